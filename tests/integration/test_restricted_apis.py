"""Restricted APIs (grpc.restricted, http.restricted; Triton's --grpc-restricted-protocol and
--http-restricted-api): a restricted API answers only requests that carry its header with the
right value, over tritonclient gRPC (metadata triton-grpc-protocol-<header>) and HTTP; the other
APIs stay open; refusals are PERMISSION_DENIED / 403 naming the header, never the value, and come
before a request body is read; wrong settings stop the start."""

import http.client
import json
import queue
import socket

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tessera_testlib import (MODELS_DIR, assert_close, assert_mlp_serves, expect_error,
                             infer_output, load_reference, make_input, start_fails)

ADMIN_VALUE = "admin-s3cret-value"
ADMIN_APIS = ["model-repository", "model-config", "statistics", "shared-memory", "trace",
              "logging"]
GRPC_ADMIN = {"triton-grpc-protocol-admin-key": ADMIN_VALUE}


@pytest.fixture(scope="module")
def admin_server(make_server, tmp_path_factory):
    """Admin APIs restricted on both endpoints from server.yaml (the value from a file, as a
    mounted Secret gives it; HTTP's header written in capitals); health, metadata and inference
    open."""
    folder = tmp_path_factory.mktemp("restricted")
    secret = folder / "admin-value"
    secret.write_text(ADMIN_VALUE + "\n")
    apis = ", ".join(ADMIN_APIS)
    config = folder / "server.yaml"
    config.write_text(
        f"grpc:\n  allow_client_shm: true\n"
        f"  restricted:\n    - {{apis: [{apis}], header: admin-key, value_file: {secret}}}\n"
        f"http:\n  restricted:\n"
        f"    - {{apis: [{apis}], header: Admin-Key, value: {ADMIN_VALUE}}}\n")
    return make_server(repository=MODELS_DIR, mode="explicit", load_models=("mlp",),
                       wait_models=("mlp",), config=config)


def grpc_admin_calls(client):
    """One call of each restricted gRPC API, each taking `headers`."""
    return {
        "model-repository": lambda h: client.get_model_repository_index(headers=h),
        "model-config": lambda h: client.get_model_config("mlp", headers=h),
        "statistics": lambda h: client.get_inference_statistics("mlp", headers=h),
        "shared-memory": lambda h: client.get_system_shared_memory_status(headers=h),
        "trace": lambda h: client.get_trace_settings(headers=h),
        "logging": lambda h: client.get_log_settings(headers=h),
    }


def test_grpc_admin_apis_need_the_header(admin_server):
    client = admin_server.client()
    for api, call in grpc_admin_calls(client).items():
        e = expect_error(lambda: call(None), "PERMISSION_DENIED")
        assert (f"This API ({api}) is restricted, expecting header "
                f"'triton-grpc-protocol-admin-key'") in e.message(), e.message()
        e = expect_error(lambda: call({"triton-grpc-protocol-admin-key": "guess"}),
                         "PERMISSION_DENIED")
        assert "came with another value" in e.message() and ADMIN_VALUE not in e.message()
        call(GRPC_ADMIN)  # answers
    assert client.get_model_config("mlp", headers=GRPC_ADMIN).config.name == "mlp"

    # Loads and unloads (answered in the background) are restricted too.
    expect_error(lambda: client.unload_model("mlp"), "PERMISSION_DENIED")
    assert client.is_model_ready("mlp")
    client.unload_model("mlp", headers=GRPC_ADMIN)
    client.load_model("mlp", headers=GRPC_ADMIN)
    assert client.is_model_ready("mlp")


def test_grpc_open_apis_need_no_header(admin_server):
    client = admin_server.client()
    assert client.is_server_live() and client.is_server_ready()
    assert client.get_model_metadata("mlp").name == "mlp"
    assert_mlp_serves(client)
    assert ADMIN_VALUE not in admin_server.log_path.read_text()


def test_http_admin_apis_need_the_header(admin_server):
    host, port = admin_server.http_url.split(":")

    def get(path, headers=None):
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            connection.request("GET", path, headers=headers or {})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    for path in ("/v2/models/mlp/config", "/v2/models/mlp/stats", "/v2/models/stats",
                 "/v2/systemsharedmemory/status", "/v2/trace/setting", "/v2/logging"):
        status, body = get(path)
        assert status == 403, (path, status, body)
        assert json.loads(body)["error"].endswith("is restricted, expecting header 'admin-key'")
        assert get(path, {"admin-key": "guess"})[0] == 403
        # HTTP header names are case-insensitive.
        status, body = get(path, {"ADMIN-KEY": ADMIN_VALUE})
        assert status == 200, (path, status, body)
    for path in ("/v2/health/live", "/v2/health/ready", "/v2/models/mlp/ready", "/v2",
                 "/v2/models/mlp"):
        assert get(path)[0] == 200, path

    client = httpclient.InferenceServerClient(admin_server.http_url)
    x, y = load_reference("mlp")
    inputs = [httpclient.InferInput("input", list(x.shape), "FP32")]
    inputs[0].set_data_from_numpy(x)
    assert_close(client.infer("mlp", inputs).as_numpy("output"), y, "mlp over HTTP, open")
    index = client.get_model_repository_index(headers={"admin-key": ADMIN_VALUE})
    assert any(entry["name"] == "mlp" for entry in index)
    client.close()


def test_http_refusal_comes_before_the_body(admin_server):
    """A client without the header cannot make the server take a body: the 403 answers the
    headers of a request that declares a gigabyte and sends none of it."""
    host, port = admin_server.http_url.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /v2/repository/models/mlp/load HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n")
        answer = sock.recv(4096).decode("latin-1")
    assert answer.startswith("HTTP/1.1 403"), answer
    assert_mlp_serves(admin_server.client())


def test_inference_restricted_by_flags(make_server):
    """Triton's flags; inference restricted on both endpoints, the stream included."""
    server = make_server(repository=MODELS_DIR, mode="explicit", load_models=("mlp",),
                         wait_models=("mlp",),
                         extra_args=("--grpc-restricted-protocol", "inference:infer-key=abc=1",
                                     "--http-restricted-api", "inference,metadata:infer-key=abc=1"))
    client = server.client()
    x, y = load_reference("mlp")
    e = expect_error(lambda: infer_output(client, "mlp", x), "PERMISSION_DENIED")
    assert "expecting header 'triton-grpc-protocol-infer-key'" in e.message()
    headers = {"triton-grpc-protocol-infer-key": "abc=1"}  # the value may hold '='
    assert_close(infer_output(client, "mlp", x, headers=headers), y, "mlp with the header")
    assert client.get_model_metadata("mlp").name == "mlp"  # metadata is open on gRPC

    for stream_headers, refused in ((None, True), (headers, False)):
        answers = queue.Queue()
        stream = server.new_client()
        stream.start_stream(callback=lambda result, error: answers.put((result, error)),
                            headers=stream_headers)
        try:
            stream.async_stream_infer("mlp", [make_input(x)])
        except InferenceServerException:
            assert refused  # the stream had already ended with the refusal
        result, error = answers.get(timeout=20)
        if refused:
            assert error is not None and "restricted" in str(error), (result, error)
        else:
            assert error is None, error
            assert_close(result.as_numpy("output"), y, "mlp over a stream with the header")
        stream.stop_stream()
        stream.close()

    http = httpclient.InferenceServerClient(server.http_url)
    inputs = [httpclient.InferInput("input", list(x.shape), "FP32")]
    inputs[0].set_data_from_numpy(x)
    with pytest.raises(Exception, match="expecting header 'infer-key'"):
        http.infer("mlp", inputs)
    with pytest.raises(Exception, match="expecting header 'infer-key'"):
        http.get_model_metadata("mlp")
    assert http.is_server_ready()
    answer = http.infer("mlp", inputs, headers={"infer-key": "abc=1"})
    assert_close(answer.as_numpy("output"), y, "mlp over HTTP with the header")
    http.close()


def test_wrong_restrictions_stop_the_start(tmp_path):
    out = start_fails("--grpc-restricted-protocol", "inferenc:k=SECRET-1")
    assert ('--grpc-restricted-protocol "inferenc:k=...": unknown API "inferenc" (expected '
            '<api>,<api>,...:<header>=<value>; the APIs: health, metadata,') in out
    assert "SECRET-1" not in out
    out = start_fails("--http-restricted-api", "inference:k")
    assert "no '=' between the header and its value" in out
    out = start_fails("--http-restricted-api", "inference:bad key=v")
    assert '"bad key" is not a header name' in out
    out = start_fails("--http-restricted-api", "inference:k=")
    assert "the value is empty" in out
    out = start_fails("--grpc-restricted-protocol", "inference,trace:a=1",
                      "--grpc-restricted-protocol", "trace:b=2")
    assert "--grpc-restricted-protocol: trace is restricted twice" in out

    def config(text):
        path = tmp_path / f"server-{abs(hash(text))}.yaml"
        path.write_text(text)
        return path

    both = config("grpc:\n  restricted:\n"
                  "    - {apis: [trace], header: k, value: a, value_file: b}\n")
    assert f"{both}:3: grpc.restricted[0]: needs one of value and value_file" in start_fails(
        "--config", both)
    missing = tmp_path / "no-such-secret"
    no_file = config(f"http:\n  restricted:\n    - apis: [trace]\n      header: k\n"
                     f"      value_file: {missing}\n")
    out = start_fails("--config", no_file)
    assert f"{no_file}:5: http.restricted[0].value_file:" in out and str(missing) in out
    unknown = config("http:\n  restricted:\n"
                     "    - {apis: [inference, admin], header: k, value: v}\n")
    assert "http.restricted[0].apis[1]" in start_fails("--config", unknown)
