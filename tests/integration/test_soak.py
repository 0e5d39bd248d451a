"""Nothing the server takes for a request, connection, stream, shared-memory region, sequence or
model load stays taken once it is done. Under soak_load.py's mixed load every answer is right and
every refusal has its code; and after a second round of that load the server's open files,
threads, memory maps, executors and /dev/shm objects are no more than after the first (a leak per
request would add hundreds). bench/soak.py runs the same load for longer and prints how resident
memory moves."""
import time

import pytest

from soak_load import (MODELS, MutualTls, SoakLoad, build_repository, server_resources,
                       write_server_config)

ROUND_S = 8
# What may differ between two settled samples without anything being kept: gRPC starts and ends
# timer and executor threads as it likes, a connection's socket may close a moment late, and memory
# maps come and go with the allocator's large blocks. A leak per request, connection, stream or
# load would add hundreds or thousands in a round.
SLACK = {"server_fds": 2, "server_threads": 4, "server_maps": 24, "executors": 0,
         "executors_fds": 0, "executors_threads": 0, "executors_maps": 24, "dev_shm_objects": 0}
KINDS = ("grpc", "http ensemble", "stream", "sequence", "shared memory", "deadline", "reload",
         "unload", "new connection", "observe")


@pytest.fixture(scope="module", params=["plaintext", "mutual TLS"])
def soak_target(request, make_server, tmp_path_factory):
    """A server and the certificates its clients need (None in plaintext). Over mutual TLS every
    new connection is a handshake, and both endpoints reload their certificate files each second."""
    folder = tmp_path_factory.mktemp("soak")
    tls = MutualTls(folder) if request.param == "mutual TLS" else None
    repo = build_repository(folder / "models")
    server = make_server(repository=repo, mode="explicit", load_models=MODELS, wait_models=MODELS,
                         config=write_server_config(folder / "server.yaml", tls),
                         extra_args=("--cache-config", "local,size=1048576", "--allow-client-shm"),
                         client_kwargs=tls.grpc_kwargs() if tls else None)
    return server, tls


def settled(pid, within_s=15.0):
    """The counts once they stop moving (sequences idle out, closed connections are let go)."""
    previous = server_resources(pid)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = server_resources(pid)
        if all(now.get(k) == previous.get(k) for k in SLACK):
            return now
        previous = now
    return previous


def assert_clean(tally):
    assert tally.failure_count == 0, "\n".join(tally.failures)
    missing = [k for k in KINDS if tally.ok.get(k, 0) == 0]
    assert not missing, f"workers that got no answer: {missing} (answers: {tally.ok})"
    assert tally.expected_errors, "no request was refused as asked"


def test_a_second_round_of_mixed_load_keeps_no_more_than_the_first(soak_target):
    server, tls = soak_target
    pid = server.proc.pid
    load = SoakLoad(server, seed=1, tls=tls)
    assert_clean(load.run(ROUND_S))
    first = settled(pid)
    answered = load.tally.total_ok()
    assert_clean(load.run(ROUND_S))
    second = settled(pid)
    assert load.tally.total_ok() > answered
    assert second["executors"] >= 1
    grew = {k: (first[k], second[k]) for k, slack in SLACK.items() if second[k] > first[k] + slack}
    assert not grew, f"kept after the second round (first, second): {grew}"
