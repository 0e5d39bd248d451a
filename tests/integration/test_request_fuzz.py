"""Seeded random bad requests (request_fuzz.py) against a real server: each gets an expected status
with a message, and afterwards the server, its executor and both models are still serving, with no
executor restarted. A thousand cases per seed keep it CI-sized (seconds); request_fuzz.py runs
longer ones."""

import grpc
import pytest
import tritonclient.utils.shared_memory as shm
from tritonclient.grpc import service_pb2

from conftest import MODELS_DIR, require_bundled_models
from request_fuzz import SERVICE, SHM_BYTES, SHM_KEY, SHM_REGION, Fuzzer
from tessera_testlib import fuzz_and_check_nothing_broke

CASES_PER_SEED = 1000


@pytest.fixture(scope="module")
def fuzz_server(make_server):
    require_bundled_models()
    # poll mode: the load/unload cases meet the repository as most deployments have it.
    return make_server(repository=MODELS_DIR, mode="poll", extra_args=("--allow-client-shm",),
                       wait_models=("mlp", "small_cnn"))


@pytest.fixture
def region():
    handle = shm.create_shared_memory_region(SHM_REGION, SHM_KEY, SHM_BYTES)
    yield
    shm.destroy_shared_memory_region(handle)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_bad_requests_get_clear_errors_and_break_nothing(fuzz_server, region, seed):
    fuzzer = Fuzzer(fuzz_server.url, seed)
    fuzzer.register_region()
    fuzz_and_check_nothing_broke(fuzz_server, fuzzer, CASES_PER_SEED)
    fuzz_server.client().unregister_system_shared_memory()


def test_malformed_bytes_are_named_for_unary_calls_and_streams_go_on(fuzz_server):
    with grpc.insecure_channel(fuzz_server.url) as channel:
        for method, message in [("ModelInfer", "inference.ModelInferRequest"),
                                ("ModelMetadata", "inference.ModelMetadataRequest"),
                                ("SystemSharedMemoryRegister",
                                 "inference.SystemSharedMemoryRegisterRequest")]:
            with pytest.raises(grpc.RpcError) as info:
                channel.unary_unary(SERVICE + method)(b"\xff\xff", timeout=10)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value
            assert message in info.value.details(), info.value.details()
        with pytest.raises(grpc.RpcError) as info:
            channel.unary_unary(SERVICE + "NoSuchMethod")(b"", timeout=10)
        assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert "NoSuchMethod" in info.value.details(), info.value.details()

        # A stream answers an unparsable message with an error response and keeps serving.
        good = service_pb2.ModelInferRequest(model_name="mlp", id="after")
        good.inputs.add(name="input", datatype="FP32", shape=[1, 64])
        good.raw_input_contents.append(bytes(64 * 4))
        stream = channel.stream_stream(SERVICE + "ModelStreamInfer")
        answers = [service_pb2.ModelStreamInferResponse.FromString(r)
                   for r in stream(iter([b"\xff\xff", good.SerializeToString()]), timeout=10)]
    assert len(answers) == 2, answers
    errors = [a for a in answers if a.error_message]
    served = [a for a in answers if not a.error_message]
    assert len(errors) == 1 and "inference.ModelInferRequest" in errors[0].error_message, answers
    assert len(served) == 1 and served[0].infer_response.id == "after", answers
    assert len(served[0].infer_response.outputs) == 1
