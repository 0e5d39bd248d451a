"""Seeded random model folders (repository_fuzz.py) loaded, reloaded and unloaded through a real
server in explicit mode: each load or unload gets an expected status with a message, loaded models
answer, and afterwards mlp still serves from the same executor. CI-sized; repository_fuzz.py runs
longer ones."""

import pytest

from conftest import copy_repository
from repository_fuzz import Finding, RepositoryFuzzer
from tessera_testlib import assert_mlp_serves, executor_pids

CASES_PER_SEED = 150


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return copy_repository(tmp_path_factory.mktemp("fuzz") / "models")


@pytest.fixture(scope="module")
def fuzz_server(make_server, repo):
    return make_server(repository=repo, mode="explicit", load_models=["mlp"], wait_models=["mlp"])


@pytest.mark.parametrize("seed", [1, 2])
def test_random_model_folders_load_or_fail_clearly_and_break_nothing(fuzz_server, repo, seed):
    executors = sorted(executor_pids(fuzz_server.proc.pid))
    assert executors, "the server started no executor"
    fuzzer = RepositoryFuzzer(fuzz_server.url, repo, seed)
    try:
        for i in range(CASES_PER_SEED):
            fuzzer.one_case(i)
    except Finding as finding:
        pytest.fail(str(finding), pytrace=False)
    finally:
        fuzzer.close()
    # Both outcomes happened: some folders loaded and some were refused.
    assert fuzzer.counts.get("OK", 0) > 0 and fuzzer.counts.get("INVALID_ARGUMENT", 0) > 0, fuzzer.counts
    assert fuzz_server.proc.poll() is None, "the server exited"
    assert sorted(executor_pids(fuzz_server.proc.pid)) == executors, "an executor was restarted"
    client = fuzz_server.client()
    assert_mlp_serves(client)
