"""The input mirror's staging protocol end to end (executors.input_mirror: host): the server
announces every request it stages in the input pool (InputsStaged), the executor copies it at
arrival, and pooled batches read that copy. On a GPU the same protocol feeds the GPU-resident
mirror (E²bird); here the host mirror makes it run in CI, and wrong bookkeeping (a batch reading
a slot staged for another request, or before its copy) would give wrong answers."""

import re

import pytest

from conftest import copy_repository
from tessera_testlib import check_concurrent_clients, fetch_metrics, metric_sum, parse_metrics

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

    # The server learns from each BatchResult whether the batch read the mirror: the pooled
    # batches do (each of their slots was announced), the gathered ones (small_cnn, warm-ups) not.
    samples = parse_metrics(fetch_metrics(server.metrics_url))
    pooled = metric_sum(samples, "tessera_input_pool_batches_total", path="pooled") or 0
    mirrored = metric_sum(samples, "tessera_input_pool_mirrored_batches_total") or 0
    print("pooled batches", pooled, "read from the mirror", mirrored)
    assert pooled > 0 and mirrored == pooled, (pooled, mirrored)

    server.stop(timeout=15.0)
    log = server.log_path.read_text(errors="replace")
    assert "host input mirror of" in log, server.log_tail_text()
    mirrored = [int(n) for n in re.findall(r"\((\d+) batch inputs read from the input mirror\)", log)]
    assert mirrored and sum(mirrored) > 0, server.log_tail_text()
