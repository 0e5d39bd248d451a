"""Stateful models (Triton's sequence_batching) through tritonclient: a real ONNX accumulator whose
state the server keeps between a sequence's requests, with the control inputs filled per request,
over gRPC and HTTP; sequences batch together; bad sequence requests get errors naming the problem,
and other models keep serving."""
import concurrent.futures
import subprocess
import threading
import time

import numpy as np
import onnx
import pytest
import tritonclient.http as httpclient
from tritonclient.grpc import model_config_pb2

from conftest import copy_repository
from tessera_testlib import (assert_mlp_serves, expect_error, fetch_metrics, make_input,
                             metric_sum, model_stats, parse_metrics, wait_until)

ACCUMULATOR = """name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [
  {{ name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] }},
  {{ name: "START_SEEN" data_type: TYPE_FP32 dims: [ 1 ] }},
  {{ name: "END_SEEN" data_type: TYPE_FP32 dims: [ 1 ] }},
  {{ name: "READY_SEEN" data_type: TYPE_FP32 dims: [ 1 ] }},
  {{ name: "CORRID_SEEN" data_type: {seen_type} dims: [ 1 ] }}
]
sequence_batching {{
  max_sequence_idle_microseconds: {idle_us}
  oldest {{ max_candidate_sequences: 16 max_queue_delay_microseconds: 2000 }}
  control_input [
    {{ name: "START" control [ {{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "END" control [ {{ kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "READY" control [ {{ kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] }} ] }},
    {{ name: "CORRID" control [ {{ kind: CONTROL_SEQUENCE_CORRID data_type: {corrid_type} }} ] }}
  ]
  state [
    {{
      input_name: "STATE_IN"
      output_name: "STATE_OUT"
      data_type: TYPE_FP32
      dims: [ 1 ]
      initial_state [ {{ data_type: TYPE_FP32 dims: [ 1 ] zero_data: true name: "zeros" }} ]
    }}
  ]
}}
"""


def save_accumulator(repo, name, idle_us=5_000_000, text_ids=False, initial=None):
    """OUTPUT = INPUT + STATE_IN, STATE_OUT = OUTPUT, and each control input echoed as FP32; with
    `text_ids` the CORRID is TYPE_STRING and echoed as it is; with `initial` a sequence starts
    from that value, read from a file in initial_state/ (Triton's data_file)."""
    def info(n, t):
        return onnx.helper.make_tensor_value_info(n, t, ["batch", 1])
    fp32, i32, i64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT32, onnx.TensorProto.INT64
    corrid = onnx.TensorProto.STRING if text_ids else i64
    inputs = [info("INPUT", fp32), info("START", i32), info("END", fp32),
              info("READY", onnx.TensorProto.BOOL), info("CORRID", corrid), info("STATE_IN", fp32)]
    outputs = [info(n, fp32) for n in
               ("OUTPUT", "STATE_OUT", "START_SEEN", "END_SEEN", "READY_SEEN")]
    outputs.append(info("CORRID_SEEN", corrid if text_ids else fp32))
    nodes = [
        onnx.helper.make_node("Add", ["INPUT", "STATE_IN"], ["OUTPUT"]),
        onnx.helper.make_node("Identity", ["OUTPUT"], ["STATE_OUT"]),
        onnx.helper.make_node("Cast", ["START"], ["START_SEEN"], to=fp32),
        onnx.helper.make_node("Identity", ["END"], ["END_SEEN"]),
        onnx.helper.make_node("Cast", ["READY"], ["READY_SEEN"], to=fp32),
        onnx.helper.make_node("Identity", ["CORRID"], ["CORRID_SEEN"]) if text_ids else
        onnx.helper.make_node("Cast", ["CORRID"], ["CORRID_SEEN"], to=fp32),
    ]
    model = onnx.helper.make_model(onnx.helper.make_graph(nodes, name, inputs, outputs),
                                   opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(repo / name / "1" / "model.onnx"))
    config = ACCUMULATOR.format(
        name=name, idle_us=idle_us, corrid_type="TYPE_STRING" if text_ids else "TYPE_INT64",
        seen_type="TYPE_STRING" if text_ids else "TYPE_FP32")
    if initial is not None:
        (repo / name / "initial_state").mkdir()
        (repo / name / "initial_state" / "start.bin").write_bytes(
            np.array([initial], np.float32).tobytes())
        config = config.replace('zero_data: true name: "zeros"', 'data_file: "start.bin"')
    (repo / name / "config.pbtxt").write_text(config)


WORD_WINDOW = """name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "WORD" data_type: TYPE_STRING dims: [ 1 ] }} ]
output [ {{ name: "LAST_TWO" data_type: TYPE_STRING dims: [ 2 ] }} ]
sequence_batching {{
  direct {{ max_queue_delay_microseconds: 2000 }}
  state [ {{
    input_name: "WORDS_IN" output_name: "WORDS_OUT" data_type: TYPE_STRING dims: [ 2 ]
    initial_state [ {{ data_type: TYPE_STRING dims: [ 2 ] {initial} name: "start" }} ]
  }} ]
}}
"""


def save_word_window(repo, name, initial=None):
    """A BYTES (TYPE_STRING) state: the sequence's last two words. WORDS_OUT = the newer of
    WORDS_IN's two, then WORD; LAST_TWO = WORDS_OUT. A sequence starts from two empty strings, or
    from `initial`'s two words, read from a file in initial_state/ (4-byte length, then bytes)."""
    string = onnx.TensorProto.STRING
    inputs = [onnx.helper.make_tensor_value_info("WORD", string, ["batch", 1]),
              onnx.helper.make_tensor_value_info("WORDS_IN", string, ["batch", 2])]
    outputs = [onnx.helper.make_tensor_value_info(n, string, ["batch", 2])
               for n in ("LAST_TWO", "WORDS_OUT")]
    ints = [onnx.helper.make_tensor(n, onnx.TensorProto.INT64, [1], [v])
            for n, v in (("one", 1), ("two", 2))]
    nodes = [onnx.helper.make_node("Slice", ["WORDS_IN", "one", "two", "one"], ["newer"]),
             onnx.helper.make_node("Concat", ["newer", "WORD"], ["WORDS_OUT"], axis=1),
             onnx.helper.make_node("Identity", ["WORDS_OUT"], ["LAST_TWO"])]
    graph = onnx.helper.make_graph(nodes, name, inputs, outputs, initializer=ints)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(repo / name / "1" / "model.onnx"))
    start = "zero_data: true"
    if initial is not None:
        (repo / name / "initial_state").mkdir()
        (repo / name / "initial_state" / "words.bin").write_bytes(
            b"".join(len(w).to_bytes(4, "little") + w for w in initial))
        start = 'data_file: "words.bin"'
    (repo / name / "config.pbtxt").write_text(WORD_WINDOW.format(name=name, initial=start))


@pytest.fixture(scope="module")
def server(make_server, tmp_path_factory):
    repo = copy_repository(tmp_path_factory.mktemp("sequence") / "models")
    save_accumulator(repo, "accumulate")
    save_accumulator(repo, "accumulate_short_idle", idle_us=1_000_000)
    save_accumulator(repo, "accumulate_text_id", text_ids=True)
    save_accumulator(repo, "accumulate_from_100", initial=100.0)
    save_word_window(repo, "word_window")
    save_word_window(repo, "word_window_from_file", initial=(b"once", b"upon"))
    return make_server(repository=repo, mode="poll", wait_models=[
        "mlp", "accumulate", "accumulate_short_idle", "accumulate_text_id",
        "accumulate_from_100", "word_window", "word_window_from_file"])


def step(client, model, value, sequence_id, start=False, end=False):
    x = np.array([[value]], dtype=np.float32)
    result = client.infer(model, [make_input(x, name="INPUT")], sequence_id=sequence_id,
                          sequence_start=start, sequence_end=end)
    return {name: float(result.as_numpy(name)[0, 0]) for name in
            ("OUTPUT", "START_SEEN", "END_SEEN", "READY_SEEN", "CORRID_SEEN")}


def test_a_sequence_accumulates_and_sees_its_controls(server):
    client = server.client()
    # Two sequences interleaved: each keeps its own state.
    a = [step(client, "accumulate", 1.0, 11, start=True), step(client, "accumulate", 10.0, 12, start=True)]
    active = lambda: metric_sum(parse_metrics(fetch_metrics(server.metrics_url)),  # noqa: E731
                                "tessera_sequences_active", model="accumulate")
    assert active() == 2
    a += [step(client, "accumulate", 2.0, 11), step(client, "accumulate", 20.0, 12)]
    a += [step(client, "accumulate", 3.0, 11, end=True), step(client, "accumulate", 30.0, 12, end=True)]
    assert [r["OUTPUT"] for r in a] == [1.0, 10.0, 3.0, 30.0, 6.0, 60.0]
    assert [r["START_SEEN"] for r in a] == [1, 1, 0, 0, 0, 0]
    assert [r["END_SEEN"] for r in a] == [0, 0, 0, 0, 1, 1]
    assert all(r["READY_SEEN"] == 1 for r in a)
    assert [r["CORRID_SEEN"] for r in a] == [11, 12, 11, 12, 11, 12]
    assert active() == 0

    # Ended: the ID starts afresh with a new START, from the initial state.
    e = expect_error(lambda: step(client, "accumulate", 1.0, 11), "INVALID_ARGUMENT")
    assert "must specify the START flag" in e.message(), e.message()
    assert step(client, "accumulate", 5.0, 11, start=True, end=True)["OUTPUT"] == 5.0

    # The state outputs and control inputs are the server's: clients neither send nor see them.
    metadata = client.get_model_metadata("accumulate")
    assert [t.name for t in metadata.inputs] == ["INPUT"]
    assert "STATE_OUT" not in [t.name for t in metadata.outputs]
    config = client.get_model_config("accumulate").config
    assert config.sequence_batching.oldest.max_queue_delay_microseconds == 2000
    assert [c.name for c in config.sequence_batching.control_input] == ["START", "END", "READY",
                                                                         "CORRID"]
    assert config.sequence_batching.state[0].output_name == "STATE_OUT"
    assert not config.HasField("dynamic_batching")
    assert "sequence" in client.get_server_metadata().extensions


def test_an_initial_state_from_a_data_file_starts_every_sequence(server):
    client = server.client()
    outputs = [step(client, "accumulate_from_100", 1.0, 41, start=True)["OUTPUT"],
               step(client, "accumulate_from_100", 2.0, 41, end=True)["OUTPUT"],
               step(client, "accumulate_from_100", 5.0, 42, start=True, end=True)["OUTPUT"]]
    assert outputs == [101.0, 103.0, 105.0]


def test_bad_sequence_requests_are_refused_by_name(server):
    client = server.client()
    x = np.array([[1.0]], dtype=np.float32)
    e = expect_error(lambda: client.infer("accumulate", [make_input(x, name="INPUT")]),
                     "INVALID_ARGUMENT")
    assert "correlation ID" in e.message(), e.message()
    e = expect_error(lambda: step(client, "accumulate", 1.0, 404), "INVALID_ARGUMENT")
    assert "sequence 404" in e.message() and "START" in e.message(), e.message()
    e = expect_error(lambda: step(client, "accumulate", 1.0, "text-id", start=True),
                     "INVALID_ARGUMENT")
    assert "CORRID" in e.message() and "TYPE_INT64" in e.message(), e.message()
    rows = np.array([[1.0], [2.0]], dtype=np.float32)
    e = expect_error(lambda: client.infer("accumulate", [make_input(rows, name="INPUT")],
                                          sequence_id=5, sequence_start=True), "INVALID_ARGUMENT")
    assert "batch size 1" in e.message(), e.message()
    # A client cannot send the server's own inputs.
    e = expect_error(lambda: client.infer(
        "accumulate", [make_input(x, name="INPUT"), make_input(x, name="STATE_IN")],
        sequence_id=6, sequence_start=True), "INVALID_ARGUMENT")
    assert "STATE_IN" in e.message(), e.message()
    assert model_stats(client, "accumulate").inference_stats.fail.count >= 5
    assert_mlp_serves(client)


def test_many_sequences_at_once_keep_their_states_and_share_batches(server):
    client = server.client()
    before = model_stats(client, "accumulate")
    sequences, steps = 8, 12

    def run(s):
        total = 0.0
        for k in range(steps):
            value = float(s * 100 + k)
            total += value
            got = step(client, "accumulate", value, 1000 + s, start=k == 0, end=k == steps - 1)
            assert got["OUTPUT"] == total, (s, k, got)
            assert got["CORRID_SEEN"] == 1000 + s
        return total

    with concurrent.futures.ThreadPoolExecutor(sequences) as pool:
        totals = list(pool.map(run, range(sequences)))
    assert totals == [sum(float(s * 100 + k) for k in range(steps)) for s in range(sequences)]
    after = model_stats(client, "accumulate")
    requests = after.inference_count - before.inference_count
    executions = after.execution_count - before.execution_count
    assert requests == sequences * steps
    # Requests of different sequences share batches (the 2 ms queue delay gathers them).
    assert executions < requests, (executions, requests)


def test_a_string_corrid_sees_string_ids_and_numbers_as_text(server):
    client = server.client()

    def text_step(value, sequence_id, start=False):
        x = np.array([[value]], dtype=np.float32)
        result = client.infer("accumulate_text_id", [make_input(x, name="INPUT")],
                              sequence_id=sequence_id, sequence_start=start)
        return float(result.as_numpy("OUTPUT")[0, 0]), result.as_numpy("CORRID_SEEN")[0, 0]

    # Sent together so that the sequences' rows may share a batch: each keeps its own state and
    # sees its own ID, whatever the lengths of the others.
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        firsts = list(pool.map(lambda a: text_step(*a), [(1.0, "user-a", True),
                                                         (10.0, "a-much-longer-user-id", True),
                                                         (100.0, 7, True)]))
    assert firsts == [(1.0, b"user-a"), (10.0, b"a-much-longer-user-id"), (100.0, b"7")]
    assert text_step(2.0, "user-a") == (3.0, b"user-a")
    assert text_step(20.0, "a-much-longer-user-id") == (30.0, b"a-much-longer-user-id")
    # The number 7 and the string "7" are two sequences (as in Triton); the model sees "7" for both.
    assert text_step(5.0, "7", start=True) == (5.0, b"7")
    assert text_step(1.0, 7) == (101.0, b"7")


def test_a_bytes_state_carries_strings_between_requests(server):
    client = server.client()

    def say(model, word, sequence_id, start=False):
        x = np.array([[word]], dtype=np.object_)
        result = client.infer(model, [make_input(x, "BYTES", "WORD")], sequence_id=sequence_id,
                              sequence_start=start)
        return result.as_numpy("LAST_TWO")[0].tolist()

    # Two sequences side by side, sent together so their rows may share a batch: each keeps its
    # own strings, whatever the lengths of the other's.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        firsts = list(pool.map(lambda a: say("word_window", *a, start=True),
                               [("a", 1), ("a-much-longer-word", 2)]))
    assert firsts == [[b"", b"a"], [b"", b"a-much-longer-word"]]
    assert say("word_window", "b", 1) == [b"a", b"b"]
    assert say("word_window", "", 2) == [b"a-much-longer-word", b""]
    assert say("word_window", "c", 1) == [b"b", b"c"]
    assert say("word_window", "x", 1, start=True) == [b"", b"x"]  # a new start, a new state
    # The initial state from a data file of serialized strings.
    assert say("word_window_from_file", "a", 5, start=True) == [b"upon", b"a"]
    assert say("word_window_from_file", "time", 5) == [b"a", b"time"]
    config = client.get_model_config("word_window").config
    assert config.sequence_batching.state[0].data_type == model_config_pb2.TYPE_STRING


def test_an_idle_sequence_is_released(server):
    client = server.client()
    assert step(client, "accumulate_short_idle", 4.0, 77, start=True)["OUTPUT"] == 4.0
    time.sleep(2.5)  # past the model's 1 s max_sequence_idle_microseconds
    e = expect_error(lambda: step(client, "accumulate_short_idle", 1.0, 77), "INVALID_ARGUMENT")
    assert "idle" in e.message(), e.message()
    # Kept alive by its requests, a sequence outlives the idle time. (Gaps well under the idle
    # time: on a loaded 2-core CI machine one request can take a few hundred milliseconds.)
    assert step(client, "accumulate_short_idle", 1.0, 78, start=True)["OUTPUT"] == 1.0
    for _ in range(5):
        time.sleep(0.3)
        last = step(client, "accumulate_short_idle", 1.0, 78)
    assert last["OUTPUT"] == 6.0


def test_a_sequence_over_http(server):
    client = httpclient.InferenceServerClient(url=server.http_url)
    try:
        outputs = []
        for k, value in enumerate([2.0, 3.0, 4.0]):
            inp = httpclient.InferInput("INPUT", [1, 1], "FP32")
            inp.set_data_from_numpy(np.array([[value]], dtype=np.float32))
            result = client.infer("accumulate", [inp], sequence_id=4242, sequence_start=k == 0,
                                  sequence_end=k == 2)
            outputs.append(float(result.as_numpy("OUTPUT")[0, 0]))
        assert outputs == [2.0, 5.0, 9.0]
        inp = httpclient.InferInput("INPUT", [1, 1], "FP32")
        inp.set_data_from_numpy(np.array([[1.0]], dtype=np.float32))
        with pytest.raises(Exception) as info:
            client.infer("accumulate", [inp])
        assert "correlation ID" in str(info.value)
    finally:
        client.close()


def test_requests_of_one_sequence_sent_together_run_in_order(server):
    """A client that does not wait for each answer: the server still runs them one at a time, in
    arrival order, each on the state the one before left."""
    client = server.new_client()
    results, lock, done = [], threading.Lock(), threading.Event()
    count = 20

    def callback(result, error):
        with lock:
            results.append(error or float(result.as_numpy("OUTPUT")[0, 0]))
            if len(results) == count:
                done.set()

    def send(k):
        x = np.array([[1.0]], dtype=np.float32)
        client.async_infer("accumulate", [make_input(x, name="INPUT")], callback,
                           sequence_id=9000, sequence_start=k == 0, sequence_end=k == count - 1)

    # gRPC keeps no order between calls, so only the requests in between are sent together: the
    # start must arrive first and the end last, or they are refused (a loaded machine reordered
    # calls sent 2 ms apart).
    send(0)
    wait_until(lambda: len(results) == 1, 10)
    for k in range(1, count - 1):
        send(k)
        time.sleep(0.002)
    wait_until(lambda: len(results) == count - 1, 30)
    send(count - 1)
    assert done.wait(30), results
    assert sorted(results) == [float(k + 1) for k in range(count)], results
    wait_until(lambda: model_stats(client, "accumulate").inference_stats.success.count > 0, 5)


def test_perf_analyzer_drives_sequences(server, tmp_path):
    """Triton's perf_analyzer sees sequence_batching in the config and sends sequences (IDs, START
    and END flags) of its own: every request must succeed."""
    from test_perf_analyzer import PERF_ANALYZER, WINDOW_ARGS
    if not PERF_ANALYZER.is_file():
        pytest.fail(f"{PERF_ANALYZER} not found: run scripts/install_deps.sh", pytrace=False)
    client = server.client()
    before = model_stats(client, "accumulate").inference_stats
    cmd = [str(PERF_ANALYZER), "-m", "accumulate", "-i", "grpc", "-u", server.url,
           "--concurrency-range", "4", "--sequence-length", "6", *WINDOW_ARGS]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"$ {' '.join(cmd)}\n{out}\n{server.log_tail_text()}"
    assert "Sequence count" in out, out
    after = model_stats(client, "accumulate").inference_stats
    assert after.fail.count == before.fail.count, out
    assert after.success.count > before.success.count
