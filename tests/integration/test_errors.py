"""Bad requests get the right gRPC status and a message that names the problem, and the server keeps
serving afterwards (every case ends with a correct mlp inference)."""

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc

from tessera_testlib import (INPUT_NAME, OUTPUT_NAME, assert_mlp_serves, expect_error, infer,
                             load_reference, make_input)


@pytest.fixture(scope="module")
def stub(server):
    """Raw gRPC stub, for requests that tritonclient refuses to build."""
    channel = grpc.insecure_channel(server.url)
    yield service_pb2_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


@pytest.fixture(autouse=True)
def still_serving(client):
    yield
    assert_mlp_serves(client)


def raw_error(call, *codes):
    with pytest.raises(grpc.RpcError) as info:
        call()
    e = info.value
    assert e.code() in codes, f"expected {codes}, got {e.code()}: {e.details()}"
    return e.details() or ""


def test_unknown_model(client):
    x, _ = load_reference("mlp")
    e = expect_error(lambda: infer(client, "no_such_model", x), "NOT_FOUND")
    assert "no_such_model" in e.message()
    e = expect_error(lambda: client.get_model_metadata("no_such_model"), "NOT_FOUND")
    assert "no_such_model" in e.message()
    expect_error(lambda: client.get_model_config("no_such_model"), "NOT_FOUND")


def test_unknown_version(client):
    x, _ = load_reference("mlp")
    expect_error(lambda: infer(client, "mlp", x, model_version="7"), "NOT_FOUND", "UNAVAILABLE")


def test_model_ready_of_unknown_model_is_false(client):
    assert client.is_model_ready("no_such_model") is False


@pytest.mark.parametrize("dtype,np_dtype", [("FP64", np.float64), ("INT32", np.int32)])
def test_wrong_datatype(client, dtype, np_dtype):
    x, _ = load_reference("mlp")
    inp = grpcclient.InferInput(INPUT_NAME, list(x.shape), dtype)
    inp.set_data_from_numpy(x.astype(np_dtype))
    e = expect_error(lambda: client.infer("mlp", [inp]), "INVALID_ARGUMENT")
    msg = e.message()
    assert INPUT_NAME in msg and dtype in msg and "FP32" in msg, msg


@pytest.mark.parametrize("shape", [[1, 63], [1, 65], [64], [1, 8, 8]])
def test_wrong_shape(client, shape):
    x = np.zeros(shape, dtype=np.float32)
    e = expect_error(lambda: client.infer("mlp", [make_input(x)]), "INVALID_ARGUMENT")
    msg = e.message()
    assert INPUT_NAME in msg, msg
    assert str(shape[-1]) in msg, msg


def test_batch_larger_than_max_batch_size(client):
    x = np.zeros([9, 64], dtype=np.float32)
    expect_error(lambda: client.infer("mlp", [make_input(x)]), "INVALID_ARGUMENT")


def test_unknown_input_name(client):
    x, _ = load_reference("mlp")
    e = expect_error(lambda: client.infer("mlp", [make_input(x, name="nope")]), "INVALID_ARGUMENT")
    assert "nope" in e.message()


def test_unknown_output(client):
    x, _ = load_reference("mlp")
    e = expect_error(lambda: infer(client, "mlp", x, outputs=("not_an_output",)),
                     "INVALID_ARGUMENT")
    assert "not_an_output" in e.message()


def test_missing_input(stub):
    request = service_pb2.ModelInferRequest(model_name="mlp")
    request.outputs.add(name=OUTPUT_NAME)
    msg = raw_error(lambda: stub.ModelInfer(request, timeout=10), grpc.StatusCode.INVALID_ARGUMENT)
    assert INPUT_NAME in msg, msg


@pytest.mark.parametrize("byte_size", [64 * 4 - 4, 64 * 4 + 4, 0])
def test_wrong_raw_byte_size(stub, byte_size):
    request = service_pb2.ModelInferRequest(model_name="mlp")
    request.inputs.add(name=INPUT_NAME, datatype="FP32", shape=[1, 64])
    request.raw_input_contents.append(b"\0" * byte_size)
    msg = raw_error(lambda: stub.ModelInfer(request, timeout=10), grpc.StatusCode.INVALID_ARGUMENT)
    assert "byte" in msg.lower(), msg


def test_raw_contents_count_mismatch(stub):
    # Two raw buffers for one input.
    request = service_pb2.ModelInferRequest(model_name="mlp")
    request.inputs.add(name=INPUT_NAME, datatype="FP32", shape=[1, 64])
    request.raw_input_contents.append(b"\0" * 256)
    request.raw_input_contents.append(b"\0" * 256)
    raw_error(lambda: stub.ModelInfer(request, timeout=10), grpc.StatusCode.INVALID_ARGUMENT)


def test_typed_contents_are_accepted(stub):
    # The protocol also allows the typed `contents` field instead of raw bytes.
    x, y = load_reference("mlp")
    request = service_pb2.ModelInferRequest(model_name="mlp")
    tensor = request.inputs.add(name=INPUT_NAME, datatype="FP32", shape=list(x.shape))
    tensor.contents.fp32_contents.extend(x.ravel().tolist())
    response = stub.ModelInfer(request, timeout=10)
    assert [o.name for o in response.outputs] == [OUTPUT_NAME]
    if response.raw_output_contents:
        out = np.frombuffer(response.raw_output_contents[0], dtype=np.float32)
    else:
        out = np.array(response.outputs[0].contents.fp32_contents, dtype=np.float32)
    np.testing.assert_allclose(out.reshape(y.shape), y, rtol=1e-4, atol=1e-5)


def test_duplicate_input(client):
    x, _ = load_reference("mlp")
    expect_error(lambda: client.infer("mlp", [make_input(x), make_input(x)]), "INVALID_ARGUMENT")


def test_message_above_grpc_default_limit_reaches_validation(stub):
    # 5 MiB is past grpc's default 4 MiB receive limit; the server raises it as Triton does, so
    # this request reaches validation (wrong byte size) instead of dying as RESOURCE_EXHAUSTED.
    request = service_pb2.ModelInferRequest(model_name="mlp")
    request.inputs.add(name=INPUT_NAME, datatype="FP32", shape=[1, 64])
    request.raw_input_contents.append(b"\0" * (5 << 20))
    msg = raw_error(lambda: stub.ModelInfer(request, timeout=30), grpc.StatusCode.INVALID_ARGUMENT)
    assert "5242880 bytes" in msg, msg
