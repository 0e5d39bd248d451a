"""Poll mode: the server picks up repository edits by itself (new model, changed config, removed
model) and never fails a request while a new version of a model loads."""

import os
import re
import shutil
import time

import pytest

from conftest import copy_repository
from tessera_testlib import (OUTPUT_NAME, RequestStream, assert_close, infer, load_reference,
                             model_ready, wait_until)

PICKUP_TIMEOUT_S = 15


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return copy_repository(tmp_path_factory.mktemp("poll") / "models")


@pytest.fixture(scope="module")
def server(make_server, repo):
    return make_server(repository=repo, mode="poll", poll_secs=1, wait_models=["mlp", "small_cnn"])


@pytest.fixture(scope="module")
def client(server):
    return server.client()


def write_atomically(path, text):
    tmp = path.with_name(path.name + ".tmp-edit")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_new_model_is_loaded(client, repo):
    staging = repo.parent / "staging_mlp_copy"
    shutil.copytree(repo / "mlp", staging)
    cfg = staging / "config.yaml"
    cfg.write_text(re.sub(r"(?m)^name:.*$", "name: mlp_copy", cfg.read_text()))
    assert client.is_model_ready("mlp_copy") is False
    os.rename(staging, repo / "mlp_copy")  # appears whole, as an operator's `mv` would

    wait_until(lambda: model_ready(client, "mlp_copy"), timeout=PICKUP_TIMEOUT_S,
               what="mlp_copy to be loaded by the poller")
    x, y = load_reference("mlp")
    assert_close(infer(client, "mlp_copy", x).as_numpy(OUTPUT_NAME), y)
    assert client.get_model_metadata("mlp_copy").name == "mlp_copy"


def test_config_change_keeps_serving(server, client, repo):
    cfg = repo / "mlp" / "config.yaml"
    text = cfg.read_text()
    new_text, n = re.subn(r"(?m)^(\s*max_batch_size:\s*)8\b", r"\g<1>4", text)
    assert n == 1, f"no 'max_batch_size: 8' line to edit in {cfg}:\n{text}"
    assert client.get_model_config("mlp").config.max_batch_size == 8

    with RequestStream(server, ["mlp"], threads_per_model=2) as stream:
        time.sleep(0.5)
        write_atomically(cfg, new_text)
        wait_until(lambda: client.get_model_config("mlp").config.max_batch_size == 4,
                   timeout=PICKUP_TIMEOUT_S, what="the new mlp config to be served")
        time.sleep(1.0)  # keep sending across the switch-over
    outcomes = stream.snapshot()
    failures = [(m, str(e)) for _, _, m, e in outcomes if e is not None]
    assert not failures, f"{len(failures)} of {len(outcomes)} requests failed: {failures[:5]}"
    assert not stream.wrong, f"wrong results: {stream.wrong[:3]}"
    assert len(outcomes) >= 10, "too few requests went through during the reload"

    assert client.is_model_ready("mlp")
    x, y = load_reference("mlp")
    assert_close(infer(client, "mlp", x).as_numpy(OUTPUT_NAME), y)  # batch 4 <= new max 4


def test_removed_model_is_unloaded(client, repo):
    shutil.rmtree(repo / "mlp_copy")
    wait_until(lambda: not model_ready(client, "mlp_copy"), timeout=PICKUP_TIMEOUT_S,
               what="mlp_copy to be unloaded after its folder was removed")
    assert client.is_model_ready("mlp")
    assert client.is_model_ready("small_cnn")
