"""Ragged batching (Triton's allow_ragged_batch, batch_input and batch_output) through tritonclient:
requests of different lengths share a batch without padding, a real ONNX model reads the batch
inputs the server makes, a scattered output comes back to each request in its own shape, and
configs that get ragged batching wrong fail their load naming the fault."""
import concurrent.futures
import json

import numpy as np
import pytest
import tritonclient.http as httpclient
from onnx import TensorProto, helper

from conftest import copy_repository
from tessera_testlib import (assert_mlp_serves, expect_error, make_input,
                             model_stats, save_graph_model)

RAGGED = """name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true }} ]
batch_input [
  {{ kind: BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO target_name: "OFFSETS"
    data_type: TYPE_INT32 source_input: "INPUT" }},
  {{ kind: BATCH_ELEMENT_COUNT target_name: "COUNTS" data_type: TYPE_FP32
    source_input: "INPUT" }},
  {{ kind: BATCH_ITEM_SHAPE target_name: "ITEM_SHAPE" data_type: TYPE_INT64
    source_input: "INPUT" }},
  {{ kind: BATCH_MAX_ELEMENT_COUNT_AS_SHAPE target_name: "MAXLEN" data_type: TYPE_INT32
    source_input: "INPUT" }}
]
output [
  {{ name: "SUM" data_type: TYPE_FP32 dims: [ 1 ] }},
  {{ name: "MEAN" data_type: TYPE_FP32 dims: [ 1 ] }},
  {{ name: "LENGTH" data_type: TYPE_INT64 dims: [ 1 ] }},
  {{ name: "LONGEST" data_type: TYPE_INT64 dims: [ 1 ] }},
  {{ name: "DOUBLED" data_type: TYPE_FP32 dims: [ -1 ] }}
]
batch_output [
  {{ target_name: "DOUBLED" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT" }}
]
dynamic_batching {{ max_queue_delay_microseconds: 200000 }}
model_warmup [ {{
  name: "three" batch_size: 1
  inputs {{ key: "INPUT" value: {{ data_type: TYPE_FP32 dims: [ 3 ] zero_data: true }} }}
}} ]
"""


def save_ragged_model(repo, name, config=None, leave_out=()):
    """Per request of the batch (its INPUT a run of the flat INPUT): SUM and MEAN of its values,
    LENGTH from ITEM_SHAPE, LONGEST (the batch's longest request) from MAXLEN's shape; DOUBLED =
    2 * INPUT, flat. `leave_out` drops batch-input targets from the model's inputs."""
    i64 = TensorProto.INT64
    ints = lambda name, values: helper.make_tensor(name, i64, [len(values)], values)  # noqa: E731
    initializers = [helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0]),
                    helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
                    ints("at0", [0]), ints("at1", [1]), ints("end", [2**62]),
                    ints("last", [-1]), ints("axis1", [1]), ints("one", [1])]
    nodes = [
        helper.make_node("CumSum", ["INPUT", "at0"], ["running"]),
        helper.make_node("Concat", ["zero", "running"], ["prefix"], axis=0),
        helper.make_node("Cast", ["OFFSETS"], ["offsets"], to=i64),
        helper.make_node("Slice", ["offsets", "at1", "end"], ["ends"]),
        helper.make_node("Slice", ["offsets", "at0", "last"], ["starts"]),
        helper.make_node("Gather", ["prefix", "ends"], ["upto_end"]),
        helper.make_node("Gather", ["prefix", "starts"], ["upto_start"]),
        helper.make_node("Sub", ["upto_end", "upto_start"], ["sums"]),
        helper.make_node("Unsqueeze", ["sums", "axis1"], ["SUM"]),
        helper.make_node("Unsqueeze", ["COUNTS", "axis1"], ["counts"]),
        helper.make_node("Div", ["SUM", "counts"], ["MEAN"]),
        helper.make_node("Identity", ["ITEM_SHAPE"], ["LENGTH"]),
        helper.make_node("Shape", ["COUNTS"], ["requests"]),
        helper.make_node("Concat", ["requests", "one"], ["per_request"], axis=0),
        helper.make_node("Shape", ["MAXLEN"], ["longest"]),
        helper.make_node("Expand", ["longest", "per_request"], ["LONGEST"]),
        helper.make_node("Mul", ["INPUT", "two"], ["DOUBLED"]),
    ]
    inputs = [helper.make_tensor_value_info("INPUT", TensorProto.FLOAT, ["elements"]),
              helper.make_tensor_value_info("OFFSETS", TensorProto.INT32, ["requests_plus_one"]),
              helper.make_tensor_value_info("COUNTS", TensorProto.FLOAT, ["requests"]),
              helper.make_tensor_value_info("ITEM_SHAPE", i64, ["rows", 1]),
              helper.make_tensor_value_info("MAXLEN", TensorProto.INT32, ["longest"])]
    inputs = [i for i in inputs if i.name not in leave_out]
    outputs = [helper.make_tensor_value_info("SUM", TensorProto.FLOAT, ["requests", 1]),
               helper.make_tensor_value_info("MEAN", TensorProto.FLOAT, ["requests", 1]),
               helper.make_tensor_value_info("LENGTH", i64, ["rows", 1]),
               helper.make_tensor_value_info("LONGEST", i64, ["requests", 1]),
               helper.make_tensor_value_info("DOUBLED", TensorProto.FLOAT, ["elements"])]
    if leave_out:  # what is left of the graph must still be valid: feed the targets constants
        for target in leave_out:
            nodes.insert(0, helper.make_node("Constant", [], [target], value=helper.make_tensor(
                target, {"OFFSETS": TensorProto.INT32, "COUNTS": TensorProto.FLOAT,
                         "MAXLEN": TensorProto.INT32}.get(target, i64),
                [1, 1] if target == "ITEM_SHAPE" else [1], [1])))
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=initializers)
    save_graph_model(repo, name, graph)
    (repo / name / "config.pbtxt").write_text(config or RAGGED.format(name=name))


@pytest.fixture(scope="module")
def server(make_server, tmp_path_factory):
    repo = copy_repository(tmp_path_factory.mktemp("ragged") / "models")
    save_ragged_model(repo, "ragged")
    # Fixed dims and no model_warmup: the default warm-up runs max_batch_size requests of a row.
    fixed = RAGGED.format(name="ragged_fixed").replace("dims: [ -1 ] allow", "dims: [ 4 ] allow")
    save_ragged_model(repo, "ragged_fixed", config=fixed[:fixed.index("model_warmup")])
    server = make_server(repository=repo, mode="explicit",
                         load_models=["mlp", "ragged", "ragged_fixed"],
                         wait_models=["mlp", "ragged", "ragged_fixed"])
    return repo, server


def ask(client, values):
    x = np.array([values], dtype=np.float32)
    result = client.infer("ragged", [make_input(x, name="INPUT")])
    return {name: result.as_numpy(name) for name in
            ("SUM", "MEAN", "LENGTH", "LONGEST", "DOUBLED")}


def test_requests_of_different_lengths_share_a_batch(server):
    _, srv = server
    client = srv.client()
    before = model_stats(client, "ragged")
    lengths = [1, 5, 2, 8, 3, 7, 4, 6]
    requests = [[float(10 * n + k) for k in range(n)] for n in lengths]
    # Eight at once: the queue delay (200 ms) holds the batch open until all eight are in, and
    # eight rows (max_batch_size) send it at once.
    with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(lambda v: ask(srv.client(), v), requests))
    for values, answer in zip(requests, answers):
        assert answer["SUM"].tolist() == [[sum(values)]]
        assert answer["MEAN"].tolist() == [[pytest.approx(sum(values) / len(values))]]
        assert answer["LENGTH"].tolist() == [[len(values)]]
        # DOUBLED is scattered back by INPUT's shape: [1, n] for a request of shape [1, n].
        np.testing.assert_array_equal(answer["DOUBLED"], 2 * np.array([values], np.float32))
    after = model_stats(client, "ragged")
    executions = after.execution_count - before.execution_count
    inferences = after.inference_count - before.inference_count
    assert inferences == len(requests)
    assert executions < len(requests), f"{executions} executions for {inferences} requests"
    # Every request of a batch sees the batch's longest request (MAXLEN's shape).
    longest = [int(a["LONGEST"][0, 0]) for a in answers]
    assert max(longest) == max(lengths) and all(n >= k for n, k in zip(longest, lengths))


def test_a_request_alone_is_a_batch_of_one(server):
    _, srv = server
    answer = ask(srv.client(), [1.0, 2.0, 3.5])
    assert answer["SUM"].tolist() == [[6.5]] and answer["LONGEST"].tolist() == [[3]]
    assert answer["DOUBLED"].tolist() == [[2.0, 4.0, 7.0]]


def test_http_and_ensemble_steps_take_the_same_path(server):
    repo, srv = server
    http = httpclient.InferenceServerClient(srv.http_url)
    for binary in (True, False):
        x = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]], dtype=np.float32)
        inp = httpclient.InferInput("INPUT", list(x.shape), "FP32")
        inp.set_data_from_numpy(x, binary_data=binary)
        result = http.infer("ragged", [inp])
        assert result.as_numpy("SUM").tolist() == [[15.0]]
        assert result.as_numpy("DOUBLED").tolist() == [[2.0, 4.0, 6.0, 8.0, 10.0]]
    # An ensemble step is one more request to the ragged model, of its own length.
    (repo / "sum_of" / "1").mkdir(parents=True)
    (repo / "sum_of" / "config.pbtxt").write_text("""name: "sum_of"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
ensemble_scheduling { step [ {
  model_name: "ragged"
  input_map { key: "INPUT" value: "IN" }
  output_map { key: "SUM" value: "OUT" }
} ] }
""")
    client = srv.client()
    client.load_model("sum_of")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        sums = list(pool.map(lambda n: srv.client().infer("sum_of", [make_input(
            np.ones((1, n), np.float32), name="IN")]).as_numpy("OUT").tolist(), [1, 2, 3, 4]))
    assert sums == [[[1.0]], [[2.0]], [[3.0]], [[4.0]]]


def test_a_ragged_input_of_fixed_dims_is_warmed_and_served(server):
    _, srv = server
    assert "batch sizes [1, 8]" in srv.log_path.read_text().split("model ragged_fixed/1: ")[1]
    x = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    result = srv.client().infer("ragged_fixed", [make_input(x, name="INPUT")])
    assert result.as_numpy("SUM").tolist() == [[10.0]]


def test_a_request_of_two_rows_to_a_row_per_request_model_gets_a_clear_error(server):
    _, srv = server
    x = np.ones((2, 3), np.float32)
    e = expect_error(lambda: srv.client().infer("ragged", [make_input(x, name="INPUT")]),
                     "INTERNAL")
    assert "a ragged model that gives a row per request needs requests of one row" in \
        e.message(), e.message()
    assert ask(srv.client(), [1.0])["SUM"].tolist() == [[1.0]]


def test_model_config_shows_the_ragged_batching_fields(server):
    _, srv = server
    config = srv.client().get_model_config("ragged", as_json=True)["config"]
    assert config["input"][0]["allow_ragged_batch"] is True
    # proto3's JSON leaves out a field at its default: kind 0 is BATCH_ELEMENT_COUNT.
    kinds = [(b.get("kind", "BATCH_ELEMENT_COUNT"), b["target_name"], b["data_type"])
             for b in config["batch_input"]]
    assert kinds == [("BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", ["OFFSETS"], "TYPE_INT32"),
                     ("BATCH_ELEMENT_COUNT", ["COUNTS"], "TYPE_FP32"),
                     ("BATCH_ITEM_SHAPE", ["ITEM_SHAPE"], "TYPE_INT64"),
                     ("BATCH_MAX_ELEMENT_COUNT_AS_SHAPE", ["MAXLEN"], "TYPE_INT32")]
    assert config["batch_output"] == [{"target_name": ["DOUBLED"], "source_input": ["INPUT"]}]
    # The batch inputs are the server's: clients neither see nor send them.
    metadata = srv.client().get_model_metadata("ragged")
    assert [t.name for t in metadata.inputs] == ["INPUT"]
    x = np.array([[1.0]], dtype=np.float32)
    e = expect_error(lambda: srv.client().infer(
        "ragged", [make_input(x, name="INPUT"), make_input(x, name="COUNTS")]), "INVALID_ARGUMENT")
    assert "COUNTS" in e.message(), e.message()


@pytest.mark.parametrize("name, change, message", [
    ("unknown_source", lambda t: t.replace('target_name: "COUNTS" data_type: TYPE_FP32\n'
                                           '    source_input: "INPUT"',
                                           'target_name: "COUNTS" data_type: TYPE_FP32\n'
                                           '    source_input: "TOKENS"'),
     "batch_input[1].source_input: 'TOKENS' is not an input of the config"),
    ("bad_type", lambda t: t.replace('target_name: "COUNTS" data_type: TYPE_FP32',
                                     'target_name: "COUNTS" data_type: TYPE_FP16'),
     "a batch input is TYPE_INT32, TYPE_INT64 or TYPE_FP32, got TYPE_FP16"),
    ("target_is_input", lambda t: t.replace('target_name: "COUNTS"', 'target_name: "INPUT"'),
     "'INPUT' is a config input"),
    ("no_batching", lambda t: t.replace("max_batch_size: 8", "max_batch_size: 0")
     .replace("dynamic_batching { max_queue_delay_microseconds: 200000 }", ""),
     "need max_batch_size > 0"),
    ("scatter_unknown", lambda t: t.replace('target_name: "DOUBLED" kind',
                                            'target_name: "TRIPLED" kind'),
     "'TRIPLED' is not an output of the config"),
])
def test_bad_ragged_configs_fail_their_load_naming_the_fault(server, name, change, message):
    repo, srv = server
    save_ragged_model(repo, name, config=change(RAGGED.format(name=name)))
    client = srv.client()
    e = expect_error(lambda: client.load_model(name), "INVALID_ARGUMENT")
    assert message in e.message(), e.message()
    assert not client.is_model_ready(name)
    assert_mlp_serves(client)


def test_a_model_without_a_batch_input_target_fails_its_load(server):
    repo, srv = server
    save_ragged_model(repo, "no_counts", config=RAGGED.format(name="no_counts"),
                      leave_out=("COUNTS",))
    client = srv.client()
    e = expect_error(lambda: client.load_model("no_counts"), "INVALID_ARGUMENT")
    assert "batch_input target 'COUNTS' is not an input of the model" in e.message(), e.message()
    assert ask(client, [2.0, 2.0])["SUM"].tolist() == [[4.0]]


def test_a_load_request_config_can_turn_ragged_batching_on(server):
    """The JSON form (a load request's config) reads the same fields."""
    repo, srv = server
    save_ragged_model(repo, "ragged_json")
    client = srv.client()
    config = client.get_model_config("ragged", as_json=True)["config"]
    config["name"] = "ragged_json"
    config.pop("backend", None)
    client.load_model("ragged_json", config=json.dumps(config))
    result = client.infer("ragged_json", [make_input(np.array([[4.0, 5.0]], np.float32),
                                                     name="INPUT")])
    assert result.as_numpy("SUM").tolist() == [[9.0]]
