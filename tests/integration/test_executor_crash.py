"""An executor process dies (SIGKILL) under load: the server stays up, requests either succeed or fail
with UNAVAILABLE naming the executor, and within a few seconds everything is served again."""

import os
import signal
import time

import pytest

from tessera_testlib import (BUNDLED_MODELS, MODELS_DIR, OUTPUT_NAME, RequestStream, assert_close,
                             executor_pids, infer, load_reference, wait_until)

RECOVERY_TIMEOUT_S = 15


@pytest.fixture(scope="module")
def server(make_server):
    return make_server(repository=MODELS_DIR, mode="none", wait_models=BUNDLED_MODELS)


def test_server_has_executor_children(server):
    pids = executor_pids(server.proc.pid)
    assert pids, "tessera-server has no tessera-executor child process"


def test_executor_killed_under_load(server):
    victims = executor_pids(server.proc.pid)
    assert victims, "no tessera-executor to kill"
    victim = victims[0]

    with RequestStream(server, list(BUNDLED_MODELS), threads_per_model=2,
                       client_timeout=30.0) as stream:
        time.sleep(1.0)
        t_kill = time.monotonic()
        os.kill(victim, signal.SIGKILL)

        def recovered():
            # A success for every model, sent after the kill.
            recent = [o for o in stream.snapshot() if o[0] > t_kill + 0.5]
            return all(any(m == model and e is None for _, _, m, e in recent)
                       for model in BUNDLED_MODELS)

        wait_until(recovered, timeout=RECOVERY_TIMEOUT_S, interval=0.2,
                   what="requests to succeed again after the executor was killed")
        t_recovered = time.monotonic()
        time.sleep(1.0)

    assert server.proc.poll() is None, "tessera-server died with its executor"
    outcomes = stream.snapshot()
    assert not stream.wrong, f"wrong results: {stream.wrong[:3]}"
    bad = [(m, e.status(), e.message()) for _, _, m, e in outcomes
           if e is not None and not (e.status() == "StatusCode.UNAVAILABLE"
                                     and "executor" in e.message().lower())]
    assert not bad, f"failures other than UNAVAILABLE naming the executor: {bad[:5]}"
    # Once recovered, it stays recovered.
    late = [(m, str(e)) for t0, _, m, e in outcomes if t0 > t_recovered + 0.2 and e is not None]
    assert not late, f"requests failed after recovery: {late[:5]}"
    failed = sum(1 for o in outcomes if o[3] is not None)
    print(f"{len(outcomes)} requests, {failed} failed with UNAVAILABLE, recovered in "
          f"{t_recovered - t_kill:.1f} s")

    # The killed process is gone and a new executor runs in its place.
    pids = executor_pids(server.proc.pid)
    assert victim not in pids
    assert pids, "no tessera-executor after recovery"


def test_all_models_serve_after_restart(server):
    client = server.client()
    for model in BUNDLED_MODELS:
        assert client.is_model_ready(model)
        x, y = load_reference(model)
        assert_close(infer(client, model, x).as_numpy(OUTPUT_NAME), y, model)


def test_server_metadata_still_answers(server):
    assert server.client().get_server_metadata().name == "tessera"
    wait_until(lambda: server.client().is_server_ready(), timeout=5, what="server ready")


def test_the_rings_leave_no_names_in_dev_shm(server):
    """Each executor's rings lose their /dev/shm names once the executor has opened them (after a
    restart too), so a server killed with SIGKILL, which runs no destructor, leaves none of its
    memory behind in /dev/shm (RAM) until reboot."""
    prefix = f"tessera-{server.proc.pid}-"
    assert executor_pids(server.proc.pid)
    left = [name for name in os.listdir("/dev/shm") if name.startswith(prefix)]
    assert not left, f"shared-memory names of a running server: {left}"
