#!/usr/bin/env python3
"""Sends one ModelInfer whose message is SIZE zero bytes after a model name, gzip-compressed by
gRPC (about SIZE/1000 bytes on the wire), and prints the server's answer and how long it took.
Watch the server's peak memory (VmHWM in /proc/<pid>/status) before and after.

    .venv/bin/python bench/compression/grpc_gzip_zeros.py 127.0.0.1:8001 3e9

The Python client cannot compress a message of 4 GiB or more (a gRPC check in the client).
"""

import sys
import time

import grpc


def main():
    url, size = sys.argv[1], int(float(sys.argv[2]))
    channel = grpc.insecure_channel(url, options=[("grpc.max_send_message_length", -1)],
                                    compression=grpc.Compression.Gzip)
    call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                               request_serializer=lambda b: b, response_deserializer=lambda b: b)
    payload = b"\x0a\x03mlp" + b"\x00" * size
    start = time.time()
    try:
        call(payload, timeout=300)
        print("answered")
    except grpc.RpcError as e:
        print("error", e.code(), e.details()[:200], f"{time.time() - start:.1f}s")


if __name__ == "__main__":
    main()
