"""Fixtures for Tessera's end-to-end tests: start tessera-server on free loopback ports, wait until
it is ready, hand out tritonclient clients, and always kill the server (and its executors) at the end.

Environment (set by CTest, see tests/CMakeLists.txt):
  TESSERA_BIN_DIR     folder with tessera-server and tessera-executor (default <repo>/build/bin)
  TESSERA_SOURCE_DIR  repository root (default: two folders above this file)
  TESSERA_TEST_LOG_VERBOSE=N  pass --log-verbose N to every server started here
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tessera_testlib import BIN_DIR, BUNDLED_MODELS, MODELS_DIR, SOURCE_DIR, descendants

SERVER_BIN = BIN_DIR / "tessera-server"

READY_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 60

# Servers alive right now; their log tails are attached to the report of a failing test.
_LIVE_SERVERS = []
_FAILED = []


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_repository(dest):
    """A private copy of the bundled model repository (tests that edit a repository use this)."""
    require_bundled_models()
    dest = Path(dest)
    shutil.copytree(MODELS_DIR, dest)
    return dest


def require_bundled_models():
    missing = [m for m in BUNDLED_MODELS if not (MODELS_DIR / m).is_dir()]
    if missing:
        pytest.fail(f"bundled models missing under {MODELS_DIR}: {', '.join(missing)}", pytrace=False)


class TesseraServer:
    """One tessera-server process in its own process group (so that its executors die with it)."""

    def __init__(self, log_dir, repository=None, mode="poll", poll_secs=None, load_models=(),
                 config=None, extra_args=(), wait_models=(), command_prefix=(), client_kwargs=None,
                 env=None):
        self.log_dir = Path(log_dir)
        self.repository = Path(repository) if repository else None
        self.mode = mode
        self.poll_secs = poll_secs
        self.load_models = tuple(load_models)
        self.config = config
        self.extra_args = tuple(extra_args)
        self.wait_models = tuple(wait_models)
        self.command_prefix = tuple(command_prefix)  # e.g. prlimit: it execs the server (same pid)
        self.client_kwargs = dict(client_kwargs or {})  # e.g. ssl=True, root_certificates=...
        self.env = dict(env or {})  # added to (or, with None values, removed from) the environment
        self.proc = None
        self.grpc_port = None
        self.metrics_port = None
        self.http_port = None
        self.log_path = None
        self._client = None
        self._starts = 0

    # ---- lifecycle --------------------------------------------------------------------------------
    def command(self):
        cmd = list(self.command_prefix) + [str(SERVER_BIN)]
        if self.config:
            cmd += ["--config", str(self.config)]
        if self.repository:
            cmd += ["--model-repository", str(self.repository)]
        cmd += ["--grpc-port", str(self.grpc_port), "--metrics-port", str(self.metrics_port),
                "--http-port", str(self.http_port)]
        if self.mode:
            cmd += ["--model-control-mode", self.mode]
        if self.poll_secs is not None:
            cmd += ["--repository-poll-secs", str(self.poll_secs)]
        for m in self.load_models:
            cmd += ["--load-model", m]
        verbose = os.environ.get("TESSERA_TEST_LOG_VERBOSE")
        if verbose:
            cmd += ["--log-verbose", verbose]
        cmd += list(self.extra_args)
        return cmd

    def start(self, attempts=3):
        if not SERVER_BIN.is_file():
            pytest.fail(f"{SERVER_BIN} not found: build the targets tessera-server and "
                        f"tessera-executor first (scripts/test.sh does)", pytrace=False)
        for attempt in range(attempts):
            self._spawn()
            try:
                self.wait_ready()
                return self
            except _EarlyExit as e:
                code = e.code
            except BaseException:  # not ready in time (pytest.fail), interrupted: leave nothing behind
                self.kill()
                raise
            self.kill()  # the server is gone; its executors may not be
            # Another process may have taken a port between free_port() and the bind: retry.
            if attempt + 1 < attempts and _looks_like_port_clash(self.log_tail()):
                continue
            pytest.fail(f"tessera-server exited with code {code} before it was ready\n"
                        f"command: {' '.join(self.command())}\n{self.log_tail_text()}",
                        pytrace=False)

    def _spawn(self):
        self.grpc_port = free_port()
        self.metrics_port = free_port()
        while self.metrics_port == self.grpc_port:
            self.metrics_port = free_port()
        self.http_port = free_port()
        while self.http_port in (self.grpc_port, self.metrics_port):
            self.http_port = free_port()
        self._starts += 1
        self.log_path = self.log_dir / f"tessera-server-{self.grpc_port}-{self._starts}.log"
        with open(self.log_path, "wb") as log:
            env = dict(os.environ)
            for key, value in self.env.items():
                if value is None:
                    env.pop(key, None)
                else:
                    env[key] = value
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=str(SOURCE_DIR),
                                         start_new_session=True, env=env)
        if self not in _LIVE_SERVERS:
            _LIVE_SERVERS.append(self)

    def wait_ready(self, timeout=READY_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        client = self.client()
        pending = ["server"] + list(self.wait_models)
        last_error = None
        while pending:
            code = self.proc.poll()
            if code is not None:
                raise _EarlyExit(code)
            if time.monotonic() > deadline:
                pytest.fail(f"tessera-server not ready after {timeout:.0f} s (waiting for "
                            f"{', '.join(pending)}; last error: {last_error})\n"
                            f"command: {' '.join(self.command())}\n{self.log_tail_text()}",
                            pytrace=False)
            try:
                if pending[0] == "server":
                    ready = client.is_server_ready(client_timeout=1.0)
                else:
                    ready = client.is_model_ready(pending[0], client_timeout=1.0)
                if ready:
                    pending.pop(0)
                    continue
            except InferenceServerException as e:
                last_error = e
            time.sleep(0.1)

    def stop(self, timeout=15.0):
        """SIGTERM, then SIGKILL of the whole process group. Returns the server's exit code."""
        if self._client is not None:
            try:
                self._client.close()
            except Exception:
                pass
            self._client = None
        if self.proc is None:
            return None
        children = descendants(self.proc.pid) if self.proc.poll() is None else []
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill(children)
        if self in _LIVE_SERVERS:
            _LIVE_SERVERS.remove(self)
        return self.proc.returncode

    def kill(self, extra_pids=()):
        """SIGKILL the server, everything left in its process group, and its descendants (executors,
        also those that left the group); extra_pids: descendants seen earlier."""
        if self.proc is None:
            return
        pids = set(extra_pids)
        if self.proc.poll() is None:
            pids.update(descendants(self.proc.pid))
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in pids:
            if _is_tessera_process(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    # ---- access -----------------------------------------------------------------------------------
    @property
    def url(self):
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self):
        return f"127.0.0.1:{self.http_port}"

    @property
    def metrics_url(self):
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def client(self):
        """The server's shared client (made anew after a restart)."""
        if self._client is None:
            self._client = self.new_client()
        return self._client

    def new_client(self):
        return grpcclient.InferenceServerClient(url=self.url, **self.client_kwargs)

    def log_tail(self, lines=LOG_TAIL_LINES):
        if not self.log_path or not self.log_path.exists():
            return ""
        text = self.log_path.read_bytes().decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def log_tail_text(self):
        return f"--- tessera-server log tail ({self.log_path}) ---\n{self.log_tail()}\n---"


class _EarlyExit(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


def _is_tessera_process(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"tessera" in f.read()
    except OSError:
        return False


def _looks_like_port_clash(log):
    # gRPC says "address already in use"; the metrics and HTTP listeners (libmicrohttpd) "cannot
    # listen ... (address in use or not available)".
    low = log.lower()
    return ("address already in use" in low or "address in use" in low or "failed to bind" in low
            or "bind" in low and "port" in low)


# ---- pytest hooks and fixtures --------------------------------------------------------------------
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        _FAILED.append(item.nodeid)
        for server in list(_LIVE_SERVERS):
            report.sections.append((f"tessera-server log {server.log_path}", server.log_tail()))


@pytest.fixture(scope="session")
def log_dir():
    path = Path(tempfile.mkdtemp(prefix="tessera-it-"))
    yield path
    if _FAILED:
        print(f"\nserver logs kept in {path}")
    else:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def make_server(log_dir):
    """Factory: make_server(**TesseraServer kwargs) -> started server, stopped at module end."""
    started = []

    def factory(**kwargs):
        server = TesseraServer(log_dir, **kwargs)
        started.append(server)
        return server.start()

    yield factory
    for server in started:
        server.stop(timeout=5.0)


@pytest.fixture(scope="module")
def server(log_dir):
    """A server on the bundled repository (poll mode, the default), both models ready."""
    require_bundled_models()
    srv = TesseraServer(log_dir, repository=MODELS_DIR, mode="poll",
                        wait_models=BUNDLED_MODELS)
    srv.start()
    yield srv
    srv.stop(timeout=5.0)


@pytest.fixture(scope="module")
def client(server):
    return server.client()
