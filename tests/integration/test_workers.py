"""Multi-granularity workers (E²bird): mlp and small_cnn with `worker_batch_sizes: [8, 4, 2, 1]` get
four instances each on one executor, answer concurrent clients correctly, count which worker ran
each batch in tessera_worker_batches_total, and both read their batches from the input pool."""

import re

import numpy as np
import pytest

from conftest import copy_repository
from tessera_testlib import check_concurrent_clients, fetch_metrics, metric_sum, parse_metrics

SIZES = [8, 4, 2, 1]
MODELS = ["mlp", "small_cnn"]


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    repo = copy_repository(tmp_path_factory.mktemp("workers") / "models")
    for model in MODELS:
        config = repo / model / "config.yaml"
        text = config.read_text()
        # The workers replace instance_group's count.
        text = re.sub(r"instance_group:\n(  .*\n)+", "", text)
        text += f"worker_batch_sizes: [{', '.join(map(str, SIZES))}]\n"
        config.write_text(text)
    return repo


@pytest.fixture(scope="module")
def server(make_server, repo):
    return make_server(repository=repo, mode="poll", wait_models=MODELS)


def test_workers_answer_concurrent_clients_and_are_counted(server):
    check_concurrent_clients(server, MODELS, threads=8, requests_per_thread=25)

    samples = parse_metrics(fetch_metrics(server.metrics_url))
    executions = 0
    for model in MODELS:
        count = metric_sum(samples, "nv_inference_exec_count", model=model)
        by_worker = {size: metric_sum(samples, "tessera_worker_batches_total", model=model,
                                      worker_batch=str(size)) or 0 for size in SIZES}
        assert count and count > 0, model
        # Every batch ran on one of the workers, and each was counted once.
        print(model, "batches by worker size:", by_worker, "executions:", count)
        assert sum(by_worker.values()) == count, (model, by_worker, count)
        assert sum(1 for v in by_worker.values() if v > 0) >= 2, (model, by_worker)  # sizes ran
        executions += count
    # The workers read their inputs from the input pool (staged at enqueue into the first worker's
    # region, in queue order): most batches of both models go out with no copy at batch time. The
    # warm-up (each size twice, before READY) is gathered. A model whose workers found no pool
    # region (the other model's workers had taken them all at load) gathered every batch.
    pooled = metric_sum(samples, "tessera_input_pool_batches_total", path="pooled") or 0
    gathered = metric_sum(samples, "tessera_input_pool_batches_total", path="gathered") or 0
    warm_ups = 2 * len(SIZES) * len(MODELS)
    print("input pool batches: pooled", pooled, "gathered", gathered)
    assert gathered - warm_ups <= executions / 10, (pooled, gathered, executions)
    log = server.log_path.read_text()
    assert log.count("workers 8/4/2/1 on executor") == len(MODELS), server.log_tail_text()
    # Each worker ran once at its own size before the model was READY (no request pays for a
    # first Run's planning and primitive creation).
    assert "mlp/1: warmed up 4 instance(s) at batch sizes [8, 4, 2, 1]" in log, server.log_tail_text()
