"""Triton's --metrics-config latency metrics on /metrics: quantile summaries
(nv_inference_*_summary_us, summary_latencies=true, custom summary_quantiles), the cumulative
counters turned off (counter_latencies=false), the same from the server YAML, and bad settings
stopping the start with the setting named. Also a model's metric_tags as "_<key>" labels."""
import shutil

import numpy as np
import pytest

from conftest import copy_repository
from tessera_testlib import (MODELS_DIR, fetch_metrics, infer, load_reference, metric_sum,
                             model_stats, parse_metrics, start_fails, wait_until)

INFERENCE_SUMMARIES = ("request", "queue", "compute_input", "compute_infer", "compute_output")


def summary_samples(samples, family, model):
    """{quantile: value} of one model's summary, and its _count and _sum."""
    quantiles = {lab["quantile"]: v for n, lab, v in samples
                 if n == family and lab.get("model") == model and "quantile" in lab}
    return (quantiles, metric_sum(samples, family + "_count", model=model),
            metric_sum(samples, family + "_sum", model=model))


def scrape_after(server, client, model, requests):
    """The metrics once they count every successful request of `model`."""
    def counted():
        samples = parse_metrics(fetch_metrics(server.metrics_url))
        wanted = model_stats(client, model).inference_stats.success.count
        count = metric_sum(samples, "nv_inference_request_summary_us_count", model=model)
        return wanted >= requests and count == wanted and samples
    return wait_until(counted, timeout=10, what=f"{model}'s summaries to count its requests")


def test_summaries_report_the_quantiles_asked_for(make_server):
    server = make_server(repository=MODELS_DIR, wait_models=["mlp"], extra_args=[
        "--metrics-config", "summary_latencies=true",
        "--metrics-config", "summary_quantiles=0.5:0.05,0.9:0.01,0.99:0.001"])
    client = server.client()
    x, _ = load_reference("mlp")
    for _ in range(40):
        infer(client, "mlp", x[:1])
    samples = scrape_after(server, client, "mlp", 40)
    stats = model_stats(client, "mlp").inference_stats
    for kind in INFERENCE_SUMMARIES:
        family = f"nv_inference_{kind}_summary_us"
        quantiles, count, total = summary_samples(samples, family, "mlp")
        assert set(quantiles) == {"0.5", "0.9", "0.99"}, (family, quantiles)
        assert count == stats.success.count, family
        # Each summary's sum is the same time as the ModelStatistics field it mirrors.
        field = "success" if kind == "request" else kind
        assert total == pytest.approx(getattr(stats, field).ns / 1e3, rel=1e-6, abs=1), family
        values = [quantiles[q] for q in ("0.5", "0.9", "0.99")]
        assert values == sorted(values), (family, values)
        assert 0 <= values[0] <= total, (family, values)
    request, _, request_sum = summary_samples(samples, "nv_inference_request_summary_us", "mlp")
    assert request["0.5"] > 0
    # No value is above the slowest request, and the sum bounds the slowest one.
    assert request["0.99"] <= request_sum
    # The counters stay on beside the summaries (counter_latencies defaults to true).
    assert metric_sum(samples, "nv_inference_request_duration_us", model="mlp") > 0
    # The other bundled models were not asked anything: their summaries count nothing yet.
    _, idle_count, _ = summary_samples(samples, "nv_inference_request_summary_us", "small_cnn")
    assert idle_count == 0


def test_counter_latencies_false_leaves_the_counts(make_server):
    server = make_server(repository=MODELS_DIR, wait_models=["mlp"],
                         extra_args=["--metrics-config", "counter_latencies=false"])
    client = server.client()
    x, _ = load_reference("mlp")
    infer(client, "mlp", x[:1])
    samples = wait_until(
        lambda: (lambda s: metric_sum(s, "nv_inference_request_success", model="mlp") == 1 and s)(
            parse_metrics(fetch_metrics(server.metrics_url))),
        timeout=10, what="the request to be counted")
    names = {name for name, _, _ in samples}
    for family in ("nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                   "nv_inference_compute_infer_duration_us", "nv_cache_num_hits_per_model"):
        assert family not in names, family
    assert "nv_inference_exec_count" in names and "nv_inference_count" in names
    assert not any("_summary_us" in name for name in names)  # summaries stay off by default


def test_server_yaml_turns_summaries_on(make_server, tmp_path):
    config = tmp_path / "server.yaml"
    config.write_text("metrics:\n  summary_latencies: true\n"
                      "  summary_quantiles: \"0.5:0.05, 0.999:0.001\"\n")
    server = make_server(repository=MODELS_DIR, wait_models=["mlp"], config=config)
    client = server.client()
    x, _ = load_reference("mlp")
    for _ in range(5):
        infer(client, "mlp", x[:1])
    samples = scrape_after(server, client, "mlp", 5)
    quantiles, count, _ = summary_samples(samples, "nv_inference_queue_summary_us", "mlp")
    assert set(quantiles) == {"0.5", "0.999"} and count == 5


def test_response_cache_summaries(make_server, tmp_path):
    repo = copy_repository(tmp_path / "models")
    shutil.copytree(repo / "mlp", repo / "mlp_cached")
    config = repo / "mlp_cached" / "config.yaml"
    config.write_text(config.read_text().replace("name: mlp", "name: mlp_cached")
                      + "response_cache:\n  enable: true\n")
    server = make_server(repository=repo, wait_models=["mlp_cached"], extra_args=[
        "--cache-config", "local,size=1048576", "--metrics-config", "summary_latencies=true"])
    client = server.client()
    x = np.ones((1, 64), np.float32)
    for _ in range(4):
        infer(client, "mlp_cached", x)  # one miss, then three hits
    samples = scrape_after(server, client, "mlp_cached", 4)
    _, hits, hit_sum = summary_samples(samples, "nv_cache_hit_summary_per_model", "mlp_cached")
    _, misses, _ = summary_samples(samples, "nv_cache_miss_summary_per_model", "mlp_cached")
    assert (hits, misses) == (3, 1)
    assert hit_sum > 0
    # A model the cache never looked up has no cache summaries.
    assert summary_samples(samples, "nv_cache_hit_summary_per_model", "mlp")[1] is None


@pytest.mark.parametrize("args, message", [
    (["--metrics-config", "summary_quantiles=0.5"], "no ':' between the quantile and its error"),
    (["--metrics-config", "summary_quantiles=1.5:0.01"], "between 0 and 1"),
    (["--metrics-config", "summary_quantiles=0.99:0.05"], "the error must be a number in (0, 0.01"),
    (["--metrics-config", "summary_quantiles=0.5:0.05,0.5:0.01"], "already listed"),
    (["--metrics-config", "summary_latencies=yes"], "summary_latencies must be true or false"),
    (["--metrics-config", "latency_histograms=true"], "unknown setting"),
    (["--metrics-config", "summary_latencies"], "expected <setting>=<value>"),
])
def test_bad_metrics_config_stops_the_start(args, message):
    out = start_fails(*args)
    assert message in out and "--metrics-config" in out, out


def test_bad_summary_quantiles_in_yaml_names_the_key(tmp_path):
    config = tmp_path / "server.yaml"
    config.write_text("metrics:\n  summary_quantiles: \"0.9:0\"\n")
    out = start_fails(config=config)
    assert "metrics.summary_quantiles" in out and "the error must be" in out, out


def test_metric_tags_label_the_models_series(make_server, tmp_path):
    repo = copy_repository(tmp_path / "models")
    config = repo / "mlp" / "config.yaml"
    config.write_text(config.read_text() + 'metric_tags: {team: vision, tier: "gold"}\n')
    server = make_server(repository=repo, wait_models=["mlp"],
                         extra_args=["--metrics-config", "summary_latencies=true"])
    client = server.client()
    x, _ = load_reference("mlp")
    infer(client, "mlp", x[:1])
    samples = scrape_after(server, client, "mlp", 1)
    tagged = {"model": "mlp", "_team": "vision", "_tier": "gold"}
    for family in ("nv_inference_request_success", "nv_inference_request_duration_us",
                   "nv_inference_request_summary_us_count", "nv_inference_request_failure"):
        assert metric_sum(samples, family, **tagged) is not None, family
    assert metric_sum(samples, "nv_inference_request_success", **tagged) == 1
    # Other models carry no tags.
    assert all("_team" not in labels for name, labels, _ in samples
               if labels.get("model") == "small_cnn")
    assert dict(client.get_model_config("mlp").config.metric_tags) == {"team": "vision",
                                                                        "tier": "gold"}
