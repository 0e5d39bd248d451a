"""Seeded structure-aware mutations of ONNX model files (model_fuzz.py) loaded through a real
server in explicit mode: each load answers with an expected status and a message, loaded models
answer, and afterwards the server, its executor and mlp are as before. CI-sized; model_fuzz.py
runs longer ones."""

import pytest

from conftest import copy_repository
from model_fuzz import ModelFuzzer
from tessera_testlib import fuzz_and_check_nothing_broke

CASES_PER_SEED = 250


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return copy_repository(tmp_path_factory.mktemp("model-fuzz") / "models")


@pytest.fixture(scope="module")
def fuzz_server(make_server, repo):
    return make_server(repository=repo, mode="explicit", load_models=["mlp"], wait_models=["mlp"])


@pytest.mark.parametrize("seed", [1, 2])
def test_mutated_model_files_load_or_fail_clearly_and_break_nothing(fuzz_server, repo, seed):
    fuzz_and_check_nothing_broke(fuzz_server, ModelFuzzer(fuzz_server.url, repo, seed),
                                 CASES_PER_SEED)
