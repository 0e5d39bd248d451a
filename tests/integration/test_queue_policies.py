"""Requests whose clients gave up (a gRPC deadline that passed, as tritonclient's client_timeout
sets) are not run when their turn in the queue comes: they are counted as CANCELED failures and
the model's time goes to requests someone still waits for. Likewise requests past their queue
timeout (Triton's default_queue_policy, and the request's own `timeout` parameter where the config
allows it) are answered UNAVAILABLE instead of being run, and a request's `priority` parameter
puts it ahead of the lower levels waiting in the queue, each level with its own queue policy."""
import threading
import time

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

from conftest import copy_repository
from tessera_testlib import assert_mlp_serves, make_input, model_stats

ROWS, WIDTH, LAYERS = 256, 512, 64


def save_slow_model(repo, name="slow", queue_policy=""):
    """y = x @ W @ ... @ W (64 times) on a [256, 512] input: about 20 ms a request on this machine
    class. One request per batch and one instance, so requests queue behind each other. The
    tests need runs long against the Python client's sending: with 16 layers (5 ms a run once the
    engine split its GEMMs over both cores) the queue sometimes drained before the last requests
    arrived. One orthogonal W serves every layer, so the file stays small and the values bounded."""
    rng = np.random.default_rng(0)
    w, _ = np.linalg.qr(rng.standard_normal((WIDTH, WIDTH)))
    inits = [onnx.numpy_helper.from_array(w.astype(np.float32), "w")]
    nodes, prev = [], "x"
    for i in range(LAYERS):
        out = "y" if i == LAYERS - 1 else f"h{i}"
        nodes.append(onnx.helper.make_node("MatMul", [prev, "w"], [out]))
        prev = out
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", ROWS, WIDTH])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", ROWS, WIDTH])
    model = onnx.helper.make_model(onnx.helper.make_graph(nodes, name, [x], [y], inits),
                                   opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    (repo / name / "1").mkdir(parents=True)
    onnx.save(model, str(repo / name / "1" / "model.onnx"))
    (repo / name / "config.yaml").write_text(
        f"name: {name}\nmax_batch_size: 1\ndynamic_batching: {{{queue_policy}}}\n"
        "instance_group: [{count: 1, kind: KIND_CPU}]\n")


def one_run_seconds(client, model, x):
    """Warms `model` and times a request of `x` alone: the fastest of three, so that a moment of
    load on the machine does not make the queue timeouts built from it too long to expire."""
    for _ in range(2):
        client.infer(model, [make_input(x, name="x")])
    runs = []
    for _ in range(3):
        start = time.monotonic()
        client.infer(model, [make_input(x, name="x")])
        runs.append(time.monotonic() - start)
    return min(runs)


def send_at_once(client, model, x, count, **kwargs):
    """`count` async requests of `x` (kwargs go to async_infer); returns the errors, after all
    are answered."""
    answered, errors = threading.Semaphore(0), []

    def done(result, error):
        if error is not None:
            errors.append(error)
        answered.release()

    for _ in range(count):
        client.async_infer(model, [make_input(x, name="x")], done, **kwargs)
    for _ in range(count):
        assert answered.acquire(timeout=60)
    return errors


@pytest.fixture(scope="module")
def served(make_server, tmp_path_factory):
    repo = copy_repository(tmp_path_factory.mktemp("cancel") / "models")
    save_slow_model(repo)
    save_slow_model(repo, "slow_timeout", "default_queue_policy: {allow_timeout_override: true}")
    save_slow_model(repo, "slow_priority", "priority_levels: 2, default_priority_level: 2")
    save_slow_model(repo, "slow_levels", "priority_levels: 2, default_priority_level: 2, "
                    "priority_queue_policy: {2: {max_queue_size: 2}}")
    server = make_server(repository=repo, mode="none",
                         wait_models=["mlp", "slow", "slow_timeout", "slow_priority",
                                      "slow_levels"])
    return server, server.client()


def test_requests_past_their_deadline_in_the_queue_are_not_run(served):
    _, client = served
    x = np.random.default_rng(1).standard_normal((1, ROWS, WIDTH)).astype(np.float32)
    one = one_run_seconds(client, "slow", x)
    before = model_stats(client, "slow")

    # 16 at once, each willing to wait three runs: the later ones are past their deadline long
    # before their turn (request k starts after about k - 1 runs).
    sent = 16
    errors = send_at_once(client, "slow", x, sent, client_timeout=3 * one)
    assert len(errors) >= 2, f"one run {one:.3f} s; errors {errors}"
    assert all("Deadline" in str(e) for e in errors), errors

    def counts():
        after = model_stats(client, "slow")
        return (after.execution_count - before.execution_count,
                after.inference_stats.fail.count - before.inference_stats.fail.count)

    # The server answers the queued ones when their turn comes; wait until that is over. (A
    # request whose deadline passed before the server read it is never counted: gRPC drops it.)
    deadline, last = time.monotonic() + 30, None
    while time.monotonic() < deadline and sum(counts()) < sent and counts() != last:
        last = counts()
        time.sleep(1.0)
    executed, failed = counts()
    assert executed + failed <= sent, (executed, failed)
    assert failed >= 2 and executed <= sent - 2, (executed, failed)
    assert_mlp_serves(client)


def test_requests_past_their_queue_timeout_are_rejected_not_run(served):
    _, client = served
    x = np.random.default_rng(2).standard_normal((1, ROWS, WIDTH)).astype(np.float32)
    one_us = int(one_run_seconds(client, "slow_timeout", x) * 1e6)
    before = model_stats(client, "slow_timeout")

    # Each may wait one run in the queue (tritonclient's `timeout`, in microseconds): the ones
    # behind two or more runs are rejected at their turn.
    sent = 8
    errors = send_at_once(client, "slow_timeout", x, sent, timeout=one_us)
    assert len(errors) >= 2, f"one run {one_us} us; errors {errors}"
    for e in errors:
        assert e.status() == "StatusCode.UNAVAILABLE", e
        assert "request timeout expired" in e.message(), e.message()
    after = model_stats(client, "slow_timeout")
    assert after.execution_count - before.execution_count == sent - len(errors)
    assert_mlp_serves(client)


def test_a_higher_priority_request_overtakes_the_queue(served):
    _, client = served
    x = np.random.default_rng(3).standard_normal((1, ROWS, WIDTH)).astype(np.float32)
    one = one_run_seconds(client, "slow_priority", x)
    finished, lock, all_done = [], threading.Lock(), threading.Semaphore(0)

    def on_done(label):
        def done(result, error):
            assert error is None, error
            with lock:
                finished.append(label)
            all_done.release()
        return done

    # Twelve at the default level (2): two go to the executor at once, the rest queue. Right after
    # them, one at level 1 (tritonclient's priority=): it goes ahead of every low one still queued,
    # so at least the last few lows sent before it finish after it. (No sleep between: under load
    # a run-based pause let the queue drain first and made this flaky.)
    lows = 12
    for i in range(lows):
        client.async_infer("slow_priority", [make_input(x, name="x")], on_done(f"low{i}"))
    client.async_infer("slow_priority", [make_input(x, name="x")], on_done("high"), priority=1)
    for _ in range(lows + 1):
        assert all_done.acquire(timeout=60)
    assert finished.index("high") < lows - 3, f"one run {one:.3f} s: {finished}"


def test_each_priority_level_keeps_its_own_queue_limit(served):
    _, client = served
    x = np.random.default_rng(4).standard_normal((1, ROWS, WIDTH)).astype(np.float32)
    one_run_seconds(client, "slow_levels", x)
    policy = client.get_model_config("slow_levels").config.dynamic_batching.priority_queue_policy
    assert policy[2].max_queue_size == 2

    # Ten at level 2 at once: two reach the executor, two may wait, the rest find level 2 full.
    # One at level 1 right after is not refused: its level counts its own requests.
    answered, errors, high = threading.Semaphore(0), [], []

    def done(result, error):
        if error is not None:
            errors.append(error)
        answered.release()

    for _ in range(10):
        client.async_infer("slow_levels", [make_input(x, name="x")], done)
    client.async_infer("slow_levels", [make_input(x, name="x")],
                       lambda result, error: (high.append(error), answered.release()),
                       priority=1)
    for _ in range(11):
        assert answered.acquire(timeout=60)
    assert high == [None], high
    assert len(errors) >= 3, errors
    for e in errors:
        assert e.status() == "StatusCode.UNAVAILABLE", e
        assert "is full (max_queue_size 2 at priority level 2)" in e.message(), e.message()
    assert_mlp_serves(client)
