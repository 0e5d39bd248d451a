#!/usr/bin/env python3
"""Several CPU models served at once by one tessera-server, closed loop on every model together:
how the CPU executor shares its cores between runs of different models.

    .venv/bin/python bench/engine/concurrent_models.py [--models mobilenetv2,unet_tiny,resnet18]
        [--concurrency 1 2 4] [--rounds 2] [--duration-s 6]
        [--executor NAME=PATH ...] [--env NAME=VAR=VALUE ...] [--output results.md]

Each variant is a server started with its own executor binary (--executor, default the build's)
and environment additions (--env; the executors inherit the server's environment, so OpenMP
settings such as OMP_WAIT_POLICY reach them). Variants take turns, round after round, so they see
the same machine load; the table shows the median over rounds of the overall throughput and p50,
and of each model's throughput. Without --executor/--env the one variant is "current".

The models come from the model zoo (docs/model-zoo.md), exported into --zoo when missing.
"""

import argparse
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchlib  # noqa: E402


def parse_variants(args, build):
    variants = {}
    for item in args.executor:
        name, _, path = item.partition("=")
        if not path:
            benchlib.die(f"--executor {item}: expected NAME=PATH")
        variants.setdefault(name, {"executor": None, "env": {}})["executor"] = Path(path).resolve()
    for item in args.env:
        name, _, assignment = item.partition("=")
        var, _, value = assignment.partition("=")
        if not var or not _:
            benchlib.die(f"--env {item}: expected NAME=VAR=VALUE")
        variants.setdefault(name, {"executor": None, "env": {}})["env"][var] = value
    if not variants:
        variants["current"] = {"executor": None, "env": {}}
    for v in variants.values():
        v["executor"] = v["executor"] or benchlib.find_bin(build, "tessera-executor")
        if not Path(v["executor"]).is_file():
            benchlib.die(f"executor {v['executor']} not found")
    return variants


def make_repository(zoo, models, folder):
    for model in models:
        source = Path(zoo) / model
        target = Path(folder) / model
        target.mkdir(parents=True)
        shutil.copy(source / "config.yaml", target / "config.yaml")
        shutil.copytree(source / "1", target / "1")


def start_server(build, work, name, variant, port):
    config = Path(work) / f"{name}.yaml"
    config.write_text(f"executors:\n  binary: {variant['executor']}\n")
    env_prefix = [f"{k}={v}" for k, v in variant["env"].items()]
    server = benchlib.Server(
        name, ["env", *env_prefix, benchlib.find_bin(build, "tessera-server"),
               "--config", config, "--model-repository", Path(work) / "models",
               "--grpc-port", port, "--http-port", "-1", "--metrics-port", "0",
               "--model-control-mode", "none"], work)
    return server.start()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=str(benchlib.REPO / "build"))
    parser.add_argument("--zoo", default=str(benchlib.REPO / "build" / "zoo-bench"))
    parser.add_argument("--models", default="mobilenetv2,unet_tiny,resnet18")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4],
                        help="requests in flight per model")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration-s", type=float, default=6)
    parser.add_argument("--warmup-s", type=float, default=1)
    parser.add_argument("--executor", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VAR=VALUE")
    parser.add_argument("--output", help="also write the table (markdown) here")
    args = parser.parse_args()

    build = Path(args.build_dir)
    bench_bin = benchlib.find_bin(build, "tessera-bench")
    models = [m for m in args.models.split(",") if m]
    missing = [m for m in models if not (Path(args.zoo) / m / "1" / "model.onnx").is_file()]
    if missing:
        print(f"exporting {','.join(missing)} into {args.zoo} ...", flush=True)
        subprocess.run([str(benchlib.REPO / "scripts" / "make_zoo.sh"), "--out", args.zoo,
                        "--models", ",".join(missing)], check=True)
    variants = parse_variants(args, build)
    work = benchlib.temp_dir("tessera-concurrent-models-")
    make_repository(args.zoo, models, work / "models")

    results = {}  # (variant, concurrency) -> [report["runs"][0]] per round
    for r in range(args.rounds):
        for name, variant in variants.items():
            port = benchlib.free_port()
            url = f"127.0.0.1:{port}"
            server = start_server(build, work, name, variant, port)
            try:
                for model in models:
                    benchlib.wait_model(bench_bin, server, url, model)
                for c in args.concurrency:
                    model_args = [a for m in models for a in ("-m", m)]
                    report = benchlib.run_bench(
                        bench_bin, ["-u", url, *model_args, "--concurrency-range", c,
                                    "--warmup-s", args.warmup_s, "--duration-s", args.duration_s,
                                    "--seed", r + 1],
                        work / f"{name}-c{c}-{r}.json")
                    run = report["runs"][0]
                    if run["overall"]["error_count"] or run["overall"]["unfinished"]:
                        benchlib.die(f"{name} had errors at concurrency {c}: "
                                     f"{run['overall']['errors']}")
                    results.setdefault((name, c), []).append(run)
                    print(f"round {r + 1} {name} c{c}: "
                          f"{run['overall']['throughput']:.1f} req/s", flush=True)
            finally:
                server.stop()

    def median(name, c, pick):
        return statistics.median(pick(run) for run in results[(name, c)])

    per_model = " | ".join(f"{m} req/s" for m in models)
    lines = [
        "# Concurrent CPU models: one server, every model loaded at once",
        "",
        f"- date: {benchlib.today()}",
        f"- machine: {benchlib.machine_description()}",
        f"- commit: {benchlib.commit_id()}",
        f"- command: `{' '.join(sys.argv)}`",
        f"- load: tessera-bench closed loop on {', '.join(models)} together, the concurrency per "
        f"model; {args.rounds} round(s) of {args.duration_s:g} s per variant and level, variants "
        "taking turns; medians over rounds",
        "",
    ]
    for name, variant in variants.items():
        env = " ".join(f"{k}={v}" for k, v in variant["env"].items()) or "(none)"
        lines.append(f"- variant `{name}`: executor `{variant['executor']}`, environment {env}")
    lines += ["", f"| concurrency | variant | overall req/s | overall p50 ms | {per_model} |",
              "|---|---|---|---|" + "---|" * len(models)]
    for c in args.concurrency:
        for name in variants:
            cells = [f"{median(name, c, lambda run: run['overall']['throughput']):.1f}",
                     f"{median(name, c, lambda run: run['overall']['latency_ms']['p50']):.2f}"]
            for m in models:
                cells.append(f"{median(name, c, lambda run, m=m: _model(run, m)['throughput']):.1f}")
            lines.append(f"| {c} | {name} | " + " | ".join(cells) + " |")
    benchlib.emit(lines, args.output)


def _model(run, name):
    for entry in run["models"]:
        if entry["model"] == name:
            return entry
    benchlib.die(f"no model {name} in the report")


if __name__ == "__main__":
    main()
