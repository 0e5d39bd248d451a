"""Health, metadata, config, inference, concurrency, statistics and metrics against the bundled
repository (mlp and small_cnn), through tritonclient's gRPC client."""

import threading

import grpc
import numpy as np
import pytest
from tritonclient.grpc import model_config_pb2

from tessera_testlib import (BUNDLED_MODELS, INPUT_DIMS, INPUT_NAME, MAX_BATCH_SIZE, OUTPUT_DIMS,
                             OUTPUT_NAME, OrtReference, assert_close, fetch_metrics, infer,
                             load_reference, make_input, metric_sum, model_stats, parse_metrics,
                             random_inputs, wait_until)


def test_health(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    for model in BUNDLED_MODELS:
        assert client.is_model_ready(model), model
        assert client.is_model_ready(model, "1"), model


def test_grpc_health_checking_protocol(server):
    """grpc.health.v1.Health/Check, as Kubernetes' gRPC probes and grpc_health_probe ask it
    (messages hand-encoded: the health proto's Python package is not a dependency)."""
    with grpc.insecure_channel(server.url) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=bytes, response_deserializer=bytes)
        assert check(b"", timeout=10) == b"\x08\x01"  # HealthCheckResponse{status: SERVING}
        with pytest.raises(grpc.RpcError) as info:
            check(b"\x0a\x03foo", timeout=10)  # HealthCheckRequest{service: "foo"}
        assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_server_metadata(client):
    md = client.get_server_metadata()
    assert md.name == "tessera"
    assert md.version != ""
    for ext in ("statistics", "model_repository", "classification"):
        assert ext in md.extensions, f"{ext} not in {list(md.extensions)}"


@pytest.mark.parametrize("model", BUNDLED_MODELS)
def test_model_metadata(client, model):
    md = client.get_model_metadata(model)
    assert md.name == model
    assert list(md.versions) == ["1"]
    assert md.platform == "onnx"
    assert [(t.name, t.datatype, list(t.shape)) for t in md.inputs] == \
        [(INPUT_NAME, "FP32", [-1] + INPUT_DIMS[model])]
    assert [(t.name, t.datatype, list(t.shape)) for t in md.outputs] == \
        [(OUTPUT_NAME, "FP32", [-1] + OUTPUT_DIMS[model])]
    # The explicit version answers the same.
    assert client.get_model_metadata(model, "1").name == model


@pytest.mark.parametrize("model", BUNDLED_MODELS)
def test_model_config(client, model):
    cfg = client.get_model_config(model).config
    assert cfg.name == model
    assert cfg.platform == "onnx"
    assert cfg.max_batch_size == MAX_BATCH_SIZE
    assert [(i.name, i.data_type, list(i.dims)) for i in cfg.input] == \
        [(INPUT_NAME, model_config_pb2.TYPE_FP32, INPUT_DIMS[model])]
    assert [(o.name, o.data_type, list(o.dims)) for o in cfg.output] == \
        [(OUTPUT_NAME, model_config_pb2.TYPE_FP32, OUTPUT_DIMS[model])]
    if model == "mlp":
        assert cfg.HasField("dynamic_batching")


@pytest.mark.parametrize("model", BUNDLED_MODELS)
def test_infer_reference_batch(client, model):
    x, y = load_reference(model)
    assert x.shape[0] == 4, x.shape
    result = infer(client, model, x)
    out = result.get_output(OUTPUT_NAME)
    assert out.datatype == "FP32"
    assert list(out.shape) == [4] + OUTPUT_DIMS[model]
    assert_close(result.as_numpy(OUTPUT_NAME), y, model)
    assert result.get_response().model_name == model


@pytest.mark.parametrize("model", BUNDLED_MODELS)
def test_infer_single_rows(client, model):
    x, y = load_reference(model)
    for row in range(x.shape[0]):
        result = infer(client, model, x[row:row + 1])
        assert list(result.get_output(OUTPUT_NAME).shape) == [1] + OUTPUT_DIMS[model]
        assert_close(result.as_numpy(OUTPUT_NAME), y[row:row + 1], f"{model} row {row}")


def test_infer_all_outputs_by_default(client):
    # No outputs requested = all outputs, returned as raw_output_contents.
    x, y = load_reference("mlp")
    result = client.infer("mlp", [make_input(x)])
    response = result.get_response()
    assert [o.name for o in response.outputs] == [OUTPUT_NAME]
    assert len(response.raw_output_contents) == 1
    assert_close(result.as_numpy(OUTPUT_NAME), y)


def test_classification_returns_the_top_classes(client):
    # Triton's classification extension, as tritonclient asks for it (class_count).
    import tritonclient.grpc as grpcclient
    x, _ = load_reference("mlp")
    probs = infer(client, "mlp", x).as_numpy(OUTPUT_NAME)
    result = client.infer("mlp", [make_input(x)],
                          outputs=[grpcclient.InferRequestedOutput(OUTPUT_NAME, class_count=3)])
    top = result.as_numpy(OUTPUT_NAME)
    assert top.shape == (x.shape[0], 3)
    assert result.get_output(OUTPUT_NAME).datatype == "BYTES"
    for row in range(x.shape[0]):
        entries = [e.decode().split(":") for e in top[row]]
        assert [int(index) for _, index in entries] == list(np.argsort(-probs[row], kind="stable")[:3])
        np.testing.assert_allclose([float(v) for v, _ in entries],
                                   np.sort(probs[row])[::-1][:3], rtol=1e-5)
    from tessera_testlib import expect_error
    e = expect_error(lambda: client.infer("mlp", [make_input(x)], outputs=[
        grpcclient.InferRequestedOutput(OUTPUT_NAME, class_count=-2)]), "INVALID_ARGUMENT")
    assert "classification parameter must be a positive" in e.message()


def test_infer_explicit_version_and_request_id(client):
    x, y = load_reference("mlp")
    result = infer(client, "mlp", x, model_version="1", request_id="req-42")
    assert result.get_response().id == "req-42"
    assert_close(result.as_numpy(OUTPUT_NAME), y)


def test_infer_max_batch(client):
    x, y = load_reference("mlp")
    xs = np.concatenate([x, x[::-1]])  # 8 rows = max_batch_size
    assert_close(infer(client, "mlp", xs).as_numpy(OUTPUT_NAME), np.concatenate([y, y[::-1]]))


@pytest.mark.parametrize("model", BUNDLED_MODELS)
def test_onnxruntime_agrees_with_reference(model):
    # The concurrency test trusts onnxruntime for inputs outside the reference batch.
    x, y = load_reference(model)
    assert_close(OrtReference(model)(x), y, f"onnxruntime vs reference for {model}")


@pytest.mark.parametrize("model,requests", [("mlp", 48), ("small_cnn", 32)])
def test_concurrent_requests_get_their_own_results(server, model, requests):
    """Many concurrent batch-1 requests with distinct inputs: each gets the answer for its own input
    (a batcher that mixes up rows fails here), and the statistics count every inference."""
    client = server.client()
    xs = random_inputs(model, requests, seed=1234 + requests)
    ort = OrtReference(model)
    expected = [ort(xs[i:i + 1]) for i in range(requests)]
    before = model_stats(client, model)

    results = [None] * requests
    done = threading.Semaphore(0)

    def callback(index, result, error):
        results[index] = (result, error)
        done.release()

    for i in range(requests):
        client.async_infer(model, [make_input(xs[i:i + 1])],
                           callback=lambda result, error, i=i: callback(i, result, error),
                           request_id=str(i), client_timeout=60.0)
    for _ in range(requests):
        assert done.acquire(timeout=90), "async requests did not complete"

    for i, (result, error) in enumerate(results):
        assert error is None, f"request {i}: {error}"
        assert result.get_response().id == str(i)
        assert_close(result.as_numpy(OUTPUT_NAME), expected[i], f"{model} request {i}")

    after = wait_until(
        lambda: (s := model_stats(client, model)).inference_count >= before.inference_count + requests
        and s, timeout=5, what="statistics to count the requests")
    assert after.inference_count - before.inference_count == requests
    executions = after.execution_count - before.execution_count
    assert 1 <= executions <= requests
    assert after.inference_stats.success.count - before.inference_stats.success.count == requests


def test_statistics_advance_per_request(client):
    x, _ = load_reference("mlp")
    before = model_stats(client, "mlp")
    n = 5
    for _ in range(n):
        infer(client, "mlp", x[:1])
    infer(client, "mlp", x)  # one request of batch 4

    after = wait_until(
        lambda: (s := model_stats(client, "mlp")).inference_stats.success.count
        >= before.inference_stats.success.count + n + 1 and s,
        timeout=5, what="success.count to advance")
    bs, as_ = before.inference_stats, after.inference_stats
    assert as_.success.count - bs.success.count == n + 1
    assert as_.queue.count - bs.queue.count == n + 1
    # inference_count counts every sample of a batched request (Triton's meaning).
    assert after.inference_count - before.inference_count == n + 4
    assert after.execution_count > before.execution_count
    assert as_.fail.count == bs.fail.count
    for field in ("success", "queue", "compute_input", "compute_infer", "compute_output"):
        stat = getattr(as_, field)
        assert stat.count > 0 and stat.ns > 0, f"{field}: {stat}"
    assert as_.success.ns > bs.success.ns
    assert after.last_inference > 0
    assert after.version == "1"


def test_statistics_of_all_models(client):
    resp = client.get_inference_statistics()
    names = {s.name for s in resp.model_stats}
    assert set(BUNDLED_MODELS) <= names, names


def test_metrics_endpoint(server):
    client = server.client()
    x, _ = load_reference("mlp")
    for _ in range(3):
        infer(client, "mlp", x[:1])

    def metrics_agree():
        samples = parse_metrics(fetch_metrics(server.metrics_url))
        success = metric_sum(samples, "nv_inference_request_success", model="mlp")
        wanted = model_stats(client, "mlp").inference_stats.success.count
        return (success is not None and success == wanted) and samples

    samples = wait_until(metrics_agree, timeout=5,
                         what="nv_inference_request_success{model=\"mlp\"} to equal success.count")
    assert metric_sum(samples, "nv_inference_request_success", model="mlp") >= 3
    assert metric_sum(samples, "nv_inference_queue_duration_us", model="mlp") is not None
    text = fetch_metrics(server.metrics_url)
    assert "nv_inference_request_success{" in text
    assert "nv_inference_queue_duration_us" in text
    # The host's CPU and memory, under Triton's names (sampled every 2 s by default).
    samples = wait_until(
        lambda: (lambda s: metric_sum(s, "nv_cpu_utilization") is not None and s)(
            parse_metrics(fetch_metrics(server.metrics_url))),
        timeout=10, what="nv_cpu_utilization")
    assert 0.0 <= metric_sum(samples, "nv_cpu_utilization") <= 1.0
    total = metric_sum(samples, "nv_cpu_memory_total_bytes")
    assert 0 < metric_sum(samples, "nv_cpu_memory_used_bytes") < total
    # GPU metrics come from NVML where the driver has it; the log says which.
    log = server.log_path.read_text(errors="replace")
    if "no GPU metrics:" in log:
        assert "nv_gpu_" not in fetch_metrics(server.metrics_url)
    else:
        assert "GPU metrics (nv_gpu_*) from NVML" in log, log[-2000:]
