#!/usr/bin/env python3
"""Reproduces seed 001's evaluation in tessera-sim and writes the results table (issue 4, item 7).

(a) Schedulability (seed 001 §5.2 Fig. 16): every rate combination of the nine Table 3 models at
    {0, 100, 200} rps (3^9 - 1 = 19,682 scenarios) on 4 GPUs, gpulet+int vs the exhaustive ideal;
    also on 3 and 2 GPUs, where the synthetic profiles are tight enough to tell the two apart.
(b) SLO-preserved max throughput (seed 001 §5.2 Fig. 13): peak search (>= 99 % of requests within
    SLO, Poisson arrivals, median of 3 runs) for game, traffic and scen1..scen5 on 4 GPUs,
    gpulet+int vs gpulet (no interference model) vs temporal (SBP) vs spatial (greedy) vs triton.
(c) Max schedulable rate (seed 001 Fig. 17): the planner alone, gpulet+int vs ideal+int.
(d) Planning time: planner_bench (9 models on 8 GPUs), when Google Benchmark was found.

Standard library only. Usage:
  python3 bench/sim/seed001_evaluation.py --build-dir build --out bench/results/<date>-sim-seed001.md
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKLOADS = ["game", "traffic", "scen1", "scen2", "scen3", "scen4", "scen5"]
SIM_POLICIES = ["gpulet+int", "gpulet", "temporal", "spatial", "triton"]
PLANNER_POLICIES = ["gpulet+int", "ideal+int", "temporal", "spatial"]


def run(cmd):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"command failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr}")
    return done.stdout


def peak_table(sim, args, policies, planner_only):
    cmd = [sim, "peak", *[f"bench/sim/workloads/{w}.yaml" for w in WORKLOADS],
           "--policies", ",".join(policies), "--runs", str(args.runs), "--json"]
    if planner_only:
        cmd += ["--planner-only"]
    else:
        cmd += ["--duration-s", str(args.duration_s)]
    key = "max_schedulable_rps" if planner_only else "peak_rps"
    table = {}
    for r in json.loads(run(cmd))["results"]:
        table[(r["workload"], r["policy"])] = r[key]
    return cmd, table


def ratio_stats(table, num, den):
    ratios = [table[(w, num)] / table[(w, den)] for w in WORKLOADS if table[(w, den)] > 0]
    return statistics.mean(ratios), statistics.median(ratios), ratios


def fmt_cmd(cmd):
    return " ".join(os.path.relpath(c, REPO) if c.startswith(REPO) else c for c in cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--out", required=True, help="markdown file to write")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration-s", type=float, default=30)
    ap.add_argument("--gpus", default="4,3,2", help="GPU counts for the schedulability study")
    args = ap.parse_args()
    build = os.path.abspath(args.build_dir)
    sim = os.path.join(build, "bin", "tessera-sim")
    if not os.path.exists(sim):
        sys.exit(f"{sim} not found: build it first (scripts/test.sh or cmake --build {args.build_dir})")
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                           capture_output=True, text=True).stdout.strip()
    started = time.time()
    out = []
    w = out.append
    w("# Seed 001 evaluation in tessera-sim (synthetic 2080 Ti profiles)\n")
    w(f"- date: {datetime.date.today().isoformat()}")
    w(f"- machine: {platform.system()} {platform.machine()}, {os.cpu_count()}-core CPU VM, no GPU "
      "(the simulator needs none)")
    w(f"- commit: {commit}{'-dirty' if dirty else ''}")
    w(f"- command: `python3 bench/sim/seed001_evaluation.py --build-dir {args.build_dir} "
      f"--out {os.path.relpath(os.path.abspath(args.out), REPO)} --runs {args.runs} "
      f"--duration-s {args.duration_s:g} --gpus {args.gpus}`")
    w("- profiles: `profiles/synthetic-2080ti` — SYNTHETIC, shaped like seed 001 Fig. 4, not "
      "measured; planners use the fitted `interference.yaml`, the simulator the ground truth "
      "`interference_truth.yaml` (the artifact's 2080 Ti coefficients) with 3 % latency jitter\n")

    # (a) schedulability
    w("## (a) Schedulability of the 19,682 rate scenarios (Fig. 16)\n")
    w("Nine models of seed 001 Table 3 with their SLOs, every rate combination of {0, 100, 200} "
      "rps except all-zero. A scenario is schedulable when the planner covers every model's rate "
      "within its SLO under its own latency and interference model (no simulation, as in the "
      "paper).\n")
    w("| GPUs | gpulet+int | ideal+int | only ideal | only gpulet | gpulet plan mean / p99 / max ms | ideal plan mean / p99 / max ms |")
    w("|---|---|---|---|---|---|---|")
    sched_cmds = []
    for g in [int(x) for x in args.gpus.split(",")]:
        cmd = [sim, "schedulability", "bench/sim/workloads/all9.yaml", "--policies",
               "gpulet+int,ideal+int", "--gpus", str(g)]
        sched_cmds.append(cmd)
        text = run(cmd)
        rows = {}
        both_line = ""
        for line in text.splitlines():
            parts = line.split()
            if parts and parts[0] in ("gpulet+int", "ideal+int") and len(parts) == 5:
                rows[parts[0]] = parts[1:]
            if line.startswith("both"):
                both_line = line
        # "both N, only gpulet+int N, only ideal+int N, neither N"
        only = {m.group(1): m.group(2) for m in re.finditer(r"only (\S+) (\d+)", both_line)}
        g_row, i_row = rows["gpulet+int"], rows["ideal+int"]
        w(f"| {g} | {g_row[0]} | {i_row[0]} | {only['ideal+int']} | {only['gpulet+int']} | "
          f"{' / '.join(g_row[1:])} | {' / '.join(i_row[1:])} |")
    w("\nCommands: " + "; ".join(f"`{fmt_cmd(c)}`" for c in sched_cmds) + "\n")

    # (b) simulated peak
    cmd_b, sim_table = peak_table(sim, args, SIM_POLICIES, planner_only=False)
    w("## (b) SLO-preserved max throughput, simulated (Fig. 13)\n")
    w("Total requests/s over the workload's models at which >= 99 % of requests finish within "
      f"their SLO; Poisson arrivals; each probe simulates {args.duration_s:g} s after 5 s warm-up; "
      f"median of {args.runs} searches; planners plan for the Poisson 99 % rate headroom; 4 GPUs.\n")
    w("| workload | " + " | ".join(SIM_POLICIES) + " | gpulet+int / temporal | gpulet+int / spatial |")
    w("|---" * (len(SIM_POLICIES) + 3) + "|")
    for wl in WORKLOADS:
        cells = [f"{sim_table[(wl, p)]:.0f}" for p in SIM_POLICIES]
        r_t = sim_table[(wl, "gpulet+int")] / sim_table[(wl, "temporal")]
        r_s = sim_table[(wl, "gpulet+int")] / sim_table[(wl, "spatial")]
        w(f"| {wl} | " + " | ".join(cells) + f" | {r_t:.2f}x | {r_s:.2f}x |")
    mean_t, med_t, _ = ratio_stats(sim_table, "gpulet+int", "temporal")
    mean_s, med_s, _ = ratio_stats(sim_table, "gpulet+int", "spatial")
    mean_b, med_b, _ = ratio_stats(sim_table, "gpulet+int", "gpulet")
    w(f"\ngpulet+int over temporal (SBP): mean of ratios {mean_t:.2f}x, median {med_t:.2f}x "
      "(target: >= 1.60x on average).  ")
    w(f"gpulet+int over spatial (greedy): mean {mean_s:.2f}x, median {med_s:.2f}x "
      "(target: >= 1.80x on average).  ")
    w(f"gpulet+int over gpulet without the interference model: mean {mean_b:.2f}x, "
      f"median {med_b:.2f}x (the paper: +7.5 %).\n")
    w(f"Command: `{fmt_cmd(cmd_b)}`\n")

    # (c) planner-only max rate vs ideal
    cmd_c, plan_table = peak_table(sim, args, PLANNER_POLICIES, planner_only=True)
    w("## (c) Max schedulable rate, planner only, vs the exhaustive ideal (Fig. 17)\n")
    w("| workload | " + " | ".join(PLANNER_POLICIES) + " | gpulet+int / ideal |")
    w("|---" * (len(PLANNER_POLICIES) + 2) + "|")
    for wl in WORKLOADS:
        cells = [f"{plan_table[(wl, p)]:.0f}" for p in PLANNER_POLICIES]
        w(f"| {wl} | " + " | ".join(cells) +
          f" | {plan_table[(wl, 'gpulet+int')] / plan_table[(wl, 'ideal+int')]:.3f} |")
    mean_i, _, ratios_i = ratio_stats(plan_table, "gpulet+int", "ideal+int")
    mean_pt, _, _ = ratio_stats(plan_table, "gpulet+int", "temporal")
    mean_ps, _, _ = ratio_stats(plan_table, "gpulet+int", "spatial")
    w(f"\ngpulet+int reaches {100 * mean_i:.1f} % of the ideal's max rate on average "
      f"(worst {100 * min(ratios_i):.1f} %; target >= 95 %, the paper 92.6 %); planner-only "
      f"ratios over temporal {mean_pt:.2f}x and spatial {mean_ps:.2f}x.\n")
    w(f"Command: `{fmt_cmd(cmd_c)}`\n")

    # (d) planning time
    bench = os.path.join(build, "bin", "planner_bench")
    w("## (d) Planning time (target < 10 ms for 9 models on 8 GPUs)\n")
    if os.path.exists(bench):
        text = run([bench, "--benchmark_min_time=0.5"])
        w("```")
        w("\n".join(l for l in text.splitlines() if l.startswith(("BM_", "planner_bench", "Benchmark"))))
        w("```")
        w(f"\nCommand: `{fmt_cmd([bench])}`\n")
    else:
        w("planner_bench was not built (Google Benchmark missing).\n")
    w(f"_Total wall time of this script: {time.time() - started:.0f} s._")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
