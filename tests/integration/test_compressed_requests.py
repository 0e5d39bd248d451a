"""Compressed requests (grpc-encoding gzip/deflate, HTTP Content-Encoding): tritonclient's
compressed inferences are answered, unary and streamed; a request that inflates past
grpc.max_message_bytes is refused without the server taking its inflated size in memory; and
compressed requests that would take more than grpc.max_inflating_bytes together are refused
(UNAVAILABLE / 503) while the server goes on serving.

gRPC 1.51 inflated a compressed message whole before comparing it with the receive limit: a 3 MB
request of gzip'd zeros took 3 GB of the server's memory (bench notes in docs/server-config.md)."""

import gzip
import json
import queue
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2

from tessera_testlib import (INPUT_NAME, MODELS_DIR, OUTPUT_NAME, assert_close, assert_mlp_serves,
                             load_reference)


def write_config(folder, text):
    path = folder / "server.yaml"
    path.write_text(text)
    return path


def mlp_server(make_server, folder, grpc_section):
    """A server of mlp alone, with `grpc_section` (YAML lines) in its server.yaml."""
    config = write_config(folder, f"grpc:\n  {grpc_section}\n")
    return make_server(repository=MODELS_DIR, mode="explicit", load_models=("mlp",),
                       wait_models=("mlp",), config=config)


@pytest.fixture(scope="module")
def small_limit_server(make_server, tmp_path_factory):
    return mlp_server(make_server, tmp_path_factory.mktemp("small-limit"),
                      "max_message_bytes: 4194304")


@pytest.fixture(scope="module")
def small_budget_server(make_server, tmp_path_factory):
    return mlp_server(make_server, tmp_path_factory.mktemp("small-budget"),
                      "max_inflating_bytes: 8388608")


def mlp_inputs(x):
    inputs = [grpcclient.InferInput(INPUT_NAME, list(x.shape), "FP32")]
    inputs[0].set_data_from_numpy(x)
    return inputs


def raw_infer_call(server):
    channel = grpc.insecure_channel(server.url, options=[("grpc.max_send_message_length", -1)])
    return channel, channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                        request_serializer=lambda b: b,
                                        response_deserializer=lambda b: b)


def zeros_request(floats):
    """A ModelInferRequest for mlp whose input is `floats` zeros: it compresses ~1000:1."""
    request = service_pb2.ModelInferRequest(model_name="mlp")
    tensor = request.inputs.add(name=INPUT_NAME, datatype="FP32", shape=[floats // 64, 64])
    assert tensor.name == INPUT_NAME
    request.raw_input_contents.append(bytes(4 * floats))
    return request.SerializeToString()


def peak_resident_bytes(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for {pid}")


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_inference_is_answered(small_limit_server, algorithm):
    x, y = load_reference("mlp")
    client = small_limit_server.client()
    result = client.infer("mlp", mlp_inputs(x), compression_algorithm=algorithm)
    assert_close(result.as_numpy(OUTPUT_NAME), y, f"mlp, {algorithm} request")


def test_compressed_stream_is_answered(small_limit_server):
    x, y = load_reference("mlp")
    client = small_limit_server.new_client()
    answers = queue.Queue()
    client.start_stream(lambda result, error: answers.put((result, error)),
                        compression_algorithm="gzip")
    try:
        for i in range(3):
            client.async_stream_infer("mlp", mlp_inputs(x), request_id=str(i))
        for _ in range(3):
            result, error = answers.get(timeout=30)
            assert error is None, error
            assert_close(result.as_numpy(OUTPUT_NAME), y, "mlp over a gzip stream")
    finally:
        client.stop_stream()
        client.close()


def test_a_request_inflating_past_the_limit_is_refused_without_inflating_it(small_limit_server):
    """128 MiB of zeros, ~130 KB compressed, against a 4 MiB limit: the server inflates no more
    than the limit. gRPC's own inflation took the whole 128 MiB first."""
    payload = zeros_request(32 << 20)
    before = peak_resident_bytes(small_limit_server.proc.pid)
    channel, call = raw_infer_call(small_limit_server)
    with pytest.raises(grpc.RpcError) as refused:
        call(payload, compression=grpc.Compression.Gzip, timeout=60)
    channel.close()
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value
    assert "inflates past the server's limit of 4194304 bytes" in refused.value.details()
    grown = peak_resident_bytes(small_limit_server.proc.pid) - before
    assert grown < 48 << 20, f"the server's peak memory grew by {grown >> 20} MiB"
    assert_mlp_serves(small_limit_server.client())


def test_compressed_requests_past_the_inflate_budget_are_refused(small_budget_server):
    """8 MiB for all compressed requests at once: one that needs more is refused as busy (it
    would fit grpc.max_message_bytes), and smaller ones are served."""
    channel, call = raw_infer_call(small_budget_server)
    with pytest.raises(grpc.RpcError) as refused:
        call(zeros_request(4 << 20), compression=grpc.Compression.Gzip, timeout=60)  # 16 MiB
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value
    assert "grpc.max_inflating_bytes" in refused.value.details()
    answer = service_pb2.ModelInferResponse.FromString(
        call(zeros_request(64), compression=grpc.Compression.Gzip, timeout=60))
    assert answer.model_name == "mlp"
    channel.close()

    body = json.dumps({"inputs": [{"name": INPUT_NAME, "shape": [1, 64], "datatype": "FP32",
                                   "data": [0.0] * 64}]}).encode()
    request = urllib.request.Request(
        f"http://{small_budget_server.http_url}/v2/models/mlp/infer", method="POST",
        data=gzip.compress(body + b" " * (16 << 20)), headers={"Content-Encoding": "gzip"})
    with pytest.raises(urllib.error.HTTPError) as busy:
        urllib.request.urlopen(request, timeout=60)
    assert busy.value.code == 503
    assert "grpc.max_inflating_bytes" in json.loads(busy.value.read())["error"]
    assert_mlp_serves(small_budget_server.client())


def padded(message, pad_bytes):
    """`message` encoded with an unknown field of `pad_bytes` zeros after it (parsers skip it), so
    that gRPC compresses it: it sends a message uncompressed when gzip would not make it smaller."""
    pad = bytes(pad_bytes)
    tag = (999 << 3) | 2  # field 999, length-delimited
    return message.SerializeToString() + varint(tag) + varint(len(pad)) + pad


def varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def typed_call(channel, method, response_type):
    return channel.unary_unary(f"/inference.GRPCInferenceService/{method}",
                               request_serializer=lambda b: b,
                               response_deserializer=response_type.FromString)


def test_compressed_requests_to_typed_methods_are_answered(small_limit_server):
    """Every method inflates a compressed request, not only inference: with gRPC's inflation off,
    ModelMetadata once took the compressed bytes for the message and answered "malformed"."""
    channel = grpc.insecure_channel(small_limit_server.url, compression=grpc.Compression.Gzip)
    metadata = typed_call(channel, "ModelMetadata", service_pb2.ModelMetadataResponse)(
        padded(service_pb2.ModelMetadataRequest(name="mlp"), 4096), timeout=30)
    assert metadata.name == "mlp" and metadata.inputs[0].name == INPUT_NAME
    config = typed_call(channel, "ModelConfig", service_pb2.ModelConfigResponse)(
        padded(service_pb2.ModelConfigRequest(name="mlp"), 4096), timeout=30)
    assert config.config.name == "mlp"
    live = typed_call(channel, "ServerLive", service_pb2.ServerLiveResponse)(
        padded(service_pb2.ServerLiveRequest(), 4096), timeout=30)
    assert live.live
    index = typed_call(channel, "RepositoryIndex", service_pb2.RepositoryIndexResponse)(
        padded(service_pb2.RepositoryIndexRequest(ready=True), 4096), timeout=30)
    assert [m.name for m in index.models] == ["mlp"]
    with pytest.raises(grpc.RpcError) as unknown:  # the request was read: its name is quoted
        typed_call(channel, "ModelMetadata", service_pb2.ModelMetadataResponse)(
            padded(service_pb2.ModelMetadataRequest(name="no_such_model"), 4096), timeout=30)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND, unknown.value
    assert "no_such_model" in unknown.value.details()
    channel.close()


def test_a_typed_request_inflating_past_the_limit_is_refused_without_inflating_it(
        small_limit_server):
    """The same bound as for inference: 128 MiB of zeros after a ModelConfig request."""
    payload = padded(service_pb2.ModelConfigRequest(name="mlp"), 128 << 20)
    before = peak_resident_bytes(small_limit_server.proc.pid)
    channel = grpc.insecure_channel(small_limit_server.url,
                                    options=[("grpc.max_send_message_length", -1)])
    with pytest.raises(grpc.RpcError) as refused:
        typed_call(channel, "ModelConfig", service_pb2.ModelConfigResponse)(
            payload, compression=grpc.Compression.Gzip, timeout=60)
    channel.close()
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.value
    assert "inflates past the server's limit of 4194304 bytes" in refused.value.details()
    grown = peak_resident_bytes(small_limit_server.proc.pid) - before
    assert grown < 48 << 20, f"the server's peak memory grew by {grown >> 20} MiB"
    assert_mlp_serves(small_limit_server.client())
