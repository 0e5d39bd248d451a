"""The KServe v2 HTTP/REST endpoint, through tritonclient.http (unchanged) and through raw HTTP
requests: metadata, configuration, inference with JSON and binary tensors, classification,
statistics, repository control, system shared memory shared with the gRPC endpoint, and clear
{"error": ...} answers for bad requests, after which the server still serves."""

import gzip
import json
import socket
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from conftest import MODELS_DIR, require_bundled_models
from tessera_testlib import (INPUT_NAME, OUTPUT_NAME, assert_close, infer_output, load_reference,
                             random_inputs)


@pytest.fixture(scope="module")
def http_server(make_server, tmp_path_factory):
    require_bundled_models()
    trace_file = tmp_path_factory.mktemp("http-trace") / "trace.json"
    return make_server(repository=MODELS_DIR, mode="explicit", load_models=("mlp", "small_cnn"),
                       extra_args=("--allow-client-shm", "--allow-log-settings", "--trace-file",
                                   str(trace_file), "--trace-level", "TIMESTAMPS"))


@pytest.fixture(scope="module")
def client(http_server):
    c = httpclient.InferenceServerClient(url=http_server.http_url, concurrency=8)
    c.tessera_grpc_url = http_server.url
    yield c
    c.close()


def client_grpc_url(client):
    return client.tessera_grpc_url


def http_infer(client, model, x, binary_in=True, binary_out=True, **kwargs):
    inp = httpclient.InferInput(INPUT_NAME, list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary_in)
    out = httpclient.InferRequestedOutput(OUTPUT_NAME, binary_data=binary_out)
    return client.infer(model, [inp], outputs=[out], **kwargs)


def raw(server, method, path, body=None, headers=None):
    """(status, headers, body bytes) of one HTTP request; error statuses are returned, not raised."""
    data = body.encode() if isinstance(body, str) else body
    request = urllib.request.Request(f"http://{server.http_url}{path}", data=data, method=method,
                                     headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def assert_error(server, method, path, body, status, fragment):
    code, _, answer = raw(server, method, path, body)
    assert code == status, (code, answer)
    message = json.loads(answer)["error"]
    assert fragment in message, message


def assert_mlp_serves_over_http(client):
    x, y = load_reference("mlp")
    assert_close(http_infer(client, "mlp", x).as_numpy(OUTPUT_NAME), y, "mlp after an error")


def test_health_metadata_and_config(http_server, client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("mlp") and not client.is_model_ready("nope")
    meta = client.get_server_metadata()
    assert meta["name"] == "tessera" and "binary_tensor_data" in meta["extensions"]
    assert "system_shared_memory" in meta["extensions"]
    model = client.get_model_metadata("small_cnn")
    assert model["inputs"] == [{"name": INPUT_NAME, "datatype": "FP32", "shape": [-1, 3, 32, 32]}]
    assert model["versions"] == ["1"]
    assert client.get_model_metadata("mlp", model_version="1")["name"] == "mlp"
    config = client.get_model_config("mlp")
    assert config["max_batch_size"] == 8
    assert config["input"][0]["dims"] == [64] and config["input"][0]["data_type"] == "TYPE_FP32"
    with pytest.raises(InferenceServerException, match="unknown model 'nope'"):
        client.get_model_metadata("nope")


@pytest.mark.parametrize("binary_in,binary_out", [(True, True), (False, False), (True, False)])
@pytest.mark.parametrize("model", ["mlp", "small_cnn"])
def test_infer_matches_the_reference(client, model, binary_in, binary_out):
    x, y = load_reference(model)
    result = http_infer(client, model, x, binary_in, binary_out, request_id="r-42")
    assert_close(result.as_numpy(OUTPUT_NAME), y, model)
    response = result.get_response()
    assert response["model_name"] == model and response["id"] == "r-42"
    assert response["outputs"][0]["shape"] == list(y.shape)


def test_http_and_grpc_give_the_same_answers(http_server, client):
    x = random_inputs("small_cnn", 3, seed=5)
    over_grpc = infer_output(http_server.client(), "small_cnn", x)
    np.testing.assert_array_equal(http_infer(client, "small_cnn", x).as_numpy(OUTPUT_NAME),
                                  over_grpc)


def test_classification(client):
    x, y = load_reference("mlp")
    inp = httpclient.InferInput(INPUT_NAME, list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    for binary in (True, False):
        out = httpclient.InferRequestedOutput(OUTPUT_NAME, binary_data=binary, class_count=3)
        classes = client.infer("mlp", [inp], outputs=[out]).as_numpy(OUTPUT_NAME)
        assert classes.shape == (x.shape[0], 3)
        # Binary BYTES come back as bytes, JSON ones as str.
        top = [int((e.decode() if isinstance(e, bytes) else e).split(":")[1]) for e in classes[:, 0]]
        assert top == list(np.argmax(y, axis=1))


def test_concurrent_requests_are_each_answered_with_their_own_result(client):
    """async_infer keeps up to 8 requests in flight, each on its own connection (the client's
    concurrency), so the server batches them; each answer must be its own request's."""
    batches = [random_inputs("mlp", 1 + i % 4, seed=i) for i in range(48)]
    pending = []
    for i, x in enumerate(batches):
        inp = httpclient.InferInput(INPUT_NAME, list(x.shape), "FP32")
        inp.set_data_from_numpy(x, binary_data=i % 2 == 0)
        out = httpclient.InferRequestedOutput(OUTPUT_NAME, binary_data=i % 3 == 0)
        pending.append(client.async_infer("mlp", [inp], outputs=[out], request_id=str(i)))
    answers = [p.get_result() for p in pending]
    # The same inputs, one at a time over gRPC, are the reference.
    grpc_client = grpcclient.InferenceServerClient(url=client_grpc_url(client))
    for i, (x, answer) in enumerate(zip(batches, answers)):
        assert answer.get_response()["id"] == str(i)
        np.testing.assert_allclose(answer.as_numpy(OUTPUT_NAME), infer_output(grpc_client, "mlp", x),
                                   rtol=1e-5, atol=1e-6)


def test_statistics_and_repository_control(http_server, client):
    before = client.get_inference_statistics("mlp")["model_stats"][0]["inference_count"]
    x, _ = load_reference("mlp")
    http_infer(client, "mlp", x)
    stats = client.get_inference_statistics("mlp")["model_stats"][0]
    assert stats["inference_count"] == before + x.shape[0]
    assert stats["inference_stats"]["success"]["count"] >= 1
    index = {m["name"]: m for m in client.get_model_repository_index()}
    assert index["mlp"]["state"] == "READY"
    client.unload_model("small_cnn")
    assert not client.is_model_ready("small_cnn")
    with pytest.raises(InferenceServerException, match="small_cnn"):
        http_infer(client, "small_cnn", load_reference("small_cnn")[0])
    client.load_model("small_cnn")
    assert client.is_model_ready("small_cnn")
    with pytest.raises(InferenceServerException, match="nope"):
        client.load_model("nope")


def test_shared_memory_regions_are_shared_with_grpc(http_server, client):
    x, y = load_reference("small_cnn")
    client.unregister_system_shared_memory()
    handles = [shm.create_shared_memory_region(n, f"/tessera-http-{n}", b)
               for n, b in (("in", x.nbytes), ("out", y.nbytes))]
    try:
        shm.set_shared_memory_region(handles[0], [x])
        client.register_system_shared_memory("in", "/tessera-http-in", x.nbytes)
        client.register_system_shared_memory("out", "/tessera-http-out", y.nbytes)
        assert {r["name"] for r in client.get_system_shared_memory_status()} == {"in", "out"}
        inp = httpclient.InferInput(INPUT_NAME, list(x.shape), "FP32")
        inp.set_shared_memory("in", x.nbytes)
        out = httpclient.InferRequestedOutput(OUTPUT_NAME)
        out.set_shared_memory("out", y.nbytes)
        result = client.infer("small_cnn", [inp], outputs=[out])
        output = result.get_output(OUTPUT_NAME)  # the answer is in the region, not the body
        assert output["shape"] == list(y.shape) and "data" not in output
        assert_close(shm.get_contents_as_numpy(handles[1], np.float32, y.shape), y, "over HTTP")
        # The region registered over HTTP serves a gRPC request too.
        shm.set_shared_memory_region(handles[1], [np.zeros_like(y)])
        ginp = grpcclient.InferInput(INPUT_NAME, list(x.shape), "FP32")
        ginp.set_shared_memory("in", x.nbytes)
        gout = grpcclient.InferRequestedOutput(OUTPUT_NAME)
        gout.set_shared_memory("out", y.nbytes)
        http_server.client().infer("small_cnn", [ginp], outputs=[gout])
        assert_close(shm.get_contents_as_numpy(handles[1], np.float32, y.shape), y, "over gRPC")
        with pytest.raises(InferenceServerException, match="already"):
            client.register_system_shared_memory("in", "/tessera-http-in", x.nbytes)
    finally:
        client.unregister_system_shared_memory()
        for h in handles:
            shm.destroy_shared_memory_region(h)
    assert client.get_system_shared_memory_status() == []


def test_bad_requests_get_a_clear_error_and_the_server_goes_on(http_server, client):
    infer = "/v2/models/mlp/infer"
    good_input = {"name": INPUT_NAME, "shape": [1, 64], "datatype": "FP32", "data": [0.0] * 64}
    cases = [
        ("POST", infer, '{"inputs": [', 400, "not valid JSON"),
        ("POST", infer, '{"inputs": 3}', 400, "'inputs' must be an array"),
        ("POST", infer, json.dumps({"inputs": [dict(good_input, shape=[1, 63])]}), 400,
         "'data' has 64 elements but its shape [1,63] needs 63"),
        ("POST", infer, json.dumps({"inputs": [dict(good_input, shape=[1, 32], data=[0.0] * 32)]}),
         400, "input 'input'"),
        ("POST", infer, json.dumps({"inputs": [dict(good_input, datatype="INT32", data=[0] * 64)]}),
         400, "INT32"),
        ("POST", infer, json.dumps({"inputs": [dict(good_input, name="x")]}), 400,
         "unexpected input 'x'"),
        ("POST", "/v2/models/nope/infer", json.dumps({"inputs": [good_input]}), 404,
         "unknown model 'nope'"),
        ("POST", "/v2/models/mlp/versions/7/infer", json.dumps({"inputs": [good_input]}), 404,
         "version 7"),
        ("GET", infer, None, 405, "use POST"),
        ("POST", "/v2/models/mlp", "{}", 405, "use GET"),
        ("GET", "/v2/nothing/here", None, 404, "no such endpoint: GET /v2/nothing/here"),
        ("GET", "/index.html", None, 404, "KServe v2 paths start /v2"),
        ("POST", "/v2/repository/index", "[1]", 400, "must be a JSON object"),
        ("POST", "/v2/systemsharedmemory/region/r/register", '{"key": "/no-such-shm"}', 400,
         "'byte_size'"),
        ("POST", "/v2/systemsharedmemory/region/r/register",
         '{"key": "/tessera-no-such-object", "byte_size": 16}', 404, "tessera-no-such-object"),
        ("GET", "/v2/cudasharedmemory/status", None, 501, "CUDA shared memory is not supported"),
    ]
    for method, path, body, status, fragment in cases:
        assert_error(http_server, method, path, body, status, fragment)
    # Binary data whose sizes do not add up to the body.
    header = json.dumps({"inputs": [{"name": INPUT_NAME, "shape": [1, 64], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 256}}]})
    code, _, answer = raw(http_server, "POST", infer, header.encode() + bytes(100),
                          {"Inference-Header-Content-Length": str(len(header))})
    assert code == 400 and "binary_data_size is 256 but only 100" in json.loads(answer)["error"]
    code, _, answer = raw(http_server, "POST", infer, b"{}", {"Content-Encoding": "br"})
    assert code == 501 and "Content-Encoding 'br' is not supported" in json.loads(answer)["error"]
    code, _, answer = raw(http_server, "POST", infer, gzip.compress(b"{}")[:-6],
                          {"Content-Encoding": "gzip"})
    assert code == 400 and "not valid gzip data" in json.loads(answer)["error"], answer
    assert_mlp_serves_over_http(client)


def test_a_raw_json_request_and_its_answer(http_server):
    x, y = load_reference("mlp")
    body = json.dumps({"id": "7", "inputs": [{"name": INPUT_NAME, "shape": list(x.shape),
                                              "datatype": "FP32", "data": x.tolist()}]})
    code, headers, answer = raw(http_server, "POST", "/v2/models/mlp/infer", body)
    assert code == 200 and headers["Content-Type"] == "application/json"
    answer = json.loads(answer)
    assert answer["id"] == "7" and answer["model_version"] == "1"
    out = answer["outputs"][0]
    assert out["name"] == OUTPUT_NAME and out["shape"] == list(y.shape)
    assert_close(np.array(out["data"], dtype=np.float32).reshape(y.shape), y, "raw JSON answer")
    code, _, _ = raw(http_server, "GET", "/v2/health/live")
    assert code == 200


@pytest.fixture(scope="module")
def small_limit_server(make_server, tmp_path_factory):
    require_bundled_models()
    config = tmp_path_factory.mktemp("http") / "server.yaml"
    config.write_text("grpc:\n  max_message_bytes: 4096\n")
    return make_server(repository=MODELS_DIR, mode="none", config=config)


@pytest.mark.parametrize("request_encoding", [None, "gzip", "deflate"])
@pytest.mark.parametrize("response_encoding", [None, "gzip", "deflate"])
def test_compressed_requests_and_answers(client, request_encoding, response_encoding):
    x, y = load_reference("small_cnn")
    for binary in (True, False):
        result = http_infer(client, "small_cnn", x, binary, binary,
                            request_compression_algorithm=request_encoding,
                            response_compression_algorithm=response_encoding)
        assert_close(result.as_numpy(OUTPUT_NAME), y, f"{request_encoding}/{response_encoding}")


def test_a_body_over_the_size_limit_is_refused_by_size(small_limit_server):
    x = random_inputs("mlp", 8, seed=1)  # 2 KiB binary, over 4 KiB as JSON text
    body = json.dumps({"inputs": [{"name": INPUT_NAME, "shape": [8, 64], "datatype": "FP32",
                                   "data": x.tolist()}]})
    assert len(body) > 4096
    assert_error(small_limit_server, "POST", "/v2/models/mlp/infer", body, 413,
                 "larger than the server's limit of 4096 bytes")
    # Compressed small, inflated past the limit: refused when the inflated bytes pass it.
    code, _, answer = raw(small_limit_server, "POST", "/v2/models/mlp/infer",
                          gzip.compress(b" " * 100000), {"Content-Encoding": "gzip"})
    assert code == 413 and "inflates past the server's limit of 4096" in json.loads(answer)["error"]
    c = httpclient.InferenceServerClient(url=small_limit_server.http_url)
    assert http_infer(c, "mlp", x).as_numpy(OUTPUT_NAME).shape == (8, 10)  # binary: 2 KiB


def _resident_bytes(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_a_declared_content_length_is_not_memory_until_the_bytes_come(http_server, client):
    """Bodies grow with the bytes that arrive. Sized from the header, four connections that each
    claimed 1 GB and sent one byte took gigabytes of the server's memory: a cheap way to get it
    killed for memory."""
    before = _resident_bytes(http_server.proc.pid)
    held = []
    try:
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", http_server.http_port), timeout=10)
            s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n{")
            held.append(s)
        time.sleep(2)
        grown = _resident_bytes(http_server.proc.pid) - before
        assert grown < 200 << 20, f"the server's memory grew by {grown >> 20} MiB"
    finally:
        for s in held:
            s.close()
    assert_mlp_serves_over_http(client)


FUZZ_VALUES = [None, -1, 0, 2**63, 2**64 - 1, 2**70, -(2**70), 1.5, "x", "", [], {}, [[1]], [-1],
               True, "FP16", "BYTES", "INT64", {"binary_data_size": 3},
               {"shared_memory_region": "none"}]


def _mutate_structure(rng, request):
    """Replaces one value somewhere in the request (a dict/list tree) by one of FUZZ_VALUES."""
    node = request
    while True:
        keys = list(node.keys()) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = keys[rng.integers(len(keys))]
        if not isinstance(node[key], (dict, list)) or rng.random() < 0.3:
            node[key] = FUZZ_VALUES[rng.integers(len(FUZZ_VALUES))]
            break
        node = node[key]
    return json.dumps(request).encode()


def _mutate_bytes(rng, body):
    body = bytearray(body)
    for _ in range(rng.integers(1, 6)):
        at = int(rng.integers(len(body)))
        kind = rng.integers(3)
        if kind == 0:
            body[at] = int(rng.integers(256))
        elif kind == 1:
            del body[at:at + int(rng.integers(1, 20))]
        else:
            body[at:at] = rng.choice([b"[", b"]", b"{", b"}", b",", b'"', b"1e999", b"\xff"])
    return bytes(body)


def test_fuzzed_infer_bodies_get_answers_never_crashes(http_server, client):
    """Seeded mutations of valid JSON and binary requests: each gets 200 or an {"error"} answer
    with a 4xx/5xx status, and the server serves a good request afterwards."""
    rng = np.random.default_rng(20261122)
    x = random_inputs("mlp", 2, seed=3)
    valid = {"id": "f", "parameters": {"priority": 1},
             "inputs": [{"name": INPUT_NAME, "shape": [2, 64], "datatype": "FP32",
                         "data": x.tolist()}],
             "outputs": [{"name": OUTPUT_NAME, "parameters": {"binary_data": False}}]}
    binary_header = json.dumps({"inputs": [{"name": INPUT_NAME, "shape": [2, 64],
                                            "datatype": "FP32",
                                            "parameters": {"binary_data_size": x.nbytes}}]})
    codes = {}
    for i in range(400):
        headers = {}
        if i % 4 == 3:  # binary data, with a header length that may not fit
            body = binary_header.encode() + x.tobytes()
            length = len(binary_header) + int(rng.integers(-5, 6)) * (i % 8 == 7)
            headers["Inference-Header-Content-Length"] = str(length)
            if i % 3 == 0:
                body = _mutate_bytes(rng, body)
        elif i % 2 == 0:
            body = _mutate_structure(rng, json.loads(json.dumps(valid)))
        else:
            body = _mutate_bytes(rng, json.dumps(valid).encode())
        code, answer_headers, answer = raw(http_server, "POST", "/v2/models/mlp/infer", body,
                                           headers)
        codes[code] = codes.get(code, 0) + 1
        assert code in (200, 400, 404, 413, 501, 503), (code, body[:200], answer[:300])
        if code == 200:  # binary outputs, if a mutation asked for them, follow the JSON
            length = int(answer_headers.get("Inference-Header-Content-Length", len(answer)))
            assert len(json.loads(answer[:length])["outputs"]) == 1
        else:
            message = json.loads(answer)["error"]
            assert isinstance(message, str) and message, answer
    print(f"answers by status: {codes}")
    assert codes.get(200, 0) > 0 and codes.get(400, 0) > 0, codes
    assert http_server.proc.poll() is None
    assert_mlp_serves_over_http(client)



def test_a_client_that_expects_100_continue_is_answered_at_once(http_server):
    """curl (bodies over 1 MiB) and other clients wait for "100 Continue" before sending the body;
    without it they stall (curl: 1 s) per request."""
    x, y = load_reference("mlp")
    body = json.dumps({"inputs": [{"name": INPUT_NAME, "shape": list(x.shape), "datatype": "FP32",
                                   "data": x.ravel().tolist()}]}).encode()
    with socket.create_connection(("127.0.0.1", http_server.http_port), timeout=10) as s:
        s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body))
        s.settimeout(0.5)  # well under curl's 1 s
        assert s.recv(64).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.settimeout(10)
        s.sendall(body)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < int(
                answer.split(b"Content-Length: ")[1].split(b"\r\n")[0]):
            chunk = s.recv(65536)
            assert chunk, answer
            answer += chunk
    head, payload = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 OK"), head
    out = json.loads(payload)["outputs"][0]
    assert_close(np.array(out["data"], np.float32).reshape(y.shape), y, "after 100 Continue")


def test_log_and_trace_settings(http_server, client):
    settings = client.get_log_settings()
    assert settings["log_info"] is True and settings["log_verbose_level"] == 0
    assert client.update_log_settings({"log_verbose_level": 1})["log_verbose_level"] == 1
    # Changed for the server, whichever endpoint asks.
    assert http_server.client().get_log_settings(as_json=True)["settings"]["log_verbose_level"] == {
        "uint32_param": 1}
    client.update_log_settings({"log_verbose_level": 0})
    with pytest.raises(InferenceServerException, match="log setting 'log_info' must be a boolean"):
        client.update_log_settings({"log_info": [1]})
    with pytest.raises(InferenceServerException, match="log_bogus"):
        client.update_log_settings({"log_bogus": True})

    trace = client.get_trace_settings()
    assert trace["trace_level"] == ["TIMESTAMPS"] and trace["trace_rate"] == "1000"
    assert client.update_trace_settings("mlp", {"trace_rate": 1})["trace_rate"] == "1"
    assert client.get_trace_settings()["trace_rate"] == "1000"  # only mlp's changed
    assert client.update_trace_settings("mlp", {"trace_rate": None})["trace_rate"] == "1000"
    with pytest.raises(InferenceServerException, match="no model 'nope'"):
        client.get_trace_settings("nope")
    with pytest.raises(InferenceServerException, match="trace_level"):
        client.update_trace_settings(settings={"trace_level": ["LOUD"]})
