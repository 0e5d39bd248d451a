"""The system shared-memory extension through tritonclient's own helpers: inputs read from, and
outputs written into, POSIX shared memory the client created; registration and its errors; and a
server that has not allowed it refusing with a message that says how to turn it on."""

import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as shm

from conftest import MODELS_DIR, require_bundled_models
from tessera_testlib import (INPUT_NAME, OUTPUT_NAME, OrtReference, assert_close,
                             assert_mlp_serves, expect_error, load_reference, make_input,
                             random_inputs)


@pytest.fixture(scope="module")
def shm_server(make_server):
    require_bundled_models()
    return make_server(repository=MODELS_DIR, mode="none", extra_args=("--allow-client-shm",))


@pytest.fixture(scope="module")
def client(shm_server):
    c = shm_server.client()
    c.unregister_system_shared_memory()
    return c


@pytest.fixture
def regions(client):
    """Creates client-side regions on demand; unregisters and destroys them afterwards."""
    made = []

    def make(name, byte_size):
        handle = shm.create_shared_memory_region(name, f"/tessera-test-{name}", byte_size)
        made.append((name, handle))
        return handle

    yield make
    client.unregister_system_shared_memory()
    for _, handle in made:
        shm.destroy_shared_memory_region(handle)


def shm_input(x, region, offset=0):
    inp = grpcclient.InferInput(INPUT_NAME, list(x.shape), "FP32")
    inp.set_shared_memory(region, x.nbytes, offset=offset)
    return inp


def test_input_and_output_in_shared_memory(client, regions):
    x, y = load_reference("small_cnn")
    in_handle = regions("in", x.nbytes)
    out_handle = regions("out", y.nbytes)
    shm.set_shared_memory_region(in_handle, [x])
    client.register_system_shared_memory("in", "/tessera-test-in", x.nbytes)
    client.register_system_shared_memory("out", "/tessera-test-out", y.nbytes)
    assert "system_shared_memory" in client.get_server_metadata().extensions

    out = grpcclient.InferRequestedOutput(OUTPUT_NAME)
    out.set_shared_memory("out", y.nbytes)
    result = client.infer("small_cnn", [shm_input(x, "in")], outputs=[out])
    meta = result.get_output(OUTPUT_NAME)
    assert list(meta.shape) == list(y.shape)
    got = shm.get_contents_as_numpy(out_handle, np.float32, list(y.shape))
    assert_close(got, y, "small_cnn output read from shared memory")
    # Nothing came back over gRPC for the output that went to shared memory.
    assert result.get_response().raw_output_contents[0] == b""


def test_many_requests_share_one_region_at_different_offsets(client, regions):
    """Four requests in flight at once, each with its input and output window in one region."""
    reference = OrtReference("mlp")
    xs = [random_inputs("mlp", batch, seed=batch) for batch in (1, 2, 3, 4)]
    in_bytes, out_bytes = sum(x.nbytes for x in xs), sum(x.shape[0] * 10 * 4 for x in xs)
    in_handle = regions("many-in", in_bytes)
    out_handle = regions("many-out", out_bytes)
    client.register_system_shared_memory("many-in", "/tessera-test-many-in", in_bytes)
    client.register_system_shared_memory("many-out", "/tessera-test-many-out", out_bytes)
    results, in_offset, out_offset, pending = [], 0, 0, []
    for x in xs:
        shm.set_shared_memory_region(in_handle, [x], offset=in_offset)
        out = grpcclient.InferRequestedOutput(OUTPUT_NAME)
        n_out = x.shape[0] * 10 * 4
        out.set_shared_memory("many-out", n_out, offset=out_offset)
        pending.append((x, out_offset))
        client.async_infer("mlp", [shm_input(x, "many-in", in_offset)],
                           callback=lambda result, error: results.append((result, error)), outputs=[out])
        in_offset += x.nbytes
        out_offset += n_out
    deadline = time.monotonic() + 10
    while len(results) < len(xs) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(results) == len(xs), results
    assert all(e is None for _, e in results), results
    for x, offset in pending:
        got = shm.get_contents_as_numpy(out_handle, np.float32, [x.shape[0], 10], offset=offset)
        assert_close(got, reference(x), f"mlp batch {x.shape[0]} at output offset {offset}")


def test_status_lists_registered_regions_and_unregister_removes_them(client, regions):
    regions("status", 256)
    client.register_system_shared_memory("status", "/tessera-test-status", 128, offset=64)
    status = client.get_system_shared_memory_status(as_json=True)
    assert status["regions"]["status"] == {"name": "status", "key": "/tessera-test-status",
                                           "offset": "64", "byte_size": "128"}
    client.unregister_system_shared_memory("status")
    assert client.get_system_shared_memory_status(as_json=True).get("regions", {}) == {}
    # Unregistering again is not an error (as in Triton).
    client.unregister_system_shared_memory("status")


def test_registration_errors(client, regions):
    regions("errs", 64)
    e = expect_error(lambda: client.register_system_shared_memory("x", "/tessera-test-none", 64),
                     "NOT_FOUND")
    assert "/tessera-test-none" in e.message()
    e = expect_error(lambda: client.register_system_shared_memory("x", "/tessera-test-errs", 128),
                     "INVALID_ARGUMENT")
    assert "shared memory region 'x'" in e.message()
    client.register_system_shared_memory("errs", "/tessera-test-errs", 64)
    e = expect_error(lambda: client.register_system_shared_memory("errs", "/tessera-test-errs", 64),
                     "ALREADY_EXISTS")
    assert "already registered" in e.message()
    e = expect_error(lambda: client.get_system_shared_memory_status("nope"), "NOT_FOUND")
    assert "'nope'" in e.message()
    e = expect_error(lambda: client.register_cuda_shared_memory("c", b"\0" * 64, 0, 64),
                     "UNIMPLEMENTED")
    assert "system shared memory instead" in e.message()
    assert_mlp_serves(client)


def test_request_errors_name_the_tensor(client, regions):
    x, _ = load_reference("mlp")
    regions("small", 16)
    client.register_system_shared_memory("small", "/tessera-test-small", 16)
    e = expect_error(lambda: client.infer("mlp", [shm_input(x, "unknown")]), "NOT_FOUND")
    assert "input 'input': shared memory region 'unknown' is not registered" in e.message()
    e = expect_error(lambda: client.infer("mlp", [shm_input(x, "small")]), "INVALID_ARGUMENT")
    assert "lie outside shared memory region 'small'" in e.message()
    # An output window too small for the result fails that request only.
    out = grpcclient.InferRequestedOutput(OUTPUT_NAME)
    out.set_shared_memory("small", 16)
    e = expect_error(lambda: client.infer("mlp", [make_input(x)], outputs=[out]), "INVALID_ARGUMENT")
    assert "output 'output': shared_memory_byte_size is 16" in e.message()
    assert_mlp_serves(client)


def test_regions_truncated_by_their_client_fail_the_request_not_the_server(shm_server, client,
                                                                           regions):
    """A client that truncates its object after registering it takes the pages away from the
    server's mapping too; reading or writing them would kill the server (SIGBUS) with every other
    client's requests. The request fails instead, naming the tensor and the region."""
    x, y = load_reference("mlp")
    regions("gone_in", x.nbytes)
    regions("gone_out", y.nbytes)
    client.register_system_shared_memory("gone_in", "/tessera-test-gone_in", x.nbytes)
    client.register_system_shared_memory("gone_out", "/tessera-test-gone_out", y.nbytes)
    out = grpcclient.InferRequestedOutput(OUTPUT_NAME)
    out.set_shared_memory("gone_out", y.nbytes)
    client.infer("mlp", [make_input(x)], outputs=[out])  # fine while the pages are there
    for key in ("/tessera-test-gone_in", "/tessera-test-gone_out"):
        with open("/dev/shm" + key, "r+b") as f:
            f.truncate(0)
    e = expect_error(lambda: client.infer("mlp", [shm_input(x, "gone_in")]), "INVALID_ARGUMENT")
    assert ("input 'input': shared-memory region 'gone_in': the shared memory under it is gone"
            in e.message())
    e = expect_error(lambda: client.infer("mlp", [make_input(x)], outputs=[out]),
                     "INVALID_ARGUMENT")
    assert ("output 'output': shared-memory region 'gone_out': the shared memory under it is gone"
            in e.message())
    assert shm_server.proc.poll() is None, "the server died"
    assert_mlp_serves(client)


def test_a_server_without_the_flag_refuses_and_says_how_to_allow_it(server, client, regions):
    plain = server.client()
    regions("off", 64)
    e = expect_error(lambda: plain.register_system_shared_memory("off", "/tessera-test-off", 64),
                     "PERMISSION_DENIED")
    assert "--allow-client-shm" in e.message()
    assert "system_shared_memory" not in plain.get_server_metadata().extensions
    x, _ = load_reference("mlp")
    e = expect_error(lambda: plain.infer("mlp", [shm_input(x, "off")]), "PERMISSION_DENIED")
    assert "--allow-client-shm" in e.message()
    assert_mlp_serves(plain)
