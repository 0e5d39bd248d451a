"""ModelStreamInfer (tritonclient's start_stream / async_stream_infer): many requests over one
bidirectional stream, answered as each completes and matched by id; a bad request gets an error on
the stream and the stream goes on; closing the stream still delivers every answer."""

import queue
import time

import pytest

from conftest import MODELS_DIR
from tessera_testlib import (OUTPUT_NAME, OrtReference, assert_close, load_reference, make_input,
                             random_inputs)

ANSWER_TIMEOUT_S = 20.0


class Stream:
    """One stream of `client`; answers land in a queue as (request id, result, error)."""

    def __init__(self, client):
        self.client = client
        self.answers = queue.Queue()
        client.start_stream(callback=self._callback)

    def _callback(self, result, error):
        if error is not None:
            self.answers.put((None, None, error))
        else:
            self.answers.put((result.get_response().id, result, None))

    def send(self, model, x, request_id):
        self.client.async_stream_infer(model, [make_input(x)], request_id=request_id)

    def collect(self, count):
        got = []
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while len(got) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"only {len(got)} of {count} answers arrived on the stream")
            got.append(self.answers.get(timeout=left))
        return got

    def close(self):
        self.client.stop_stream()


@pytest.fixture
def stream(server):
    client = server.new_client()
    s = Stream(client)
    yield s
    s.close()
    client.close()


def test_many_requests_on_one_stream_are_answered_and_matched_by_id(stream):
    references = {"mlp": OrtReference("mlp"), "small_cnn": OrtReference("small_cnn")}
    sent = {}
    for i in range(40):
        model = ("mlp", "small_cnn")[i % 2]
        x = random_inputs(model, batch=1 + i % 4, seed=i)
        sent[f"req-{i}"] = (model, x)
        stream.send(model, x, f"req-{i}")
    answers = stream.collect(len(sent))
    assert all(error is None for _, _, error in answers), [e for _, _, e in answers if e]
    assert sorted(rid for rid, _, _ in answers) == sorted(sent)
    for rid, result, _ in answers:
        model, x = sent[rid]
        assert result.get_response().model_name == model
        assert_close(result.as_numpy(OUTPUT_NAME), references[model](x), f"{rid} ({model})")


def test_a_bad_request_gets_an_error_and_the_stream_goes_on(stream):
    x, y = load_reference("mlp")
    stream.send("mlp", x, "before")
    stream.send("no_such_model", x, "unknown-model")
    stream.send("mlp", x[:, :10], "wrong-shape")
    stream.send("mlp", x, "after")
    answers = stream.collect(4)
    errors = [str(error) for _, _, error in answers if error is not None]
    assert len(errors) == 2, answers
    assert any("no_such_model" in e for e in errors), errors
    assert any("does not match the model's shape" in e for e in errors), errors
    results = {rid: result for rid, result, error in answers if error is None}
    assert sorted(results) == ["after", "before"]
    for result in results.values():
        assert_close(result.as_numpy(OUTPUT_NAME), y, "mlp on the stream around errors")


def test_closing_the_stream_still_delivers_every_answer(server):
    client = server.new_client()
    s = Stream(client)
    x, y = load_reference("small_cnn")
    for i in range(16):
        s.send("small_cnn", x, f"close-{i}")
    # stop_stream half-closes and waits for the server to finish the call: by then every answer
    # must have been written.
    s.close()
    answers = []
    while not s.answers.empty():
        answers.append(s.answers.get_nowait())
    client.close()
    assert sorted(rid for rid, _, _ in answers) == sorted(f"close-{i}" for i in range(16))
    for _, result, error in answers:
        assert error is None
        assert_close(result.as_numpy(OUTPUT_NAME), y, "small_cnn answered before the close")


def test_shutdown_ends_an_open_stream_with_the_shutdown_message(make_server):
    """A client that keeps its stream open does not hold the shutdown until gRPC's deadline cancels
    the call: the server ends the stream itself, saying why, and exits cleanly."""
    srv = make_server(repository=MODELS_DIR, mode="none")
    client = srv.new_client()
    s = Stream(client)
    x, y = load_reference("mlp")
    s.send("mlp", x, "before")
    [(rid, result, error)] = s.collect(1)
    assert error is None and rid == "before"
    assert_close(result.as_numpy(OUTPUT_NAME), y, "mlp before the shutdown")
    assert srv.stop(timeout=15.0) == 0
    [(_, _, error)] = s.collect(1)
    assert "server is shutting down" in str(error), error
    client.stop_stream()
    client.close()
