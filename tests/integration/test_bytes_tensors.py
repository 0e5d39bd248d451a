"""BYTES (TYPE_STRING) tensors end to end: tritonclient sends strings over gRPC (raw, typed
bytes_contents, shared memory) and HTTP (JSON and binary), the CPU engine runs string ONNX ops,
dynamic batching splits variable-length answers back to their requests, and malformed BYTES data
is refused naming the input while the server keeps serving."""
import concurrent.futures
import json
import queue

import numpy as np
import onnx
import onnxruntime
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException, serialize_byte_tensor

import grpc
from tessera_testlib import expect_error, model_stats, run_bench

ECHO_CONFIG = """name: "str_echo"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "text" data_type: TYPE_STRING dims: [ 2 ] } ]
output [ { name: "echo" data_type: TYPE_STRING dims: [ 2 ] } ]
dynamic_batching { max_queue_delay_microseconds: 200000 }
"""

ANIMALS = ["cat", "dog", "bird"]
LABELS = ["Cat", "Dog", "Bird"]


def save(model, repo, name):
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(repo / name / "1" / "model.onnx"))
    return str(repo / name / "1" / "model.onnx")


def make_model(nodes, inputs, outputs, initializers=()):
    graph = onnx.helper.make_graph(nodes, "strings", inputs, outputs, list(initializers))
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13),
                                                         onnx.helper.make_opsetid("ai.onnx.ml", 2)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def echo_model():
    string = onnx.TensorProto.STRING
    return make_model([onnx.helper.make_node("Identity", ["text"], ["echo"])],
                      [onnx.helper.make_tensor_value_info("text", string, ["batch", 2])],
                      [onnx.helper.make_tensor_value_info("echo", string, ["batch", 2])])


def labels_model():
    """text [batch, 1] -> lower case -> animal id (INT64, -1 unknown) and its label (STRING)."""
    string, int64 = onnx.TensorProto.STRING, onnx.TensorProto.INT64
    flat = onnx.helper.make_tensor("flat", int64, [1], [-1])
    column = onnx.helper.make_tensor("column", int64, [2], [-1, 1])
    nodes = [
        onnx.helper.make_node("Reshape", ["text", "flat"], ["words"]),
        onnx.helper.make_node("StringNormalizer", ["words"], ["lower"],
                              case_change_action="LOWER", locale="C"),
        onnx.helper.make_node("LabelEncoder", ["lower"], ["ids"], domain="ai.onnx.ml",
                              keys_strings=ANIMALS, values_int64s=[0, 1, 2], default_int64=-1),
        onnx.helper.make_node("LabelEncoder", ["ids"], ["names"], domain="ai.onnx.ml",
                              keys_int64s=[0, 1, 2], values_strings=LABELS,
                              default_string="unknown"),
        onnx.helper.make_node("Reshape", ["ids", "column"], ["id"]),
        onnx.helper.make_node("Reshape", ["names", "column"], ["label"]),
    ]
    return make_model(nodes, [onnx.helper.make_tensor_value_info("text", string, ["batch", 1])],
                      [onnx.helper.make_tensor_value_info("id", int64, ["batch", 1]),
                       onnx.helper.make_tensor_value_info("label", string, ["batch", 1])],
                      [flat, column])


def upper_model():
    """text [batch, 1] -> upper case, same shape."""
    string, int64 = onnx.TensorProto.STRING, onnx.TensorProto.INT64
    nodes = [
        onnx.helper.make_node("Reshape", ["text", "flat"], ["words"]),
        onnx.helper.make_node("StringNormalizer", ["words"], ["upper"],
                              case_change_action="UPPER", locale="C"),
        onnx.helper.make_node("Reshape", ["upper", "column"], ["out"]),
    ]
    return make_model(nodes, [onnx.helper.make_tensor_value_info("text", string, ["batch", 1])],
                      [onnx.helper.make_tensor_value_info("out", string, ["batch", 1])],
                      [onnx.helper.make_tensor("flat", int64, [1], [-1]),
                       onnx.helper.make_tensor("column", int64, [2], [-1, 1])])


CACHED_CONFIG = """name: "str_cached"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "text" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "id" data_type: TYPE_INT64 dims: [ 1 ] },
         { name: "label" data_type: TYPE_STRING dims: [ 1 ] } ]
response_cache { enable: true }
"""


# Labels, then upper case: a BYTES tensor passed from one step to the next.
PIPELINE = """name: "str_pipeline"
platform: "ensemble"
max_batch_size: 4
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "SHOUT" data_type: TYPE_STRING dims: [ 1 ] } ]
ensemble_scheduling {
  step [
    { model_name: "str_labels" input_map { key: "text" value: "TEXT" }
      output_map { key: "label" value: "LABEL" } },
    { model_name: "str_upper" input_map { key: "text" value: "LABEL" }
      output_map { key: "out" value: "SHOUT" } }
  ]
}
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("bytes") / "models"
    save(echo_model(), repo, "str_echo")
    (repo / "str_echo" / "config.pbtxt").write_text(ECHO_CONFIG)
    # No config: completed from the model file, STRING tensors as TYPE_STRING.
    save(labels_model(), repo, "str_labels")
    save(upper_model(), repo, "str_upper")
    save(labels_model(), repo, "str_cached")
    (repo / "str_cached" / "config.pbtxt").write_text(CACHED_CONFIG)
    (repo / "str_pipeline" / "1").mkdir(parents=True)
    (repo / "str_pipeline" / "config.pbtxt").write_text(PIPELINE)
    return repo


@pytest.fixture(scope="module")
def server(make_server, repo):
    return make_server(repository=repo, mode="poll", poll_secs=1,
                       extra_args=["--allow-client-shm", "--cache-config", "local,size=1048576"],
                       wait_models=["str_echo", "str_labels", "str_upper", "str_pipeline",
                                    "str_cached"])


@pytest.fixture(scope="module")
def client(server):
    return server.client()


def bytes_input(name, values, client_module=grpcclient, binary=True):
    array = np.array(values, dtype=np.object_)
    tensor = client_module.InferInput(name, list(array.shape), "BYTES")
    if client_module is httpclient:
        tensor.set_data_from_numpy(array, binary_data=binary)
    else:
        tensor.set_data_from_numpy(array)
    return tensor


def echo(client, rows):
    result = client.infer("str_echo", [bytes_input("text", rows)])
    return result.as_numpy("echo")


def test_strings_round_trip_over_grpc_whatever_their_bytes(client):
    rows = [[b"", "h\u00e9llo w\u00f6rld".encode()], [b"\x00\xff\xfe binary", b"x" * 10000]]
    out = echo(client, rows)
    assert out.dtype == np.object_ and out.shape == (2, 2)
    assert out.tolist() == rows


def test_config_completed_from_the_model_file_says_type_string(client):
    config = client.get_model_config("str_labels").config
    assert [i.data_type for i in config.input] == [grpcclient.model_config_pb2.TYPE_STRING]
    outputs = {o.name: o.data_type for o in config.output}
    assert outputs == {"id": grpcclient.model_config_pb2.TYPE_INT64,
                       "label": grpcclient.model_config_pb2.TYPE_STRING}
    metadata = client.get_model_metadata("str_labels")
    assert [(i.name, i.datatype) for i in metadata.inputs] == [("text", "BYTES")]


def test_string_ops_match_onnxruntime(client, repo):
    words = np.array([["Cat"], ["DOG"], ["fish"], [""]], dtype=np.object_)
    result = client.infer("str_labels", [bytes_input("text", words)])
    session = onnxruntime.InferenceSession(str(repo / "str_labels" / "1" / "model.onnx"))
    ids, labels = session.run(["id", "label"], {"text": words.astype(str)})
    np.testing.assert_array_equal(result.as_numpy("id"), ids)
    assert ids.ravel().tolist() == [0, 1, -1, -1]
    assert result.as_numpy("label").ravel().tolist() == [s.encode() for s in labels.ravel()]


def test_an_ensemble_passes_strings_between_steps(client):
    words = np.array([["dog"], ["Fish"]], dtype=np.object_)
    result = client.infer("str_pipeline", [bytes_input("TEXT", words)])
    assert result.as_numpy("SHOUT").tolist() == [[b"DOG"], [b"UNKNOWN"]]


def test_the_response_cache_keys_on_the_strings(client):
    def label(word):
        result = client.infer("str_cached", [bytes_input("text", [[word]])])
        return result.as_numpy("label")[0, 0]

    before = model_stats(client, "str_cached").inference_stats
    assert [label(w) for w in ("Cat", "cat", "Cat", "dog", "cat")] == [
        b"Cat", b"Cat", b"Cat", b"Dog", b"Cat"]
    after = model_stats(client, "str_cached").inference_stats
    assert after.cache_miss.count - before.cache_miss.count == 3  # "Cat", "cat", "dog"
    assert after.cache_hit.count - before.cache_hit.count == 2


def test_strings_over_a_stream(client):
    answers = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    try:
        for k, word in enumerate(["bird", "x" * 300, "DOG"]):
            client.async_stream_infer("str_labels", [bytes_input("text", [[word]])],
                                      request_id=str(k))
        got = {}
        for _ in range(3):
            result, error = answers.get(timeout=30)
            assert error is None, error
            got[result.get_response().id] = result.as_numpy("label")[0, 0]
    finally:
        client.stop_stream()
    assert got == {"0": b"Bird", "1": b"unknown", "2": b"Dog"}


def test_http_json_and_binary_strings(server):
    client = httpclient.InferenceServerClient(server.http_url)
    rows = [["caf\u00e9", ""], ["b", "long " * 50]]
    for binary in (False, True):
        output = httpclient.InferRequestedOutput("echo", binary_data=binary)
        result = client.infer("str_echo", [bytes_input("text", rows, httpclient, binary)],
                              outputs=[output])
        out = result.as_numpy("echo")
        assert [[v.decode() if isinstance(v, bytes) else v for v in row] for row in out] == rows


def test_dynamic_batching_splits_variable_length_answers(client):
    before = model_stats(client, "str_echo")
    rows = {i: [[f"req{i}-" + "a" * (i * 37 % 101), "b" * i]] for i in range(8)}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = {i: pool.submit(echo, client, r) for i, r in rows.items()}
        answers = {i: f.result().tolist() for i, f in futures.items()}
    for i, r in rows.items():
        assert answers[i] == [[s.encode() for s in r[0]]], f"request {i} got another's answer"
    after = model_stats(client, "str_echo")
    requests = after.inference_count - before.inference_count
    batches = after.execution_count - before.execution_count
    assert requests == 8 and batches < 8, (requests, batches)


def test_typed_bytes_contents(server):
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.url))
    request = service_pb2.ModelInferRequest(model_name="str_echo")
    tensor = request.inputs.add(name="text", datatype="BYTES", shape=[1, 2])
    tensor.contents.bytes_contents.extend([b"typed", b"\x01"])
    response = stub.ModelInfer(request)
    assert response.outputs[0].datatype == "BYTES"
    assert list(response.outputs[0].shape) == [1, 2]
    assert response.raw_output_contents[0] == b"\x05\0\0\0typed\x01\0\0\0\x01"

    tensor.contents.bytes_contents.append(b"third")
    with pytest.raises(grpc.RpcError) as error:
        stub.ModelInfer(request)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "contents hold 3 elements" in error.value.details()


@pytest.mark.parametrize("raw, message", [
    (b"\x02\0\0\0ab\x05\0\0\0abc", "input 'text': raw_input_contents: BYTES element 1 says it "
                                   "has 5 bytes but only 3 follow"),
    (b"\x02\0\0\0ab\x01\0", "BYTES element 1 at byte 6: its 4-byte length is cut off"),
    (b"\x01\0\0\0a\x01\0\0\0b\x01\0\0\0c", "hold 3 elements, the shape needs 2"),
])
def test_malformed_bytes_are_refused_and_the_server_keeps_serving(server, client, raw, message):
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.url))
    request = service_pb2.ModelInferRequest(model_name="str_echo")
    request.inputs.add(name="text", datatype="BYTES", shape=[1, 2])
    request.raw_input_contents.append(raw)
    with pytest.raises(grpc.RpcError) as error:
        stub.ModelInfer(request)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in error.value.details()
    assert echo(client, [["still", "fine"]]).tolist() == [[b"still", b"fine"]]


def test_wrong_datatype_for_a_string_input(client):
    tensor = grpcclient.InferInput("text", [1, 2], "FP32")
    tensor.set_data_from_numpy(np.zeros((1, 2), dtype=np.float32))
    error = expect_error(lambda: client.infer("str_echo", [tensor]), "INVALID_ARGUMENT")
    assert "datatype FP32 does not match the model's BYTES" in error.message()


def test_strings_from_client_shared_memory(client):
    rows = np.array([["shared", "memory \u2713"]], dtype=np.object_)
    data = serialize_byte_tensor(rows).item()
    handle = shm.create_shared_memory_region("strings", "/tessera-test-strings", len(data))
    try:
        shm.set_shared_memory_region(handle, [np.frombuffer(data, dtype=np.uint8)])
        client.register_system_shared_memory("strings", "/tessera-test-strings", len(data))
        tensor = grpcclient.InferInput("text", [1, 2], "BYTES")
        tensor.set_shared_memory("strings", len(data))
        result = client.infer("str_echo", [tensor])
        assert result.as_numpy("echo").tolist() == [[b"shared", "memory \u2713".encode()]]

        # A region holding fewer elements than the shape says.
        short = grpcclient.InferInput("text", [1, 2], "BYTES")
        short.set_shared_memory("strings", 10)  # "shared" and half the next length prefix
        error = expect_error(lambda: client.infer("str_echo", [short]),
                             "INVALID_ARGUMENT")
        assert "shared-memory region 'strings'" in error.message()
    finally:
        client.unregister_system_shared_memory("strings")
        shm.destroy_shared_memory_region(handle)


def test_model_with_strings_in_a_warm_up_sample_loads(make_server, tmp_path):
    repo = tmp_path / "models"
    save(echo_model(), repo, "str_warm")
    (repo / "str_warm" / "config.pbtxt").write_text(
        ECHO_CONFIG.replace("str_echo", "str_warm") +
        'model_warmup [ { name: "w" batch_size: 2 inputs { key: "text" value: '
        '{ data_type: TYPE_STRING dims: [ 2 ] zero_data: true } } } ]\n')
    server = make_server(repository=repo, mode="poll", poll_secs=1, wait_models=["str_warm"])
    result = server.client().infer("str_warm", [bytes_input("text", [["a", "b"]])])
    assert result.as_numpy("echo").tolist() == [[b"a", b"b"]]


def test_tessera_bench_sends_random_and_file_strings(server, tmp_path):
    strings = tmp_path / "text.bin"
    strings.write_bytes(serialize_byte_tensor(np.array([["from", "file"]], np.object_)).item())
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(f"""\
warmup_s: 0.2
duration_s: 1
drain_s: 10
models:
  - {{name: str_echo, arrival: constant, rate: 20, input: random}}
  - {{name: str_labels, arrival: constant, rate: 20, input: zeros}}
  - {{name: str_upper, arrival: constant, rate: 20, input: files,
      input_files: {{text: {strings}}}, inputs: [{{name: text, datatype: BYTES, shape: [1, 2]}}]}}
""")
    report_path = tmp_path / "report.json"
    r = run_bench("-s", scenario, "-u", server.url, "--json", report_path)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    models = {m["model"]: m for m in json.loads(report_path.read_text())["runs"][0]["models"]}
    for name in ("str_echo", "str_labels"):
        assert models[name]["ok"] == models[name]["intended"] > 0, models[name]
    # str_upper takes [batch, 1]: the file's [1, 2] is refused by the server, and counted.
    assert models["str_upper"]["errors"] == {"INVALID_ARGUMENT": models["str_upper"]["intended"]}
