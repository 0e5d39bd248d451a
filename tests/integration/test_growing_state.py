"""Stateful models whose state changes size (Triton's implicit state with -1 dims): a real ONNX
model keeps a sequence's history, one element longer per request; the server hands each request
the state in the shape the request before it gave, starts a sequence at the initial state (or
with each -1 as 1), and batches together only sequences whose states have the same shape."""
import concurrent.futures
import json
import shutil

import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import copy_repository
from tessera_testlib import expect_error, make_input, model_stats, save_graph_model

HISTORY = """name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "TOKEN" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [
  {{ name: "SUM" data_type: TYPE_FP32 dims: [ 1 ] }},
  {{ name: "COUNT" data_type: TYPE_FP32 dims: [ 1 ] }}
]
sequence_batching {{
  oldest {{ max_candidate_sequences: 16 max_queue_delay_microseconds: 200000 }}
  state [ {{
    input_name: "HISTORY_IN" output_name: "HISTORY_OUT" data_type: TYPE_FP32 dims: [ -1 ]
    use_same_buffer_for_input_output: true use_growable_memory: true
    {initial}
  }} ]
}}
"""


def save_history(repo, name, initial=None, width=None):
    """HISTORY_OUT = HISTORY_IN then TOKEN (one longer); SUM and COUNT of HISTORY_OUT. With
    `initial` a sequence starts from those values (a data_file in initial_state/). With `width`
    the model takes its history as [batch, length, width] (summed over the width first), where
    the config says [-1]."""
    f32 = TensorProto.FLOAT
    history = ["batch", "length"] if width is None else ["batch", "length", width]
    inputs = [helper.make_tensor_value_info("TOKEN", f32, ["batch", 1]),
              helper.make_tensor_value_info("HISTORY_IN", f32, history)]
    outputs = [helper.make_tensor_value_info("SUM", f32, ["batch", 1]),
               helper.make_tensor_value_info("COUNT", f32, ["batch", 1]),
               helper.make_tensor_value_info("HISTORY_OUT", f32, ["batch", "longer"])]
    initializers = [helper.make_tensor("axis1", TensorProto.INT64, [1], [1]),
                    helper.make_tensor("axis2", TensorProto.INT64, [1], [2]),
                    helper.make_tensor("zero", f32, [], [0.0]),
                    helper.make_tensor("one", f32, [], [1.0])]
    nodes = [helper.make_node("Identity", ["HISTORY_IN"], ["past"]) if width is None else
             helper.make_node("ReduceSum", ["HISTORY_IN", "axis2"], ["past"], keepdims=0),
             helper.make_node("Concat", ["past", "TOKEN"], ["HISTORY_OUT"], axis=1),
             helper.make_node("ReduceSum", ["HISTORY_OUT", "axis1"], ["SUM"], keepdims=1),
             helper.make_node("Mul", ["HISTORY_OUT", "zero"], ["zeros"]),
             helper.make_node("Add", ["zeros", "one"], ["ones"]),
             helper.make_node("ReduceSum", ["ones", "axis1"], ["COUNT"], keepdims=1)]
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=initializers)
    save_graph_model(repo, name, graph)
    start = ""
    if initial is not None:
        (repo / name / "initial_state").mkdir()
        (repo / name / "initial_state" / "start.bin").write_bytes(
            np.array(initial, np.float32).tobytes())
        start = (f'initial_state [ {{ data_type: TYPE_FP32 dims: [ {len(initial)} ] '
                 'data_file: "start.bin" name: "start" } ]')
    (repo / name / "config.pbtxt").write_text(HISTORY.format(name=name, initial=start))


@pytest.fixture(scope="module")
def server(make_server, tmp_path_factory):
    repo = copy_repository(tmp_path_factory.mktemp("growing") / "models")
    save_history(repo, "history")
    save_history(repo, "history_from_file", initial=[5.0, 6.0, 7.0])
    models = ["history", "history_from_file"]
    return repo, make_server(repository=repo, mode="explicit", load_models=models,
                             wait_models=models)


def step(client, token, sequence_id, start=False, model="history"):
    result = client.infer(model, [make_input(np.array([[token]], np.float32), name="TOKEN")],
                          sequence_id=sequence_id, sequence_start=start)
    return float(result.as_numpy("SUM")[0, 0]), int(result.as_numpy("COUNT")[0, 0])


def test_the_state_grows_by_a_request_and_starts_again_at_start(server):
    _, srv = server
    client = srv.client()
    # The first state is one zero (Triton starts a -1 dim at 1); each request adds its token.
    assert [step(client, t, 5, start=(t == 1.0)) for t in (1.0, 2.0, 3.0, 4.0)] == \
        [(1.0, 2), (3.0, 3), (6.0, 4), (10.0, 5)]
    assert step(client, 9.0, 5, start=True) == (9.0, 2)


def test_a_variable_state_starts_at_its_initial_state(server):
    _, srv = server
    client = srv.client()
    assert step(client, 1.0, 8, start=True, model="history_from_file") == (19.0, 4)
    assert step(client, 1.0, 8, model="history_from_file") == (20.0, 5)


def test_sequences_batch_only_with_states_of_their_length(server):
    _, srv = server
    client = srv.client()
    # One sequence three steps ahead of four new ones: its state is longer than theirs.
    ahead = 100
    for k, token in enumerate((1.0, 1.0, 1.0)):
        step(client, token, ahead, start=(k == 0))
    before = model_stats(client, "history")
    fresh = [201, 202, 203, 204]
    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        firsts = list(pool.map(lambda s: step(srv.client(), 2.0, s, start=True), fresh))
        late = pool.submit(step, srv.client(), 2.0, ahead)
        seconds = list(pool.map(lambda s: step(srv.client(), 3.0, s), fresh))
    assert firsts == [(2.0, 2)] * 4 and seconds == [(5.0, 3)] * 4
    assert late.result() == (5.0, 5)
    after = model_stats(client, "history")
    executions = after.execution_count - before.execution_count
    assert after.inference_count - before.inference_count == 9
    # The fresh sequences share batches (the queue delay holds one open for them); the one ahead
    # never rides with them while its state is longer.
    assert executions < 9, f"{executions} executions for 9 requests"


def test_model_config_shows_the_variable_dims_and_the_initial_state(server):
    repo, srv = server
    client = srv.client()
    config = client.get_model_config("history_from_file", as_json=True)["config"]
    state = config["sequence_batching"]["state"][0]
    assert state["dims"] == ["-1"]
    assert state["initial_state"][0]["dims"] == ["3"]
    assert state["initial_state"][0]["data_file"] == "start.bin"
    # The config read back loads a copy of the folder as it is, initial state included.
    shutil.copytree(repo / "history_from_file", repo / "history_copy")
    config["name"] = "history_copy"
    client.load_model("history_copy", config=json.dumps(config))
    assert step(client, 1.0, 9, start=True, model="history_copy") == (19.0, 4)


def test_a_model_whose_state_has_another_rank_fails_its_load(server):
    repo, srv = server
    save_history(repo, "history_wide", width=2)
    e = expect_error(lambda: srv.client().load_model("history_wide"), "INVALID_ARGUMENT")
    assert "input 'HISTORY_IN': config dims [-1]" in e.message(), e.message()
    assert "different rank" in e.message(), e.message()
