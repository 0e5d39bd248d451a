#!/usr/bin/env python3
"""Per-thread CPU of tessera-server, its executors and the tessera-bench client under the frontend
overhead load (bench/frontend_overhead.py's identity model, closed loop): which thread is the
bottleneck when the machine has cores to spare. A thread near 100 % of a core caps throughput
however many cores there are; on a 2-core machine the cores run out first.

Reads utime+stime of every thread from /proc over a window inside the run (no perf needed, so it
runs on the GPU machines too: bench/gpu/frontend_overhead.sh --thread-cpu).

Usage: .venv/bin/python bench/frontend_thread_cpu.py --build-dir build [--concurrency 256]
           [--channels 4] [--batching] [--devices cpu] [--window-s 4]
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def thread_times(pid):
    """{(pid, tid): (name, cpu seconds)} for every thread of `pid`."""
    out = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended
        # comm may hold spaces and parentheses: fields start after the last ')'.
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[(pid, int(task.name))] = (name, (int(fields[11]) + int(fields[12])) / TICKS)
    return out


def children(pid):
    """Every descendant process of `pid` (executors are the server's children)."""
    found, unvisited = [], [pid]
    while unvisited:
        p = unvisited.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            found += kids
            unvisited += kids
    return found


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build-dir", default=str(benchlib.REPO / "build"))
    p.add_argument("--dims", type=int, nargs="+", default=[256])
    p.add_argument("--concurrency", type=int, default=256)
    p.add_argument("--channels", type=int, default=4)
    p.add_argument("--batching", action="store_true")
    p.add_argument("--devices", choices=["auto", "cpu", "gpu"], default="auto")
    p.add_argument("--warmup-s", type=float, default=2)
    p.add_argument("--window-s", type=float, default=4)
    p.add_argument("--output", help="also write the table (markdown) here")
    args = p.parse_args()

    build = Path(args.build_dir)
    bench_bin = benchlib.find_bin(build, "tessera-bench")
    work = benchlib.temp_dir("tessera-thread-cpu-")
    port = benchlib.free_port()
    url = f"127.0.0.1:{port}"
    server = benchlib.identity_tessera_server(build, work, args.dims, port, args.batching,
                                              args.devices)
    try:
        server.start()
        benchlib.wait_model(bench_bin, server, url, "identity")
        duration = args.warmup_s + args.window_s + 1
        client = subprocess.Popen(
            [str(bench_bin), "-u", url, "-m", "identity", "--concurrency-range",
             str(args.concurrency), "--channels", str(args.channels), "--warmup-s", "0",
             "--duration-s", str(duration), "--progress", "off", "--json", str(work / "b.json")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(args.warmup_s)
        roles = {server.proc.pid: "tessera-server", client.pid: "tessera-bench"}
        roles.update({pid: "executor" for pid in children(server.proc.pid)})
        pids = list(roles)

        def sample():
            times = {}
            for pid in pids:
                times.update(thread_times(pid))
            return time.monotonic(), times

        t0, before = sample()
        time.sleep(args.window_s)
        t1, after = sample()
        if client.wait(timeout=duration + 30) != 0:
            benchlib.die(f"tessera-bench exited with {client.returncode}")
        server.check_alive()
    finally:
        server.stop()
    report = json.loads((work / "b.json").read_text())
    rate = report["runs"][0]["overall"]["throughput"]

    # Threads of one name in one process are summed (gRPC and worker pools), with the busiest one.
    groups = collections.OrderedDict()
    for key, (name, cpu) in after.items():
        used = (cpu - before.get(key, (name, 0.0))[1]) / (t1 - t0)
        g = groups.setdefault((key[0], name), [0.0, 0.0, 0])
        g[0] += used
        g[1] = max(g[1], used)
        g[2] += 1
    lines = [
        "# Per-thread CPU under the frontend overhead load",
        "",
        f"- date: {benchlib.today()}; machine: {benchlib.machine_description()}; "
        f"commit: {benchlib.commit_id()}",
        f"- load: tessera-bench closed loop, concurrency {args.concurrency}, {args.channels} "
        f"connection(s), identity FP32 [1, {', '.join(map(str, args.dims))}]"
        f"{', dynamic batching' if args.batching else ''}, devices {args.devices}; "
        f"{rate:.0f} req/s over the run",
        "",
        "| process | thread name | threads | CPU, all (cores) | busiest thread (% of a core) | "
        "µs per request |",
        "|---|---|---|---|---|---|",
    ]
    totals = collections.Counter()
    for (pid, name), (total, busiest, count) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
        totals[pid] += total
        if total < 0.005:
            continue
        lines.append(f"| {roles[pid]} | {name} | {count} | {total:.2f} | "
                     f"{100 * busiest:.0f} | {1e6 * total / rate:.1f} |")
    lines.append("")
    for pid, total in totals.items():
        lines.append(f"- {roles[pid]} ({pid}): {total:.2f} cores, "
                     f"{1e6 * total / rate:.1f} µs per request")
    benchlib.emit(lines, args.output)


if __name__ == "__main__":
    main()
