"""Helpers shared by the benchmark scripts in bench/: start servers on free ports, wait for them,
run tessera-bench and read its JSON report, name the machine and the commit.

Standard library only (tritonclient is not needed: readiness is checked by tessera-bench's own
connection attempt plus the server's log line / a ModelMetadata probe via tessera-bench itself)."""

import datetime
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def die(message):
    print(f"{Path(sys.argv[0]).name}: error: {message}", file=sys.stderr)
    sys.exit(1)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_bin(build_dir, name):
    path = Path(build_dir) / "bin" / name
    if not path.is_file():
        die(f"{path} not found: build it first (cmake --build {build_dir} --target {name})")
    return path


def commit_id():
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return out + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine_description():
    cpu = platform.processor() or "cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    # The cores this process may run on (taskset narrows them), of the machine's.
    usable = len(os.sched_getaffinity(0))
    cores = f"{usable} cores" if usable == os.cpu_count() else f"{usable} of {os.cpu_count()} cores"
    return f"{cores} ({cpu}), {platform.system()} {platform.release()}"


def today():
    return datetime.date.today().isoformat()


class Server:
    """A server process in its own process group, killed (with its children) on stop()."""

    def __init__(self, name, command, log_dir):
        self.name = name
        self.command = [str(c) for c in command]
        self.log_path = Path(log_dir) / f"{name}.log"
        self.proc = None

    def start(self):
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.command, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=str(REPO),
                                     start_new_session=True)
        return self

    def check_alive(self):
        if self.proc.poll() is not None:
            die(f"{self.name} exited with code {self.proc.returncode}; log {self.log_path}:\n"
                + self.log_path.read_text(errors="replace")[-3000:])

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=20)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        if self.proc:
            self.log.close()


def wait_model(bench_bin, server, url, model, timeout=60, extra_args=()):
    """Waits until `model` answers ModelMetadata at `url` (a 1-request tessera-bench run, with
    `extra_args` such as the TLS flags)."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        server.check_alive()
        r = subprocess.run([str(bench_bin), "-u", url, "-m", model, "--concurrency-range", "1",
                            "--warmup-s", "0", "--duration-s", "0.05", "--progress", "off",
                            "--fail-on-error", *map(str, extra_args)],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
        time.sleep(0.5)
    die(f"{server.name}: model {model} not ready at {url} after {timeout} s (last: {last})")


def run_bench(bench_bin, args, json_path):
    """Runs tessera-bench with `args` and returns its JSON report."""
    cmd = [str(bench_bin), *map(str, args), "--json", str(json_path), "--progress", "off"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"tessera-bench failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    with open(json_path) as f:
        return json.load(f)


def interleaved_closed_loop(bench_bin, servers, urls, args, work, extra_args=None, model="identity"):
    """Closed-loop runs of `model` at each of args.concurrency, args.repeats times, the servers
    (name -> Server, urls name -> host:port) taking turns; extra_args: name -> more tessera-bench
    flags. Returns {(name, concurrency): [overall summary per run]}; a run with errors or
    unfinished requests stops the benchmark."""
    results = {}
    for c in args.concurrency:
        for r in range(args.repeats):
            for name, server in servers.items():
                server.check_alive()
                report = run_bench(
                    bench_bin,
                    ["-u", urls[name], "-m", model, "--concurrency-range", c,
                     "--warmup-s", args.warmup_s, "--duration-s", args.duration_s,
                     "--channels", args.channels, "--seed", r + 1,
                     *((extra_args or {}).get(name, ()))],
                    Path(work) / f"{name}-c{c}-{r}.json")
                overall = report["runs"][0]["overall"]
                if overall["error_count"] or overall["unfinished"]:
                    die(f"{name} had errors at concurrency {c}: {overall['errors']}")
                results.setdefault((name, c), []).append(overall)
    return results


def write_identity_model(folder, dims, max_batch_size=8, batching=False):
    """An ONNX Identity model in `folder` (a model repository entry): input/output FP32
    [batch] + dims. Needs the `onnx` package (in the project's .venv)."""
    try:
        import onnx
        from onnx import TensorProto, helper
    except ImportError:
        die("the onnx package is missing: run this script with .venv/bin/python "
            "(scripts/install_deps.sh makes it)")
    folder = Path(folder)
    (folder / "1").mkdir(parents=True, exist_ok=True)
    shape = ["batch", *dims]
    graph = helper.make_graph(
        [helper.make_node("Identity", ["input"], ["output"])], "identity",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "1" / "model.onnx"))
    dims_text = ", ".join(str(d) for d in dims)
    config = (f"name: {folder.name}\nplatform: onnx\nmax_batch_size: {max_batch_size}\n"
              f"input:\n  - name: input\n    data_type: TYPE_FP32\n    dims: [{dims_text}]\n"
              f"output:\n  - name: output\n    data_type: TYPE_FP32\n    dims: [{dims_text}]\n")
    if batching:
        config += "dynamic_batching:\n  max_queue_delay_microseconds: 0\n"
    config += "instance_group:\n  - count: 1\n    kind: KIND_AUTO\n"
    (folder / "config.yaml").write_text(config)


def temp_dir(prefix):
    return Path(tempfile.mkdtemp(prefix=prefix))


def identity_tessera_server(build, work, dims, port, batching=False, devices="auto"):
    """tessera-server (not started) serving write_identity_model's "identity" from work/models, with
    executors.devices set to `devices` (auto, cpu or gpu)."""
    write_identity_model(Path(work) / "models" / "identity", dims, batching=batching)
    config = Path(work) / "server.yaml"
    config.write_text(f"executors:\n  devices: {devices}\n")
    find_bin(build, "tessera-executor")
    return Server("tessera-server",
                  [find_bin(build, "tessera-server"), "--model-repository", Path(work) / "models",
                   "--grpc-port", port, "--metrics-port", "0", "--http-port", "-1",
                   "--model-control-mode", "none", "--config", config], work)


def emit(lines, output=None):
    """Prints a report's lines, and writes them to `output` too when given."""
    text = "\n".join(lines) + "\n"
    print(text)
    if output:
        Path(output).write_text(text)


def add_closed_loop_args(parser, concurrency, channels, duration_s, devices):
    """The arguments every interleaved closed-loop comparison takes (interleaved_closed_loop
    reads them), with that script's defaults."""
    parser.add_argument("--build-dir", default=str(REPO / "build"))
    parser.add_argument("--dims", type=int, nargs="+", default=[256],
                        help="input dims without the batch dim (default 256 FP32 = 1 KiB)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=concurrency)
    parser.add_argument("--channels", type=int, default=channels,
                        help="gRPC connections the client spreads its requests over "
                             "(tessera-bench --channels)")
    parser.add_argument("--duration-s", type=float, default=duration_s)
    parser.add_argument("--warmup-s", type=float, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--devices", choices=["auto", "cpu", "gpu"], default=devices,
                        help="tessera-server's executors.devices (auto: the GPU when there is "
                             "one)")
    parser.add_argument("--output", help="also write the table (markdown) here")


def median_of(results, name, concurrency, key, sub=None):
    """The median over interleaved_closed_loop's runs of `name` at `concurrency` of a summary
    field (`key`, or `key`[`sub`] such as latency_ms p50)."""
    return statistics.median((o[key][sub] if sub else o[key])
                             for o in results[(name, concurrency)])

