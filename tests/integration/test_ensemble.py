"""Ensembles (Triton's platform "ensemble") through tritonclient: a request to the ensemble runs
its steps on the composing models, in data-flow order, and bad ensembles fail their load naming
what is wrong while everything else keeps serving."""
import concurrent.futures

import numpy as np
import onnx
import pytest

from conftest import copy_repository
from tessera_testlib import assert_mlp_serves, expect_error, make_input, model_stats, wait_until

PIPELINE = """name: "{name}"
platform: "ensemble"
max_batch_size: 4
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [
  {{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }},
  {{ name: "MID" data_type: TYPE_FP32 dims: [ 4 ] }}
]
ensemble_scheduling {{
  step [
    {{
      model_name: "ens_neg"
      model_version: -1
      input_map {{ key: "x" value: "MID" }}
      output_map {{ key: "y" value: "OUT" }}
    }},
    {{
      model_name: "ens_relu"
      input_map {{ key: "x" value: "IN" }}
      output_map {{ key: "y" value: "MID" }}
    }}
  ]
}}
"""


def save_unary_model(repo, name, op):
    """A config-less model folder: y = op(x) over [batch, 4] FP32 (completed with batching)."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 4])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 4])
    graph = onnx.helper.make_graph([onnx.helper.make_node(op, ["x"], ["y"])], name, [x], [y])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    (repo / name / "1").mkdir(parents=True)
    onnx.save(model, str(repo / name / "1" / "model.onnx"))


def save_ensemble(repo, name, text):
    (repo / name / "1").mkdir(parents=True, exist_ok=True)  # Triton's empty version folder
    (repo / name / "config.pbtxt").write_text(text)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    repo = copy_repository(tmp_path_factory.mktemp("ensemble") / "models")
    save_unary_model(repo, "ens_relu", "Relu")
    save_unary_model(repo, "ens_neg", "Neg")
    # Sorts before its composing models: the server must still load it after them.
    save_ensemble(repo, "a_pipeline", PIPELINE.format(name="a_pipeline"))
    return repo


def test_ensemble_runs_its_steps_in_data_flow_order(make_server, repo):
    server = make_server(repository=repo, mode="poll", poll_secs=1,
                         wait_models=["mlp", "ens_relu", "ens_neg", "a_pipeline"])
    client = server.client()
    x = np.array([[-1.0, 2.0, -3.0, 4.0], [5.0, -6.0, 7.0, -8.0]], dtype=np.float32)
    result = client.infer("a_pipeline", [make_input(x, name="IN")])
    np.testing.assert_array_equal(result.as_numpy("MID"), np.maximum(x, 0))
    np.testing.assert_array_equal(result.as_numpy("OUT"), -np.maximum(x, 0))

    config = client.get_model_config("a_pipeline").config
    assert config.platform == "ensemble"
    steps = {s.model_name: s for s in config.ensemble_scheduling.step}
    assert dict(steps["ens_relu"].input_map) == {"x": "IN"}
    assert dict(steps["ens_neg"].output_map) == {"y": "OUT"}
    assert client.get_model_metadata("a_pipeline").platform == "ensemble"

    # Many at once: the steps of different requests share the composing models' queues.
    rows = [np.random.default_rng(i).normal(size=(1, 4)).astype(np.float32) for i in range(32)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(
            lambda r: client.infer("a_pipeline", [make_input(r, name="IN")]).as_numpy("OUT"), rows))
    for r, out in zip(rows, outs):
        np.testing.assert_array_equal(out, -np.maximum(r, 0))
    assert model_stats(client, "a_pipeline").inference_stats.success.count == 33
    assert model_stats(client, "ens_relu").inference_stats.success.count == 33

    # A request the ensemble's own config refuses never reaches a step.
    e = expect_error(lambda: client.infer("a_pipeline", [make_input(x[:, :3], name="IN")]),
                     "INVALID_ARGUMENT")
    assert "input 'IN': shape [2, 3]" in e.message(), e.message()

    # A composing model taken away: the ensemble answers UNAVAILABLE naming the step.
    (repo / "ens_neg").rename(repo / ".ens_neg_away")  # hidden folders are not models
    try:
        wait_until(lambda: not client.is_model_ready("ens_neg"), timeout=15,
                   what="ens_neg unloaded by the poller")
        e = expect_error(lambda: client.infer("a_pipeline", [make_input(x, name="IN")]),
                         "UNAVAILABLE")
        assert "ensemble 'a_pipeline' step[0] (model 'ens_neg')" in e.message(), e.message()
    finally:
        (repo / ".ens_neg_away").rename(repo / "ens_neg")
    assert_mlp_serves(client)


@pytest.fixture(scope="module")
def explicit(make_server, tmp_path_factory):
    repo = copy_repository(tmp_path_factory.mktemp("ensemble_explicit") / "models")
    save_unary_model(repo, "ens_relu", "Relu")
    save_unary_model(repo, "ens_neg", "Neg")
    server = make_server(repository=repo, mode="explicit", load_models=["mlp"],
                         wait_models=["mlp"])
    return repo, server.client()


def test_loading_an_ensemble_loads_its_composing_models(explicit):
    repo, client = explicit
    save_ensemble(repo, "pipeline", PIPELINE.format(name="pipeline"))
    assert not client.is_model_ready("ens_relu")
    client.load_model("pipeline")
    assert client.is_model_ready("pipeline")
    assert client.is_model_ready("ens_relu") and client.is_model_ready("ens_neg")
    x = np.array([[1.0, -1.0, 0.5, -0.5]], dtype=np.float32)
    out = client.infer("pipeline", [make_input(x, name="IN")]).as_numpy("OUT")
    np.testing.assert_array_equal(out, -np.maximum(x, 0))


@pytest.mark.parametrize("name, change, message", [
    ("cycle", lambda t: t.replace('value: "IN" }', 'value: "OUT" }'),
     "wait on each other's outputs (a cycle)"),
    ("missing", lambda t: t.replace('"ens_neg"', '"no_such_model"'),
     "step[0] (model 'no_such_model')"),
    ("wrong_input", lambda t: t.replace('key: "x" value: "IN"', 'key: "z" value: "IN"'),
     "input_map gives the model's input 'x' no ensemble tensor"),
    ("wrong_type", lambda t: t.replace('name: "OUT" data_type: TYPE_FP32',
                                       'name: "OUT" data_type: TYPE_INT64'),
     "output 'OUT' is TYPE_INT64 in its config, but the step that makes it gives TYPE_FP32"),
    ("batching", lambda t: t.replace("max_batch_size: 4", "max_batch_size: 16"),
     "the ensemble's max_batch_size is 16, the model's only 4"),
    ("unproduced", lambda t: t.replace('value: "OUT" }', 'value: "OTHER" }'),
     "ensemble output 'OUT' is not the output of any step"),
])
def test_bad_ensembles_fail_their_load_naming_the_fault(explicit, name, change, message):
    repo, client = explicit
    save_ensemble(repo, f"bad_{name}", change(PIPELINE.format(name=f"bad_{name}")))
    e = expect_error(lambda: client.load_model(f"bad_{name}"), "INVALID_ARGUMENT", "UNAVAILABLE")
    assert message in e.message(), e.message()
    assert not client.is_model_ready(f"bad_{name}")
    assert_mlp_serves(client)
