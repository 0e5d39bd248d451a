"""Optional inputs (Triton's `optional: true`) through tritonclient: a request may leave such an
input out, and the model then runs with the ONNX file's default for it (an initializer of the
input's name, which ONNX Runtime lets a request override); requests that leave out different
inputs are batched apart; an ensemble step need not map one; and an optional input the file gives
no default for is served, with a clear error for a request that leaves it out."""
import concurrent.futures
import json

import numpy as np
import pytest
import tritonclient.http as httpclient
from onnx import TensorProto, helper

from conftest import copy_repository
from tessera_testlib import expect_error, make_input, model_stats, save_graph_model

SCALED = """name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {{ name: "X" data_type: TYPE_FP32 dims: [ 2 ] }},
  {{ name: "SCALE" data_type: TYPE_FP32 dims: [ 2 ] optional: true }}
]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 2 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: 200000 }}
model_warmup [ {{
  name: "without_scale" batch_size: 2
  inputs {{ key: "X" value: {{ data_type: TYPE_FP32 dims: [ 2 ] zero_data: true }} }}
}} ]
"""

DEFAULT_SCALE = [2.0, 3.0]

ENSEMBLE_PASS = """name: "{name}"
platform: "ensemble"
max_batch_size: 8
input [
  {{ name: "IN" data_type: TYPE_FP32 dims: [ 2 ] }},
  {{ name: "S" data_type: TYPE_FP32 dims: [ 2 ] optional: true }}
]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] }} ]
ensemble_scheduling {{ step [ {{
  model_name: "scaled"
  input_map {{ key: "X" value: "{x_from}" }}
  input_map {{ key: "SCALE" value: "{scale_from}" }}
  output_map {{ key: "Y" value: "OUT" }}
}} ] }}
"""


def save_model(repo, name, config, default=True):
    """Y = X * SCALE. With `default`, SCALE is also an initializer ([[2, 3]]), so a run without
    it multiplies every row by [2, 3]."""
    f32 = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("X", f32, ["batch", 2]),
              helper.make_tensor_value_info("SCALE", f32, ["batch", 2])]
    initializers = [helper.make_tensor("SCALE", f32, [1, 2], DEFAULT_SCALE)] if default else []
    graph = helper.make_graph([helper.make_node("Mul", ["X", "SCALE"], ["Y"])], name, inputs,
                              [helper.make_tensor_value_info("Y", f32, ["batch", 2])],
                              initializer=initializers)
    save_graph_model(repo, name, graph)
    if config is not None:
        (repo / name / "config.pbtxt").write_text(config.format(name=name))


def server_with(make_server, tmp_path_factory):
    repo = copy_repository(tmp_path_factory.mktemp("optional") / "models")
    save_model(repo, "scaled", SCALED)
    save_model(repo, "no_default", SCALED.split("model_warmup")[0], default=False)
    save_model(repo, "json_loaded", None)
    (repo / "scale_step" / "1").mkdir(parents=True)
    (repo / "scale_step" / "config.pbtxt").write_text("""name: "scale_step"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] } ]
ensemble_scheduling { step [ {
  model_name: "scaled"
  input_map { key: "X" value: "IN" }
  output_map { key: "Y" value: "OUT" }
} ] }
""")
    for name, scale_input in (("scale_pass", "SCALE"), ("scale_into_x", "X")):
        # An ensemble whose optional input S goes to the model's optional SCALE, or (a config
        # error only a request without S shows) to its required X.
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(ENSEMBLE_PASS.format(
            name=name, x_from="S" if scale_input == "X" else "IN",
            scale_from="IN" if scale_input == "X" else "S"))
    models = ["scaled", "no_default", "scale_step", "scale_pass", "scale_into_x"]
    return repo, make_server(repository=repo, mode="explicit", load_models=models,
                             wait_models=models)


@pytest.fixture(scope="module")
def server(make_server, tmp_path_factory):
    return server_with(make_server, tmp_path_factory)


def ask(client, x, scale=None, model="scaled"):
    inputs = [make_input(np.array(x, np.float32), name="X")]
    if scale is not None:
        inputs.append(make_input(np.array(scale, np.float32), name="SCALE"))
    return client.infer(model, inputs).as_numpy("Y").tolist()


def test_a_request_without_the_optional_input_runs_with_the_models_default(server):
    _, srv = server
    client = srv.client()
    assert ask(client, [[1.0, 1.0], [10.0, 100.0]]) == [[2.0, 3.0], [20.0, 300.0]]
    assert ask(client, [[1.0, 1.0]], scale=[[5.0, 7.0]]) == [[5.0, 7.0]]
    # Giving it does not change the default for the next request.
    assert ask(client, [[1.0, 1.0]]) == [[2.0, 3.0]]


def run_at_once(srv, cases):
    """Each (x, scale) case as its own request, all at once; the answers checked; returns how
    many batches the model ran for them."""
    before = model_stats(srv.client(), "scaled")
    with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:
        answers = list(pool.map(lambda c: ask(srv.client(), c[0], c[1]), cases))
    for (x, scale), answer in zip(cases, answers):
        factor = scale[0] if scale else DEFAULT_SCALE
        assert answer == [[x[0][0] * factor[0], x[0][1] * factor[1]]], (x, scale)
    after = model_stats(srv.client(), "scaled")
    assert after.inference_count - before.inference_count == len(cases)
    return after.execution_count - before.execution_count


def test_requests_batch_with_those_that_give_the_same_inputs_only(server):
    _, srv = server
    without = [([[float(k), 1.0]], None) for k in range(1, 5)]
    given = [([[float(k), 1.0]], [[float(k), 2.0]]) for k in range(1, 5)]
    # The queue delay (200 ms) holds a batch open for the others of its kind.
    assert run_at_once(srv, without) < len(without)
    assert run_at_once(srv, given) < len(given)
    # Mixed, each request still gets its own inputs' answer: a batch never mixes the two kinds
    # (the batch ends where the next queued request is of the other kind).
    mixed = [c for pair in zip(without, given) for c in pair]
    assert run_at_once(srv, mixed) >= 2


def test_http_and_an_ensemble_step_may_leave_it_out(server):
    _, srv = server
    http = httpclient.InferenceServerClient(srv.http_url)
    x = np.array([[1.0, 2.0]], np.float32)
    inp = httpclient.InferInput("X", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    assert http.infer("scaled", [inp]).as_numpy("Y").tolist() == [[2.0, 6.0]]
    result = srv.client().infer("scale_step", [make_input(x, name="IN")])
    assert result.as_numpy("OUT").tolist() == [[2.0, 6.0]]


def test_a_required_input_left_out_is_still_refused_and_a_given_one_still_checked(server):
    _, srv = server
    client = srv.client()
    e = expect_error(lambda: client.infer(
        "scaled", [make_input(np.ones((1, 2), np.float32), name="SCALE")]), "INVALID_ARGUMENT")
    assert "missing input 'X'" in e.message()
    e = expect_error(lambda: ask(client, [[1.0, 1.0]], scale=[[1.0, 2.0, 3.0]]),
                     "INVALID_ARGUMENT")
    assert "input 'SCALE'" in e.message(), e.message()
    e = expect_error(lambda: ask(client, [[1.0, 1.0]], scale=[[1.0, 2.0], [3.0, 4.0]]),
                     "INVALID_ARGUMENT")
    assert "batch size 2 differs" in e.message(), e.message()
    assert ask(client, [[1.0, 1.0]]) == [[2.0, 3.0]]


def test_an_optional_input_without_a_default_in_the_file_is_served_when_given(server):
    _, srv = server
    client = srv.client()
    assert ask(client, [[1.0, 2.0]], scale=[[3.0, 3.0]], model="no_default") == [[3.0, 6.0]]
    e = expect_error(lambda: ask(client, [[1.0, 2.0]], model="no_default"), "INVALID_ARGUMENT")
    assert 'missing input "SCALE" (it has no default' in e.message(), e.message()
    assert "input 'SCALE' is optional, but the model file has no default" in \
        srv.log_path.read_text()
    # The model goes on serving.
    assert ask(client, [[1.0, 2.0]], scale=[[2.0, 2.0]], model="no_default") == [[2.0, 4.0]]


def test_model_config_shows_the_flag_and_a_json_config_sets_it(server):
    _, srv = server
    client = srv.client()
    config = client.get_model_config("scaled", as_json=True)["config"]
    assert [i.get("optional", False) for i in config["input"]] == [False, True]
    # The config read back loads another model folder as it is.
    config["name"] = "json_loaded"
    config.pop("model_warmup", None)
    client.load_model("json_loaded", config=json.dumps(config))
    assert ask(client, [[1.0, 1.0]], model="json_loaded") == [[2.0, 3.0]]


def test_an_ensembles_optional_input_reaches_its_step_left_out(server):
    _, srv = server
    client = srv.client()

    def run(model, x, s=None):
        inputs = [make_input(np.array(x, np.float32), name="IN")]
        if s is not None:
            inputs.append(make_input(np.array(s, np.float32), name="S"))
        return client.infer(model, inputs).as_numpy("OUT").tolist()

    assert run("scale_pass", [[1.0, 2.0]]) == [[2.0, 6.0]]  # the model's default
    assert run("scale_pass", [[1.0, 2.0]], s=[[10.0, 10.0]]) == [[10.0, 20.0]]
    # Given, S may feed the required X; left out, the step cannot run, and the error says why.
    assert run("scale_into_x", [[2.0, 2.0]], s=[[1.0, 3.0]]) == [[2.0, 6.0]]
    e = expect_error(lambda: run("scale_into_x", [[1.0, 2.0]]), "INVALID_ARGUMENT")
    assert "leaves out the ensemble's optional input 'S', which the model takes as its " \
        "required input 'X'" in e.message(), e.message()
