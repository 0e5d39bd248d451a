"""Seeded random model folders (repository_fuzz.py) loaded, reloaded and unloaded through a real
server in explicit mode: each load or unload gets an expected status with a message, loaded models
answer, and afterwards mlp still serves from the same executor. CI-sized; repository_fuzz.py runs
longer ones."""

import threading

import pytest
import tritonclient.utils.shared_memory as shm

import request_fuzz
from conftest import copy_repository
from repository_fuzz import Finding, RepositoryFuzzer
from request_fuzz import SHM_BYTES, SHM_KEY, SHM_REGION, Fuzzer
from tessera_testlib import assert_mlp_serves, executor_pids, fuzz_and_check_nothing_broke

CASES_PER_SEED = 150


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return copy_repository(tmp_path_factory.mktemp("fuzz") / "models")


@pytest.fixture(scope="module")
def fuzz_server(make_server, repo):
    # Client shared memory on: the racing test's request fuzzer registers a region.
    return make_server(repository=repo, mode="explicit", load_models=["mlp"], wait_models=["mlp"],
                       extra_args=("--allow-client-shm",))


@pytest.mark.parametrize("seed", [1, 2])
def test_random_model_folders_load_or_fail_clearly_and_break_nothing(fuzz_server, repo, seed):
    fuzz_and_check_nothing_broke(fuzz_server, RepositoryFuzzer(fuzz_server.url, repo, seed),
                                 CASES_PER_SEED)


def test_requests_racing_loads_and_unloads_get_clear_answers(fuzz_server, repo):
    """Requests to the models the repository fuzzer is loading, reloading and unloading at the
    same moment: each is served, or refused with a clear status (UNAVAILABLE while a version
    goes), never INTERNAL or lost; and the executor survives it."""
    executors = sorted(executor_pids(fuzz_server.proc.pid))
    loader = RepositoryFuzzer(fuzz_server.url, repo, seed=7)
    failures = []

    def churn():
        try:
            for i in range(120):
                loader.one_case(i)
        except Exception as e:  # reported below, on the test's thread
            failures.append(e)

    thread = threading.Thread(target=churn)
    saved = dict(request_fuzz.MODELS)
    request_fuzz.MODELS.update({name: [64] for name in ("fz_a", "fz_b", "fz_c")})
    requester = Fuzzer(fuzz_server.url, seed=8)
    region = shm.create_shared_memory_region(SHM_REGION, SHM_KEY, SHM_BYTES)
    thread.start()
    try:
        requester.register_region()
        for i in range(600):
            requester.one_case(i)
            if not thread.is_alive():
                break
    except Finding as finding:
        pytest.fail(str(finding), pytrace=False)
    finally:
        thread.join()
        request_fuzz.MODELS.clear()
        request_fuzz.MODELS.update(saved)
        requester.close()
        loader.close()
        shm.destroy_shared_memory_region(region)
    assert not failures, failures[0]
    assert sorted(executor_pids(fuzz_server.proc.pid)) == executors, "an executor was restarted"
    assert_mlp_serves(fuzz_server.client())
