// A traced request as OpenTelemetry spans, laid out as Triton's opentelemetry trace mode does
// (docs/user_guide/trace.md, "OpenTelemetry trace support"), so that dashboards and queries
// written for Triton's spans read Tessera's:
//   InferRequest          the request at the server: from its arrival to its answer
//   └─ <model name>       the model's part: REQUEST_START, QUEUE_START, REQUEST_END events, and
//      │                  the attributes triton.model_name, triton.model_version,
//      │                  triton.trace_id, triton.trace_parent_id (and triton.request_id)
//      └─ compute         the executor's part: COMPUTE_START, COMPUTE_INPUT_END,
//                         COMPUTE_OUTPUT_START, COMPUTE_END (absent when the request failed)
// The root span is a child of the request's W3C trace context when it carried one. A step of an
// ensemble is a model span (and its compute span) under the model span of the request it serves,
// in the same trace.
#pragma once

#include <cstdint>

#include "google/protobuf/repeated_ptr_field.h"
#include "tessera/otlp_trace.pb.h"
#include "trace_record.h"

namespace tessera::frontend {

// Trace and span ids made from the server's trace numbers, so that a step's spans can name their
// parent's without either being kept: a random salt per source, then a bijective mix, so ids are
// unpredictable and never collide within one source.
class SpanIdSource {
 public:
  enum class Role { kRoot, kModel, kCompute };
  SpanIdSource();
  std::string TraceIdOf(uint64_t root_number) const;             // 16 bytes, not all zero
  std::string SpanIdOf(uint64_t trace_number, Role role) const;  // 8 bytes, not all zero

 private:
  uint64_t salt_[3];
};

// How many spans AppendTraceSpans makes of `record`.
int SpanCount(const TraceRecord& record);

// Appends `record`'s spans to `spans`. `trace_number` is the server's number for the trace (the
// triton.trace_id attribute, as the id in Triton's trace file; record.id when set); ids come
// from `ids`, which must be the same for a request and its steps; `wall_offset_ns` turns the
// record's MonotonicNs times into Unix-epoch times (OpenTelemetry's).
void AppendTraceSpans(const TraceRecord& record, uint64_t trace_number, int64_t wall_offset_ns,
                      const SpanIdSource& ids,
                      google::protobuf::RepeatedPtrField<otlp::Span>* spans);

}  // namespace tessera::frontend
