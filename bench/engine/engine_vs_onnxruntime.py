#!/usr/bin/env python3
"""Tessera's CPU engine against onnxruntime on the same ONNX files, threads and input shapes.

Run with the project's virtualenv (it has onnxruntime and numpy):

    .venv/bin/python bench/engine/engine_vs_onnxruntime.py [--models resnet18,resnet50,...]
        [--batches 1,8] [--threads N] [--iterations 20] [--out results.md]

The models come from the model zoo (docs/model-zoo.md); missing ones are exported first with
scripts/make_zoo.sh into --zoo (default build/zoo-bench). For every (model, batch) the engine
(build/bin/tessera-engine-bench, a subprocess) and onnxruntime (in this process) run back to back,
so both see the same machine load. Reported: median latency of each, and speed = onnxruntime's
latency / the engine's (> 1: the engine is faster). The issue's CPU target is speed >= 0.5.
"""

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = 0.5


def ort_inputs(session, batch, seq_dynamic, rng):
    feeds = {}
    for info in session.get_inputs():
        shape = [batch if i == 0 else (d if isinstance(d, int) else seq_dynamic)
                 for i, d in enumerate(info.shape)]
        if info.type == "tensor(float)":
            feeds[info.name] = rng.standard_normal(shape).astype(np.float32)
        elif info.type == "tensor(float16)":  # a model.half() export
            feeds[info.name] = rng.standard_normal(shape).astype(np.float16)
        elif info.type == "tensor(int64)":
            # Token ids and attention masks alike: values in [0, 2), as tessera-engine-bench uses.
            feeds[info.name] = rng.integers(0, 2, size=shape).astype(np.int64)
        else:
            raise SystemExit(f"input {info.name}: type {info.type} is not handled by this script")
    return feeds


def time_ort(session, feeds, warmup, iterations):
    for _ in range(warmup):
        session.run(None, feeds)
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        session.run(None, feeds)
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


# --openmp-spin: the engine's OpenMP workers spin briefly between parallel regions, as
# onnxruntime's own pool does by default, instead of the executor's default PASSIVE wait
# (docs/engine.md, "Threads").
SPIN_ENV = {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "1000"}


def time_tessera(bench, model, batch, threads, warmup, iterations, env=None, extra=()):
    cmd = [bench, "--model", model, "--batches", str(batch), "--threads", str(threads),
           "--warmup", str(warmup), "--iterations", str(iterations), *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    match = re.search(r"median_ms=([0-9.]+)", out.stdout)
    if match is None:
        raise SystemExit(f"no median in tessera-engine-bench output:\n{out.stdout}")
    return float(match.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--zoo", default=os.path.join(REPO, "build", "zoo-bench"))
    parser.add_argument("--models", default="resnet18,resnet50,mobilenetv2,bert_base")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    # The engine's first runs with a shape plan memory and time each node on and off the pool.
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--bench", default=os.path.join(REPO, "build", "bin", "tessera-engine-bench"))
    parser.add_argument("--out", help="also write the table as Markdown to this file")
    parser.add_argument("--openmp-spin", action="store_true",
                        help="run the engine with OMP_WAIT_POLICY=ACTIVE GOMP_SPINCOUNT=1000 "
                             "(default: its PASSIVE wait)")
    parser.add_argument("--no-node-tuning", action="store_true",
                        help="run every engine node on every thread, without the per-node choice "
                             "of the pool or the calling thread alone")
    parser.add_argument("--also", action="append", default=[], metavar="NAME=PATH",
                        help="also time this tessera-engine-bench binary (another build, e.g. "
                             "an older commit's) in the same loop; adds a column per build")
    args = parser.parse_args()
    engine_extra = ["--no-node-tuning"] if args.no_node_tuning else []
    also = []
    for item in args.also:
        name, _, path = item.partition("=")
        if not path or not os.access(path, os.X_OK):
            raise SystemExit(f"--also {item}: expected NAME=PATH to an executable")
        also.append((name, path))
    engine_env = {**os.environ, **SPIN_ENV} if args.openmp_spin else None

    models = args.models.split(",")
    batches = [int(b) for b in args.batches.split(",")]
    if not os.access(args.bench, os.X_OK):
        raise SystemExit(f"{args.bench} not found: build it (cmake --build build --target "
                         "tessera-engine-bench)")
    missing = [m for m in models if not os.path.exists(os.path.join(args.zoo, m, "1", "model.onnx"))]
    if missing:
        print(f"exporting {','.join(missing)} into {args.zoo} ...", flush=True)
        subprocess.run([os.path.join(REPO, "scripts", "make_zoo.sh"), "--out", args.zoo,
                        "--models", ",".join(missing)], check=True)

    rng = np.random.default_rng(7)
    rows = []
    header = (f"CPU engine vs onnxruntime {ort.__version__}, {args.threads} thread(s), "
              f"median of {args.iterations} runs after {args.warmup} warm-up; "
              f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; engine "
              f"OpenMP wait {'ACTIVE, GOMP_SPINCOUNT=1000' if args.openmp_spin else 'PASSIVE'}"
              f"{', no node tuning' if args.no_node_tuning else ''}")
    print(header)
    print(f"{'model':<14}{'batch':>6}{'tessera ms':>12}{'onnxruntime ms':>16}{'speed':>8}  target"
          + "".join(f"{name + ' ms':>16}" for name, _ in also))
    for model in models:
        path = os.path.join(args.zoo, model, "1", "model.onnx")
        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        for batch in batches:
            feeds = ort_inputs(session, batch, 1, rng)
            others = [time_tessera(bench, path, batch, args.threads, args.warmup,
                                   args.iterations, engine_env, engine_extra)
                      for _, bench in also]
            ours = time_tessera(args.bench, path, batch, args.threads, args.warmup, args.iterations,
                                engine_env, engine_extra)
            theirs = time_ort(session, feeds, args.warmup, args.iterations)
            speed = theirs / ours
            verdict = "ok" if speed >= TARGET else "MISSED"
            rows.append((model, batch, ours, theirs, speed, verdict, others))
            print(f"{model:<14}{batch:>6}{ours:>12.2f}{theirs:>16.2f}{speed:>8.2f}  "
                  f">= {TARGET}: {verdict}" + "".join(f"{ms:>16.2f}" for ms in others), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"{header}\n\n| model | batch | tessera ms | onnxruntime ms | "
                    "speed (ort/tessera) |" + "".join(f" {name} ms |" for name, _ in also) + "\n")
            f.write("|---|---|---|---|---|" + "---|" * len(also) + "\n")
            for model, batch, ours, theirs, speed, _, others in rows:
                f.write(f"| {model} | {batch} | {ours:.2f} | {theirs:.2f} | {speed:.2f} |"
                        + "".join(f" {ms:.2f} |" for ms in others) + "\n")
    return 0 if all(r[5] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
