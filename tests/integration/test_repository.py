"""Model repository API in explicit mode, on a private copy of the bundled repository:
index, load, unload, reload, and loads that must fail cleanly (bad config, truncated model)."""

import os
import re
import shutil
from pathlib import Path

import grpc
import numpy as np
import onnx
import pytest
from tritonclient.grpc import service_pb2, service_pb2_grpc

from conftest import copy_repository
from tessera_testlib import (OUTPUT_NAME, assert_close, assert_mlp_serves, executor_pids,
                             expect_error, find_model_file, infer, load_reference, make_input,
                             model_ready, wait_until)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return copy_repository(tmp_path_factory.mktemp("explicit") / "models")


@pytest.fixture(scope="module")
def server(make_server, repo):
    return make_server(repository=repo, mode="explicit", load_models=["mlp"], wait_models=["mlp"])


@pytest.fixture(scope="module")
def client(server):
    return server.client()


def index_states(client):
    return {m.name: m.state for m in client.get_model_repository_index().models}


def with_name(config_text, name):
    """The config text with its top-level `name:` (if any) set to `name`."""
    return re.sub(r"(?m)^name:.*$", f"name: {name}", config_text)


def clone_model(repo, source, dest):
    shutil.copytree(repo / source, repo / dest)
    cfg = repo / dest / "config.yaml"
    cfg.write_text(with_name(cfg.read_text(), dest))
    return repo / dest


def test_index_lists_loaded_and_unloaded_models(server, client):
    states = index_states(client)
    assert states.get("mlp") == "READY", states
    assert "small_cnn" in states, states
    assert states["small_cnn"] != "READY", states
    assert client.is_model_ready("small_cnn") is False
    # Only the ready ones when asked so.
    # Only the ready ones when asked so (tritonclient has no argument for it: raw stub).
    with grpc.insecure_channel(server.url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        ready_only = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=True), timeout=10)
    assert {m.name for m in ready_only.models} == {"mlp"}


def test_infer_on_not_loaded_model_fails(client):
    x, _ = load_reference("small_cnn")
    expect_error(lambda: infer(client, "small_cnn", x), "UNAVAILABLE", "NOT_FOUND")


def test_load_model(client):
    client.load_model("small_cnn")
    assert client.is_model_ready("small_cnn")
    assert index_states(client)["small_cnn"] == "READY"
    x, y = load_reference("small_cnn")
    assert_close(infer(client, "small_cnn", x).as_numpy(OUTPUT_NAME), y)


def test_unload_and_reload(client):
    client.unload_model("mlp")
    wait_until(lambda: not model_ready(client, "mlp"), timeout=10, what="mlp to unload")
    assert index_states(client).get("mlp") != "READY"
    x, y = load_reference("mlp")
    expect_error(lambda: infer(client, "mlp", x), "UNAVAILABLE", "NOT_FOUND")
    # The other model is untouched.
    assert client.is_model_ready("small_cnn")

    client.load_model("mlp")
    assert client.is_model_ready("mlp")
    assert_close(infer(client, "mlp", x).as_numpy(OUTPUT_NAME), y)


def test_reload_of_loaded_model(client):
    client.load_model("mlp")  # loading a loaded model reloads it and keeps it serving
    assert client.is_model_ready("mlp")
    assert_mlp_serves(client)


def test_load_unknown_model(client):
    e = expect_error(lambda: client.load_model("not_in_repository"),
                     "NOT_FOUND", "INVALID_ARGUMENT")
    assert "not_in_repository" in e.message()
    assert_mlp_serves(client)


def test_load_config_with_unknown_key_fails(client, repo):
    folder = clone_model(repo, "mlp", "broken_cfg")
    cfg = folder / "config.yaml"
    cfg.write_text(cfg.read_text().rstrip("\n") + "\ndimz: [64]\n")
    e = expect_error(lambda: client.load_model("broken_cfg"), "INVALID_ARGUMENT")
    assert "config.yaml" in e.message() and "dimz" in e.message(), e.message()
    assert client.is_model_ready("broken_cfg") is False
    assert_mlp_serves(client)


def test_load_config_with_bad_yaml_fails(client, repo):
    folder = clone_model(repo, "mlp", "broken_yaml")
    (folder / "config.yaml").write_text("name: broken_yaml\nmax_batch_size: [8\n  input: {\n")
    e = expect_error(lambda: client.load_model("broken_yaml"), "INVALID_ARGUMENT")
    assert "config.yaml" in e.message(), e.message()
    assert_mlp_serves(client)


def test_load_truncated_model_fails(client, repo):
    folder = clone_model(repo, "mlp", "truncated")
    model_file = find_model_file("truncated", repository=repo)
    data = model_file.read_bytes()
    model_file.write_bytes(data[:len(data) // 2])
    e = expect_error(lambda: client.load_model("truncated"),
                     "INVALID_ARGUMENT", "INTERNAL", "UNAVAILABLE", "FAILED_PRECONDITION")
    assert model_file.name in e.message(), e.message()
    assert client.is_model_ready("truncated") is False
    assert folder.is_dir()
    assert_mlp_serves(client)


# The mlp model's config as Triton writes it, with hints Tessera ignores (noted in the log).
TRITON_MLP_PBTXT = """name: "mlp_triton"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {
    name: "input"
    data_type: TYPE_FP32
    format: FORMAT_NONE
    dims: [ 64 ]
  }
]
output [ { name: "output", data_type: TYPE_FP32, dims: [ 10 ] } ]
dynamic_batching { max_queue_delay_microseconds: 500 }
instance_group [ { count: 1, kind: KIND_CPU } ]
optimization { execution_accelerators { cpu_execution_accelerator : [ { name : "openvino" } ] } }
parameters { key: "slo_ms" value { string_value: "250" } }
"""


def triton_model(repo, name, pbtxt):
    """A model folder in Triton's layout: config.pbtxt and 1/model.onnx (mlp's weights)."""
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    shutil.copy(find_model_file("mlp", repository=repo), folder / "1" / "model.onnx")
    (folder / "config.pbtxt").write_text(pbtxt)
    return folder


def test_triton_config_pbtxt_model_serves(server, client, repo):
    triton_model(repo, "mlp_triton", TRITON_MLP_PBTXT)
    client.load_model("mlp_triton")
    assert client.is_model_ready("mlp_triton")
    x, y = load_reference("mlp")
    assert_close(infer(client, "mlp_triton", x).as_numpy(OUTPUT_NAME), y)
    config = client.get_model_config("mlp_triton").config
    assert config.max_batch_size == 8
    assert [i.name for i in config.input] == ["input"]
    assert list(config.input[0].dims) == [64]
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    # The ignored accelerator is named in the log, with the file and line.
    wait_until(lambda: "config.pbtxt:15: optimization: ignored" in server.log_path.read_text(),
               timeout=5, what="the note on the ignored optimization block")


def test_broken_triton_config_pbtxt_fails_cleanly(client, repo):
    seq = (TRITON_MLP_PBTXT.replace('"mlp_triton"', '"seq_triton"')
           .replace("dynamic_batching { max_queue_delay_microseconds: 500 }\n", "")
           + "sequence_batching { iterative_sequence: true }\n")
    triton_model(repo, "seq_triton", seq)
    e = expect_error(lambda: client.load_model("seq_triton"), "INVALID_ARGUMENT")
    assert "config.pbtxt:16: sequence_batching.iterative_sequence: iterative sequences are not " \
        "supported" in e.message(), e.message()
    triton_model(repo, "typo_triton", TRITON_MLP_PBTXT.replace('"mlp_triton"', '"typo_triton"')
                 .replace("max_queue_delay_microseconds", "max_queue_delay_us"))
    e = expect_error(lambda: client.load_model("typo_triton"), "INVALID_ARGUMENT")
    assert "config.pbtxt:13:" in e.message() and "max_queue_delay_us" in e.message(), e.message()
    assert client.is_model_ready("seq_triton") is False
    assert_mlp_serves(client)


def test_model_folder_without_config_is_completed_from_the_model(server, client, repo):
    # Triton's auto-completion: the config comes from the ONNX file's inputs and outputs.
    folder = repo / "mlp_bare"
    (folder / "1").mkdir(parents=True)
    shutil.copy(find_model_file("mlp", repository=repo), folder / "1" / "model.onnx")
    client.load_model("mlp_bare")
    x, y = load_reference("mlp")
    assert_close(infer(client, "mlp_bare", x).as_numpy(OUTPUT_NAME), y)
    config = client.get_model_config("mlp_bare").config
    assert config.max_batch_size == 4  # every first dim is dynamic: Triton's default
    assert config.HasField("dynamic_batching")
    assert [(i.name, list(i.dims)) for i in config.input] == [("input", [64])]
    assert [(o.name, list(o.dims)) for o in config.output] == [("output", [10])]
    metadata = client.get_model_metadata("mlp_bare")
    assert list(metadata.inputs[0].shape) == [-1, 64]
    log = server.log_path.read_text()
    assert "model 'mlp_bare' version 1: completed from " in log, log
    assert "model.onnx: max_batch_size 4: every input and output has a dynamic first dim" in log

    # A config.pbtxt that names only what it wants: the rest comes from the model.
    folder = triton_model(repo, "mlp_partial", 'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n')
    client.load_model("mlp_partial")
    config = client.get_model_config("mlp_partial").config
    assert config.max_batch_size == 8 and not config.HasField("dynamic_batching")
    assert_close(infer(client, "mlp_partial", x).as_numpy(OUTPUT_NAME), y)

    # A model file that cannot be read: the load fails naming it, nothing else changes.
    folder = repo / "bare_truncated"
    (folder / "1").mkdir(parents=True)
    data = find_model_file("mlp", repository=repo).read_bytes()
    (folder / "1" / "model.onnx").write_bytes(data[:len(data) // 2])
    e = expect_error(lambda: client.load_model("bare_truncated"), "INVALID_ARGUMENT")
    assert "bare_truncated/1/model.onnx is not a valid ONNX model" in e.message(), e.message()
    assert_mlp_serves(client)


def test_model_with_external_data_serves(client, repo):
    # Weights in a file beside model.onnx (ONNX's external-data format, as onnx.save writes it for
    # models over 2 GiB); no config either, so this is completed from the model file too.
    import onnx
    folder = repo / "cnn_external"
    (folder / "1").mkdir(parents=True)
    model = onnx.load(str(find_model_file("small_cnn", repository=repo)))
    onnx.save_model(model, str(folder / "1" / "model.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="weights.data", size_threshold=0)
    assert (folder / "1" / "weights.data").stat().st_size > 10000
    client.load_model("cnn_external")
    x, y = load_reference("small_cnn")
    assert_close(infer(client, "cnn_external", x).as_numpy(OUTPUT_NAME), y)

    # A weights file that is gone: the load fails naming it.
    broken = repo / "cnn_external_lost"
    shutil.copytree(folder, broken)
    (broken / "1" / "weights.data").unlink()
    e = expect_error(lambda: client.load_model("cnn_external_lost"), "INVALID_ARGUMENT")
    assert "weights.data" in e.message(), e.message()
    assert_mlp_serves(client)


def test_classification_labels_come_from_label_filename(client, repo):
    import tritonclient.grpc as grpcclient
    folder = clone_model(repo, "mlp", "mlp_labels")
    cfg = folder / "config.yaml"
    cfg.write_text(cfg.read_text().replace("    dims: [10]\n", "    dims: [10]\n    label_filename: labels.txt\n"))
    (folder / "labels.txt").write_text("".join(f"class {i}\n" for i in range(10)))
    client.load_model("mlp_labels")
    assert client.get_model_config("mlp_labels").config.output[0].label_filename == "labels.txt"
    x, _ = load_reference("mlp")
    top = client.infer("mlp_labels", [make_input(x)], outputs=[
        grpcclient.InferRequestedOutput(OUTPUT_NAME, class_count=2)]).as_numpy(OUTPUT_NAME)
    for entry in top.reshape(-1):
        value, index, label = entry.decode().split(":")
        assert label == f"class {index}"

    # A label file that is missing fails the load, naming it.
    (folder / "labels.txt").unlink()
    e = expect_error(lambda: client.load_model("mlp_labels"), "INVALID_ARGUMENT")
    assert "label_filename" in e.message() and "labels.txt" in e.message(), e.message()
    assert_mlp_serves(client)


def test_auto_complete_can_be_turned_off(make_server, tmp_path):
    repo = copy_repository(tmp_path / "models")
    triton_model(repo, "mlp_bare", "")  # an empty config.pbtxt: everything from the model file
    server = make_server(repository=repo, mode="explicit", load_models=["mlp"], wait_models=["mlp"],
                         extra_args=["--disable-auto-complete-config"])
    client = server.client()
    e = expect_error(lambda: client.load_model("mlp_bare"), "INVALID_ARGUMENT")
    assert "lists no input" in e.message() and "--disable-auto-complete-config" in e.message()
    assert_mlp_serves(client)


def test_names_that_are_not_utf8_fail_their_load_and_nothing_else(server, client, repo):
    """Found by repository_fuzz.py: a corrupt name in a model file (here a byte that is not UTF-8 in
    the tensor one node reads) made the executor's error unparsable; the server took the whole
    executor for dead and restarted it. Now the load fails with the name shown, and that is all."""
    executors = sorted(executor_pids(server.proc.pid))
    folder = clone_model(repo, "mlp", "bad_name")
    model_file = find_model_file("bad_name", repository=repo)
    data = model_file.read_bytes()
    name = b"/fc1/Gemm_output_0"
    at = data.index(name, data.index(name) + 1)  # the Relu's input, not the Gemm's output
    model_file.write_bytes(data[:at] + b"/fc1/Gemm\xa7output_0" + data[at + len(name):])
    e = expect_error(lambda: client.load_model("bad_name"), "INVALID_ARGUMENT")
    assert "/fc1/Gemm?output_0" in e.message(), e.message()
    # A folder whose own name is not UTF-8 is listed as far as it can be: before, the index
    # response carried the raw bytes in a string field and the client could not parse it.
    bad_folder = Path(os.fsdecode(bytes(repo) + b"/bad\xffname"))
    shutil.copytree(folder, bad_folder)
    (bad_folder / "config.yaml").write_text(with_name((folder / "config.yaml").read_text(), "x"))
    reasons = {m.name: m.reason for m in client.get_model_repository_index().models}
    assert "bad?name" in reasons, reasons
    shutil.rmtree(bad_folder)
    assert sorted(executor_pids(server.proc.pid)) == executors, "an executor was restarted"
    assert_mlp_serves(client)


def test_model_that_cannot_run_fails_its_load_not_its_requests(client, repo):
    """Found by repository_fuzz.py: a model whose file parses but whose graph cannot run (here the
    second Gemm's transB flag flipped, so its inner dims differ) became READY and failed every
    request with INTERNAL. Its warm-up run now fails the load, naming the node."""
    folder = clone_model(repo, "mlp", "cannot_run")
    model_file = find_model_file("cannot_run", repository=repo)
    model = onnx.load(str(model_file))
    gemm = [n for n in model.graph.node if n.op_type == "Gemm"][1]
    next(a for a in gemm.attribute if a.name == "transB").i = 0
    onnx.save(model, str(model_file))
    e = expect_error(lambda: client.load_model("cannot_run"), "INVALID_ARGUMENT")
    assert "warm-up" in e.message() and gemm.name in e.message(), e.message()
    assert client.is_model_ready("cannot_run") is False
    assert folder.is_dir()
    assert_mlp_serves(client)


def test_model_the_engine_cannot_run_is_invalid_argument(client, repo):
    """The executor now reports its engine's refusal (here an opset the importer does not know)
    as UNIMPLEMENTED, so that a GPU server can load a KIND_AUTO model the CUDA backend refuses on
    the CPU instead. On a CPU server nothing is left to try, and the client still sees the load
    fail as the model's fault, INVALID_ARGUMENT, naming the reason."""
    clone_model(repo, "mlp", "future_opset")
    model_file = find_model_file("future_opset", repository=repo)
    model = onnx.load(str(model_file))
    model.opset_import[0].version = 999
    onnx.save(model, str(model_file))
    e = expect_error(lambda: client.load_model("future_opset"), "INVALID_ARGUMENT")
    assert "opset 999" in e.message() and "future_opset" in e.message(), e.message()
    assert client.is_model_ready("future_opset") is False
    assert_mlp_serves(client)


def save_single_op_model(repo, name, op, input_shape, output_shape, **attributes):
    """A config-less model folder whose ONNX graph is one `op` node from x (FP32) to y."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, input_shape)
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, output_shape)
    node = onnx.helper.make_node(op, ["x"], ["y"], name=f"the_{op.lower()}", **attributes)
    model = onnx.helper.make_model(onnx.helper.make_graph([node], name, [x], [y]),
                                   opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    (repo / name / "1").mkdir(parents=True)
    onnx.save(model, str(repo / name / "1" / "model.onnx"))


def test_model_whose_inputs_cannot_fit_the_executor_fails_its_load_and_nothing_else(
        server, client, repo):
    """Found by model_fuzz.py: an input of 2^40 x 2 floats in a model file took the server down
    (std::bad_alloc while making the warm-up's zeros). Now the load fails before allocating, naming
    the input and the ring it would have to fit."""
    executors = sorted(executor_pids(server.proc.pid))
    save_single_op_model(repo, "huge_input", "Relu", [1 << 40, 2], [1 << 40, 2])
    e = expect_error(lambda: client.load_model("huge_input"), "RESOURCE_EXHAUSTED")
    assert "input 'x' of shape [1099511627776, 2] is 8796093022208 bytes" in e.message(), \
        e.message()
    assert "executors.input_ring_bytes" in e.message(), e.message()
    assert server.proc.poll() is None, "the server exited"
    assert sorted(executor_pids(server.proc.pid)) == executors, "an executor was restarted"
    assert_mlp_serves(client)


def save_huge_constant_model(repo, name, rows):
    """x [-1, 4] times the column maxima of a [rows, 4] constant of ones that a ConstantOfShape
    makes: constant folding at load allocates rows * 16 bytes."""
    shape = onnx.helper.make_tensor("shape", onnx.TensorProto.INT64, [2], [rows, 4])
    one = onnx.helper.make_tensor("one", onnx.TensorProto.FLOAT, [1], [1.0])
    nodes = [onnx.helper.make_node("ConstantOfShape", ["shape"], ["ones"], value=one, name="fill"),
             onnx.helper.make_node("ReduceMax", ["ones"], ["m"], axes=[0], keepdims=0, name="max"),
             onnx.helper.make_node("Mul", ["x", "m"], ["y"], name="scale")]
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 4])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 4])
    model = onnx.helper.make_model(onnx.helper.make_graph(nodes, name, [x], [y], [shape]),
                                   opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    (repo / name / "1").mkdir(parents=True)
    onnx.save(model, str(repo / name / "1" / "model.onnx"))


def test_model_over_the_executor_memory_limit_fails_its_load_and_nothing_else(make_server,
                                                                              tmp_path):
    """A model asking for more memory than an executor may allocate (here 2.4 GB folded at load,
    against executors.memory_limit_mb = 1024) fails its load with RESOURCE_EXHAUSTED naming the
    limit. Without the limit such a model, up to the machine's overcommit, was allocated, and
    when it did not fit the kernel's OOM killer ended the executor with every model on it."""
    repo = copy_repository(tmp_path / "models")
    save_huge_constant_model(repo, "huge_constant", 150_000_000)
    save_huge_constant_model(repo, "small_constant", 1000)
    config = tmp_path / "server.yaml"
    config.write_text("executors:\n  memory_limit_mb: 1024\n")
    server = make_server(repository=repo, mode="explicit", config=config, load_models=["mlp"],
                         wait_models=["mlp"])
    client = server.client()
    executors = sorted(executor_pids(server.proc.pid))
    e = expect_error(lambda: client.load_model("huge_constant"), "RESOURCE_EXHAUSTED")
    assert "out of memory loading the model" in e.message(), e.message()
    assert "at most 1024 MiB (executors.memory_limit_mb)" in e.message(), e.message()
    assert sorted(executor_pids(server.proc.pid)) == executors, "an executor was restarted"
    client.load_model("small_constant")  # the same graph, small enough, loads and runs
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    result = client.infer("small_constant", [make_input(x, name="x")])
    np.testing.assert_array_equal(result.as_numpy("y"), x)
    assert_mlp_serves(client)


def relu_with_warmup(repo, name, warmup_input):
    """A Relu model over a variable-length row, in Triton's layout, whose config.pbtxt has one
    model_warmup sample giving `warmup_input` 16 values per row."""
    save_single_op_model(repo, name, "Relu", ["batch", "length"], ["batch", "length"])
    (repo / name / "config.pbtxt").write_text(
        f'name: "{name}"\nmax_batch_size: 4\n'
        'input { name: "x" data_type: TYPE_FP32 dims: [ -1 ] }\n'
        'output { name: "y" data_type: TYPE_FP32 dims: [ -1 ] }\n'
        f'model_warmup [ {{ name: "rows16" batch_size: 2 inputs {{ key: "{warmup_input}" '
        'value { data_type: TYPE_FP32 dims: [ 16 ] random_data: true } } } ]\n')


def test_model_warmup_samples_run_at_load(server, client, repo):
    """Triton's model_warmup: a model whose row length varies cannot be warmed at a guessed shape;
    its config's sample is run before it reports READY, and a sample that does not fit the model
    fails the load, naming the sample and the input."""
    relu_with_warmup(repo, "warm_relu", "x")
    client.load_model("warm_relu")
    assert client.is_model_ready("warm_relu")
    assert "model warm_relu/1: warmed up 1 instance(s) with model_warmup [rows16]" in \
        server.log_path.read_text(errors="replace")
    x = np.array([[-1.0, 2.0, -3.0]], dtype=np.float32)
    result = client.infer("warm_relu", [make_input(x, name="x")])
    np.testing.assert_array_equal(result.as_numpy("y"), np.maximum(x, 0))

    relu_with_warmup(repo, "warm_relu_bad", "z")
    e = expect_error(lambda: client.load_model("warm_relu_bad"), "INVALID_ARGUMENT")
    assert 'model_warmup "rows16"' in e.message(), e.message()
    assert "gives no data for the model's input 'x'" in e.message(), e.message()
    assert client.is_model_ready("warm_relu_bad") is False
    assert_mlp_serves(client)


def test_model_warmup_reads_data_files_from_the_warmup_folder(server, client, repo):
    """Triton's input_data_file: one row of raw data in <model>/warmup/, repeated for each row of
    the sample; a file whose size is not one row fails the load naming the file and the sizes."""
    save_single_op_model(repo, "warm_file", "Relu", ["batch", "length"], ["batch", "length"])
    (repo / "warm_file" / "warmup").mkdir()
    (repo / "warm_file" / "warmup" / "row16").write_bytes(
        np.linspace(-1, 1, 16, dtype=np.float32).tobytes())
    (repo / "warm_file" / "warmup" / "row15").write_bytes(np.zeros(15, np.float32).tobytes())
    config = ('name: "warm_file"\nmax_batch_size: 4\n'
              'input { name: "x" data_type: TYPE_FP32 dims: [ -1 ] }\n'
              'output { name: "y" data_type: TYPE_FP32 dims: [ -1 ] }\n'
              'model_warmup [ { name: "real" batch_size: 3 inputs { key: "x" '
              'value { data_type: TYPE_FP32 dims: [ 16 ] input_data_file: "%s" } } } ]\n')
    (repo / "warm_file" / "config.pbtxt").write_text(config % "row16")
    client.load_model("warm_file")
    assert "model warm_file/1: warmed up 1 instance(s) with model_warmup [real]" in \
        server.log_path.read_text(errors="replace")
    x = np.array([[-1.0, 2.0]], dtype=np.float32)
    np.testing.assert_array_equal(
        client.infer("warm_file", [make_input(x, name="x")]).as_numpy("y"), np.maximum(x, 0))

    (repo / "warm_file" / "config.pbtxt").write_text(config % "row15")
    e = expect_error(lambda: client.load_model("warm_file"), "INVALID_ARGUMENT")
    assert "input 'x': input_data_file row15 holds 60 bytes; one row of dims [16] of " \
        "TYPE_FP32 is 64 bytes" in e.message(), e.message()
    (repo / "warm_file" / "config.pbtxt").write_text(config % "missing")
    e = expect_error(lambda: client.load_model("warm_file"), "INVALID_ARGUMENT")
    assert "cannot read its input_data_file" in e.message(), e.message()
    assert client.is_model_ready("warm_file")  # the first load still serves
    assert_mlp_serves(client)


def test_model_file_dims_of_size_zero_fail_the_load_clearly(client, repo):
    """Found by model_fuzz.py: a dim of size 0 in a model file was completed as 'any size', and
    every request then failed in the engine (which held the model to 0) with INTERNAL."""
    save_single_op_model(repo, "zero_dim", "Relu", [2, 0], [2, 0])
    e = expect_error(lambda: client.load_model("zero_dim"), "INVALID_ARGUMENT")
    assert "input 'x' has a dim of size 0 in the model file (dim 1)" in e.message(), e.message()
    assert_mlp_serves(client)


def test_input_the_model_cannot_run_is_refused_as_invalid_argument(client, repo):
    """Found by model_fuzz.py: a request the config allows but the model cannot run (here an input
    smaller than a pooling window, with the spatial dims left free) was answered INTERNAL, as if
    the server had failed. It is the input that does not suit the model: INVALID_ARGUMENT, naming
    the node."""
    save_single_op_model(repo, "pool", "MaxPool", [1, 1, "h", "w"], [1, 1, "oh", "ow"],
                         kernel_shape=[3, 3])
    client.load_model("pool")

    def pool(side):
        x = np.zeros((1, 1, side, side), np.float32)
        return client.infer("pool", [make_input(x, name="x")]).as_numpy("y")

    assert pool(5).shape == (1, 1, 3, 3)
    e = expect_error(lambda: pool(2), "INVALID_ARGUMENT")
    assert "the_maxpool" in e.message() and "window" in e.message(), e.message()
    assert_mlp_serves(client)


def test_still_serving_after_failed_loads(client):
    assert client.is_model_ready("mlp")
    assert client.is_model_ready("small_cnn")
    assert_mlp_serves(client)
    x, y = load_reference("small_cnn")
    assert_close(infer(client, "small_cnn", x).as_numpy(OUTPUT_NAME), y)


def test_reshape_serves_clients_in_the_configs_dims(client, repo):
    """Triton's reshape: clients send and receive `dims`, the model file takes and gives the
    reshape (here [b, 4, n] from clients is the model's [b, 2, 2, n], and a [b, 1] input is the
    model's [b]). Warm-up samples are in the config's dims too; a reshape whose element count
    differs fails the load naming the tensor."""
    save_single_op_model(repo, "reshaped", "Relu", ["batch", 2, 2, "n"], ["batch", 2, 2, "n"])
    (repo / "reshaped" / "config.pbtxt").write_text(
        'name: "reshaped"\nmax_batch_size: 4\n'
        'input { name: "x" data_type: TYPE_FP32 dims: [ 4, -1 ] reshape { shape: [ 2, 2, -1 ] } }\n'
        'output { name: "y" data_type: TYPE_FP32 dims: [ 4, -1 ] reshape { shape: [ 2, 2, -1 ] } }\n'
        'model_warmup [ { name: "n3" batch_size: 2 inputs { key: "x" '
        'value { data_type: TYPE_FP32 dims: [ 4, 3 ] random_data: true } } } ]\n')
    client.load_model("reshaped")
    x = np.arange(-12, 12, dtype=np.float32).reshape(2, 4, 3)
    y = client.infer("reshaped", [make_input(x, name="x")]).as_numpy("y")
    assert y.shape == (2, 4, 3)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    config = client.get_model_config("reshaped").config
    assert list(config.input[0].dims) == [4, -1]
    assert list(config.input[0].reshape.shape) == [2, 2, -1]
    assert list(config.output[0].reshape.shape) == [2, 2, -1]
    e = expect_error(lambda: client.infer("reshaped", [make_input(x.reshape(2, 2, 2, 3), name="x")]),
                     "INVALID_ARGUMENT")
    assert "[-1, 4, -1]" in e.message(), e.message()

    save_single_op_model(repo, "scalar_rows", "Relu", ["batch"], ["batch"])
    (repo / "scalar_rows" / "config.pbtxt").write_text(
        'name: "scalar_rows"\nmax_batch_size: 8\n'
        'input { name: "x" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } }\n'
        'output { name: "y" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } }\n'
        'dynamic_batching { max_queue_delay_microseconds: 100 }\n')
    client.load_model("scalar_rows")
    x = np.array([[-2.0], [3.0], [-0.5]], dtype=np.float32)
    y = client.infer("scalar_rows", [make_input(x, name="x")]).as_numpy("y")
    np.testing.assert_array_equal(y, np.maximum(x, 0))

    save_single_op_model(repo, "bad_reshape", "Relu", ["batch", 4], ["batch", 4])
    (repo / "bad_reshape" / "config.pbtxt").write_text(
        'name: "bad_reshape"\nmax_batch_size: 4\n'
        'input { name: "x" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 3 ] } }\n'
        'output { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }\n')
    e = expect_error(lambda: client.load_model("bad_reshape"), "INVALID_ARGUMENT")
    assert "config.pbtxt:3: input[0].reshape: [2, 3] has 6 elements, dims [4] has 4" in \
        e.message(), e.message()
    assert_mlp_serves(client)
