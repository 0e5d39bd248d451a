"""Triton's LogSettings RPC through tritonclient: the settings round-trip, take effect on the
server's log (file, severities, format), and bad settings are refused with the key named and
nothing changed."""

import re

import grpc
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tessera_testlib import MODELS_DIR, assert_mlp_serves, expect_error


@pytest.fixture(scope="module")
def own_server(make_server):
    """A server of its own: these tests move its log away from the file the fixtures read."""
    return make_server(repository=MODELS_DIR, mode="explicit", load_models=("mlp", "small_cnn"),
                       wait_models=("mlp", "small_cnn"), extra_args=("--allow-log-settings",))


@pytest.fixture(scope="module")
def log_client(own_server):
    return own_server.client()


def settings_of(client):
    return client.get_log_settings(as_json=True)["settings"]


def value(entry):
    # tritonclient's JSON form: {"boolParam": true} / {"uint32Param": 1} / {"stringParam": "x"}.
    return next(iter(entry.values()))


def test_defaults_are_listed(log_client):
    settings = settings_of(log_client)
    assert set(settings) == {"log_file", "log_info", "log_warning", "log_error",
                             "log_verbose_level", "log_format"}
    assert value(settings["log_info"]) is True
    assert value(settings["log_format"]) == "default"


def test_log_file_severities_and_format_take_effect(log_client, own_server, tmp_path):
    path = tmp_path / "server.log"
    log_client.update_log_settings({"log_file": str(path), "log_format": "ISO8601"})
    # A repository load writes info lines.
    log_client.unload_model("small_cnn")
    log_client.load_model("small_cnn")
    text = path.read_text()
    assert "small_cnn" in text, text
    assert re.search(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ I ", text, re.M), text

    log_client.update_log_settings({"log_info": False})
    before = path.read_text()
    log_client.unload_model("small_cnn")
    log_client.load_model("small_cnn")
    after = path.read_text()
    new_info = [line for line in after[len(before):].splitlines() if re.search(r"Z I ", line)]
    assert new_info == [], new_info

    settings = settings_of(log_client)
    assert value(settings["log_file"]) == str(path)
    assert value(settings["log_info"]) is False
    assert value(settings["log_format"]) == "ISO8601"
    log_client.update_log_settings({"log_file": "", "log_info": True, "log_format": "default"})
    assert_mlp_serves(log_client)


def test_bad_settings_are_refused_and_change_nothing(log_client, own_server, tmp_path):
    before = settings_of(log_client)
    e = expect_error(lambda: log_client.update_log_settings({"log_colour": True}),
                     "INVALID_ARGUMENT")
    assert "log_colour" in e.message()
    # tritonclient refuses a string for an integer setting itself; the raw RPC can send one.
    channel = grpc.insecure_channel(own_server.url)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    request = service_pb2.LogSettingsRequest()
    request.settings["log_verbose_level"].string_param = "high"
    with pytest.raises(grpc.RpcError) as info:
        stub.LogSettings(request)
    channel.close()
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "uint32_param" in info.value.details()
    e = expect_error(lambda: log_client.update_log_settings(
        {"log_info": False, "log_format": "json"}), "INVALID_ARGUMENT")
    assert "json" in e.message()
    missing = tmp_path / "no-such-dir" / "x.log"
    e = expect_error(lambda: log_client.update_log_settings({"log_file": str(missing)}),
                     "FAILED_PRECONDITION")
    assert str(missing) in e.message() and "does not exist" in e.message()
    assert not missing.parent.exists()
    assert settings_of(log_client) == before
    assert_mlp_serves(log_client)


def test_changes_are_refused_without_the_flag(client):
    """The shared default server: reading works, changing is PERMISSION_DENIED naming the flag."""
    assert "log_file" in settings_of(client)
    e = expect_error(lambda: client.update_log_settings({"log_file": "/tmp/anything.log"}),
                     "PERMISSION_DENIED")
    assert "--allow-log-settings" in e.message()
    assert value(settings_of(client)["log_file"]) == ""
