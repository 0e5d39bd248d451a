// What one traced request leaves behind, for either way of writing it: Triton's JSON trace file
// (request_tracer.h) or OpenTelemetry spans (otel_spans.h).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::frontend {

// One tensor of a traced request, as Triton's TENSORS level writes it.
struct TracedTensor {
  const char* activity = "";  // TENSOR_QUEUE_INPUT or TENSOR_BACKEND_OUTPUT
  std::string name;
  std::string data;   // the elements, comma-separated ("0.5,1,2"; BYTES elements as they are)
  std::string shape;  // "1,64"
  std::string dtype;  // "FP32"
};

// The W3C Trace Context (www.w3.org/TR/trace-context) a request carried in its `traceparent` and
// `tracestate` headers (gRPC metadata or HTTP): the caller's trace, and its span that the
// request's spans are children of.
struct TraceParent {
  std::array<uint8_t, 16> trace_id{};
  std::array<uint8_t, 8> span_id{};
  uint8_t flags = 0;        // trace-flags (bit 0: the caller sampled it)
  std::string trace_state;  // tracestate as sent, "" when none
};

// A `traceparent` header as the specification reads it: version 00 is exactly
// "00-<32 hex>-<16 hex>-<2 hex>" in lowercase with non-zero ids; a later version (not ff) is read
// by those fields and may go on after a '-'. nullopt when it is not (the request is then traced
// as one without a parent, as the specification asks).
std::optional<TraceParent> ParseTraceParent(std::string_view traceparent,
                                            std::string_view tracestate);

// One traced request: its timestamps (MonotonicNs) in the order they happened.
struct TraceRecord {
  std::string model_name;
  int64_t model_version = 0;
  std::string request_id;
  std::vector<std::pair<const char*, uint64_t>> timestamps;
  std::string error;                  // "" when the request succeeded
  std::vector<TracedTensor> tensors;  // level TENSORS: the inputs as queued, then the outputs
  // Mode opentelemetry: the event that names how the request arrived ("GRPC_WAITREAD_END",
  // "HTTP_RECV_END"; "" = neither), and the trace context it carried.
  const char* received_event = "";
  std::optional<TraceParent> parent;
  // The trace's id (0: the tracer numbers it when it is recorded). A step of another traced
  // request (an ensemble's) names that request's id as `parent_id`, and the id of the request
  // the client sent, at the top, as `root_id`; both are 0 for the request the client sent.
  uint64_t id = 0;
  uint64_t parent_id = 0;
  uint64_t root_id = 0;
};

}  // namespace tessera::frontend
