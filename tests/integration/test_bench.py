"""tessera-bench against a real tessera-server: a ~2 s open-loop run over the bundled models plus a
model the server lacks. The JSON report must account for every request, show no errors where there
were none, and count the unknown model's requests as NOT_FOUND (never hide them). Bad set-ups
(unknown model without explicit inputs, unreachable server, broken scenario) fail with a message
naming the problem."""

import json

import pytest

from tessera_testlib import model_stats, run_bench

SCENARIO = """\
warmup_s: 0.5
duration_s: 1.5
drain_s: 10
seed: 3
models:
  - name: mlp
    slo_ms: 1000
    arrival: poisson
    rate: 80
  - name: small_cnn
    slo_ms: 1000
    arrival: uniform
    rate: 40
    batch_size: 2
  - name: no_such_model
    arrival: constant
    rate: 20
    inputs:
      - {name: input, datatype: FP32, shape: [1, 64]}
"""


def test_report_counts_every_request_and_shows_server_errors(server, client, tmp_path):
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    report_path = tmp_path / "report.json"
    before = {m: model_stats(client, m).inference_stats.success.count for m in ("mlp", "small_cnn")}
    r = run_bench("-s", scenario, "-u", server.url, "--json", report_path,
                  "--csv", tmp_path / "report.csv", "--timeline-csv", tmp_path / "timeline.csv")
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    report = json.loads(report_path.read_text())
    assert report["mode"] == "open" and len(report["runs"]) == 1
    run = report["runs"][0]
    models = {m["model"]: m for m in run["models"]}
    assert set(models) == {"mlp", "small_cnn", "no_such_model"}

    for name, rate in (("mlp", 80), ("small_cnn", 40)):
        m = models[name]
        # Everything scheduled in the window was sent and answered, without errors.
        assert m["intended"] > 0.5 * rate * 1.5, m
        assert m["sent"] == m["intended"] and m["ok"] == m["intended"], m
        assert m["error_count"] == 0 and m["errors"] == {}, m
        assert m["client_dropped"] == 0 and m["unfinished"] == 0, m
        lat = m["latency_ms"]
        assert lat["count"] == m["ok"]
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]
        assert m["throughput"] == pytest.approx(m["ok"] / m["window_s"], rel=1e-3)

    missing = models["no_such_model"]
    assert missing["intended"] == 30  # constant 20/s over 1.5 s
    assert missing["ok"] == 0
    assert missing["errors"] == {"NOT_FOUND": missing["intended"]}, missing
    assert missing["slo_violation_pct"] == 100
    overall = run["overall"]
    assert overall["error_count"] == missing["intended"]
    assert overall["intended"] == sum(m["intended"] for m in models.values())
    examples = [e for e in run["error_examples"] if e["model"] == "no_such_model"]
    assert examples and examples[0]["status"] == "NOT_FOUND"
    assert "no_such_model" in examples[0]["message"]
    # The human-readable output shows the errors too.
    assert "NOT_FOUND" in r.stdout and "ERRORS" in r.stdout
    assert "failed at the server" in r.stderr

    # The server saw at least what the bench counted as successes (warm-up requests included).
    for name in ("mlp", "small_cnn"):
        served = model_stats(client, name).inference_stats.success.count - before[name]
        assert served >= models[name]["ok"], (name, served, models[name]["ok"])
    assert (tmp_path / "report.csv").read_text().count("\n") == 1 + 4  # header + 3 models + overall
    assert (tmp_path / "timeline.csv").read_text().startswith("second,model,")


def test_fail_on_error_exit_code(server, tmp_path):
    r = run_bench("-u", server.url, "-m", "mlp", "--rate", "20", "--warmup-s", "0",
                  "--duration-s", "0.3", "--fail-on-error")
    assert r.returncode == 0, r.stderr
    scenario = tmp_path / "s.yaml"
    scenario.write_text("models:\n  - name: ghost\n    rate: 20\n"
                        "    inputs: [{name: input, datatype: FP32, shape: [1, 64]}]\n")
    r = run_bench("-s", scenario, "-u", server.url, "--warmup-s", "0", "--duration-s", "0.3",
                  "--fail-on-error")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "NOT_FOUND" in r.stdout


def test_bad_setups_are_named(server, tmp_path):
    r = run_bench("-u", server.url, "-m", "no_such_model", "--rate", "10")
    assert r.returncode == 1
    assert 'model "no_such_model"' in r.stderr and "NOT_FOUND" in r.stderr, r.stderr

    r = run_bench("-u", "127.0.0.1:1", "-m", "mlp", "--rate", "10", timeout=30)
    assert r.returncode == 1
    assert "cannot reach the server at 127.0.0.1:1" in r.stderr, r.stderr

    broken = tmp_path / "broken.yaml"
    broken.write_text("models:\n  - name: mlp\n    rate: 10\n    sloms: 5\n")
    r = run_bench("-s", broken, "-u", server.url)
    assert r.returncode == 1
    assert f"{broken}:4: models[0].sloms: unknown key" in r.stderr, r.stderr

    r = run_bench("-u", server.url, "-m", "mlp")
    assert r.returncode == 1 and "--rate" in r.stderr, r.stderr
