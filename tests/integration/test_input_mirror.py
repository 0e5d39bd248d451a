"""The input mirror's staging protocol end to end (executors.input_mirror: host): the server
announces every request it stages in the input pool (InputsStaged), the executor copies it at
arrival, and pooled batches read that copy. On a GPU the same protocol feeds the GPU-resident
mirror (E²bird); here the host mirror makes it run in CI, and wrong bookkeeping (a batch reading
a slot staged for another request, or before its copy) would give wrong answers."""

import re

import pytest

from conftest import copy_repository
from tessera_testlib import check_concurrent_clients

MODELS = ["mlp", "small_cnn"]


@pytest.fixture(scope="module")
def server(make_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("mirror")
    repo = copy_repository(root / "models")
    # Requests are staged in the input pool for gpulets and multi-granularity workers; mlp gets
    # workers, small_cnn keeps a plain instance (its batches gather, unmirrored).
    config = repo / "mlp" / "config.yaml"
    text = re.sub(r"instance_group:\n(  .*\n)+", "", config.read_text())
    config.write_text(text + "worker_batch_sizes: [4, 2, 1]\n")
    server_yaml = root / "server.yaml"
    server_yaml.write_text("executors:\n  input_mirror: host\n")
    return make_server(repository=repo, mode="none", config=server_yaml, wait_models=MODELS)


def test_concurrent_requests_are_answered_from_the_mirror(server):
    check_concurrent_clients(server, MODELS, threads=6, requests_per_thread=30)

    server.stop(timeout=15.0)
    log = server.log_path.read_text(errors="replace")
    assert "host input mirror of" in log, server.log_tail_text()
    mirrored = [int(n) for n in re.findall(r"\((\d+) batch inputs read from the input mirror\)", log)]
    assert mirrored and sum(mirrored) > 0, server.log_tail_text()
