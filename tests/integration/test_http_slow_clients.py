"""Slow, idle and half-sent HTTP connections hold no thread of the server. The HTTP endpoint reads
requests in an epoll loop (libmicrohttpd); a connection waits there until its request is whole,
and an inference waiting for its answer holds no thread either. Before, every connection took a
civetweb worker thread: about 70 connections that sent nothing stalled every other HTTP client,
for up to 30 s. Connections that send nothing for `http.idle_timeout_s` are closed, but not one
whose answer is still being computed. The Prometheus /metrics endpoint is served the same way."""

import gzip
import shutil
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest
import tritonclient.http as httpclient

from conftest import MODELS_DIR, require_bundled_models
from tessera_testlib import INPUT_NAME, OUTPUT_NAME, assert_close, load_reference


@pytest.fixture(scope="module")
def two_thread_server(make_server, tmp_path_factory):
    """Two HTTP worker threads, the default idle timeout (30 s): longer than any wait here."""
    require_bundled_models()
    config = tmp_path_factory.mktemp("http-slow") / "server.yaml"
    config.write_text("http:\n  threads: 2\n")
    return make_server(repository=MODELS_DIR, mode="none", config=config)


@pytest.fixture(scope="module")
def short_timeout_server(make_server, tmp_path_factory):
    """A one-second idle timeout, and mlp_slow: mlp whose batcher waits 2.5 s for more requests,
    so that one request's answer takes longer than the timeout."""
    require_bundled_models()
    root = tmp_path_factory.mktemp("http-timeout")
    repository = root / "models"
    shutil.copytree(MODELS_DIR / "mlp", repository / "mlp_slow")
    config_path = repository / "mlp_slow" / "config.yaml"
    text = config_path.read_text().replace("name: mlp", "name: mlp_slow")
    text = text.replace("max_queue_delay_microseconds: 2000", "max_queue_delay_microseconds: 2500000")
    config_path.write_text("\n".join(line for line in text.splitlines()
                                     if not line.startswith("slo_ms")) + "\n")
    config = root / "server.yaml"
    config.write_text("http:\n  idle_timeout_s: 1\n")
    return make_server(repository=repository, mode="none", config=config)


def _connect(server):
    return socket.create_connection(("127.0.0.1", server.http_port), timeout=10)


def _infer(client, model, x):
    inp = httpclient.InferInput(INPUT_NAME, list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=True)
    out = httpclient.InferRequestedOutput(OUTPUT_NAME, binary_data=True)
    return client.infer(model, [inp], outputs=[out]).as_numpy(OUTPUT_NAME)


def _stall(server, count):
    """`count` connections: a third send nothing, a third stop inside the headers, a third stop
    inside a body they declared."""
    held = []
    for i in range(count):
        s = _connect(server)
        if i % 3 == 1:
            s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Ty")
        elif i % 3 == 2:
            s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"inp")
        held.append(s)
    return held


def test_stalled_connections_do_not_delay_other_clients(two_thread_server):
    x, y = load_reference("mlp")
    held = _stall(two_thread_server, 150)
    try:
        time.sleep(0.5)  # every stalled connection accepted and read
        client = httpclient.InferenceServerClient(url=two_thread_server.http_url,
                                                  connection_timeout=20, network_timeout=20)
        start = time.monotonic()
        for _ in range(5):
            assert_close(_infer(client, "mlp", x), y, "mlp beside 150 stalled connections")
        elapsed = time.monotonic() - start
        client.close()
        # A thread per connection waited here until the stalled ones timed out (30 s).
        assert elapsed < 5, f"5 requests took {elapsed:.1f} s beside stalled connections"
        # Many more inferences at once than the endpoint has threads: a waiting one holds none.
        answers, errors = [], []

        def one():
            c = httpclient.InferenceServerClient(url=two_thread_server.http_url)
            try:
                answers.append(_infer(c, "mlp", x))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
            finally:
                c.close()

        threads = [threading.Thread(target=one) for _ in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors[:3]
        assert len(answers) == 24
        for answer in answers:
            assert_close(answer, y, "mlp, 24 at once over 2 HTTP threads")
    finally:
        for s in held:
            s.close()


def _closed_within(s, seconds):
    """Seconds until the server closed `s` (recv gives b""), or None if it is still open."""
    s.settimeout(0.2)
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            if s.recv(4096) == b"":
                return time.monotonic() - start
        except socket.timeout:
            continue
        except ConnectionResetError:
            return time.monotonic() - start
    return None


def test_connections_that_send_nothing_are_closed_after_the_idle_timeout(short_timeout_server):
    held = _stall(short_timeout_server, 3)
    try:
        for s in held:
            waited = _closed_within(s, 8)
            assert waited is not None, "a stalled connection was still open after 8 s (timeout 1 s)"
    finally:
        for s in held:
            s.close()


def test_a_connection_waiting_for_its_answer_is_not_timed_out(short_timeout_server):
    """mlp_slow answers one request after about 2.5 s, past the 1 s idle timeout."""
    x, y = load_reference("mlp")
    client = httpclient.InferenceServerClient(url=short_timeout_server.http_url,
                                              connection_timeout=20, network_timeout=20)
    try:
        start = time.monotonic()
        answer = _infer(client, "mlp_slow", x[:1])
        elapsed = time.monotonic() - start
        assert elapsed > 1.5, f"answered in {elapsed:.2f} s: the batcher did not hold it"
        assert_close(answer, y[:1], "mlp_slow after waiting past the idle timeout")
    finally:
        client.close()


def test_metrics_scrapes_are_not_stalled_by_idle_connections(two_thread_server):
    """/metrics shares the epoll loop design; prometheus-cpp's own server (2 civetweb threads) let
    three idle connections hold every scrape for 30 s."""
    held = [socket.create_connection(("127.0.0.1", two_thread_server.metrics_port), timeout=10)
            for _ in range(20)]
    try:
        start = time.monotonic()
        request = urllib.request.Request(two_thread_server.metrics_url,
                                         headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=20) as response:
            assert response.headers["Content-Encoding"] == "gzip"
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = gzip.decompress(response.read()).decode()
        elapsed = time.monotonic() - start
        assert elapsed < 5, f"a scrape beside 20 idle connections took {elapsed:.1f} s"
        assert "nv_inference_request_success{" in text
        with urllib.request.urlopen(two_thread_server.metrics_url, timeout=20) as response:
            assert "nv_inference_count{" in response.read().decode()  # uncompressed when not asked
        base = two_thread_server.metrics_url.rsplit("/", 1)[0]
        for url, method, status in ((f"{base}/nope", "GET", 404),
                                    (two_thread_server.metrics_url, "POST", 405)):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(urllib.request.Request(url, data=b"" if method == "POST"
                                                              else None, method=method), timeout=20)
            assert refused.value.code == status
            assert "/metrics" in refused.value.read().decode()
    finally:
        for s in held:
            s.close()
