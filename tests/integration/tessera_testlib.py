"""Helpers shared by the integration tests: reference data, requests, statistics, metrics, /proc."""

import os
import re
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
from onnx import numpy_helper
from tritonclient.utils import InferenceServerException

SOURCE_DIR = Path(os.environ.get("TESSERA_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BIN_DIR = Path(os.environ.get("TESSERA_BIN_DIR", SOURCE_DIR / "build" / "bin"))
MODELS_DIR = SOURCE_DIR / "configs" / "models"
BUNDLED_MODELS = ("mlp", "small_cnn")
REFERENCE_DIR = SOURCE_DIR / "tests" / "data" / "reference"
INPUT_NAME = "input"
OUTPUT_NAME = "output"
INPUT_DIMS = {"mlp": [64], "small_cnn": [3, 32, 32]}
OUTPUT_DIMS = {"mlp": [10], "small_cnn": [10]}
MAX_BATCH_SIZE = 8
RTOL = 1e-4
ATOL = 1e-5


# ---- reference data -------------------------------------------------------------------------------
def load_reference(model):
    """(input, output) arrays of the exporter's reference batch for `model`."""
    folder = REFERENCE_DIR / model
    paths = [folder / "input_0.pb", folder / "output_0.pb"]
    for p in paths:
        if not p.is_file():
            pytest.fail(f"reference data missing: {p}", pytrace=False)
    x, y = (numpy_helper.to_array(onnx.load_tensor(str(p))) for p in paths)
    return np.ascontiguousarray(x, dtype=np.float32), np.ascontiguousarray(y, dtype=np.float32)


def find_model_file(model, repository=MODELS_DIR):
    """Path of the ONNX file of version 1 of `model` (any *.onnx under the version folder)."""
    folder = Path(repository) / model
    for candidate in [folder / "1" / "model.onnx", *sorted(folder.glob("1/*.onnx")),
                      *sorted(folder.glob("**/*.onnx"))]:
        if candidate.is_file():
            return candidate
    pytest.fail(f"no .onnx file under {folder}", pytrace=False)


class OrtReference:
    """onnxruntime on the CPU: expected outputs for inputs other than the stored reference batch."""

    def __init__(self, model):
        import onnxruntime as ort
        self.session = ort.InferenceSession(str(find_model_file(model)),
                                            providers=["CPUExecutionProvider"])
        self.input_name = self.session.get_inputs()[0].name

    def __call__(self, x):
        return self.session.run(None, {self.input_name: x})[0]


def random_inputs(model, batch, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal([batch] + INPUT_DIMS[model]).astype(np.float32)


def assert_close(actual, expected, what=""):
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL, err_msg=what)


# ---- requests ---------------------------------------------------------------------------------------
def save_graph_model(repo, name, graph):
    """Writes `graph` (opset 13, IR 8, checked) as version 1 of model `name` in `repo`."""
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(repo / name / "1" / "model.onnx"))


def make_input(x, datatype="FP32", name=INPUT_NAME):
    inp = grpcclient.InferInput(name, list(x.shape), datatype)
    inp.set_data_from_numpy(x)
    return inp


def infer(client, model, x, outputs=(OUTPUT_NAME,), **kwargs):
    requested = [grpcclient.InferRequestedOutput(o) for o in outputs] if outputs else None
    return client.infer(model, [make_input(x)], outputs=requested, **kwargs)


def infer_output(client, model, x, **kwargs):
    return infer(client, model, x, **kwargs).as_numpy(OUTPUT_NAME)


def expect_error(fn, *codes):
    """Runs fn, which must raise InferenceServerException with one of `codes` (e.g. "NOT_FOUND")."""
    with pytest.raises(InferenceServerException) as info:
        fn()
    e = info.value
    wanted = {f"StatusCode.{c}" for c in codes}
    assert e.status() in wanted, f"expected {' or '.join(sorted(wanted))}, got {e.status()}: {e.message()}"
    return e


def check_concurrent_clients(server, models, threads, requests_per_thread):
    """`threads` clients each send `requests_per_thread` requests of 1-3 random rows, cycling
    through `models`, and compare every answer with onnxruntime's; fails with the first errors."""
    references = {model: OrtReference(model) for model in models}
    errors = []
    lock = threading.Lock()

    def client_thread(seed):
        client = server.new_client()
        for i in range(requests_per_thread):
            model = models[(seed + i) % len(models)]
            x = random_inputs(model, 1 + (seed + i) % 3, seed * 1000 + i)
            try:
                y = infer(client, model, x).as_numpy(OUTPUT_NAME)
                assert_close(y, references[model](x), f"{model} thread {seed} request {i}")
            except Exception as e:  # collected: a failure in a thread must fail the test
                with lock:
                    errors.append(repr(e))

    started = [threading.Thread(target=client_thread, args=(s,)) for s in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join(timeout=120)
    assert not errors, errors[:3]


def assert_mlp_serves(client, model="mlp"):
    """The server still answers a correct mlp request (used after every error case)."""
    x, y = load_reference("mlp")
    assert_close(infer_output(client, model, x), y, f"{model} after an error")


def run_bench(*args, timeout=60):
    """Runs tessera-bench without its progress line; the CompletedProcess, text captured."""
    bench = BIN_DIR / "tessera-bench"
    if not bench.is_file():
        pytest.fail(f"{bench} not found: build the target tessera-bench", pytrace=False)
    return subprocess.run([str(bench), "--progress", "off", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def start_fails(*args, config=None, env=None):
    """Runs tessera-server with settings that must stop its start (exit code 2, before any
    endpoint listens); returns its output. `env`: variables added to the environment."""
    command = [str(BIN_DIR / "tessera-server"), "--model-repository", str(MODELS_DIR),
               "--grpc-port", "0", "--metrics-port", "-1", "--http-port", "0", *map(str, args)]
    if config is not None:
        command += ["--config", str(config)]
    run = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=30, env={**os.environ, **(env or {})})
    output = run.stdout + run.stderr
    assert run.returncode == 2, output
    assert "listening" not in output, output
    return output


def wait_until(predicate, timeout, interval=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except InferenceServerException as e:
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last})")


def model_ready(client, model):
    return client.is_model_ready(model, client_timeout=5.0)


# ---- statistics -------------------------------------------------------------------------------------
def model_stats(client, model):
    """The ModelStatistics entry of `model` (version 1 if several are reported)."""
    resp = client.get_inference_statistics(model, client_timeout=5.0)
    entries = [s for s in resp.model_stats if s.name == model]
    assert entries, f"no statistics for {model}: {resp}"
    for s in entries:
        if s.version in ("1", ""):
            return s
    return entries[0]


# ---- metrics ----------------------------------------------------------------------------------------
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def fetch_metrics(url):
    with urllib.request.urlopen(url, timeout=5) as resp:
        assert resp.status == 200, f"GET {url} -> {resp.status}"
        return resp.read().decode("utf-8")


def parse_metrics(text):
    """[(name, {label: value}, float value)] of the Prometheus text exposition format."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            samples.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return samples


def metric_sum(samples, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`; None when there is none."""
    values = [v for n, lab, v in samples
              if n == name and all(lab.get(k) == val for k, val in labels.items())]
    return sum(values) if values else None


# ---- processes ----------------------------------------------------------------------------------------
def _ppid(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read().decode("utf-8", "replace")
    return int(stat[stat.rindex(")") + 2:].split()[1])


def _cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().decode("utf-8", "replace").split("\0")


def descendants(root_pid):
    """PIDs of all live descendants of root_pid."""
    children = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            children.setdefault(_ppid(int(entry.name)), []).append(int(entry.name))
        except (OSError, ValueError):
            continue
    out, stack = [], [root_pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def executor_pids(server_pid):
    """Live tessera-executor processes started (directly or not) by the server."""
    pids = []
    for pid in descendants(server_pid):
        try:
            argv0 = _cmdline(pid)[0]
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().decode("utf-8", "replace")
            state = state[state.rindex(")") + 2:].split()[0]
        except (OSError, IndexError, ValueError):
            continue
        if Path(argv0).name.startswith("tessera-executor") and state != "Z":
            pids.append(pid)
    return pids


# ---- background load ----------------------------------------------------------------------------------
class RequestStream:
    """Threads that send requests back to back and record every outcome until stopped.

    Each outcome is (t_start, t_end, model, error or None); a success is checked against the
    expected output for its own input."""

    def __init__(self, server, models, threads_per_model=1, client_timeout=20.0, pause_s=0.0):
        self.server = server
        self.pause_s = pause_s  # sleep between a thread's requests (paces the rate)
        self.models = models
        self.client_timeout = client_timeout
        self.outcomes = []
        self.wrong = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(m, i), daemon=True)
                         for m in models for i in range(threads_per_model)]

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=self.client_timeout + 10)

    def _run(self, model, index):
        x, y = load_reference(model)
        client = self.server.new_client()
        try:
            i = 0
            while not self._stop.is_set():
                row = (i + index) % x.shape[0]
                i += 1
                t0 = time.monotonic()
                error = None
                try:
                    out = infer_output(client, model, x[row:row + 1],
                                       client_timeout=self.client_timeout)
                    if not np.allclose(out, y[row:row + 1], rtol=RTOL, atol=ATOL):
                        with self._lock:
                            self.wrong.append((model, row, out, y[row:row + 1]))
                except InferenceServerException as e:
                    error = e
                    time.sleep(0.05)  # don't spin while the server recovers
                with self._lock:
                    self.outcomes.append((t0, time.monotonic(), model, error))
                if self.pause_s:
                    time.sleep(self.pause_s)
        finally:
            client.close()

    def snapshot(self):
        with self._lock:
            return list(self.outcomes)


# ---- fuzzing ------------------------------------------------------------------------------------
def fuzz_and_check_nothing_broke(server, fuzzer, cases):
    """Runs `cases` cases of a request_fuzz/repository_fuzz fuzzer against `server` (a finding
    fails the test with its text), then checks that both kinds of outcome happened (the fuzzer is
    not sending only requests that fail, or only ones that pass) and that nothing else broke: the
    server is up, no executor was restarted, mlp answers correctly."""
    from request_fuzz import Finding
    executors = sorted(executor_pids(server.proc.pid))
    assert executors, "the server started no executor"
    try:
        fuzzer.run(cases)
    except Finding as finding:
        pytest.fail(str(finding), pytrace=False)
    finally:
        fuzzer.close()
    counts = fuzzer.counts
    assert counts.get("OK", 0) > 0 and counts.get("INVALID_ARGUMENT", 0) > 0, counts
    assert server.proc.poll() is None, "the server exited"
    assert sorted(executor_pids(server.proc.pid)) == executors, "an executor was restarted"
    assert_mlp_serves(server.client())
