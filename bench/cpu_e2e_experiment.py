#!/usr/bin/env python3
"""First end-to-end experiment (CPU): several small models at mixed open-loop rates with SLOs,
Tessera's current policy versus a plain per-model FIFO baseline, judged by SLO goodput.

  policy    the server as configured (scheduler.policy triton: per-model queues with dynamic
            batching, the bundled configs' max_queue_delay_microseconds 2000, max_batch_size 8)
  fifo      the same server and models with dynamic batching removed from every model config: each
            request runs alone, in arrival order, per model

Both model repositories are made by this script in a temporary folder from configs/models (plus an
ONNX Identity model), so nothing is edited by hand. For each configuration it runs
  1. the scenario at its nominal rates (one run, --duration-s), and
  2. a peak search: the highest factor on all rates with <= 1 % SLO violations (median of
     --repeats runs per probe), as seed 001 §5.4 does.
Usage (repository root, binaries built):
    .venv/bin/python bench/cpu_e2e_experiment.py --build-dir build --output-dir bench/results/DIR
It writes results.md (command, machine, commit, tables), the JSON reports, and one SVG (latency CDF
and goodput over time) per configuration at nominal rates.
"""

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

# name, arrival, nominal rate (req/s), SLO (ms). The SLOs are tight for a 2-core CPU on purpose:
# batching has to pay off within them.
MODELS = [
    ("mlp", "poisson", 600, 10),
    ("small_cnn", "poisson", 300, 25),
    ("identity", "uniform", 200, 5),
]


def make_repository(dest, batching):
    dest.mkdir(parents=True)
    for name in ("mlp", "small_cnn"):
        shutil.copytree(benchlib.REPO / "configs" / "models" / name, dest / name)
        if not batching:
            config = dest / name / "config.yaml"
            lines = config.read_text().splitlines(keepends=True)
            kept, skipping = [], False
            for line in lines:
                if line.startswith("dynamic_batching:"):
                    skipping = True
                    continue
                if skipping and line.startswith(" "):
                    continue
                skipping = False
                kept.append(line)
            config.write_text("".join(kept))
            assert "dynamic_batching" not in config.read_text()
    benchlib.write_identity_model(dest / "identity", [256], batching=batching)


def scenario_yaml(duration_s, warmup_s, seed):
    lines = [f"warmup_s: {warmup_s}", f"duration_s: {duration_s}", "drain_s: 10",
             "request_timeout_s: 5", f"seed: {seed}", "models:"]
    for name, arrival, rate, slo in MODELS:
        lines += [f"  - name: {name}", f"    arrival: {arrival}", f"    rate: {rate}",
                  f"    slo_ms: {slo}"]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build-dir", default=str(benchlib.REPO / "build"))
    p.add_argument("--output-dir", required=True)
    p.add_argument("--duration-s", type=float, default=10)
    p.add_argument("--warmup-s", type=float, default=2)
    p.add_argument("--peak-duration-s", type=float, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--machine", default=None)
    args = p.parse_args()

    build = Path(args.build_dir)
    bench_bin = benchlib.find_bin(build, "tessera-bench")
    server_bin = benchlib.find_bin(build, "tessera-server")
    benchlib.find_bin(build, "tessera-executor")
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    work = benchlib.temp_dir("tessera-e2e-")
    scenario = out / "scenario.yaml"
    scenario.write_text(scenario_yaml(args.duration_s, args.warmup_s, 1))
    commit = benchlib.commit_id()

    results = {}
    for config, batching in (("policy", True), ("fifo", False)):
        repo = work / config
        make_repository(repo, batching)
        port = benchlib.free_port()
        url = f"127.0.0.1:{port}"
        server = benchlib.Server(f"tessera-server-{config}",
                                 [server_bin, "--model-repository", repo, "--grpc-port", port,
                                  "--metrics-port", "0", "--http-port", "-1", "--model-control-mode", "none"], work)
        try:
            server.start()
            for name, *_ in MODELS:
                benchlib.wait_model(bench_bin, server, url, name)
            nominal = benchlib.run_bench(
                bench_bin, ["-s", scenario, "-u", url, "--commit", commit,
                            "--requests-csv", out / f"{config}-nominal.requests.csv",
                            "--timeline-csv", out / f"{config}-nominal.timeline.csv"],
                out / f"{config}-nominal.json")
            server.check_alive()
            peak = benchlib.run_bench(
                bench_bin, ["-s", scenario, "-u", url, "--commit", commit, "--peak-search",
                            "--peak-repeats", args.repeats, "--duration-s", args.peak_duration_s,
                            "--warmup-s", 1, "--peak-tolerance", 0.05],
                out / f"{config}-peak.json")
            server.check_alive()
        finally:
            server.stop()
        results[config] = (nominal, peak)
        slos = [f"--slo={n}={s}" for n, _, _, s in MODELS]
        subprocess.run([sys.executable, str(Path(__file__).parent / "plot_report.py"),
                        "--requests", out / f"{config}-nominal.requests.csv",
                        "--timeline", out / f"{config}-nominal.timeline.csv",
                        "--title", f"{config} (nominal rates)", *slos,
                        "-o", out / f"{config}-nominal.svg"], check=True)
        # The per-request CSV is large and the SVG shows it; keep the timeline only.
        (out / f"{config}-nominal.requests.csv").unlink()

    cmd = (f".venv/bin/python bench/cpu_e2e_experiment.py --build-dir {args.build_dir} "
           f"--output-dir {args.output_dir} --duration-s {args.duration_s:g} "
           f"--warmup-s {args.warmup_s:g} --peak-duration-s {args.peak_duration_s:g} "
           f"--repeats {args.repeats}")
    lines = [
        "# CPU end-to-end experiment: Tessera's policy (dynamic batching) vs per-model FIFO",
        "",
        f"- date: {benchlib.today()}",
        f"- machine: {args.machine or benchlib.machine_description()}",
        f"- commit: {commit}",
        f"- command: `{cmd}`",
        "- scenario: [scenario.yaml](scenario.yaml) — "
        + ", ".join(f"{n} {a} {r}/s SLO {s} ms" for n, a, r, s in MODELS),
        "- policy = bundled configs (dynamic batching, max_queue_delay 2000 us for mlp/small_cnn, "
        "0 for identity; max_batch_size 8); fifo = same models, dynamic_batching removed",
        "- one tessera-server with one CPU executor; tessera-bench runs on the same 2 cores",
        "",
        f"## Nominal rates ({args.duration_s:g} s measured after {args.warmup_s:g} s warm-up)",
        "",
        "| config | model | target/s | throughput/s | goodput/s | SLO viol. % | p50 ms | p99 ms | "
        "p99.9 ms | errors | late sends |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for config, (nominal, _) in results.items():
        run = nominal["runs"][0]
        for m in run["models"] + [run["overall"]]:
            lat = m["latency_ms"]
            errors = ", ".join(f"{k} {v}" for k, v in m["errors"].items()) or "0"
            if m["client_dropped"] or m["unfinished"]:
                errors += f" (+{m['client_dropped']} dropped, {m['unfinished']} unfinished)"
            lines.append(
                f"| {config} | {m['model']} | {m['intended_rate']:.0f} | {m['throughput']:.0f} | "
                f"{m['goodput']:.0f} | {m['slo_violation_pct']:.2f} | {lat['p50']:.2f} | "
                f"{lat['p99']:.2f} | {lat['p99.9']:.2f} | {errors} | {m['late_sends']} |")
    lines += ["", f"## Peak search (<= 1 % SLO violations overall; median of {args.repeats} runs "
              f"per probe, {args.peak_duration_s:g} s each)", "",
              "| config | peak factor | failing factor | peak total rate/s | probes |",
              "|---|---|---|---|---|"]
    total_rate = sum(r for _, _, r, _ in MODELS)
    for config, (_, peak) in results.items():
        ps = peak["peak_search"]
        probes = "; ".join(f"x{pr['factor']:.3g}: {pr['median_pct']:.2f}%" for pr in ps["probes"])
        lines.append(f"| {config} | {ps['peak_factor']:.3g} | {ps['failing_factor']:.3g} | "
                     f"{ps['peak_factor'] * total_rate:.0f} | {probes} |")
    pol = results["policy"][1]["peak_search"]["peak_factor"]
    fifo = results["fifo"][1]["peak_search"]["peak_factor"]
    if fifo > 0:
        lines += ["", f"Peak SLO-compliant load, policy / fifo: **{pol / fifo:.2f}x**."]
    lines += ["", "Plots (latency CDF, goodput over time at nominal rates): "
              "[policy](policy-nominal.svg), [fifo](fifo-nominal.svg)."]
    text = "\n".join(lines) + "\n"
    (out / "results.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
