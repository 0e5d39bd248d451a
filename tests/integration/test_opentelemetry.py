"""Request tracing in mode opentelemetry (tritonserver's --trace-config mode=opentelemetry): traced
requests reach an OTLP/HTTP collector as Triton's three spans (InferRequest > <model> > compute),
decoded here with the OpenTelemetry project's own protobuf classes (opentelemetry-proto); a W3C
traceparent makes the root a child of the caller's span and is traced whatever the rate; the
exporter's settings come from flags, server.yaml and the OTEL_* environment, bad ones stop the
start naming them; a collector that is away costs the clients nothing."""

import http.server
import threading
import time

import numpy as np
import pytest
import tritonclient.http as httpclient
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from tessera_testlib import (MODELS_DIR, expect_error, infer, load_reference, make_input,
                             start_fails, wait_until)

TRACEPARENT = "00-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-01"
MODEL_EVENTS = ["REQUEST_START", "QUEUE_START", "REQUEST_END"]
COMPUTE_EVENTS = ["COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"]


class Collector:
    """An OTLP/HTTP trace receiver on a free loopback port: keeps each export's spans, resource
    attributes, path and headers. `answer` is the HTTP status it replies with."""

    def __init__(self):
        self.exports = []
        self.answer = 200
        self.lock = threading.Lock()
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                with collector.lock:
                    collector.exports.append({"path": self.path, "headers": dict(self.headers),
                                              "request": request})
                self.send_response(collector.answer)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1/traces"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def spans(self):
        with self.lock:
            return [span for e in self.exports for rs in e["request"].resource_spans
                    for ss in rs.scope_spans for span in ss.spans]

    def trace(self, request_id, timeout=10.0):
        """The three spans of the request whose model span has triton.request_id = request_id."""
        def find():
            spans = self.spans()
            model = [s for s in spans if attributes(s).get("triton.request_id") == request_id]
            if not model:
                return None
            same_trace = [s for s in spans if s.trace_id == model[0].trace_id]
            return same_trace if len(same_trace) >= 3 else None
        spans = wait_until(find, timeout, what=f"the spans of request {request_id}")
        return {s.name if s.name in ("InferRequest", "compute") else "model": s for s in spans}

    def close(self):
        self.httpd.shutdown()


def attributes(span_or_resource):
    out = {}
    for kv in span_or_resource.attributes:
        kind = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, kind)
    return out


def event_names(span):
    return [e.name for e in span.events]


@pytest.fixture(scope="module")
def collector():
    c = Collector()
    yield c
    c.close()


@pytest.fixture(scope="module")
def otel_server(make_server, collector):
    return make_server(
        repository=MODELS_DIR, mode="explicit", load_models=("mlp",), wait_models=("mlp",),
        extra_args=("--trace-config", "mode=opentelemetry",
                    "--trace-config", f"opentelemetry,url={collector.url}",
                    "--trace-config", "opentelemetry,resource=service.name=test_tessera",
                    "--trace-config", "opentelemetry,resource=test.key=test.value",
                    "--trace-config", "opentelemetry,bsp_schedule_delay=50",
                    "--trace-config", "level=TIMESTAMPS", "--trace-config", "rate=1"))


def test_a_grpc_request_is_three_nested_spans_with_triton_names(otel_server, collector):
    x, _ = load_reference("mlp")
    before_ns = time.time_ns()
    infer(otel_server.client(), "mlp", x, request_id="grpc-1")
    spans = collector.trace("grpc-1")
    after_ns = time.time_ns()
    root, model, compute = spans["InferRequest"], spans["model"], spans["compute"]

    assert model.name == "mlp"
    assert len(root.trace_id) == 16 and any(root.trace_id)
    assert model.trace_id == root.trace_id == compute.trace_id
    assert root.parent_span_id == b""
    assert model.parent_span_id == root.span_id and compute.parent_span_id == model.span_id
    assert len({root.span_id, model.span_id, compute.span_id}) == 3

    assert event_names(root) == ["GRPC_WAITREAD_END", "INFER_RESPONSE_COMPLETE"]
    assert event_names(model) == MODEL_EVENTS
    assert event_names(compute) == COMPUTE_EVENTS
    for span in (root, model, compute):
        # Wall-clock (Unix epoch) times, inside the test's own bracket, events inside their span.
        assert before_ns - 10**9 <= span.start_time_unix_nano <= span.end_time_unix_nano
        assert span.end_time_unix_nano <= after_ns + 10**9
        times = [e.time_unix_nano for e in span.events]
        assert times == sorted(times)
        assert span.start_time_unix_nano <= times[0] and times[-1] <= span.end_time_unix_nano
    assert root.start_time_unix_nano <= compute.start_time_unix_nano
    assert compute.end_time_unix_nano <= root.end_time_unix_nano

    assert attributes(model) == {"triton.model_name": "mlp", "triton.model_version": 1,
                                 "triton.trace_id": attributes(model)["triton.trace_id"],
                                 "triton.trace_parent_id": 0, "triton.request_id": "grpc-1"}
    assert root.status.code == 0 and model.status.code == 0


def test_exports_go_to_the_url_as_protobuf_with_the_resource(otel_server, collector):
    x, _ = load_reference("mlp")
    infer(otel_server.client(), "mlp", x, request_id="resource-1")
    collector.trace("resource-1")
    with collector.lock:
        export = collector.exports[-1]
    assert export["path"] == "/v1/traces"
    assert export["headers"]["Content-Type"] == "application/x-protobuf"
    resource = export["request"].resource_spans[0].resource
    assert attributes(resource) == {"service.name": "test_tessera", "test.key": "test.value"}
    assert export["request"].resource_spans[0].scope_spans[0].scope.name == "tessera"


def test_a_traceparent_makes_the_root_a_child_of_the_callers_span(otel_server, collector):
    x, _ = load_reference("mlp")
    infer(otel_server.client(), "mlp", x, request_id="parent-grpc",
          headers={"traceparent": TRACEPARENT, "tracestate": "vendor=abc"})
    spans = collector.trace("parent-grpc")
    root = spans["InferRequest"]
    assert root.trace_id.hex() == TRACEPARENT.split("-")[1]
    assert root.parent_span_id.hex() == TRACEPARENT.split("-")[2]
    assert root.trace_state == "vendor=abc"
    assert spans["compute"].trace_id == root.trace_id

    # Over HTTP too, where the root's first event names that transport.
    http = httpclient.InferenceServerClient(f"127.0.0.1:{otel_server.http_port}")
    inp = httpclient.InferInput("input", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    http.infer("mlp", [inp], request_id="parent-http", headers={"traceparent": TRACEPARENT})
    spans = collector.trace("parent-http")
    assert spans["InferRequest"].parent_span_id.hex() == TRACEPARENT.split("-")[2]
    assert event_names(spans["InferRequest"])[0] == "HTTP_RECV_END"


def test_a_malformed_traceparent_starts_a_trace_of_its_own(otel_server, collector):
    x, _ = load_reference("mlp")
    bad = "00-0AF7651916CD43DD8448EB211C12666C-b7ad6b7169242424-01"  # uppercase: not W3C's form
    infer(otel_server.client(), "mlp", x, request_id="bad-parent", headers={"traceparent": bad})
    root = collector.trace("bad-parent")["InferRequest"]
    assert root.parent_span_id == b""
    assert root.trace_id.hex() != TRACEPARENT.split("-")[1]


def test_trace_setting_rpc_in_opentelemetry_mode(otel_server, collector):
    client = otel_server.client()
    e = expect_error(lambda: client.update_trace_settings(settings={"trace_level": ["TENSORS"]}),
                     "INVALID_ARGUMENT")
    assert "mode opentelemetry" in e.message()
    client.update_trace_settings(model_name="mlp", settings={"trace_level": ["OFF"]})
    try:
        x, _ = load_reference("mlp")
        infer(client, "mlp", x, request_id="not-traced")
        infer(client, "mlp", x, request_id="not-traced-either",
              headers={"traceparent": TRACEPARENT})
        time.sleep(0.5)  # ten schedule delays
        assert not [s for s in collector.spans()
                    if attributes(s).get("triton.request_id", "").startswith("not-traced")]
    finally:
        client.update_trace_settings(model_name="mlp", settings={"trace_level": None})


def test_rate_zero_traces_only_requests_that_carry_a_context(make_server, collector):
    server = make_server(
        repository=MODELS_DIR, mode="explicit", load_models=("mlp",), wait_models=("mlp",),
        extra_args=("--trace-config", "mode=opentelemetry", "--trace-config", "level=TIMESTAMPS",
                    "--trace-config", "rate=0", "--trace-config", "count=0",
                    "--trace-config", f"opentelemetry,url={collector.url}",
                    "--trace-config", "opentelemetry,bsp_schedule_delay=50"))
    x, _ = load_reference("mlp")
    for i in range(3):
        infer(server.client(), "mlp", x, request_id=f"rate0-plain-{i}")
    infer(server.client(), "mlp", x, request_id="rate0-context",
          headers={"traceparent": TRACEPARENT})
    collector.trace("rate0-context")
    time.sleep(0.3)
    assert not [s for s in collector.spans()
                if attributes(s).get("triton.request_id", "").startswith("rate0-plain")]


def test_queued_spans_are_sent_when_the_server_stops(make_server, collector, tmp_path):
    config = tmp_path / "server.yaml"
    config.write_text(
        "trace:\n  mode: opentelemetry\n  level: TIMESTAMPS\n  rate: 1\n"
        f"  opentelemetry:\n    url: {collector.url}\n    bsp_schedule_delay: 600000\n"
        "    resource: {deployment.environment: test}\n")
    server = make_server(repository=MODELS_DIR, mode="explicit", load_models=("mlp",),
                         wait_models=("mlp",), config=config)
    x, _ = load_reference("mlp")
    infer(server.client(), "mlp", x, request_id="at-stop")
    time.sleep(0.3)
    assert not [s for s in collector.spans() if attributes(s).get("triton.request_id") == "at-stop"]
    assert server.stop() == 0
    spans = collector.trace("at-stop", timeout=1.0)
    assert set(spans) == {"InferRequest", "model", "compute"}


def test_the_environment_configures_the_exporter(make_server, collector):
    server = make_server(
        repository=MODELS_DIR, mode="explicit", load_models=("mlp",), wait_models=("mlp",),
        extra_args=("--trace-config", "mode=opentelemetry", "--trace-config", "level=TIMESTAMPS",
                    "--trace-config", "rate=1"),
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}/",
             "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=s%20cret",
             "OTEL_RESOURCE_ATTRIBUTES": "service.name=ignored,team=search",
             "OTEL_SERVICE_NAME": "from-env", "OTEL_BSP_SCHEDULE_DELAY": "50"})
    x, _ = load_reference("mlp")
    infer(server.client(), "mlp", x, request_id="from-env")
    trace_id = collector.trace("from-env")["InferRequest"].trace_id
    with collector.lock:
        export = [e for e in collector.exports
                  if any(s.trace_id == trace_id for rs in e["request"].resource_spans
                         for ss in rs.scope_spans for s in ss.spans)][0]
    assert export["path"] == "/v1/traces"
    assert export["headers"]["x-api-key"] == "s cret"
    assert attributes(export["request"].resource_spans[0].resource) == {
        "service.name": "from-env", "team": "search"}


def test_a_collector_that_is_away_costs_the_clients_nothing(make_server, collector):
    gone = Collector()
    url = gone.url
    gone.close()
    gone.httpd.server_close()
    server = make_server(
        repository=MODELS_DIR, mode="explicit", load_models=("mlp",), wait_models=("mlp",),
        extra_args=("--trace-config", "mode=opentelemetry", "--trace-config", "level=TIMESTAMPS",
                    "--trace-config", "rate=1", "--trace-config", f"opentelemetry,url={url}",
                    "--trace-config", "opentelemetry,bsp_schedule_delay=20",
                    "--trace-config", "opentelemetry,bsp_max_queue_size=6",
                    "--trace-config", "opentelemetry,bsp_max_export_batch_size=3"))
    x, _ = load_reference("mlp")
    for i in range(20):
        infer(server.client(), "mlp", x, request_id=f"away-{i}")
    wait_until(lambda: "cannot send spans to the OpenTelemetry collector" in
               server.log_path.read_text(),
               5.0, what="the export failure in the log")
    started = time.monotonic()
    assert server.stop() == 0
    assert time.monotonic() - started < 10.0


def test_bad_opentelemetry_settings_stop_the_start(tmp_path):
    otel = ("--trace-config", "mode=opentelemetry")
    cases = [
        ((*otel, "--trace-config", "level=TENSORS"), None, "TIMESTAMPS only"),
        ((*otel, "--trace-config", "opentelemetry,url=ftp://x/v1/traces"), None,
         "expected an http:// or https:// URL"),
        ((*otel, "--trace-config", "opentelemetry,bsp_max_queue_size=5",
          "--trace-config", "opentelemetry,bsp_max_export_batch_size=10"), None,
         "bsp_max_export_batch_size (10) must not be larger than bsp_max_queue_size (5)"),
        ((*otel, "--trace-config", "opentelemetry,bsp_schedule_delay=soon"), None,
         "bsp_schedule_delay must be an integer >= 1"),
        ((*otel, "--trace-config", "opentelemetry,colour=blue"), None,
         "unknown opentelemetry setting"),
        ((*otel, "--trace-config", "opentelemetry,resource=novalue"), None,
         "resource must be <key>=<value>"),
        (("--trace-config", "opentelemetry,url=http://x:4318/v1/traces"), None,
         "need trace mode opentelemetry"),
        (("--trace-config", "mode=zipkin"), None, "mode must be triton or opentelemetry"),
        (otel, {"OTEL_BSP_MAX_QUEUE_SIZE": "lots"}, "OTEL_BSP_MAX_QUEUE_SIZE: expected a positive"),
        (otel, {"OTEL_RESOURCE_ATTRIBUTES": "team"}, "OTEL_RESOURCE_ATTRIBUTES: \"team\" is not"),
        (otel, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4318"},
         "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT \"collector:4318\": expected an http"),
    ]
    for args, env, message in cases:
        output = start_fails(*args, env=env)
        assert message in output, (args, env, output)

    config = tmp_path / "server.yaml"
    config.write_text("trace:\n  opentelemetry:\n    url: http://x:4318/v1/traces\n")
    assert "need trace mode opentelemetry" in start_fails(config=config)
    config.write_text("trace:\n  mode: opentelemetry\n  opentelemetry:\n    resource: [a, b]\n")
    output = start_fails(config=config)
    assert "trace.opentelemetry.resource" in output and "expected a map" in output, output


def test_an_ensembles_steps_are_model_spans_under_the_ensembles(make_server, collector, tmp_path):
    from test_ensemble import OUTER, PIPELINE, save_ensemble, save_unary_model

    repo = tmp_path / "models"
    save_unary_model(repo, "ens_relu", "Relu")
    save_unary_model(repo, "ens_neg", "Neg")
    save_ensemble(repo, "c_pipeline", PIPELINE.format(name="c_pipeline"))
    save_ensemble(repo, "b_outer", OUTER.format(name="b_outer", inner="c_pipeline"))
    server = make_server(
        repository=repo, mode="none", wait_models=["b_outer"],
        extra_args=("--trace-config", "mode=opentelemetry", "--trace-config", "level=TIMESTAMPS",
                    "--trace-config", "rate=1",
                    "--trace-config", f"opentelemetry,url={collector.url}",
                    "--trace-config", "opentelemetry,bsp_schedule_delay=50"))
    x = np.array([[-1.0, 2.0, -3.0, 4.0]], dtype=np.float32)
    # A trace of its own (the other tests send TRACEPARENT's).
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    server.client().infer("b_outer", [make_input(x, name="IN")], request_id="ensemble-otel",
                          headers={"traceparent": traceparent})
    trace_id = bytes.fromhex(traceparent.split("-")[1])

    def spans_of_trace():
        spans = [s for s in collector.spans() if s.trace_id == trace_id
                 and s.name in ("InferRequest", "b_outer", "c_pipeline", "ens_relu", "ens_neg")]
        return spans if len(spans) >= 6 else None
    spans = wait_until(spans_of_trace, 10.0, what="the ensemble's spans")
    by_id = {s.span_id: s for s in collector.spans() if s.trace_id == trace_id}
    parent_of = {}
    for s in by_id.values():
        parent = by_id.get(s.parent_span_id)
        parent_of.setdefault(parent.name if parent else "(caller)", []).append(s.name)
    parent_of = {k: sorted(v) for k, v in parent_of.items()}
    assert parent_of["(caller)"] == ["InferRequest"]
    assert parent_of["InferRequest"] == ["b_outer"]
    assert parent_of["b_outer"] == ["c_pipeline", "compute", "ens_neg"]
    assert parent_of["c_pipeline"] == ["compute", "ens_neg", "ens_relu"]
    assert parent_of["ens_relu"] == ["compute"]
    steps = [s for s in by_id.values() if s.name in ("c_pipeline", "ens_relu", "ens_neg")]
    for step in steps:
        assert attributes(step)["triton.trace_parent_id"] != 0
        assert attributes(step)["triton.request_id"] == "ensemble-otel"
        assert event_names(step) == MODEL_EVENTS
