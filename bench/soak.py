#!/usr/bin/env python3
"""A long mixed load against one tessera-server: does its memory settle, or grow with what it
serves? The load is tests/integration/soak_load.py's (gRPC and HTTP inference, an ensemble,
streams, sequences (some abandoned to the idle timeout), client shared-memory regions registered
and unregistered, refused requests, requests whose client gives up first, a model loaded and
unloaded over and over, a new connection per request, statistics and /metrics reads), every
answer checked. After each window of load it samples the server's and its executors' resident
memory, open files, threads and memory maps, and prints them; at the end, how much each grew
from the end of the warm-up window to the last, per hour of load.

Usage (from the repository root, after building tessera-server and tessera-executor):
    .venv/bin/python bench/soak.py --build-dir build --duration-s 600 [--output bench/results/x.md]
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
import benchlib  # noqa: E402
import tritonclient.grpc as grpcclient  # noqa: E402
from soak_load import (MODELS, MutualTls, SoakLoad, build_repository,  # noqa: E402
                       server_resources, write_server_config)
from tessera_testlib import descendants  # noqa: E402

COLUMNS = ("server_rss_kib", "executors_rss_kib", "server_fds", "executors_fds", "server_threads",
           "executors_threads", "server_maps", "executors_maps", "executors", "dev_shm_objects")


class Endpoints:
    """The addresses SoakLoad asks a server for."""

    def __init__(self, grpc_port, http_port, metrics_port):
        self.url = f"127.0.0.1:{grpc_port}"
        self.http_url = f"127.0.0.1:{http_port}"
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"


def server_pid(started_pid):
    """The tessera-server process: the one started, or under --server-prefix its descendant."""
    for pid in [started_pid, *descendants(started_pid)]:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "tessera-server":
                return pid
        except OSError:
            continue
    benchlib.die(f"no tessera-server process under pid {started_pid}")


def wait_ready(server, url, tls, timeout_s=60):
    client = grpcclient.InferenceServerClient(url, **(tls.grpc_kwargs() if tls else {}))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        server.check_alive()
        try:
            if all(client.is_model_ready(m) for m in MODELS):
                return
        except Exception:  # not listening yet
            pass
        time.sleep(0.2)
    benchlib.die(f"models {MODELS} not ready after {timeout_s} s; log {server.log_path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--duration-s", type=float, default=600)
    parser.add_argument("--window-s", type=float, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--server-prefix", default="",
                        help="a command the server runs under, e.g. 'heaptrack -o /tmp/soak' "
                             "(with a build configured -DTESSERA_TCMALLOC=OFF: tcmalloc's "
                             "operator new bypasses heaptrack)")
    parser.add_argument("--tls", action="store_true",
                        help="both endpoints speak only mutual TLS and reload their certificate "
                             "files every second (throw-away certificates from tools/tls_certs.py)")
    parser.add_argument("--output")
    args = parser.parse_args()
    if args.duration_s < 2 * args.window_s:
        benchlib.die("--duration-s must hold at least two windows (the first is the warm-up)")

    work = benchlib.temp_dir("tessera-soak-")
    build_repository(work / "models")
    ports = [benchlib.free_port() for _ in range(3)]
    tls = MutualTls(work) if args.tls else None
    command = [*args.server_prefix.split(), benchlib.find_bin(args.build_dir, "tessera-server"),
               "--model-repository", work / "models", "--grpc-port", ports[0], "--http-port",
               ports[1], "--metrics-port", ports[2], "--model-control-mode", "explicit",
               "--cache-config", "local,size=1048576", "--allow-client-shm",
               "--config", write_server_config(work / "server.yaml", tls)]
    for model in MODELS:
        command += ["--load-model", model]
    server = benchlib.Server("tessera-server", command, work)
    benchlib.find_bin(args.build_dir, "tessera-executor")
    server.start()
    rows = []
    try:
        endpoints = Endpoints(*ports)
        wait_ready(server, endpoints.url, tls)
        pid = server_pid(server.proc.pid)
        load = SoakLoad(endpoints, seed=args.seed, tls=tls)
        started = time.monotonic()
        while time.monotonic() - started < args.duration_s:
            load.run(args.window_s)
            server.check_alive()
            sample = server_resources(pid)
            sample["minutes"] = (time.monotonic() - started) / 60
            sample["answers"] = load.tally.total_ok()
            sample["failures"] = load.tally.failure_count
            rows.append(sample)
            print(f"{sample['minutes']:6.1f} min  answers {sample['answers']:>9}  failures "
                  f"{sample['failures']}  " + "  ".join(f"{c} {sample.get(c, 0)}" for c in COLUMNS),
                  flush=True)
    finally:
        server.stop()

    warm, last = rows[0], rows[-1]
    refused = dict(sorted(load.tally.expected_errors.items()))
    lines = [
        "# Soak: a long mixed load against one tessera-server",
        "",
        f"- date: {benchlib.today()}",
        f"- machine: {benchlib.machine_description()}",
        f"- commit: {benchlib.commit_id()}",
        f"- command: `.venv/bin/python bench/soak.py --build-dir {args.build_dir} --duration-s "
        f"{args.duration_s:g} --window-s {args.window_s:g} --seed {args.seed}"
        + (f" --server-prefix '{args.server_prefix}'" if args.server_prefix else "")
        + (" --tls" if args.tls else "") + "`",
        f"- load: tests/integration/soak_load.py's ten workers, {len(rows)} windows of "
        f"{args.window_s:g} s; sampled after each window"
        + ("; both endpoints mutual TLS, certificate files reloaded every second"
           if args.tls else ""),
        f"- answers checked: {last['answers']}, failures: {last['failures']}, refused as asked: "
        f"{sum(refused.values())} {refused}",
        "",
        "| minutes | answers | " + " | ".join(COLUMNS) + " |",
        "|---" * (len(COLUMNS) + 2) + "|",
    ]
    for r in rows:
        lines.append(f"| {r['minutes']:.1f} | {r['answers']} | "
                     + " | ".join(str(r.get(c, 0)) for c in COLUMNS) + " |")
    middle = rows[len(rows) // 2]
    lines += ["", "Change over the first and the second half of the run (from the end of the first "
              "window, the warm-up, to the middle one, and from there to the last):", ""]
    for c in COLUMNS:
        lines.append(f"- {c}: {warm.get(c, 0)} -> {middle.get(c, 0)} -> {last.get(c, 0)} "
                     f"({middle.get(c, 0) - warm.get(c, 0):+d}, then "
                     f"{last.get(c, 0) - middle.get(c, 0):+d})")
    if last["failures"]:
        lines += ["", "Failures (first 20):", ""] + [f"- {f}" for f in load.tally.failures]
    benchlib.emit(lines, args.output)
    return 1 if last["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
