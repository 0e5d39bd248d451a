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


def save_unary_model(repo, name, op, width=4):
    """A config-less model folder: y = op(x) over [batch, width] FP32 (completed with batching)."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", width])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", width])
    graph = onnx.helper.make_graph([onnx.helper.make_node(op, ["x"], ["y"])], name, [x], [y])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
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


def test_an_ensemble_waiting_for_a_missing_model_loads_when_it_arrives(make_server,
                                                                       tmp_path_factory):
    """Poll mode: the ensemble fails its load naming the missing step model, and is tried again,
    and serves, once a poll has loaded that model."""
    repo = copy_repository(tmp_path_factory.mktemp("ensemble_late") / "models")
    save_unary_model(repo, "ens_relu", "Relu")
    save_ensemble(repo, "late", PIPELINE.format(name="late"))  # ens_neg is not there yet
    server = make_server(repository=repo, mode="poll", poll_secs=1, wait_models=["ens_relu"])
    client = server.client()
    wait_until(lambda: "step[0] (model 'ens_neg')" in server.log_path.read_text(errors="replace"),
               timeout=15, what="the failed load of 'late'")
    assert not client.is_model_ready("late")
    save_unary_model(repo, "ens_neg", "Neg")
    wait_until(lambda: client.is_model_ready("late"), timeout=20, what="'late' tried again")
    x = np.array([[1.0, -2.0, 3.0, -4.0]], dtype=np.float32)
    out = client.infer("late", [make_input(x, name="IN")]).as_numpy("OUT")
    np.testing.assert_array_equal(out, -np.maximum(x, 0))


def test_an_ensemble_stops_serving_when_a_composing_model_no_longer_fits(make_server,
                                                                         tmp_path_factory):
    """Poll mode: a composing model's file replaced by one with other dims reloads; the ensemble
    then stops serving, saying which step no longer fits, instead of failing every request at
    that step. Put back, the model reloads and the ensemble serves again."""
    repo = copy_repository(tmp_path_factory.mktemp("ensemble_refit") / "models")
    save_unary_model(repo, "ens_relu", "Relu")
    save_unary_model(repo, "ens_neg", "Neg")
    save_ensemble(repo, "refit", PIPELINE.format(name="refit"))
    server = make_server(repository=repo, mode="poll", poll_secs=1,
                         wait_models=["ens_relu", "ens_neg", "refit"])
    client = server.client()
    x = np.array([[1.0, -2.0, 3.0, -4.0]], dtype=np.float32)

    save_unary_model(repo, "ens_neg", "Neg", width=5)
    wait_until(lambda: not client.is_model_ready("refit"), timeout=20,
               what="the ensemble to stop serving after ens_neg changed")
    assert client.is_model_ready("ens_neg")  # the changed model itself serves
    # (The same poll then tries the ensemble again, which fails its load for the same reason.)
    reason = {m.name: m.reason for m in client.get_model_repository_index().models}["refit"]
    assert ("step[0] (model 'ens_neg'): tensor 'MID' has dims [4], the model's input 'x' takes "
            "[5]") in reason, reason
    assert "composing model 'ens_neg' was reloaded and no longer fits" in server.log_tail()
    e = expect_error(lambda: client.infer("refit", [make_input(x, name="IN")]), "UNAVAILABLE")
    assert "refit" in e.message(), e.message()

    save_unary_model(repo, "ens_neg", "Neg")
    wait_until(lambda: client.is_model_ready("refit"), timeout=20,
               what="the ensemble to serve again once ens_neg fits")
    out = client.infer("refit", [make_input(x, name="IN")]).as_numpy("OUT")
    np.testing.assert_array_equal(out, -np.maximum(x, 0))


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


OUTER = """name: "{name}"
platform: "ensemble"
max_batch_size: 4
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }} ]
ensemble_scheduling {{
  step [
    {{ model_name: "{inner}" input_map {{ key: "IN" value: "IN" }}
      output_map {{ key: "OUT" value: "X" }} }},
    {{ model_name: "ens_neg" input_map {{ key: "x" value: "X" }}
      output_map {{ key: "y" value: "OUT" }} }}
  ]
}}
"""


def test_ensembles_run_inside_ensembles(make_server, tmp_path):
    """Triton's nested ensembles: an ensemble's step may be an ensemble. They load after the
    ensembles they run (whatever their names), and each level counts its own requests."""
    repo = copy_repository(tmp_path / "models")
    save_unary_model(repo, "ens_relu", "Relu")
    save_unary_model(repo, "ens_neg", "Neg")
    save_ensemble(repo, "c_pipeline", PIPELINE.format(name="c_pipeline"))  # -relu(x)
    save_ensemble(repo, "b_outer", OUTER.format(name="b_outer", inner="c_pipeline"))  # relu(x)
    save_ensemble(repo, "a_outermost", OUTER.format(name="a_outermost", inner="b_outer"))
    server = make_server(repository=repo, mode="none",
                         wait_models=["c_pipeline", "b_outer", "a_outermost"])
    client = server.client()
    x = np.array([[-1.0, 2.0, -3.0, 4.0]], dtype=np.float32)
    out = client.infer("a_outermost", [make_input(x, name="IN")]).as_numpy("OUT")
    np.testing.assert_array_equal(out, -np.maximum(x, 0))
    out = client.infer("b_outer", [make_input(x, name="IN")]).as_numpy("OUT")
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    assert model_stats(client, "a_outermost").inference_stats.success.count == 1
    assert model_stats(client, "c_pipeline").inference_stats.success.count == 2
    # Three levels of ens_neg in a_outermost's request, two in b_outer's.
    assert model_stats(client, "ens_neg").inference_stats.success.count == 5


def test_loading_a_nested_ensemble_loads_what_it_runs_and_loops_are_refused(explicit):
    repo, client = explicit
    save_ensemble(repo, "inner", PIPELINE.format(name="inner"))
    save_ensemble(repo, "nested", OUTER.format(name="nested", inner="inner"))
    client.load_model("nested")
    assert client.is_model_ready("inner")
    x = np.array([[1.0, -1.0, 0.5, -0.5]], dtype=np.float32)
    out = client.infer("nested", [make_input(x, name="IN")]).as_numpy("OUT")
    np.testing.assert_array_equal(out, np.maximum(x, 0))

    # "inner" changed to run "nested", which runs "inner": refused, and both keep serving.
    save_ensemble(repo, "inner", OUTER.format(name="inner", inner="nested"))
    e = expect_error(lambda: client.load_model("inner"), "INVALID_ARGUMENT")
    assert "runs 'inner' again (inner -> nested -> inner): ensembles may not loop" in \
        e.message(), e.message()
    out = client.infer("nested", [make_input(x, name="IN")]).as_numpy("OUT")
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    assert_mlp_serves(client)


def random_ensemble(rng, name):
    """A random ensemble over ens_relu, ens_neg ([b, 4] FP32) and mlp ([b, 64] -> [b, 10]): the
    maps, tensor names, types, dims and batch sizes are drawn so that most are wrong somewhere."""
    models = {"ens_relu": ("x", "y"), "ens_neg": ("x", "y"), "mlp": ("input", "output")}
    dtype = lambda: "TYPE_INT64" if rng.random() < 0.1 else "TYPE_FP32"  # noqa: E731
    dims = lambda: rng.choice(["[ 4 ]"] * 6 + ["[ 64 ]", "[ 10 ]", "[ -1 ]", "[ 2, 2 ]"])  # noqa
    inputs = [f"IN{i}" for i in range(1 if rng.random() < 0.8 else 2)]
    tensors, steps = list(inputs), []
    for s in range(rng.randint(1, 3)):
        model = rng.choice(list(models))
        source = rng.choice(tensors + ["NOWHERE"] if rng.random() < 0.1 else tensors)
        made = f"T{s}" if rng.random() < 0.85 else rng.choice(["IN0", "T0"])
        tensors.append(made)
        key_in, key_out = models[model]
        if rng.random() < 0.1:
            key_in = "wrong"
        steps.append(f'{{ model_name: "{model}" input_map {{ key: "{key_in}" value: "{source}" }} '
                     f'output_map {{ key: "{key_out}" value: "{made}" }} }}')
    outputs = rng.sample(tensors[len(inputs):], k=1) if len(tensors) > len(inputs) else ["T0"]
    text = (f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: {rng.choice([0, 4, 4, 4, 16])}\n'
            + "".join(f'input {{ name: "{i}" data_type: {dtype()} dims: {dims()} }}\n' for i in inputs)
            + "".join(f'output {{ name: "{o}" data_type: {dtype()} dims: {dims()} }}\n'
                      for o in outputs)
            + "ensemble_scheduling { step [ " + ", ".join(steps) + " ] }\n")
    return text


def test_random_ensembles_load_or_fail_clearly_and_answer_or_refuse_clearly(explicit):
    """A seeded fuzz of ensemble configs: each load is OK or a clear error; each loaded one answers
    a request shaped as its metadata says, or refuses it with a clear status, never INTERNAL; and
    mlp keeps serving."""
    import random
    repo, client = explicit
    rng = random.Random(11)
    outcomes = {}
    for case in range(80):
        name = f"fz_ens_{case}"
        save_ensemble(repo, name, random_ensemble(rng, name))
        try:
            client.load_model(name)
        except Exception as e:  # noqa: BLE001 - the status is checked
            assert e.status() in ("StatusCode.INVALID_ARGUMENT", "StatusCode.UNAVAILABLE"), e
            assert e.message(), e
            outcomes["load refused"] = outcomes.get("load refused", 0) + 1
            continue
        meta = client.get_model_metadata(name)
        inputs = []
        for t in meta.inputs:
            shape = [1 if d < 0 else d for d in t.shape]
            kind = np.float32 if t.datatype == "FP32" else np.int64
            inputs.append(make_input(np.ones(shape, dtype=kind), datatype=t.datatype, name=t.name))
        try:
            client.infer(name, inputs)
            outcomes["answered"] = outcomes.get("answered", 0) + 1
        except Exception as e:  # noqa: BLE001 - the status is checked
            assert e.status() in ("StatusCode.INVALID_ARGUMENT", "StatusCode.UNAVAILABLE"), \
                (e, (repo / name / "config.pbtxt").read_text())
            outcomes["refused"] = outcomes.get("refused", 0) + 1
        client.unload_model(name)
    # Seeded: about 5 answered, 20 refused at the request, 50 refused at load.
    assert min(outcomes.get(k, 0) for k in ("answered", "refused", "load refused")) >= 1, outcomes
    assert_mlp_serves(client)
