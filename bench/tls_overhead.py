#!/usr/bin/env python3
"""What TLS costs on the gRPC endpoint: the same tessera-bench load against two tessera-servers
serving an ONNX Identity model, one plaintext and one with grpc.tls (a P-256 certificate from
tools/tls_certs.py), runs interleaved; prints throughput and p50/p99 latency of both and the
TLS/plaintext ratios. Plaintext Tessera is the peer.

Usage (from the repository root, after building tessera-server, tessera-executor, tessera-bench):
    .venv/bin/python bench/tls_overhead.py --build-dir build [--output bench/results/x.md]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import benchlib  # noqa: E402
from tls_certs import make_ca, make_leaf  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    benchlib.add_closed_loop_args(p, concurrency=[1, 16, 64], channels=4, duration_s=4,
                                  devices="cpu")
    args = p.parse_args()

    build = Path(args.build_dir)
    bench_bin = benchlib.find_bin(build, "tessera-bench")
    work = benchlib.temp_dir("tessera-tls-overhead-")
    ca = make_ca(work, "ca")
    leaf = make_leaf(work, "server", ca)

    names = ("plain", "tls")
    ports = {name: benchlib.free_port() for name in names}
    servers = {}
    for name in names:
        folder = work / name
        folder.mkdir()
        servers[name] = benchlib.identity_tessera_server(build, folder, args.dims, ports[name],
                                                         devices=args.devices)
    servers["tls"].command += ["--grpc-server-cert", str(leaf.cert),
                               "--grpc-server-key", str(leaf.key)]
    urls = {name: f"127.0.0.1:{ports[name]}" for name in names}
    client_tls = {"plain": [], "tls": ["--ssl-grpc-use-ssl", "--ssl-grpc-root-certifications-file",
                                       str(ca.cert)]}
    try:
        for server in servers.values():
            server.start()
        for name in names:
            benchlib.wait_model(bench_bin, servers[name], urls[name], "identity",
                                extra_args=client_tls[name])
        results = benchlib.interleaved_closed_loop(bench_bin, servers, urls, args, work,
                                                   extra_args=client_tls)
    finally:
        for server in servers.values():
            server.stop()

    def med(name, c, key, sub=None):
        return benchlib.median_of(results, name, c, key, sub)

    dims = " ".join(map(str, args.dims))
    lines = [
        "# TLS on the gRPC endpoint: tessera-server with grpc.tls vs plaintext",
        "",
        f"- date: {benchlib.today()}",
        f"- machine: {benchlib.machine_description()}",
        f"- commit: {benchlib.commit_id()}",
        f"- command: `.venv/bin/python bench/tls_overhead.py --build-dir {args.build_dir} "
        f"--dims {dims} --concurrency {' '.join(map(str, args.concurrency))} "
        f"--channels {args.channels} --duration-s {args.duration_s:g} "
        f"--warmup-s {args.warmup_s:g} --repeats {args.repeats} --devices {args.devices}`",
        f"- load: tessera-bench closed loop, one request = FP32 [1, {', '.join(map(str, args.dims))}]"
        f", {args.channels} gRPC connection(s), {args.repeats} interleaved runs per server and "
        f"level, medians shown; client and servers share the machine; identity model, one "
        f"instance, executors.devices {args.devices}",
        "",
        "| concurrency | metric | plaintext | TLS | TLS / plaintext |",
        "|---|---|---|---|---|",
    ]
    for c in args.concurrency:
        plain, tls = med("plain", c, "throughput"), med("tls", c, "throughput")
        lines.append(f"| {c} | throughput (req/s) | {plain:.0f} | {tls:.0f} | {tls / plain:.2f}x |")
        for key in ("p50", "p99"):
            plain, tls = med("plain", c, "latency_ms", key), med("tls", c, "latency_ms", key)
            lines.append(f"| {c} | {key} latency (ms) | {plain:.3f} | {tls:.3f} | "
                         f"{tls / plain:.2f}x ({(tls - plain) * 1000:+.0f} us) |")
    benchlib.emit(lines, args.output)


if __name__ == "__main__":
    main()
