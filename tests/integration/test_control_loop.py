"""The scheduler's control loop in a running server (issue 5): with scheduler.policy gpulet and the
measured CPU profiles, the measured request rates are planned every epoch, gpulets start as executor
processes in their partitions, and models switch to them while serving. A load change forces a new
plan and a switch; every request either succeeds with the right output or is dropped by the SLO rule
with its status. A model whose SLO cannot be met is reported unschedulable and keeps being served."""

import re
import shutil
import time

import pytest
from tritonclient.utils import InferenceServerException

from conftest import copy_repository
from tessera_testlib import (SOURCE_DIR, RequestStream, executor_pids, fetch_metrics, parse_metrics,
                             metric_sum, wait_until)

PROFILES = SOURCE_DIR / "profiles" / "cpu-2core"
EPOCH_S = 1.5


def write_config(path, repository):
    path.write_text(f"""
repository:
  path: {repository}
scheduler:
  policy: gpulet
  profiles: {PROFILES}
  epoch_secs: {EPOCH_S}
  rate_window_ms: 250
  slo_drop: true
""")
    return path


def gpulet_models(server):
    """{model: [(gpulet, partition_pct, batch)]} from tessera_gpulet_rate_rps."""
    placed = {}
    for name, labels, _ in parse_metrics(fetch_metrics(server.metrics_url)):
        if name == "tessera_gpulet_rate_rps":
            placed.setdefault(labels["model"], []).append(
                (labels["gpulet"], labels["partition_pct"], labels["batch"]))
    return placed


def metric(server, name):
    return metric_sum(parse_metrics(fetch_metrics(server.metrics_url)), name) or 0


def assert_outcomes_clean(stream):
    """Every request succeeded with the right output, or was dropped by the SLO rule."""
    assert not stream.wrong, f"wrong results: {stream.wrong[:3]}"
    other = []
    dropped = 0
    for _, _, model, error in stream.snapshot():
        if error is None:
            continue
        if "StatusCode.UNAVAILABLE" in str(error.status()) and "can no longer meet its SLO" in \
                error.message():
            dropped += 1
        else:
            other.append((model, error.status(), error.message()))
    assert not other, f"{len(other)} request(s) failed outside the SLO rule, e.g. {other[:3]}"
    return dropped


@pytest.fixture(scope="module")
def planned_server(make_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("control")
    repository = copy_repository(root / "models")
    config = write_config(root / "server.yaml", repository)
    return make_server(config=config, repository=repository, mode="none",
                       wait_models=("mlp", "small_cnn"))


def test_load_change_replans_and_switches_without_failing_requests(planned_server):
    server = planned_server
    base_executors = len(executor_pids(server.proc.pid))

    # Phase 1: only mlp has traffic -> a plan with a gpulet for mlp, small_cnn left on its instances.
    with RequestStream(server, ["mlp"], threads_per_model=1, pause_s=0.004) as first:
        wait_until(lambda: "mlp" in gpulet_models(server), timeout=12 * EPOCH_S, interval=0.25,
                   what="a plan that gives mlp a gpulet")
        placed = gpulet_models(server)
        assert "small_cnn" not in placed, f"small_cnn has no traffic yet but got {placed}"
        generation_1 = metric(server, "tessera_plan_generation")
        switches_1 = metric(server, "tessera_lane_switches_total")
        assert switches_1 >= 1
        # The gpulet is an executor process of its own.
        assert len(executor_pids(server.proc.pid)) > base_executors
        time.sleep(EPOCH_S)

        # Phase 2: small_cnn gets traffic too -> re-plan, small_cnn switches to a gpulet.
        with RequestStream(server, ["small_cnn"], threads_per_model=2, pause_s=0.002) as second:
            wait_until(lambda: "small_cnn" in gpulet_models(server), timeout=12 * EPOCH_S,
                       interval=0.25, what="a new plan that gives small_cnn a gpulet")
            time.sleep(EPOCH_S)  # serve a while on the new plan
        assert metric(server, "tessera_plan_generation") > generation_1
        assert metric(server, "tessera_lane_switches_total") > switches_1
        # The switch paused dispatching for well under a millisecond (GSLICE: < 100 us).
        assert metric(server, "tessera_switch_gap_max_seconds") < 0.01
        # CPU executors load their own weights: a shadow maps its active's only on a GPU.
        assert "tessera_shadow_weights_shared_total 0" in fetch_metrics(server.metrics_url)

    dropped = assert_outcomes_clean(first) + assert_outcomes_clean(second)
    served = [o for o in first.snapshot() + second.snapshot() if o[3] is None]
    assert len(served) > 100, f"only {len(served)} requests succeeded"
    assert dropped <= len(served) // 10, f"{dropped} SLO drops against {len(served)} served"

    # Requests routed to gpulets were copied into their executors' input pools on arrival, and
    # batches went out from there without a copy at batch time.
    samples = parse_metrics(fetch_metrics(server.metrics_url))
    assert (metric_sum(samples, "tessera_input_pool_batches_total", path="pooled") or 0) > 0

    # The new plan is live: requests after the switch were counted on the gpulets' batches.
    stats = server.client().get_inference_statistics("small_cnn")
    assert stats.model_stats[0].inference_stats.success.count > 0
    log = server.log_path.read_text()
    assert re.search(r"model 'small_cnn' now on gpulet \d+", log), server.log_tail_text()


def test_unschedulable_model_is_reported_and_still_served(make_server, tmp_path_factory):
    root = tmp_path_factory.mktemp("unschedulable")
    repository = copy_repository(root / "models")
    cfg = repository / "small_cnn" / "config.yaml"
    # Far below small_cnn's measured 0.29 ms for one request: no partition can meet it.
    cfg.write_text(re.sub(r"slo_ms: .*", "slo_ms: 0.01", cfg.read_text()))
    config = write_config(root / "server.yaml", repository)
    server = make_server(config=config, repository=repository, mode="none",
                         wait_models=("mlp", "small_cnn"))
    with RequestStream(server, ["small_cnn", "mlp"], threads_per_model=1, pause_s=0.01) as stream:
        wait_until(lambda: metric(server, "tessera_unschedulable_models") >= 1,
                   timeout=12 * EPOCH_S, interval=0.25, what="small_cnn reported unschedulable")
        index = {m.name: m for m in server.client().get_model_repository_index().models}
        assert "unschedulable" in index["small_cnn"].reason, index["small_cnn"]
        time.sleep(0.5)
    assert_outcomes_clean(stream)
    ok = [o for o in stream.snapshot() if o[2] == "small_cnn" and o[3] is None]
    assert ok, "small_cnn was not served while unschedulable"
    assert "unschedulable on 1 GPUs: small_cnn" in server.log_path.read_text() or \
        "unschedulable" in server.log_path.read_text()
