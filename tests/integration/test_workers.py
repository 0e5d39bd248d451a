"""Multi-granularity workers (E²bird): mlp with `worker_batch_sizes: [8, 4, 2, 1]` gets four
instances on one executor, answers concurrent clients correctly, and counts which worker ran each
batch in tessera_worker_batches_total."""

import re

import numpy as np
import pytest

from conftest import copy_repository
from tessera_testlib import check_concurrent_clients, fetch_metrics, metric_sum, parse_metrics

SIZES = [8, 4, 2, 1]


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    repo = copy_repository(tmp_path_factory.mktemp("workers") / "models")
    config = repo / "mlp" / "config.yaml"
    text = config.read_text()
    # The workers replace instance_group's count.
    text = re.sub(r"instance_group:\n(  .*\n)+", "", text)
    text += f"worker_batch_sizes: [{', '.join(map(str, SIZES))}]\n"
    config.write_text(text)
    return repo


@pytest.fixture(scope="module")
def server(make_server, repo):
    return make_server(repository=repo, mode="poll", wait_models=["mlp"])


def test_workers_answer_concurrent_clients_and_are_counted(server):
    check_concurrent_clients(server, ["mlp"], threads=8, requests_per_thread=25)

    samples = parse_metrics(fetch_metrics(server.metrics_url))
    executions = metric_sum(samples, "nv_inference_exec_count", model="mlp")
    by_worker = {size: metric_sum(samples, "tessera_worker_batches_total", model="mlp",
                                  worker_batch=str(size)) or 0 for size in SIZES}
    assert executions and executions > 0
    # Every batch ran on one of the workers, and each was counted once.
    print("batches by worker size:", by_worker, "executions:", executions)
    assert sum(by_worker.values()) == executions, (by_worker, executions)
    assert sum(1 for v in by_worker.values() if v > 0) >= 2, by_worker  # several sizes ran
    # The workers read their inputs from the input pool (staged at enqueue into the first worker's
    # region, in queue order): most batches go out with no copy at batch time.
    pooled = metric_sum(samples, "tessera_input_pool_batches_total", path="pooled") or 0
    gathered = metric_sum(samples, "tessera_input_pool_batches_total", path="gathered") or 0
    print("input pool batches: pooled", pooled, "gathered", gathered)
    assert pooled >= executions / 2, (pooled, gathered, executions)
    log = server.log_path.read_text()
    assert "workers 8/4/2/1 on executor" in log, server.log_tail_text()
    # Each worker ran once at its own size before the model was READY (no request pays for a
    # first Run's planning and primitive creation).
    assert "mlp/1: warmed up 4 instance(s) at batch sizes [8, 4, 2, 1]" in log, server.log_tail_text()
