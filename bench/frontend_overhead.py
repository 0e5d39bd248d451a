#!/usr/bin/env python3
"""Frontend overhead: the same tessera-bench load against (a) tessera-server serving an ONNX Identity
model and (b) tessera-bare-server (bare grpc++, ModelInfer answers with a copy of the input), in one
run; prints Tessera's throughput and p50/p99 latency next to the bare server's, with the ratios.

Targets (issue 6): throughput >= 0.7x the bare server's, added median latency <= 100 us.

Usage (from the repository root, after building tessera-server, tessera-executor, tessera-bench and
tessera-bare-server):
    .venv/bin/python bench/frontend_overhead.py --build-dir build [--output bench/results/x.md]

Loads (each run `--repeats` times, servers interleaved, medians reported):
  closed loop, concurrency 1         -> unloaded latency (the "added median latency" figure)
  closed loop, concurrency 16..128   -> throughput; each server's throughput is its peak, the
                                        highest median over these levels (a closed-loop client
                                        only saturates a server whose latency it can cover with
                                        its requests in flight: the bare server peaks by 16, and
                                        Tessera, one process hop longer, needs more). The ratio
                                        at equal concurrency is in the table for every level.
The identity model has one instance, FP32 [1, --dims]; no dynamic batching unless --batching
(then max_queue_delay_microseconds 0: whatever is queued runs as one batch).

A third server, the bare one with --answer-thread (each response finished from a thread of its
own, not the gRPC thread that received the request), is measured alongside: the gap between the
two bare servers is what gRPC charges any server that answers asynchronously, Tessera included;
the gap from there to Tessera is Tessera's own queueing and executor IPC. The targets are judged
against the plain bare server, as the issue defines them.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    benchlib.add_closed_loop_args(p, concurrency=[1, 16, 32, 64, 128], channels=1, duration_s=5,
                                  devices="auto")
    p.add_argument("--batching", action="store_true",
                   help="give the identity model dynamic_batching (max_queue_delay 0): queued "
                        "requests run as one batch")
    p.add_argument("--machine", default=None, help="machine class for the header")
    args = p.parse_args()

    build = Path(args.build_dir)
    bench_bin = benchlib.find_bin(build, "tessera-bench")
    bare_bin = benchlib.find_bin(build, "tessera-bare-server")
    work = benchlib.temp_dir("tessera-overhead-")

    tessera_port, bare_port, async_port = (benchlib.free_port(), benchlib.free_port(),
                                           benchlib.free_port())
    dims = [str(d) for d in args.dims]
    names = ("bare", "bare-async", "tessera")
    servers = {
        "bare": benchlib.Server("tessera-bare-server",
                                [bare_bin, "--grpc-port", bare_port, "--model", "identity",
                                 "--dims", *dims], work),
        "bare-async": benchlib.Server("tessera-bare-server-answer-thread",
                                      [bare_bin, "--grpc-port", async_port, "--model", "identity",
                                       "--dims", *dims, "--answer-thread"], work),
        "tessera": benchlib.identity_tessera_server(build, work, args.dims, tessera_port,
                                                    args.batching, args.devices),
    }
    urls = {"bare": f"127.0.0.1:{bare_port}", "bare-async": f"127.0.0.1:{async_port}",
            "tessera": f"127.0.0.1:{tessera_port}"}
    try:
        for s in servers.values():
            s.start()
        for name in names:
            benchlib.wait_model(bench_bin, servers[name], urls[name], "identity")
        results = benchlib.interleaved_closed_loop(
            bench_bin, {name: servers[name] for name in names}, urls, args, work)
    finally:
        for s in servers.values():
            s.stop()

    def med(name, c, key, sub=None):
        return benchlib.median_of(results, name, c, key, sub)

    lines = [
        "# Frontend overhead: tessera-server (identity model) vs bare grpc++ server",
        "",
        f"- date: {benchlib.today()}",
        f"- machine: {args.machine or benchlib.machine_description()}",
        f"- commit: {benchlib.commit_id()}",
        f"- command: `.venv/bin/python bench/frontend_overhead.py --build-dir {args.build_dir} "
        f"--dims {' '.join(dims)} --concurrency {' '.join(map(str, args.concurrency))} "
        f"--channels {args.channels} --duration-s {args.duration_s:g} --warmup-s {args.warmup_s:g} "
        f"--repeats {args.repeats}"
        f"{' --batching' if args.batching else ''}"
        f"{'' if args.devices == 'auto' else ' --devices ' + args.devices}`",
        f"- load: tessera-bench closed loop, one request = FP32 [1, {', '.join(dims)}], "
        f"{args.channels} gRPC connection(s), {args.repeats} interleaved runs per server and level, "
        f"medians shown; client and server "
        f"share the machine; identity model "
        f"{'with dynamic batching (max_queue_delay 0)' if args.batching else 'without batching'}, "
        f"one instance",
        "",
        "| concurrency | metric | bare grpc++ | bare, answered from a thread | tessera | "
        "tessera / bare | tessera / bare answered from a thread |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in args.concurrency:
        tb, ta, tt = (med(n, c, "throughput") for n in names)
        rows = [("throughput (req/s)", tb, ta, tt, f"{tt / tb:.2f}x", f"{tt / ta:.2f}x")]
        for key, label in (("p50", "p50 latency (ms)"), ("p99", "p99 latency (ms)")):
            b, a, t = (med(n, c, "latency_ms", key) for n in names)
            rows.append((label, b, a, t, f"{t / b:.2f}x (+{(t - b) * 1000:.0f} us)",
                         f"{t / a:.2f}x (+{(t - a) * 1000:.0f} us)"))
        for label, b, a, t, ratio, ratio_async in rows:
            lines.append(f"| {c} | {label} | {b:.3f} | {a:.3f} | {t:.3f} | {ratio} | {ratio_async} |")
    # Throughput is each server's peak over the loaded levels (concurrency 1 only measures
    # 1/latency); added median latency is judged at the lowest level (no queueing in either).
    c_lo = min(args.concurrency)
    loaded = [c for c in args.concurrency if c > 1] or [max(args.concurrency)]

    def peak(name):
        return max((med(name, c, "throughput"), c) for c in loaded)

    (peak_t, c_t), (peak_b, c_b) = peak("tessera"), peak("bare")
    ratio = peak_t / peak_b
    added_us = (med("tessera", c_lo, "latency_ms", "p50") -
                med("bare", c_lo, "latency_ms", "p50")) * 1000
    verdicts = [
        f"peak throughput ({args.channels} client connection(s)): tessera {peak_t:.0f} req/s "
        f"(concurrency {c_t}), bare {peak_b:.0f} "
        f"req/s (concurrency {c_b}): {ratio:.2f}x bare "
        f"({'meets' if ratio >= 0.7 else 'MISSES'} the >= 0.7x target)",
        "throughput at equal concurrency: " + ", ".join(
            f"{c}: {med('tessera', c, 'throughput') / med('bare', c, 'throughput'):.2f}x"
            for c in loaded),
        f"added median latency at concurrency {c_lo}: {added_us:.0f} us "
        f"({'meets' if added_us <= 100 else 'MISSES'} the <= 100 us target)",
    ]
    lines += ["", "Targets (issue 6): throughput >= 0.7x bare, added median latency <= 100 us.", ""]
    lines += [f"- {v}" for v in verdicts]
    benchlib.emit(lines, args.output)


if __name__ == "__main__":
    main()
