"""Triton's response cache through tritonclient: with --cache-config local,size=N, a model whose
config enables response_cache answers a repeated request from the cache (counted in
ModelStatistics' cache_hit and the nv_cache_* metrics, nothing executed), and models without it
always run."""
import os
import shutil
import subprocess

import numpy as np
import onnx
import pytest

from conftest import copy_repository
from tessera_testlib import (OUTPUT_NAME, assert_close, fetch_metrics, load_reference, make_input,
                             metric_sum, model_stats, parse_metrics, wait_until)


@pytest.fixture(scope="module")
def cached(make_server, tmp_path_factory):
    repo = copy_repository(tmp_path_factory.mktemp("cache") / "models")
    shutil.copytree(repo / "mlp", repo / "mlp_cached")
    config = repo / "mlp_cached" / "config.yaml"
    config.write_text(config.read_text().replace("name: mlp", "name: mlp_cached")
                      + "response_cache:\n  enable: true\n")
    server = make_server(repository=repo, mode="poll", poll_secs=1,
                         wait_models=["mlp", "mlp_cached"],
                         extra_args=("--cache-config", "local,size=1048576"))
    return server, server.client(), repo


def infer(client, model, x):
    return client.infer(model, [make_input(x)]).as_numpy(OUTPUT_NAME)


def test_a_repeated_request_is_answered_from_the_cache(cached):
    server, client, _ = cached
    x, y = load_reference("mlp")
    for _ in range(3):
        assert_close(infer(client, "mlp_cached", x), y, "mlp_cached")
    stats = model_stats(client, "mlp_cached")
    assert stats.inference_stats.cache_miss.count == 1
    assert stats.inference_stats.cache_hit.count == 2
    assert stats.inference_stats.success.count == 3
    assert stats.execution_count == 1  # the two hits ran nothing
    # Other inputs are other entries: one more miss, then a hit.
    x2 = (x + 1).astype(np.float32)
    first, second = infer(client, "mlp_cached", x2), infer(client, "mlp_cached", x2)
    np.testing.assert_array_equal(first, second)
    assert not np.allclose(first, y)
    stats = model_stats(client, "mlp_cached")
    assert (stats.inference_stats.cache_miss.count, stats.inference_stats.cache_hit.count) == (2, 3)
    assert client.get_model_config("mlp_cached").config.response_cache.enable

    samples = parse_metrics(fetch_metrics(server.metrics_url))
    assert metric_sum(samples, "nv_cache_num_hits_per_model", model="mlp_cached") == 3
    assert metric_sum(samples, "nv_cache_num_misses_per_model", model="mlp_cached") == 2


def test_models_without_response_cache_always_run(cached):
    _, client, _ = cached
    x, y = load_reference("mlp")
    before = model_stats(client, "mlp").execution_count
    for _ in range(2):
        assert_close(infer(client, "mlp", x), y, "mlp")
    stats = model_stats(client, "mlp")
    assert stats.execution_count == before + 2
    assert stats.inference_stats.cache_hit.count == 0
    assert stats.inference_stats.cache_miss.count == 0


def test_a_bad_cache_config_stops_the_server_with_a_message():
    binary = os.path.join(os.environ["TESSERA_BIN_DIR"], "tessera-server")
    result = subprocess.run([binary, "--cache-config", "redis,host=localhost"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "expected local,size=<bytes>" in result.stderr, result.stderr


def test_a_reloaded_model_file_never_gets_the_old_files_answers(cached):
    """Version 1's file replaced (poll mode reloads it as version 1 again): the same request must
    run the new file, not come back from the cache of the old one."""
    server, client, repo = cached
    x, y = load_reference("mlp")
    assert_close(infer(client, "mlp_cached", x), y, "before the reload")  # cached now
    # A model with mlp's signature whose answer is the first 10 inputs.
    inp = onnx.helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, ["batch", 64])
    out = onnx.helper.make_tensor_value_info("output", onnx.TensorProto.FLOAT, ["batch", 10])
    consts = [onnx.helper.make_tensor(n, onnx.TensorProto.INT64, [1], [v])
              for n, v in (("starts", 0), ("ends", 10), ("axes", 1))]
    node = onnx.helper.make_node("Slice", ["input", "starts", "ends", "axes"], ["output"])
    model = onnx.helper.make_model(onnx.helper.make_graph([node], "head", [inp], [out], consts),
                                   opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(repo / "mlp_cached" / "1" / "model.onnx"))
    wait_until(lambda: "model 'mlp_cached' ready, version(s) 1 (replacing the previous load)"
               in server.log_path.read_text(errors="replace"), timeout=20, what="the reload")
    np.testing.assert_array_equal(infer(client, "mlp_cached", x), x[:, :10])
