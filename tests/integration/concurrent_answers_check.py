#!/usr/bin/env python3
"""Concurrent clients against a running server; every answer is checked against onnxruntime.

Run with the project's virtualenv (tritonclient, onnxruntime, numpy):

    .venv/bin/python tests/integration/concurrent_answers_check.py --url 127.0.0.1:8001 --zoo build/zoo \\
        --models lenet,mobilenetv2,bert_tiny,gpt2_tiny,roberta_tiny,unet_tiny \\
        [--threads 8] [--requests 400] [--seed 1] [--protocol grpc|http]

For each model, 16 input rows are drawn (normal floats; token ids in [0, 100); attention masks of
ones with a random tail of zeros) and onnxruntime computes their outputs once. Each client thread
then sends requests of 1-3 random rows to random models and compares every output with the
rows' reference: max |answer - reference| <= 1e-4 * max(1, max |reference|), the zoo's bound.
Rows are independent, so any answer that misses the bound got another request's data, or a
computation disturbed by a concurrent one. Serve the models with several instances (and workers)
to check the server's concurrency: a model folder from `scripts/make_zoo.sh` with its
`instance_group` count raised. Exits 1 when any answer failed.
"""

import argparse
import random
import sys
import threading
import time

import numpy as np
import onnxruntime as ort
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

DATATYPES = {np.float32: "FP32", np.int64: "INT64", np.int32: "INT32"}
ROWS = 16


def reference_rows(model_path, seed):
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    names, inputs = [], []
    for info in session.get_inputs():
        shape = [ROWS] + list(info.shape[1:])
        if info.type == "tensor(float)":
            x = rng.standard_normal(shape).astype(np.float32)
        elif "mask" in info.name:
            x = np.ones(shape, np.int64)
            for r in range(ROWS):
                x[r, rng.integers(1, shape[1] + 1):] = 0
        else:
            x = rng.integers(0, 100, shape).astype(np.int64)
        names.append(info.name)
        inputs.append(x)
    outputs = session.run(None, dict(zip(names, inputs)))
    return names, inputs, [o.name for o in session.get_outputs()], outputs


def check_concurrent_answers(url, zoo, models, threads=8, requests=400, seed=1, protocol="grpc"):
    """Runs the clients; returns (correct answers per model, failure lines)."""
    references = {m: reference_rows(f"{zoo}/{m}/1/model.onnx", seed) for m in models}
    failures, answered = [], {m: 0 for m in models}
    lock = threading.Lock()
    api = grpcclient if protocol == "grpc" else httpclient

    def client_thread(index):
        rng = random.Random(seed * 1000 + index)
        client = api.InferenceServerClient(url)
        for i in range(requests):
            model = rng.choice(models)
            in_names, inputs, out_names, outputs = references[model]
            rows = [rng.randrange(ROWS) for _ in range(rng.randint(1, 3))]
            request = []
            for name, x in zip(in_names, inputs):
                part = np.ascontiguousarray(x[rows])
                tensor = api.InferInput(name, list(part.shape), DATATYPES[part.dtype.type])
                tensor.set_data_from_numpy(part)
                request.append(tensor)
            try:
                result = client.infer(model, request, outputs=[
                    api.InferRequestedOutput(o) for o in out_names])
                for name, reference in zip(out_names, outputs):
                    bound = 1e-4 * max(1.0, float(np.abs(reference).max()))
                    error = float(np.abs(result.as_numpy(name) - reference[rows]).max())
                    if not error <= bound:
                        raise AssertionError(f"{name}: max error {error:.3g} > {bound:.3g}")
                with lock:
                    answered[model] += 1
            except Exception as e:  # every failure is reported, none stops the others
                with lock:
                    failures.append(f"thread {index} request {i} ({model}, rows {rows}): {e}")

    started = [threading.Thread(target=client_thread, args=(t,)) for t in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join()
    return answered, failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="host:port of the gRPC (or HTTP) endpoint")
    parser.add_argument("--protocol", choices=["grpc", "http"], default="grpc",
                        help="http: binary tensors over the KServe v2 HTTP endpoint")
    parser.add_argument("--zoo", required=True, help="folder with <model>/1/model.onnx")
    parser.add_argument("--models", required=True, help="comma-separated model names")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--requests", type=int, default=400, help="per thread")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    start = time.monotonic()
    answered, failures = check_concurrent_answers(args.url, args.zoo, args.models.split(","),
                                                  args.threads, args.requests, args.seed,
                                                  args.protocol)
    print(f"{args.threads * args.requests} requests in {time.monotonic() - start:.1f} s; correct "
          f"answers per model: {answered}; failed: {len(failures)}")
    for line in failures[:10]:
        print("  " + line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
