#!/usr/bin/env python3
"""What tracing every request costs: the same tessera-bench load against three tessera-servers
serving an ONNX Identity model, runs interleaved: tracing off (the peer), Triton-mode JSON
tracing (--trace-level TIMESTAMPS, rate 1, written at stop) and OpenTelemetry-mode tracing
(rate 1, spans batched and POSTed to an OTLP/HTTP collector on this machine that takes each export
and drops it). Prints throughput and p50/p99 latency of each and their ratios to tracing off, and
how many spans the collector received.

Usage (from the repository root, after building tessera-server, tessera-executor, tessera-bench):
    .venv/bin/python bench/trace_overhead.py --build-dir build [--output bench/results/x.md]
"""

import argparse
import http.server
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402


class DiscardingCollector:
    """Answers every OTLP/HTTP export with 200 after reading it; counts bytes and exports."""

    def __init__(self):
        self.exports = 0
        self.bytes = 0
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the exporter's libcurl handle expects

            def do_POST(self):
                length = int(self.headers["Content-Length"])
                self.rfile.read(length)
                collector.exports += 1
                collector.bytes += length
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/traces"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    benchlib.add_closed_loop_args(p, concurrency=[1, 16, 64], channels=4, duration_s=4,
                                  devices="cpu")
    args = p.parse_args()

    build = Path(args.build_dir)
    bench_bin = benchlib.find_bin(build, "tessera-bench")
    work = benchlib.temp_dir("tessera-trace-overhead-")
    collector = DiscardingCollector()

    names = ("off", "triton", "otel")
    ports = {name: benchlib.free_port() for name in names}
    servers = {}
    for name in names:
        folder = work / name
        folder.mkdir()
        servers[name] = benchlib.identity_tessera_server(build, folder, args.dims, ports[name],
                                                         devices=args.devices)
    servers["triton"].command += ["--trace-level", "TIMESTAMPS", "--trace-rate", "1",
                                  "--trace-file", str(work / "triton" / "trace.json")]
    servers["otel"].command += ["--trace-config", "mode=opentelemetry",
                                "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1",
                                "--trace-config", f"opentelemetry,url={collector.url}",
                                "--trace-config", "opentelemetry,bsp_max_queue_size=65536",
                                "--trace-config", "opentelemetry,bsp_schedule_delay=200"]
    urls = {name: f"127.0.0.1:{ports[name]}" for name in names}
    try:
        for server in servers.values():
            server.start()
        for name in names:
            benchlib.wait_model(bench_bin, servers[name], urls[name], "identity")
        results = benchlib.interleaved_closed_loop(bench_bin, servers, urls, args, work)
    finally:
        for server in servers.values():
            server.stop()
    dropped = [line for line in servers["otel"].log_path.read_text(errors="replace").splitlines()
               if "OpenTelemetry traces:" in line]

    def med(name, c, key, sub=None):
        return benchlib.median_of(results, name, c, key, sub)

    lines = [
        "# Request tracing at rate 1: Triton-mode JSON and OpenTelemetry spans vs tracing off",
        "",
        f"- date: {benchlib.today()}",
        f"- machine: {benchlib.machine_description()}",
        f"- commit: {benchlib.commit_id()}",
        f"- command: `.venv/bin/python bench/trace_overhead.py --build-dir {args.build_dir} "
        f"--dims {' '.join(map(str, args.dims))} "
        f"--concurrency {' '.join(map(str, args.concurrency))} --channels {args.channels} "
        f"--duration-s {args.duration_s:g} --warmup-s {args.warmup_s:g} "
        f"--repeats {args.repeats} --devices {args.devices}`",
        f"- load: tessera-bench closed loop, one request = FP32 [1, {', '.join(map(str, args.dims))}]"
        f", {args.channels} gRPC connection(s), {args.repeats} interleaved runs per server and "
        f"level, medians shown; client, servers and the collector (Python, on this machine) "
        f"share the cores; identity model, one instance, executors.devices {args.devices}",
        f"- collector: {collector.exports} exports, {collector.bytes} bytes; the server's "
        f"own count: {dropped[0].split('] ', 1)[-1] if dropped else 'not logged'}",
        "",
        "| concurrency | metric | off | triton JSON | opentelemetry | JSON / off | OTel / off |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in args.concurrency:
        off, js, ot = (med(n, c, "throughput") for n in names)
        lines.append(f"| {c} | throughput (req/s) | {off:.0f} | {js:.0f} | {ot:.0f} | "
                     f"{js / off:.2f}x | {ot / off:.2f}x |")
        for key in ("p50", "p99"):
            off, js, ot = (med(n, c, "latency_ms", key) for n in names)
            lines.append(f"| {c} | {key} latency (ms) | {off:.3f} | {js:.3f} | {ot:.3f} | "
                         f"{js / off:.2f}x | {ot / off:.2f}x |")
    benchlib.emit(lines, args.output)


if __name__ == "__main__":
    main()
