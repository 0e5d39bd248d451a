"""Triton's trace extension through tritonclient: TraceSetting reads and changes the settings
(global and per model), traced requests land in the trace file as JSON with their timestamps in
order and, at level TENSORS, their input and output tensors, bad settings are refused naming the
key, and the traces left over are written at stop."""

import json

import numpy as np
import pytest

from tessera_testlib import (MODELS_DIR, assert_mlp_serves, expect_error, infer, load_reference,
                             make_input)

STAGES = ["REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
          "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END"]


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    return tmp_path_factory.mktemp("trace") / "trace.json"


@pytest.fixture(scope="module")
def traced(make_server, trace_file):
    return make_server(repository=MODELS_DIR, mode="explicit", load_models=("mlp", "small_cnn"),
                       wait_models=("mlp", "small_cnn"),
                       extra_args=("--trace-file", str(trace_file), "--trace-level", "TIMESTAMPS",
                                   "--trace-rate", "1"))


@pytest.fixture(scope="module")
def trace_client(traced):
    return traced.client()


def settings_of(client, model=None):
    raw = client.get_trace_settings(model_name=model, as_json=True)["settings"]
    return {key: entry.get("value", []) for key, entry in raw.items()}


def read_traces(path):
    return json.loads(path.read_text())


def test_settings_come_from_the_command_line(trace_client, trace_file):
    settings = settings_of(trace_client)
    assert settings == {"trace_file": [str(trace_file)], "trace_level": ["TIMESTAMPS"],
                        "trace_rate": ["1"], "trace_count": ["-1"], "log_frequency": ["0"]}


def test_traced_requests_are_written_every_log_frequency(trace_client, trace_file):
    trace_client.update_trace_settings(settings={"log_frequency": "2"})
    x, _ = load_reference("mlp")
    for i in range(4):
        infer(trace_client, "mlp", x, request_id=f"trace-{i}")
    files = [trace_file.with_name(f"{trace_file.name}.{i}") for i in range(2)]
    traces = read_traces(files[0]) + read_traces(files[1])
    assert [t["request_id"] for t in traces] == [f"trace-{i}" for i in range(4)]
    for t in traces:
        assert t["model_name"] == "mlp" and t["model_version"] == 1
        names = [s["name"] for s in t["timestamps"]]
        assert names == STAGES, names
        ns = [s["ns"] for s in t["timestamps"]]
        assert ns == sorted(ns) and ns[-1] > ns[0], ns


def test_model_settings_override_and_clear(trace_client, trace_file):
    trace_client.update_trace_settings(model_name="small_cnn", settings={"trace_level": "OFF"})
    assert settings_of(trace_client, "small_cnn")["trace_level"] == ["OFF"]
    assert settings_of(trace_client)["trace_level"] == ["TIMESTAMPS"]
    trace_client.update_trace_settings(settings={"log_frequency": "1"})
    before = sorted(trace_file.parent.glob(trace_file.name + ".*"))
    x, _ = load_reference("small_cnn")
    infer(trace_client, "small_cnn", x, request_id="untraced")
    assert sorted(trace_file.parent.glob(trace_file.name + ".*")) == before

    trace_client.update_trace_settings(model_name="small_cnn", settings={"trace_level": None})
    assert settings_of(trace_client, "small_cnn")["trace_level"] == ["TIMESTAMPS"]
    infer(trace_client, "small_cnn", x, request_id="traced-again")
    new = sorted(set(trace_file.parent.glob(trace_file.name + ".*")) - set(before))
    assert len(new) == 1
    assert [t["request_id"] for t in read_traces(new[0])] == ["traced-again"]


def test_bad_settings_are_refused_and_change_nothing(trace_client, tmp_path):
    before = settings_of(trace_client)
    e = expect_error(lambda: trace_client.update_trace_settings(settings={"trace_mode": "x"}),
                     "INVALID_ARGUMENT")
    assert "trace_mode" in e.message()
    e = expect_error(lambda: trace_client.update_trace_settings(
        settings={"trace_file": str(tmp_path / "elsewhere.json")}), "INVALID_ARGUMENT")
    assert "--trace-file" in e.message()
    e = expect_error(lambda: trace_client.update_trace_settings(settings={"trace_rate": "-1"}),
                     "INVALID_ARGUMENT")
    assert "trace_rate" in e.message()
    e = expect_error(lambda: trace_client.update_trace_settings(
        settings={"trace_level": ["OFF", "TENSORS"]}), "INVALID_ARGUMENT")
    assert "OFF cannot be named beside another level" in e.message()
    e = expect_error(lambda: trace_client.update_trace_settings(
        settings={"trace_level": "TENSOR"}), "INVALID_ARGUMENT")
    assert "must be OFF, TIMESTAMPS or TENSORS" in e.message()
    e = expect_error(lambda: trace_client.update_trace_settings(
        settings={"trace_rate": ["1", "2"]}), "INVALID_ARGUMENT")
    assert "one value" in e.message()
    e = expect_error(lambda: trace_client.get_trace_settings(model_name="no_such_model"),
                     "NOT_FOUND")
    assert "no_such_model" in e.message()
    assert settings_of(trace_client) == before
    assert_mlp_serves(trace_client)


def test_traces_left_are_written_at_stop(make_server, tmp_path):
    path = tmp_path / "at-stop.json"
    server = make_server(repository=MODELS_DIR, mode="explicit", load_models=("mlp",),
                         wait_models=("mlp",),
                         extra_args=("--trace-file", str(path), "--trace-level", "TIMESTAMPS",
                                     "--trace-rate", "2"))
    x, _ = load_reference("mlp")
    client = server.client()
    for i in range(4):
        infer(client, "mlp", x, request_id=f"r{i}")
    assert not path.exists()
    assert server.stop() == 0
    assert [t["request_id"] for t in read_traces(path)] == ["r0", "r2"]


def test_tensors_level_records_the_inputs_and_outputs(make_server, tmp_path):
    path = tmp_path / "tensors.json"
    server = make_server(repository=MODELS_DIR, mode="explicit", load_models=("mlp",),
                         wait_models=("mlp",),
                         extra_args=("--trace-file", str(path), "--trace-config", "level=TENSORS",
                                     "--trace-config", "rate=1"))
    client = server.client()
    assert settings_of(client)["trace_level"] == ["TENSORS"]
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 64)
    y = infer(client, "mlp", x, request_id="t0").as_numpy("output")
    # Both levels at once, as a TraceSetting call lists them.
    client.update_trace_settings(settings={"trace_level": ["TIMESTAMPS", "TENSORS"]})
    assert settings_of(client)["trace_level"] == ["TIMESTAMPS", "TENSORS"]
    infer(client, "mlp", x, request_id="t1")
    assert server.stop() == 0
    entries = read_traces(path)
    heads = [e for e in entries if "model_name" in e]
    assert [h["request_id"] for h in heads] == ["t0", "t1"]
    assert "timestamps" not in heads[0] and [s["name"] for s in heads[1]["timestamps"]] == STAGES
    for head in heads:
        tensors = [e for e in entries if e["id"] == head["id"] and "activity" in e]
        assert [(t["activity"], t["tensor"]["name"]) for t in tensors] == [
            ("TENSOR_QUEUE_INPUT", "input"), ("TENSOR_BACKEND_OUTPUT", "output")]
        sent, answered = tensors[0]["tensor"], tensors[1]["tensor"]
        assert (sent["shape"], sent["dtype"]) == ("1,64", "FP32")
        np.testing.assert_array_equal(np.array(sent["data"].split(","), np.float32), x.ravel())
        assert (answered["shape"], answered["dtype"]) == ("1,10", "FP32")
        np.testing.assert_array_equal(np.array(answered["data"].split(","), np.float32),
                                      y.ravel())


def test_tracing_is_off_by_default(client):
    """The shared default server: tracing is off and needs a trace file to be turned on."""
    assert settings_of(client)["trace_level"] == ["OFF"]
    e = expect_error(lambda: client.update_trace_settings(settings={"trace_level": "TIMESTAMPS"}),
                     "FAILED_PRECONDITION")
    assert "--trace-file" in e.message()


def test_an_ensembles_steps_are_traced_as_its_children(make_server, tmp_path):
    """Each step of a traced ensemble request (and each step of a nested ensemble's) is a trace of
    its own whose parent_id is the trace of the request it serves, as Triton writes them; at level
    TENSORS the steps' tensors show the data flow."""
    from test_ensemble import OUTER, PIPELINE, save_ensemble, save_unary_model

    repo = tmp_path / "models"
    save_unary_model(repo, "ens_relu", "Relu")
    save_unary_model(repo, "ens_neg", "Neg")
    save_ensemble(repo, "c_pipeline", PIPELINE.format(name="c_pipeline"))  # -relu(x)
    save_ensemble(repo, "b_outer", OUTER.format(name="b_outer", inner="c_pipeline"))  # relu(x)
    trace_file = tmp_path / "steps.json"
    server = make_server(repository=repo, mode="none", wait_models=["b_outer"],
                         extra_args=("--trace-file", str(trace_file), "--trace-level", "TIMESTAMPS",
                                     "--trace-level", "TENSORS", "--trace-rate", "1"))
    x = np.array([[-1.0, 2.0, -3.0, 4.0]], dtype=np.float32)
    out = server.client().infer("b_outer", [make_input(x, name="IN")], request_id="flow")
    np.testing.assert_array_equal(out.as_numpy("OUT"), np.maximum(x, 0))
    assert server.stop() == 0

    entries = read_traces(trace_file)
    traces = {e["id"]: e for e in entries if "model_name" in e}
    assert sorted(t["model_name"] for t in traces.values()) == [
        "b_outer", "c_pipeline", "ens_neg", "ens_neg", "ens_relu"]
    top = [t for t in traces.values() if "parent_id" not in t]
    assert [t["model_name"] for t in top] == ["b_outer"]
    children = {t["model_name"]: t for t in traces.values() if t.get("parent_id") == top[0]["id"]}
    assert sorted(children) == ["c_pipeline", "ens_neg"]
    inner = children["c_pipeline"]["id"]
    assert sorted(t["model_name"] for t in traces.values() if t.get("parent_id") == inner) == [
        "ens_neg", "ens_relu"]
    for t in traces.values():
        assert t["request_id"] == "flow"
        assert [s["name"] for s in t["timestamps"]] == STAGES, t
        ns = [s["ns"] for s in t["timestamps"]]
        assert ns == sorted(ns), t
        if "parent_id" in t:  # a step runs inside the request it serves
            parent = traces[t["parent_id"]]["timestamps"]
            assert parent[0]["ns"] <= ns[0] and ns[-1] <= parent[-1]["ns"], t

    relu = [t for t in traces.values() if t["model_name"] == "ens_relu"][0]["id"]
    tensors = [e for e in entries if e["id"] == relu and "tensor" in e]
    assert [(e["activity"], e["tensor"]["name"], e["tensor"]["data"]) for e in tensors] == [
        ("TENSOR_QUEUE_INPUT", "x", "-1,2,-3,4"), ("TENSOR_BACKEND_OUTPUT", "y", "0,2,0,4")]
