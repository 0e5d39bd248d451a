"""Models whose ONNX files use FLOAT16 or BFLOAT16 tensors (a PyTorch `model.half()` export): they
load, their metadata and auto-completed configs carry the file's types, and requests in those
types are answered over gRPC and HTTP, batched, with the values of a reference that computes in
FP32 and rounds once. The engine computes them in FP32 (docs/engine.md)."""
import concurrent.futures
import re

import ml_dtypes  # onnx requires it; tritonclient takes BF16 arrays of its type
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper, numpy_helper

from tessera_testlib import expect_error, save_graph_model

RNG = np.random.default_rng(7)
W = RNG.normal(0, 0.5, (8, 4)).astype(np.float16)
B = RNG.normal(0, 0.5, (4,)).astype(np.float16)

BF16_CONFIG = """name: "bf16_double"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_BF16 dims: [ 3 ] } ]
output [ { name: "Y" data_type: TYPE_BF16 dims: [ 3 ] } ]
dynamic_batching { max_queue_delay_microseconds: 100000 }
parameters { key: "precision" value { string_value: "fp16" } }
model_warmup [ { name: "random_bf16" batch_size: 2
  inputs { key: "X" value: { data_type: TYPE_BF16 dims: [ 3 ] random_data: true } } } ]
"""


def save_half_mlp(repo):
    """Y = relu(X @ W + B), all FLOAT16, batch dynamic; no config file (auto-completed)."""
    f16 = TensorProto.FLOAT16
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["H"]),
         helper.make_node("Add", ["H", "B"], ["H2"]),
         helper.make_node("Relu", ["H2"], ["Y"])],
        "half_mlp", [helper.make_tensor_value_info("X", f16, ["batch", 8])],
        [helper.make_tensor_value_info("Y", f16, ["batch", 4])],
        initializer=[numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")])
    save_graph_model(repo, "half_mlp", graph)


def save_bf16_double(repo):
    """Y = X * 2 in BFLOAT16, with a config and dynamic batching."""
    bf16 = TensorProto.BFLOAT16
    two = helper.make_tensor("TWO", bf16, [], [2.0])
    graph = helper.make_graph(
        [helper.make_node("Mul", ["X", "TWO"], ["Y"])], "bf16_double",
        [helper.make_tensor_value_info("X", bf16, ["batch", 3])],
        [helper.make_tensor_value_info("Y", bf16, ["batch", 3])], initializer=[two])
    save_graph_model(repo, "bf16_double", graph)
    (repo / "bf16_double" / "config.pbtxt").write_text(BF16_CONFIG)


@pytest.fixture(scope="module")
def server(make_server, tmp_path_factory):
    repo = tmp_path_factory.mktemp("float16") / "models"
    save_half_mlp(repo)
    save_bf16_double(repo)
    models = ["half_mlp", "bf16_double"]
    return make_server(repository=repo, mode="explicit", load_models=models, wait_models=models)


def reference(x):
    """FP32 arithmetic on the FP16 values, rounded to FP16 once."""
    return np.maximum(x.astype(np.float32) @ W.astype(np.float32) + B.astype(np.float32),
                      0).astype(np.float16)


def test_metadata_and_config_carry_the_files_types(server):
    client = server.client()
    meta = client.get_model_metadata("half_mlp")
    assert [(t.name, t.datatype) for t in meta.inputs] == [("X", "FP16")]
    assert [(t.name, t.datatype) for t in meta.outputs] == [("Y", "FP16")]
    config = client.get_model_config("half_mlp").config
    assert config.input[0].data_type == 10 and config.output[0].data_type == 10  # TYPE_FP16
    meta = client.get_model_metadata("bf16_double")
    assert [t.datatype for t in list(meta.inputs) + list(meta.outputs)] == ["BF16", "BF16"]
    log = server.log_path.read_text(errors="replace")
    assert "warmed up 1 instance(s) with model_warmup [random_bf16]" in log
    if "serving on the CPU" in log:  # the config's precision reached the CPU executor
        assert re.search(r"bf16_double/1#\d+: precision fp16 runs in FP32 on the CPU", log)


def test_fp16_requests_over_grpc_and_http_match_the_reference(server):
    x = RNG.normal(0, 1, (4, 8)).astype(np.float16)  # the auto-completed max_batch_size
    inp = grpcclient.InferInput("X", list(x.shape), "FP16")
    inp.set_data_from_numpy(x)
    y = server.client().infer("half_mlp", [inp]).as_numpy("Y")
    assert y.dtype == np.float16 and y.shape == (4, 4)
    # One rounding of the same FP32 sum; a different summation order may move a value by a unit
    # in the last place.
    np.testing.assert_allclose(y.astype(np.float32), reference(x).astype(np.float32),
                               rtol=2e-3, atol=1e-3)
    http = httpclient.InferenceServerClient(server.http_url)
    for binary in (True, False):
        hinp = httpclient.InferInput("X", list(x.shape), "FP16")
        hinp.set_data_from_numpy(x, binary_data=binary)
        out = httpclient.InferRequestedOutput("Y", binary_data=binary)
        hy = http.infer("half_mlp", [hinp], outputs=[out]).as_numpy("Y")
        np.testing.assert_array_equal(hy.astype(np.float16), y)


def test_bf16_requests_are_batched_and_each_gets_its_answer(server):
    # Doubling values exact in BF16 is exact.
    cases = [np.array([[k, -0.5 * k, 1.25]], ml_dtypes.bfloat16) for k in range(1, 7)]

    def ask(x):
        inp = grpcclient.InferInput("X", list(x.shape), "BF16")
        inp.set_data_from_numpy(x)
        return server.new_client().infer("bf16_double", [inp]).as_numpy("Y")

    with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:
        answers = list(pool.map(ask, cases))
    for x, y in zip(cases, answers):
        assert y.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(y.astype(np.float32), 2 * x.astype(np.float32))
    stats = server.client().get_inference_statistics("bf16_double").model_stats[0]
    assert stats.inference_count == len(cases)
    assert stats.execution_count < len(cases)  # the 100 ms queue delay batched some


def test_a_request_in_fp32_for_an_fp16_model_names_both_types(server):
    x = np.zeros((1, 8), np.float32)
    inp = grpcclient.InferInput("X", [1, 8], "FP32")
    inp.set_data_from_numpy(x)
    e = expect_error(lambda: server.client().infer("half_mlp", [inp]), "INVALID_ARGUMENT")
    assert "FP32" in e.message() and "FP16" in e.message(), e.message()
    # ... and the model still serves.
    ok = grpcclient.InferInput("X", [1, 8], "FP16")
    ok.set_data_from_numpy(x.astype(np.float16))
    assert server.client().infer("half_mlp", [ok]).as_numpy("Y").shape == (1, 4)
