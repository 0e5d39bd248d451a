"""A mixed load that goes through every resource the server keeps per request, connection, stream,
shared-memory region, sequence and model load, with every answer checked; and the server's resource
counts (open files, threads, memory maps, resident memory, /dev/shm objects, executors).

Used by tests/integration/test_soak.py (the counts after a second round of load equal those after
the first) and by bench/soak.py (a long run that prints how resident memory moves).

Each worker loops until `stop` is set. What a worker is sent is random but seeded; what comes back
is checked against the answer computed here. Errors a worker provokes (a wrong shape, an unknown
model, a deadline too short to meet) must come back with the status code they call for; any other
error, or any wrong answer, is counted as a failure with its message kept.
"""
import os
import queue
import random
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from tessera_testlib import SOURCE_DIR, executor_pids, fetch_metrics

sys.path.insert(0, str(SOURCE_DIR / "tools"))
from tls_certs import make_ca, make_leaf  # noqa: E402

WIDTH = 4

ADD_ONE = """name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: 300 }}
instance_group [ {{ count: 2 }} ]
response_cache {{ enable: true }}
"""

TWICE = """name: "soak_twice"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling {
  step [
    { model_name: "soak_add" input_map { key: "IN" value: "IN" }
      output_map { key: "OUT" value: "MID" } },
    { model_name: "soak_add" input_map { key: "IN" value: "MID" }
      output_map { key: "OUT" value: "OUT" } }
  ]
}
"""

# Sequences left without an END are released after 1 s idle (Triton's default), long enough that a
# sequence whose requests are slow to come back on a loaded machine is not released between them.
ACCUMULATE = """name: "soak_acc"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 1000000
  oldest { max_candidate_sequences: 1024 max_queue_delay_microseconds: 300 }
  state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 1 ]
            initial_state [ { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true name: "z" } ] } ]
}
"""

MODELS = ("soak_add", "soak_twice", "soak_acc")
RELOADED = "soak_reload"


def _save_onnx(repo, name, nodes, inputs, outputs):
    graph = onnx.helper.make_graph(nodes, name, inputs, outputs,
                                   initializer=[onnx.numpy_helper.from_array(
                                       np.ones([1], np.float32), "one")])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    (repo / name / "1").mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(repo / name / "1" / "model.onnx"))


def build_repository(repo):
    """soak_add (OUT = IN + 1, batched, cached, two instances), soak_reload (the same, loaded and
    unloaded over and over), soak_twice (an ensemble of two soak_add steps) and soak_acc (a
    stateful accumulator)."""
    repo = Path(repo)
    fp32 = onnx.TensorProto.FLOAT
    for name in ("soak_add", RELOADED):
        _save_onnx(repo, name, [onnx.helper.make_node("Add", ["IN", "one"], ["OUT"])],
                   [onnx.helper.make_tensor_value_info("IN", fp32, ["b", WIDTH])],
                   [onnx.helper.make_tensor_value_info("OUT", fp32, ["b", WIDTH])])
        (repo / name / "config.pbtxt").write_text(ADD_ONE.format(name=name))
    (repo / "soak_twice" / "1").mkdir(parents=True)
    (repo / "soak_twice" / "config.pbtxt").write_text(TWICE)
    vec = [onnx.helper.make_tensor_value_info(n, fp32, ["b", 1])
           for n in ("INPUT", "STATE_IN", "OUTPUT", "STATE_OUT")]
    _save_onnx(repo, "soak_acc",
               [onnx.helper.make_node("Add", ["INPUT", "STATE_IN"], ["OUTPUT"]),
                onnx.helper.make_node("Identity", ["OUTPUT"], ["STATE_OUT"])],
               vec[:2], vec[2:])
    (repo / "soak_acc" / "config.pbtxt").write_text(ACCUMULATE)
    return repo


class MutualTls:
    """Throw-away certificates for a soak over mutual TLS: the server's (of one CA) and a
    client's (of another)."""

    def __init__(self, folder):
        folder = Path(folder)
        self.ca = make_ca(folder, "soak-ca")
        self.server = make_leaf(folder, "soak-server", self.ca)
        self.client_ca = make_ca(folder, "soak-client-ca")
        self.client = make_leaf(folder, "soak-client", self.client_ca, usage="clientAuth")

    def server_yaml(self):
        # Both endpoints read their files again every second: a reload that kept anything would
        # add up over a round.
        tls = (f"  tls: {{cert: {self.server.cert}, key: {self.server.key}, "
               f"client_ca: {self.client_ca.cert}, reload_secs: 1}}\n")
        return tls, tls

    def grpc_kwargs(self):
        return {"ssl": True, "root_certificates": str(self.ca.cert),
                "private_key": str(self.client.key), "certificate_chain": str(self.client.cert)}

    def http_kwargs(self):
        return {"ssl": True, "ssl_options": {"ca_certs": str(self.ca.cert),
                                             "certfile": str(self.client.cert),
                                             "keyfile": str(self.client.key)}}


def write_server_config(path, tls=None):
    """A server.yaml whose inflate budget holds 16 of the soak's compressed requests at once (each
    takes at least 64 KiB of it while it is inflated; two workers compress), so that budget not
    given back would soon refuse them all (UNAVAILABLE); with `tls` (MutualTls), both endpoints
    speak only mutual TLS."""
    grpc_tls, http_tls = tls.server_yaml() if tls else ("", "")
    path = Path(path)
    path.write_text(f"grpc:\n  max_inflating_bytes: 1048576\n{grpc_tls}"
                    + (f"http:\n{http_tls}" if http_tls else ""))
    return path


class Tally:
    """What the workers did: answers checked, errors that were asked for, and failures."""

    def __init__(self):
        self._lock = threading.Lock()
        self.ok = {}
        self.expected_errors = {}
        self.failures = []
        self.failure_count = 0

    def good(self, what):
        with self._lock:
            self.ok[what] = self.ok.get(what, 0) + 1

    def refused(self, what):
        with self._lock:
            self.expected_errors[what] = self.expected_errors.get(what, 0) + 1

    def bad(self, what, message):
        with self._lock:
            self.failure_count += 1
            if len(self.failures) < 20:
                self.failures.append(f"{what}: {message}")

    def total_ok(self):
        with self._lock:
            return sum(self.ok.values())


def _code(error):
    return (error.status() or "").replace("StatusCode.", "")


class SoakLoad:
    """The workers of one round of load against `server` (conftest.TesseraServer, explicit mode,
    with build_repository's models loaded), over mutual TLS when `tls` (MutualTls) is given."""

    def __init__(self, server, seed=0, tls=None):
        self.server = server
        self.seed = seed
        self.tls = tls
        self.tally = Tally()
        self._stop = threading.Event()
        self._threads = []
        self._round = 0

    def workers(self):
        return [self._grpc_unary, self._http_ensemble, self._stream, self._sequences,
                self._shared_memory, self._refused, self._deadlines, self._reload,
                self._new_connections, self._observe]

    def run(self, seconds):
        """Runs every worker for `seconds`, then waits for them; returns the tally."""
        self._round += 1
        self._stop.clear()
        self._threads = [threading.Thread(target=self._guard, args=(w, i), daemon=True)
                         for i, w in enumerate(self.workers())]
        for t in self._threads:
            t.start()
        time.sleep(seconds)
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)
            if t.is_alive():
                self.tally.bad("worker", f"{t.name} still running 60 s after the stop")
        return self.tally

    def _guard(self, worker, index):
        rng = random.Random(self.seed * 1000 + self._round * 100 + index)
        try:
            worker(rng)
        except Exception as e:  # a worker that dies stops counting: that is a failure
            self.tally.bad(worker.__name__, f"worker ended: {type(e).__name__}: {e}")

    # ---- workers --------------------------------------------------------------------------------
    def _grpc_unary(self, rng):
        client = self._grpc()
        fixed = np.arange(2 * WIDTH, dtype=np.float32).reshape(2, WIDTH)  # a cache hit each time
        while not self._stop.is_set():
            x = fixed if rng.random() < 0.2 else self._batch(rng)
            # Half compressed: each is inflated within the server's shared inflate budget, which
            # must be given back.
            self._check(client, grpcclient, "soak_add", x, x + 1, "grpc",
                        compression=rng.choice([None, None, "gzip", "deflate"]))
        client.close()

    def _http_ensemble(self, rng):
        client = self._http()
        while not self._stop.is_set():
            x = self._batch(rng)
            self._check(client, httpclient, "soak_twice", x, x + 2, "http ensemble",
                        binary=rng.random() < 0.5,
                        compression=rng.choice([None, None, "gzip", "deflate"]))
        client.close()

    def _stream(self, rng):
        client = self._grpc()
        while not self._stop.is_set():
            answers = queue.Queue()
            client.start_stream(callback=lambda result, error: answers.put((result, error)))
            sent = {}
            for i in range(rng.randint(1, 6)):
                x = self._batch(rng)
                sent[str(i)] = x
                client.async_stream_infer("soak_add", [self._input(grpcclient, x)],
                                          request_id=str(i))
            for _ in sent:
                try:
                    result, error = answers.get(timeout=30)
                except queue.Empty:
                    self.tally.bad("stream", "an answer did not come within 30 s")
                    break
                if error is not None:
                    self.tally.bad("stream", str(error))
                    continue
                x = sent[result.get_response().id]
                self._compare("stream", result.as_numpy("OUT"), x + 1)
            client.stop_stream()
        client.close()

    def _sequences(self, rng):
        client = self._grpc()
        sequence = (self.seed * 1_000_003 + self._round * 10_007) * 1000 + 1
        while not self._stop.is_set():
            sequence += 1
            steps = rng.randint(1, 5)
            abandon = rng.random() < 0.2  # no END: the idle timeout must free it
            total = 0.0
            for step in range(steps):
                value = float(rng.randint(1, 9))
                total += value
                x = np.array([[value]], np.float32)
                inputs = [grpcclient.InferInput("INPUT", [1, 1], "FP32")]
                inputs[0].set_data_from_numpy(x)
                end = step == steps - 1 and not abandon
                try:
                    result = client.infer("soak_acc", inputs, sequence_id=sequence,
                                          sequence_start=step == 0, sequence_end=end)
                except InferenceServerException as e:
                    self.tally.bad("sequence", str(e))
                    break
                self._compare("sequence", result.as_numpy("OUTPUT"), np.array([[total]]))
        client.close()

    def _shared_memory(self, rng):
        """Regions made, registered, used for an input and an output, unregistered and removed;
        by turns over gRPC and over HTTP."""
        clients = {grpcclient: self._grpc(), httpclient: self._http()}
        tag = f"soak-{os.getpid()}-{self._round}"
        n = 0
        while not self._stop.is_set():
            n += 1
            module = grpcclient if n % 2 else httpclient
            client = clients[module]
            x = self._batch(rng)
            name_in, name_out = f"{tag}-in-{n}", f"{tag}-out-{n}"
            h_in = shm.create_shared_memory_region(name_in, "/" + name_in, x.nbytes)
            h_out = shm.create_shared_memory_region(name_out, "/" + name_out, x.nbytes)
            try:
                shm.set_shared_memory_region(h_in, [x])
                client.register_system_shared_memory(name_in, "/" + name_in, x.nbytes)
                client.register_system_shared_memory(name_out, "/" + name_out, x.nbytes)
                inp = module.InferInput("IN", list(x.shape), "FP32")
                inp.set_shared_memory(name_in, x.nbytes)
                out = module.InferRequestedOutput("OUT")
                out.set_shared_memory(name_out, x.nbytes)
                client.infer("soak_add", [inp], outputs=[out])
                got = shm.get_contents_as_numpy(h_out, np.float32, list(x.shape))
                self._compare("shared memory", got, x + 1)
            except InferenceServerException as e:
                self.tally.bad("shared memory", f"{module.__name__}: {e}")
            finally:
                for name in (name_in, name_out):
                    try:
                        client.unregister_system_shared_memory(name)
                    except InferenceServerException as e:
                        self.tally.bad("shared memory",
                                       f"{module.__name__}: unregister {name}: {e}")
                shm.destroy_shared_memory_region(h_in)
                shm.destroy_shared_memory_region(h_out)
        for client in clients.values():
            client.close()

    def _refused(self, rng):
        """Requests the server must refuse, each with the code it calls for."""
        client = self._grpc()
        cases = [
            ("wrong shape", "soak_add", np.zeros([1, WIDTH + 1], np.float32), "FP32",
             "INVALID_ARGUMENT"),
            ("wrong type", "soak_add", np.zeros([1, WIDTH], np.int32), "INT32",
             "INVALID_ARGUMENT"),
            ("too big a batch", "soak_add", np.zeros([9, WIDTH], np.float32), "FP32",
             "INVALID_ARGUMENT"),
            ("unknown model", "soak_none", np.zeros([1, WIDTH], np.float32), "FP32",
             "NOT_FOUND"),
        ]
        while not self._stop.is_set():
            what, model, x, dtype, want = rng.choice(cases)
            inp = grpcclient.InferInput("IN", list(x.shape), dtype)
            inp.set_data_from_numpy(x)
            try:
                client.infer(model, [inp])
                self.tally.bad("refused", f"{what}: answered")
            except InferenceServerException as e:
                if _code(e) == want and e.message():
                    self.tally.refused(what)
                else:
                    self.tally.bad("refused", f"{what}: {_code(e)} {e.message()}")
            time.sleep(0.002)
        client.close()

    def _deadlines(self, rng):
        """Requests whose client gives up first: the server must drop them and go on."""
        client = self._grpc()
        while not self._stop.is_set():
            x = self._batch(rng)
            try:
                result = client.infer("soak_twice", [self._input(grpcclient, x)],
                                      client_timeout=rng.choice([0.0002, 0.001, 0.005]))
                self._compare("deadline", result.as_numpy("OUT"), x + 2)
            except InferenceServerException as e:
                if _code(e) == "DEADLINE_EXCEEDED":
                    self.tally.refused("deadline")
                else:
                    self.tally.bad("deadline", f"{_code(e)} {e.message()}")
        client.close()

    def _reload(self, rng):
        """soak_reload loaded, asked, unloaded, over and over: each load starts instances on the
        executors and each unload must give back all they took."""
        client = self._grpc()
        while not self._stop.is_set():
            try:
                client.load_model(RELOADED)
                x = self._batch(rng)
                self._check(client, grpcclient, RELOADED, x, x + 1, "reload")
                client.unload_model(RELOADED)
                deadline = time.monotonic() + 30
                while client.is_model_ready(RELOADED) and time.monotonic() < deadline:
                    time.sleep(0.01)
                self.tally.good("unload")
            except InferenceServerException as e:
                self.tally.bad("reload", str(e))
                time.sleep(0.1)
        client.close()

    def _new_connections(self, rng):
        while not self._stop.is_set():
            client = self._grpc()
            x = self._batch(rng)
            self._check(client, grpcclient, "soak_add", x, x + 1, "new connection")
            client.close()

    def _observe(self, rng):
        client = self._grpc()
        while not self._stop.is_set():
            try:
                client.get_inference_statistics()
                client.get_model_repository_index()
                text = fetch_metrics(self.server.metrics_url)
                if "nv_inference_request_success" not in text:
                    self.tally.bad("metrics", "no nv_inference_request_success")
                else:
                    self.tally.good("observe")
            except (InferenceServerException, OSError) as e:
                self.tally.bad("observe", str(e))
            time.sleep(0.05)
        client.close()

    # ---- helpers --------------------------------------------------------------------------------
    def _grpc(self):
        return grpcclient.InferenceServerClient(
            self.server.url, **(self.tls.grpc_kwargs() if self.tls else {}))

    def _http(self):
        return httpclient.InferenceServerClient(
            self.server.http_url, **(self.tls.http_kwargs() if self.tls else {}))

    @staticmethod
    def _batch(rng):
        rows = rng.randint(1, 4)
        return np.array([[rng.uniform(-8, 8) for _ in range(WIDTH)] for _ in range(rows)],
                        np.float32)

    @staticmethod
    def _input(module, x):
        inp = module.InferInput("IN", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        return inp

    def _check(self, client, module, model, x, want, what, binary=True, compression=None):
        inp = module.InferInput("IN", list(x.shape), "FP32")
        kwargs = {}
        if module is httpclient:
            inp.set_data_from_numpy(x, binary_data=binary)
            kwargs["outputs"] = [httpclient.InferRequestedOutput("OUT", binary_data=binary)]
            if compression:
                kwargs["request_compression_algorithm"] = compression
                kwargs["response_compression_algorithm"] = compression
        else:
            inp.set_data_from_numpy(x)
            if compression:
                kwargs["compression_algorithm"] = compression
        try:
            result = client.infer(model, [inp], **kwargs)
        except InferenceServerException as e:
            self.tally.bad(what, f"{model}: {_code(e)} {e.message()}")
            return
        self._compare(what, result.as_numpy("OUT"), want)

    def _compare(self, what, got, want):
        if got is not None and got.shape == want.shape and np.allclose(got, want, atol=1e-5):
            self.tally.good(what)
        else:
            self.tally.bad(what, f"wrong answer: got {got!r}, want {want!r}")


# ---- the server's resources --------------------------------------------------------------------
def _status_field(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def process_resources(pid):
    """Open files, threads, memory maps and resident KiB of one process."""
    with open(f"/proc/{pid}/maps") as f:
        maps = sum(1 for _ in f)
    return {"fds": len(os.listdir(f"/proc/{pid}/fd")), "threads": _status_field(pid, "Threads"),
            "maps": maps, "rss_kib": _status_field(pid, "VmRSS")}


def server_resources(server_pid):
    """The server's counts, its executors' (summed), how many executors there are and how many
    /dev/shm objects the server made."""
    executors = executor_pids(server_pid)
    out = {f"server_{k}": v for k, v in process_resources(server_pid).items()}
    summed = {}
    for pid in executors:
        try:
            for k, v in process_resources(pid).items():
                summed[k] = summed.get(k, 0) + v
        except OSError:
            continue
    out.update({f"executors_{k}": v for k, v in summed.items()})
    out["executors"] = len(executors)
    # The executors' rings are named tessera-<server pid>-...; other processes' objects (other
    # tests, the shared-memory worker's regions) are not the server's to free.
    out["dev_shm_objects"] = sum(1 for name in os.listdir("/dev/shm")
                                 if name.startswith(f"tessera-{server_pid}-"))
    return out
