"""tritonserver's own command-line flags: a Triton launch line starts tessera-server unchanged.
Flags with a Tessera meaning take effect (log format and file, --model-config-name, --exit-on-error,
--strict-readiness over ServerReady, /v2/health/ready and grpc.health.v1), Triton's tuning flags are accepted and named in the log as unused, and
values that cannot be honoured stop the start naming the flag."""
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import grpc
import pytest

from conftest import copy_repository
from tessera_testlib import (BIN_DIR, MODELS_DIR, assert_close, assert_mlp_serves, fetch_metrics,
                             infer_output, load_reference, model_ready, start_fails, wait_until)


def http_status(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as e:
        return e.code


def grpc_health(server):
    """grpc.health.v1.Health/Check for the server (""): True for SERVING, False for NOT_SERVING."""
    with grpc.insecure_channel(server.url) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        answer = check(b"", timeout=10)  # an empty HealthCheckRequest; status is field 1
    assert answer in (b"\x08\x01", b"\x08\x02"), answer
    return answer == b"\x08\x01"


def add_broken_model(repo, name="broken"):
    folder = repo / name
    shutil.copytree(repo / "mlp", folder)
    (folder / "config.yaml").write_text(f"name: {name}\nmax_batch_size: [8\n")  # bad YAML
    return folder


def test_a_triton_launch_line_serves(make_server, tmp_path):
    log_file = tmp_path / "server.log"
    server = make_server(repository=MODELS_DIR, mode="none", wait_models=["mlp"], extra_args=[
        "--strict-model-config=false", "--exit-timeout-secs", "5", "--log-format", "ISO8601",
        "--log-file", str(log_file), "--pinned-memory-pool-byte-size=268435456",
        "--cuda-memory-pool-byte-size", "0:67108864", "--backend-config",
        "onnxruntime,default-max-batch-size=8", "--model-load-thread-count", "2",
        "--exit-on-error=false", "--strict-readiness=false", "--allow-grpc=true",
        "--allow-cpu-metrics=false", "--allow-gpu-metrics=false",
        "--metrics-interval-ms", "100", "--grpc-keepalive-time", "60000",
        "--grpc-keepalive-permit-without-calls=true", "--grpc-http2-max-pings-without-data", "0",
        "--grpc-infer-response-compression-level", "high", "--trace-config", "rate=100",
        "--metrics-config", "summary_latencies=true", "--model-namespacing=false"])
    assert_mlp_serves(server.client())
    time.sleep(0.3)
    assert "nv_cpu_" not in fetch_metrics(server.metrics_url)
    assert "GPU metrics" not in log_file.read_text()  # NVML not even tried
    text = log_file.read_text()
    assert "--pinned-memory-pool-byte-size 268435456: not used" in text, text
    assert "--backend-config onnxruntime,default-max-batch-size=8: not used" in text, text
    # ISO8601: UTC timestamps ending in Z.
    first = text.splitlines()[0]
    assert first[:4].isdigit() and "Z" in first.split()[0], first


def test_a_second_server_cannot_take_a_port_in_use(make_server, tmp_path):
    """As in Triton (--reuse-grpc-port=false): gRPC's own default, SO_REUSEPORT, let a second
    server bind the same port and take half the connections."""
    first = make_server(repository=MODELS_DIR, mode="none", wait_models=["mlp"])
    command = [str(BIN_DIR / "tessera-server"), "--model-repository", str(MODELS_DIR),
               "--grpc-port", str(first.grpc_port), "--metrics-port", "-1", "--http-port", "-1",
               "--model-control-mode", "none"]
    run = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode != 0, run.stdout + run.stderr
    assert f"cannot listen for gRPC on 0.0.0.0:{first.grpc_port}" in run.stdout + run.stderr
    assert_mlp_serves(first.client())


@pytest.mark.parametrize("args, message", [
    (["--allow-grpc=false"], "--allow-grpc=false: tessera-server always serves"),
    (["--allow-metrics=false"], "--allow-metrics=false contradicts --metrics-port"),
    (["--log-format", "json"], "json"),
    (["--allow-http", "perhaps"], "perhaps"),
    (["--model-config-name", "../h100"], "--model-config-name: '../h100' is not a config name"),
    (["--trace-config", "opentelemetry,url=localhost:4318"], "need trace mode opentelemetry"),
    (["--model-namespacing=true"], "--model-namespacing=true"),
])
def test_values_that_cannot_be_honoured_stop_the_start(args, message):
    out = start_fails(*args)
    assert message in out, out


def test_exit_on_error_ends_the_start_naming_the_model(tmp_path):
    repo = copy_repository(tmp_path / "models")
    add_broken_model(repo)
    command = [str(BIN_DIR / "tessera-server"), "--model-repository", str(repo),
               "--grpc-port", "0", "--http-port", "-1", "--metrics-port", "-1",
               "--model-control-mode", "none", "--exit-on-error=true"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "1 model(s) failed to load at start" in out and "broken:" in out, out
    assert "listening" not in out, out  # no endpoint was opened


def test_strict_readiness_follows_the_models(make_server, tmp_path):
    repo = copy_repository(tmp_path / "models")
    strict = make_server(repository=repo, mode="poll", poll_secs=1, wait_models=["mlp"],
                         extra_args=["--strict-readiness=true"])
    lenient = make_server(repository=repo, mode="poll", poll_secs=1, wait_models=["mlp"])
    strict_client, lenient_client = strict.client(), lenient.client()
    assert strict_client.is_server_ready() and grpc_health(strict)

    folder = add_broken_model(repo)
    wait_until(lambda: not strict_client.is_server_ready(), 30,
               what="the strict server to turn unready after a model failed its load")
    assert not model_ready(strict_client, "broken")
    assert http_status(f"http://{strict.http_url}/v2/health/ready") == 400
    assert http_status(f"http://{strict.http_url}/v2/health/live") == 200
    assert not grpc_health(strict)
    assert_mlp_serves(strict_client)  # unready is a signal, not a refusal
    wait_until(lambda: "broken" in {m.name for m in lenient_client.get_model_repository_index()
                                    .models if m.reason}, 30, what="the lenient server's poll")
    assert lenient_client.is_server_ready() and grpc_health(lenient)

    shutil.rmtree(folder)
    wait_until(strict_client.is_server_ready, 30,
               what="the strict server to be ready once the broken model is gone")
    assert grpc_health(strict)


def test_model_config_name_picks_each_folders_custom_config(make_server, tmp_path):
    """Triton's custom model configuration: configs/<name>.pbtxt where a folder has one."""
    repo = copy_repository(tmp_path / "models")
    (repo / "mlp" / "configs").mkdir()
    config = (repo / "mlp" / "config.yaml").read_text().replace("max_batch_size: 8",
                                                                "max_batch_size: 2")
    (repo / "mlp" / "configs" / "small.yaml").write_text(config)
    server = make_server(repository=repo, mode="none", wait_models=["mlp", "small_cnn"],
                         extra_args=["--model-config-name", "small"])
    client = server.client()
    assert client.get_model_config("mlp").config.max_batch_size == 2
    assert client.get_model_config("small_cnn").config.max_batch_size == 8  # its own config
    x, y = load_reference("mlp")
    assert_close(infer_output(client, "mlp", x[:2]), y[:2])
