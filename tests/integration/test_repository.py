"""Model repository API in explicit mode, on a private copy of the bundled repository:
index, load, unload, reload, and loads that must fail cleanly (bad config, truncated model)."""

import re
import shutil

import grpc
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from conftest import copy_repository
from tessera_testlib import (OUTPUT_NAME, assert_close, assert_mlp_serves, expect_error,
                             find_model_file, infer, load_reference, model_ready, wait_until)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return copy_repository(tmp_path_factory.mktemp("explicit") / "models")


@pytest.fixture(scope="module")
def server(make_server, repo):
    return make_server(repository=repo, mode="explicit", load_models=["mlp"], wait_models=["mlp"])


@pytest.fixture(scope="module")
def client(server):
    return server.client()


def index_states(client):
    return {m.name: m.state for m in client.get_model_repository_index().models}


def with_name(config_text, name):
    """The config text with its top-level `name:` (if any) set to `name`."""
    return re.sub(r"(?m)^name:.*$", f"name: {name}", config_text)


def clone_model(repo, source, dest):
    shutil.copytree(repo / source, repo / dest)
    cfg = repo / dest / "config.yaml"
    cfg.write_text(with_name(cfg.read_text(), dest))
    return repo / dest


def test_index_lists_loaded_and_unloaded_models(server, client):
    states = index_states(client)
    assert states.get("mlp") == "READY", states
    assert "small_cnn" in states, states
    assert states["small_cnn"] != "READY", states
    assert client.is_model_ready("small_cnn") is False
    # Only the ready ones when asked so.
    # Only the ready ones when asked so (tritonclient has no argument for it: raw stub).
    with grpc.insecure_channel(server.url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        ready_only = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=True), timeout=10)
    assert {m.name for m in ready_only.models} == {"mlp"}


def test_infer_on_not_loaded_model_fails(client):
    x, _ = load_reference("small_cnn")
    expect_error(lambda: infer(client, "small_cnn", x), "UNAVAILABLE", "NOT_FOUND")


def test_load_model(client):
    client.load_model("small_cnn")
    assert client.is_model_ready("small_cnn")
    assert index_states(client)["small_cnn"] == "READY"
    x, y = load_reference("small_cnn")
    assert_close(infer(client, "small_cnn", x).as_numpy(OUTPUT_NAME), y)


def test_unload_and_reload(client):
    client.unload_model("mlp")
    wait_until(lambda: not model_ready(client, "mlp"), timeout=10, what="mlp to unload")
    assert index_states(client).get("mlp") != "READY"
    x, y = load_reference("mlp")
    expect_error(lambda: infer(client, "mlp", x), "UNAVAILABLE", "NOT_FOUND")
    # The other model is untouched.
    assert client.is_model_ready("small_cnn")

    client.load_model("mlp")
    assert client.is_model_ready("mlp")
    assert_close(infer(client, "mlp", x).as_numpy(OUTPUT_NAME), y)


def test_reload_of_loaded_model(client):
    client.load_model("mlp")  # loading a loaded model reloads it and keeps it serving
    assert client.is_model_ready("mlp")
    assert_mlp_serves(client)


def test_load_unknown_model(client):
    e = expect_error(lambda: client.load_model("not_in_repository"),
                     "NOT_FOUND", "INVALID_ARGUMENT")
    assert "not_in_repository" in e.message()
    assert_mlp_serves(client)


def test_load_config_with_unknown_key_fails(client, repo):
    folder = clone_model(repo, "mlp", "broken_cfg")
    cfg = folder / "config.yaml"
    cfg.write_text(cfg.read_text().rstrip("\n") + "\ndimz: [64]\n")
    e = expect_error(lambda: client.load_model("broken_cfg"), "INVALID_ARGUMENT")
    assert "config.yaml" in e.message() and "dimz" in e.message(), e.message()
    assert client.is_model_ready("broken_cfg") is False
    assert_mlp_serves(client)


def test_load_config_with_bad_yaml_fails(client, repo):
    folder = clone_model(repo, "mlp", "broken_yaml")
    (folder / "config.yaml").write_text("name: broken_yaml\nmax_batch_size: [8\n  input: {\n")
    e = expect_error(lambda: client.load_model("broken_yaml"), "INVALID_ARGUMENT")
    assert "config.yaml" in e.message(), e.message()
    assert_mlp_serves(client)


def test_load_truncated_model_fails(client, repo):
    folder = clone_model(repo, "mlp", "truncated")
    model_file = find_model_file("truncated", repository=repo)
    data = model_file.read_bytes()
    model_file.write_bytes(data[:len(data) // 2])
    e = expect_error(lambda: client.load_model("truncated"),
                     "INVALID_ARGUMENT", "INTERNAL", "UNAVAILABLE", "FAILED_PRECONDITION")
    assert model_file.name in e.message(), e.message()
    assert client.is_model_ready("truncated") is False
    assert folder.is_dir()
    assert_mlp_serves(client)


def test_still_serving_after_failed_loads(client):
    assert client.is_model_ready("mlp")
    assert client.is_model_ready("small_cnn")
    assert_mlp_serves(client)
    x, y = load_reference("small_cnn")
    assert_close(infer(client, "small_cnn", x).as_numpy(OUTPUT_NAME), y)
