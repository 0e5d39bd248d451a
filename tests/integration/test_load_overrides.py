"""Triton's load parameters in explicit mode: a model config sent with the load ("config", JSON)
in place of the repository's, a model folder's files sent with it ("file:<path>"), and
unload_dependents on an unload; over gRPC (tritonclient) and HTTP."""

import base64
import json
import os
import re
import signal
from pathlib import Path

import grpc
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc

from conftest import copy_repository
from tessera_testlib import (assert_close, assert_mlp_serves, executor_pids, expect_error,
                             find_model_file, infer_output, load_reference, model_ready,
                             wait_until)

MLP_CONFIG = {
    "max_batch_size": 8,
    "input": [{"name": "input", "data_type": "TYPE_FP32", "dims": [64]}],
    "output": [{"name": "output", "data_type": "TYPE_FP32", "dims": [10]}],
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return copy_repository(tmp_path_factory.mktemp("overrides") / "models")


@pytest.fixture(scope="module")
def server(make_server, repo):
    return make_server(repository=repo, mode="explicit", load_models=["mlp"], wait_models=["mlp"])


@pytest.fixture(scope="module")
def client(server):
    return server.client()


@pytest.fixture(scope="module")
def mlp_bytes():
    return find_model_file("mlp").read_bytes()


def index_states(client):
    return {m.name: m.state for m in client.get_model_repository_index().models}


def loaded_folders(server):
    """The folders the server wrote load requests' files into, from its log."""
    text = server.log_path.read_text(errors="replace")
    return re.findall(r"file\(s\) in (\S+)", text)


def raw_load(server, name, parameters):
    """RepositoryModelLoad with parameters tritonclient cannot send (wrong types)."""
    request = service_pb2.RepositoryModelLoadRequest(model_name=name)
    for key, value in parameters.items():
        request.parameters[key].CopyFrom(value)
    with grpc.insecure_channel(server.url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        try:
            stub.RepositoryModelLoad(request, timeout=60)
        except grpc.RpcError as e:
            return e.code(), e.details()
    return grpc.StatusCode.OK, ""


def test_config_replaces_the_repositorys_until_a_plain_load(client):
    config = dict(MLP_CONFIG, max_batch_size=2)
    client.load_model("mlp", config=json.dumps(config))
    assert client.get_model_config("mlp").config.max_batch_size == 2
    x, y = load_reference("mlp")  # 4 rows
    assert_close(infer_output(client, "mlp", x[:2]), y[:2])
    e = expect_error(lambda: infer_output(client, "mlp", x), "INVALID_ARGUMENT")
    assert "batch" in e.message().lower(), e.message()

    client.load_model("mlp")  # the repository's config again (max_batch_size 8)
    assert client.get_model_config("mlp").config.max_batch_size == 8
    assert_close(infer_output(client, "mlp", x), y)


def test_a_config_read_back_as_json_loads_unchanged(client):
    """What Triton's Model Analyzer does: read the config as JSON, change it, load it."""
    config = client.get_model_config("mlp", as_json=True)["config"]
    config["instance_group"] = [{"count": 2, "kind": "KIND_CPU"}]
    client.load_model("mlp", config=json.dumps(config))
    served = client.get_model_config("mlp").config
    assert [g.count for g in served.instance_group] == [2]
    assert_mlp_serves(client)
    client.load_model("mlp")


def test_files_make_a_model_the_repository_does_not_have(server, client, mlp_bytes):
    config = json.dumps(dict(MLP_CONFIG, name="uploaded"))
    client.load_model("uploaded", config=config, files={"file:1/model.onnx": mlp_bytes})
    assert index_states(client).get("uploaded") == "READY"
    assert_mlp_serves(client, "uploaded")
    first = Path(loaded_folders(server)[-1])
    assert (first / "1" / "model.onnx").read_bytes() == mlp_bytes

    # A new load with other files replaces it; the first load's folder goes with it.
    client.load_model("uploaded", config=json.dumps(dict(MLP_CONFIG, version_policy={"all": {}})),
                      files={"file:1/model.onnx": mlp_bytes, "file:2/model.onnx": mlp_bytes})
    wait_until(lambda: not first.exists(), timeout=10, what="the first load's folder to go")
    versions = {m.version for m in client.get_model_repository_index().models
                if m.name == "uploaded"}
    assert versions == {"1", "2"}
    second = Path(loaded_folders(server)[-1])
    assert_mlp_serves(client, "uploaded")

    # An executor that dies loads the model again from the files, which are still there.
    os.kill(executor_pids(server.proc.pid)[0], signal.SIGKILL)

    def serves_again():
        try:
            assert_mlp_serves(client, "uploaded")
            return True
        except Exception:  # UNAVAILABLE while the executor restarts
            return False

    wait_until(serves_again, timeout=20, what="'uploaded' to serve after its executor died")

    client.unload_model("uploaded")
    wait_until(lambda: not second.exists(), timeout=10, what="the unloaded model's folder to go")
    assert not model_ready(client, "uploaded")


def test_bad_loads_are_refused_naming_what_is_wrong_and_the_model_keeps_serving(
        server, client, mlp_bytes):
    config = json.dumps(MLP_CONFIG)
    cases = [
        (dict(config="{not json"), "INVALID_ARGUMENT", "the load request's 'config': not a JSON"),
        (dict(config='{"max_batch_sise": 8}'), "INVALID_ARGUMENT", "max_batch_sise"),
        (dict(config='{"input": [{"name": "input", "data_type": "TYPE_FP32", "dims": [0]}]}'),
         "INVALID_ARGUMENT", "the load request's 'config': input[0].dims[0]: must be > 0"),
        (dict(config='{"name": "other"}'), "INVALID_ARGUMENT", "other"),
        (dict(config=config, files={"file:../escape.onnx": b"x"}), "INVALID_ARGUMENT",
         "load parameter 'file:../escape.onnx': '.' and '..' are not allowed"),
        (dict(config=config, files={"file:/etc/model.onnx": b"x"}), "INVALID_ARGUMENT",
         "must be relative"),
        (dict(config=config, files={"file:config.pbtxt": b"x", "file:1/model.onnx": mlp_bytes}),
         "INVALID_ARGUMENT", "the config comes from the load's 'config' parameter"),
        (dict(files={"file:1/model.onnx": mlp_bytes}), "INVALID_ARGUMENT",
         "needs a 'config' parameter too"),
        (dict(config=config, files={"file:1/model.onnx": b"not an onnx file"}),
         "INVALID_ARGUMENT", "mlp"),
        (dict(config=config, files={"file:2/other.bin": b"x"}), "NOT_FOUND", "model.onnx"),
    ]
    before = len(loaded_folders(server))
    for kwargs, code, words in cases:
        e = expect_error(lambda: server.client().load_model("mlp", **kwargs), code)
        assert words in e.message(), (kwargs.get("config"), e.message())
        assert model_ready(client, "mlp"), kwargs  # the load before keeps serving
        assert_mlp_serves(client)
    # Every folder written for a refused load is gone again.
    for folder in loaded_folders(server)[before:]:
        assert not Path(folder).exists(), folder

    e = expect_error(lambda: client.load_model("not_in_repository", config=config), "NOT_FOUND")
    assert "a load with a 'config' parameter and no 'file:<path>' ones" in e.message()
    assert "not_in_repository" not in index_states(client)

    wrong = service_pb2.ModelRepositoryParameter(bytes_param=b"{}")
    assert raw_load(server, "mlp", {"config": wrong}) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "parameter 'config' must be a string_param holding the model config as JSON")
    code, message = raw_load(server, "mlp", {
        "conifg": service_pb2.ModelRepositoryParameter(string_param="{}")})
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "unknown load parameter 'conifg'" in message
    assert_mlp_serves(client)


def ensemble_config(name):
    return json.dumps({
        "name": name, "platform": "ensemble", "max_batch_size": 8,
        "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [64]}],
        "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [10]}],
        "ensemble_scheduling": {"step": [{"model_name": "mlp", "model_version": -1,
                                          "input_map": {"input": "IN"},
                                          "output_map": {"output": "OUT"}}]}})


def test_unload_dependents_takes_composing_models_no_other_ensemble_runs(client):
    client.unload_model("mlp")
    # An ensemble is a folder with an empty version folder: one file makes it.
    for name in ("pipeline_a", "pipeline_b"):
        client.load_model(name, config=ensemble_config(name), files={"file:1/.keep": b""})
    assert model_ready(client, "mlp")  # loaded with the first ensemble, as in Triton
    x, y = load_reference("mlp")
    inputs = [grpcclient.InferInput("IN", list(x.shape), "FP32")]
    inputs[0].set_data_from_numpy(x)
    assert_close(client.infer("pipeline_b", inputs).as_numpy("OUT"), y)

    client.unload_model("pipeline_a", unload_dependents=True)
    assert model_ready(client, "mlp")  # pipeline_b still runs it
    assert_close(client.infer("pipeline_b", inputs).as_numpy("OUT"), y)
    client.unload_model("pipeline_b", unload_dependents=True)
    wait_until(lambda: not model_ready(client, "mlp"), timeout=10, what="mlp to unload")

    client.load_model("mlp")
    assert_mlp_serves(client)


def test_http_load_takes_base64_files_and_unload_takes_dependents(server, client, mlp_bytes):
    http = httpclient.InferenceServerClient(server.http_url)
    try:
        # tritonclient.http cannot send files (it puts bytes in json.dumps): a raw POST does.
        body = {"parameters": {"config": json.dumps(MLP_CONFIG),
                               "file:1/model.onnx": base64.b64encode(mlp_bytes).decode()}}
        answer = http._post("v2/repository/models/over_http/load", json.dumps(body), None, None)
        assert answer.status_code == 200, answer.read()
        assert_mlp_serves(client, "over_http")

        bad = {"parameters": {"config": json.dumps(MLP_CONFIG), "file:1/model.onnx": "%%%"}}
        answer = http._post("v2/repository/models/over_http/load", json.dumps(bad), None, None)
        assert answer.status_code == 400
        assert "base64" in json.loads(answer.read())["error"]
        assert_mlp_serves(client, "over_http")

        http.load_model("mlp", config=json.dumps(dict(MLP_CONFIG, max_batch_size=4)))
        assert client.get_model_config("mlp").config.max_batch_size == 4
        http.unload_model("over_http", unload_dependents=True)
        assert not model_ready(client, "over_http")
        assert "model_repository(unload_dependents)" in http.get_server_metadata()["extensions"]
    finally:
        http.close()
        client.load_model("mlp")
    x, y = load_reference("mlp")
    assert_close(infer_output(client, "mlp", x), y)
