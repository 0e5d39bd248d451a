"""Models of the CI zoo served with three instances each, under concurrent clients: every answer
must match onnxruntime on the same rows (concurrent_answers_check.py). Instances of one model share
its weights and kernel states and run at once on the executor's threads; when oneDNN's Conv
primitives shared one scratchpad, 1-2 % of such answers came back wrong with status OK.

Needs the CI zoo (CTest's engine_zoo_export fixture makes it; by hand: scripts/make_zoo.sh --set
ci --out build/zoo, or TESSERA_ZOO_DIR)."""

import os
import re
import shutil
from pathlib import Path

import pytest

from concurrent_answers_check import check_concurrent_answers
from conftest import SOURCE_DIR

MODELS = ["mobilenetv2", "unet_tiny", "bert_tiny"]  # oneDNN Convs of several sizes, and GEMMs
INSTANCES = 3


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    zoo = Path(os.environ.get("TESSERA_ZOO_DIR") or SOURCE_DIR / "build" / "zoo")
    missing = [m for m in MODELS if not (zoo / m / "1" / "model.onnx").is_file()]
    if missing:
        pytest.fail(f"zoo models {missing} missing under {zoo}: run scripts/make_zoo.sh --set ci "
                    f"--out {zoo} (CTest's engine_zoo_export does)", pytrace=False)
    repo = tmp_path_factory.mktemp("instances") / "models"
    for model in MODELS:
        shutil.copytree(zoo / model, repo / model, ignore=shutil.ignore_patterns("reference"))
        config = repo / model / "config.yaml"
        text, count = re.subn(r"count: \d+", f"count: {INSTANCES}", config.read_text())
        assert count == 1, f"{config}: no instance_group count to raise"
        config.write_text(text)
    return repo


def test_concurrent_instances_answer_like_onnxruntime(make_server, repo):
    server = make_server(repository=repo, mode="none", wait_models=MODELS)
    answered, failures = check_concurrent_answers(f"127.0.0.1:{server.grpc_port}", repo, MODELS,
                                                  threads=8, requests=100, seed=3)
    print("correct answers per model:", answered)
    assert not failures, f"{len(failures)} of {8 * 100} answers failed: {failures[:5]}"
    assert all(answered[m] > 0 for m in MODELS), answered
    log = server.log_path.read_text()
    assert log.count(f"warmed up {INSTANCES} instance(s)") == len(MODELS), server.log_tail_text()
