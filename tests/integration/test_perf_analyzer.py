"""Triton's own load generator, perf_analyzer (its PyPI binary, unchanged), measures Tessera over gRPC
in each of its inference modes (sync, async, streaming, system shared memory, batches, request
rate), over HTTP (its default protocol), and with random strings to a BYTES model: every request
must succeed, and the server-side statistics it reads (ModelStatistics) must account for every
request it sent.

perf_analyzer is fetched by scripts/install_deps.sh (scripts/fetch_perf_analyzer.sh); on Debian 12 it
runs on Debian 13's C runtime, which that script puts beside it.
"""

import csv
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import MODELS_DIR, require_bundled_models
from tessera_testlib import SOURCE_DIR, model_stats
from test_bytes_tensors import labels_model, save

PERF_ANALYZER = Path(os.environ.get("TESSERA_PERF_ANALYZER",
                                    SOURCE_DIR / ".cache" / "perf_analyzer" / "bin" / "perf_analyzer"))
RUN_TIMEOUT_S = 120
# Short windows, and no stability rule in effect: the test asserts correctness, not speed. A 2-core
# CI machine running other tests beside this one once gave windows whose average latency differed
# more than 3x (the old 200 % bound); perf_analyzer then ends a sweep after its first level.
WINDOW_ARGS = ["--measurement-interval", "400", "--stability-percentage", "100000", "--max-trials",
               "6"]


@pytest.fixture(scope="module")
def server(make_server):
    """The bundled models, with client shared memory allowed (for --shared-memory system)."""
    require_bundled_models()
    return make_server(repository=MODELS_DIR, mode="none", extra_args=("--allow-client-shm",))


@pytest.fixture(scope="module")
def perf_analyzer():
    if not PERF_ANALYZER.is_file():
        pytest.fail(f"{PERF_ANALYZER} not found: run scripts/install_deps.sh "
                    f"(or scripts/fetch_perf_analyzer.sh)", pytrace=False)
    return PERF_ANALYZER


def run_perf_analyzer(perf_analyzer, server, tmp_path, model, *args, protocol="grpc"):
    """Runs perf_analyzer; returns (stdout, csv rows). Fails the test with its output on an error."""
    report = tmp_path / f"{model}.csv"
    url = server.url if protocol == "grpc" else server.http_url
    cmd = [str(perf_analyzer), "-m", model, "-i", protocol, "-u", url, "-f", str(report),
           *WINDOW_ARGS, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        pytest.fail(f"perf_analyzer exited {proc.returncode}\n$ {' '.join(cmd)}\n{out}\n"
                    f"--- server log\n{server.log_tail_text()}", pytrace=False)
    with open(report, newline="") as f:
        rows = list(csv.DictReader(f))
    return out, rows


def server_counts(out):
    """(client request count, server inference count, server successful count) per load level."""
    client = [int(n) for n in re.findall(r"Request count: (\d+)", out)]
    inferences = [int(n) for n in re.findall(r"Inference count: (\d+)", out)]
    successes = [int(n) for n in re.findall(r"Successful request count: (\d+)", out)]
    return client, inferences, successes


def assert_all_served(out, rows, levels, batch=1):
    assert "rror" not in out, out
    assert len(rows) == levels, f"expected {levels} CSV rows, got {rows}\n{out}"
    for row in rows:
        assert float(row["Inferences/Second"]) > 0, row
    client, inferences, successes = server_counts(out)
    assert len(client) == levels and len(successes) == levels, out
    for sent, inferred, succeeded in zip(client, inferences, successes):
        assert sent > 0
        # The server's window is read just before and after the client's, so it can count a few
        # requests of the neighbouring windows, but never fewer than the client sent (no loss).
        assert succeeded >= sent * 0.95, out
        assert inferred == succeeded * batch, out


@pytest.mark.parametrize("model", ["mlp", "small_cnn"])
def test_sync_concurrency_sweep(perf_analyzer, server, tmp_path, model):
    out, rows = run_perf_analyzer(perf_analyzer, server, tmp_path, model,
                                  "--concurrency-range", "1:3:2")
    assert_all_served(out, rows, levels=2)
    # The server-side breakdown comes from ModelStatistics ("statistics" extension).
    assert re.search(r"overhead \d+ usec \+ queue \d+ usec \+ compute input", out), out


def test_async_batch_of_four(perf_analyzer, server, tmp_path):
    out, rows = run_perf_analyzer(perf_analyzer, server, tmp_path, "small_cnn", "--async",
                                  "-b", "4", "--concurrency-range", "2")
    assert_all_served(out, rows, levels=1, batch=4)


def test_request_rate_with_zero_inputs(perf_analyzer, server, tmp_path):
    out, rows = run_perf_analyzer(perf_analyzer, server, tmp_path, "mlp", "--request-rate-range",
                                  "200", "--input-data", "zero")
    assert_all_served(out, rows, levels=1)


def test_streaming(perf_analyzer, server, tmp_path):
    out, rows = run_perf_analyzer(perf_analyzer, server, tmp_path, "mlp", "--streaming",
                                  "--concurrency-range", "2")
    assert_all_served(out, rows, levels=1)


@pytest.mark.parametrize("batch", [1, 3])
def test_system_shared_memory(perf_analyzer, server, tmp_path, batch):
    out, rows = run_perf_analyzer(perf_analyzer, server, tmp_path, "small_cnn", "--shared-memory",
                                  "system", "-b", str(batch), "--concurrency-range", "2")
    assert_all_served(out, rows, levels=1, batch=batch)


@pytest.mark.parametrize("model", ["mlp", "small_cnn"])
def test_http_concurrency_sweep(perf_analyzer, server, tmp_path, model):
    out, rows = run_perf_analyzer(perf_analyzer, server, tmp_path, model,
                                  "--concurrency-range", "1:3:2", protocol="http")
    assert_all_served(out, rows, levels=2)
    assert "Avg HTTP time" in out, out


def test_http_async_batch_of_four_from_json_inputs(perf_analyzer, server, tmp_path):
    # perf_analyzer sends the tensors as binary data unless --input-tensor-format json. Its random
    # data are random bytes, NaNs among them, which JSON cannot spell: zeros instead.
    out, rows = run_perf_analyzer(perf_analyzer, server, tmp_path, "small_cnn", "--async", "-b",
                                  "4", "--concurrency-range", "2", "--input-tensor-format", "json",
                                  "--input-data", "zero", protocol="http")
    assert_all_served(out, rows, levels=1, batch=4)


def test_http_system_shared_memory(perf_analyzer, server, tmp_path):
    out, rows = run_perf_analyzer(perf_analyzer, server, tmp_path, "small_cnn", "--shared-memory",
                                  "system", "-b", "2", "--concurrency-range", "2", protocol="http")
    assert_all_served(out, rows, levels=1, batch=2)


ENSEMBLE_PBTXT = """name: "mlp_ensemble"
platform: "ensemble"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 64 ] } ]
output [ { name: "PROBS" data_type: TYPE_FP32 dims: [ 10 ] } ]
ensemble_scheduling {
  step [ { model_name: "mlp" input_map { key: "input" value: "INPUT" }
           output_map { key: "output" value: "PROBS" } } ]
}
"""


@pytest.fixture(scope="module")
def composite_server(make_server, tmp_path_factory):
    """The bundled models plus an ensemble over mlp and a copy of mlp with the response cache."""
    require_bundled_models()
    repo = tmp_path_factory.mktemp("pa") / "models"
    shutil.copytree(MODELS_DIR, repo)
    (repo / "mlp_ensemble" / "1").mkdir(parents=True)
    (repo / "mlp_ensemble" / "config.pbtxt").write_text(ENSEMBLE_PBTXT)
    shutil.copytree(repo / "mlp", repo / "mlp_cached")
    config = repo / "mlp_cached" / "config.yaml"
    config.write_text(config.read_text().replace("name: mlp", "name: mlp_cached")
                      + "response_cache: {enable: true}\n")
    return make_server(repository=repo, mode="none",
                       extra_args=("--cache-config", "local,size=1048576"))


def test_ensemble_with_its_composing_model_statistics(perf_analyzer, composite_server, tmp_path):
    out, rows = run_perf_analyzer(perf_analyzer, composite_server, tmp_path, "mlp_ensemble",
                                  "--concurrency-range", "2")
    assert "rror" not in out and len(rows) == 1, out
    # perf_analyzer follows ensemble_scheduling to the composing model's statistics, listed after
    # the ensemble's own: every request the client sent ran once on mlp.
    assert re.search(r"Composing models: \n\s*mlp, version: 1", out), out
    (sent,), _, (ensemble_ok, mlp_ok) = server_counts(out)
    assert sent > 0 and ensemble_ok >= sent * 0.95 and mlp_ok == ensemble_ok, out


def test_response_cache_hits_are_reported(perf_analyzer, composite_server, tmp_path):
    out, rows = run_perf_analyzer(perf_analyzer, composite_server, tmp_path, "mlp_cached",
                                  "--concurrency-range", "2", "--input-data", "zero")
    assert "rror" not in out, out
    # perf_analyzer reports the server side of its last measurement window. Cache hits are not
    # inferences (Triton's inference_count excludes them), and perf_analyzer prints a window made
    # only of hits as "Request count: 0" without the cache lines: on a loaded machine the last
    # window may come after the first requests' misses. Either form is right; the server's own
    # statistics must then show the hits.
    hits = [int(n) for n in re.findall(r"Cache hit count: (\d+)", out)]
    misses = [int(n) for n in re.findall(r"Cache miss count: (\d+)", out)]
    server_requests = re.findall(r"Server: \n\s*Request count: (\d+)", out)
    assert (hits and hits[-1] > 0) or server_requests == ["0"], out
    # Every request carries the same zeros: only the first ones (one per concurrent request at
    # most) miss.
    assert not misses or misses[-1] <= 2, out
    stats = model_stats(composite_server.client(), "mlp_cached").inference_stats
    assert stats.cache_hit.count > 0 and 0 < stats.cache_miss.count <= 2, stats


@pytest.fixture(scope="module")
def strings_server(make_server, tmp_path_factory):
    """A model with a BYTES input and BYTES and INT64 outputs (StringNormalizer, LabelEncoder)."""
    repo = tmp_path_factory.mktemp("pa_strings") / "models"
    save(labels_model(), repo, "str_labels")
    return make_server(repository=repo, mode="none", wait_models=["str_labels"])


@pytest.mark.parametrize("protocol, args", [
    ("grpc", ("-b", "2", "--concurrency-range", "2")),
    ("http", ("--concurrency-range", "2")),
    ("http", ("--input-tensor-format", "json", "--output-tensor-format", "json")),
])
def test_random_strings_to_a_bytes_model(perf_analyzer, strings_server, tmp_path, protocol, args):
    # perf_analyzer fills BYTES inputs with random strings (--string-length, 128 by default).
    out, rows = run_perf_analyzer(perf_analyzer, strings_server, tmp_path, "str_labels", *args,
                                  protocol=protocol)
    batch = int(args[1]) if args[0] == "-b" else 1
    assert_all_served(out, rows, levels=1, batch=batch)
