// Mode opentelemetry's way out: traced requests become OTLP spans (otel_spans.h) sent to a
// collector over OTLP/HTTP, batched as OpenTelemetry's batch span processor does
// (opentelemetry.io/docs/specs/otel/trace/sdk, "Batching processor"): a bounded queue of spans,
// sent by one thread of its own when a batch's worth has gathered or the schedule delay has
// passed. The thread that finishes a request only queues its record: no encoding, no I/O.
//
// Thread-safety: Add and Flush may be called from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "otel_spans.h"
#include "tessera/common/status.h"
#include "tessera/frontend/trace_settings.h"
#include "trace_record.h"

namespace tessera::frontend {

// Where an export's bytes (a serialized ExportTraceServiceRequest) go. Called from the exporter's
// thread only.
class OtlpSink {
 public:
  virtual ~OtlpSink() = default;
  // OK once the collector took it (HTTP 2xx); UNAVAILABLE naming the URL and what went wrong.
  virtual Status Post(const std::string& body) = 0;
};

// The collector at `settings.url`, over HTTP(S) with libcurl: Content-Type
// application/x-protobuf, `settings.headers`, `settings.timeout_ms` for the whole request.
StatusOr<std::unique_ptr<OtlpSink>> MakeCurlOtlpSink(const OtlpExportSettings& settings);

class OtlpExporter {
 public:
  // `wall_offset_ns` turns MonotonicNs times into Unix-epoch ones (WallNs() - MonotonicNs()).
  OtlpExporter(OtlpExportSettings settings, std::unique_ptr<OtlpSink> sink, int64_t wall_offset_ns);
  // Sends what is queued (giving up on the rest at the first failed export), then stops.
  ~OtlpExporter();

  // Queues `record`'s spans. False when they would overflow max_queue_size: they are dropped
  // (counted, and logged at most once a minute).
  bool Add(TraceRecord record, uint64_t trace_number);
  // Returns once everything queued before the call has been sent, or has failed to be.
  void Flush();

  struct Counts {
    uint64_t exported_spans = 0;  // taken by the collector
    uint64_t failed_spans = 0;    // in exports that failed
    uint64_t dropped_spans = 0;   // never queued: the queue was full
  };
  Counts counts() const;

 private:
  struct Pending {
    TraceRecord record;
    uint64_t trace_number = 0;
    int spans = 0;
  };

  void Run();
  // Sends `batch` (outside the lock) and counts the outcome.
  void Export(std::deque<Pending>& batch);

  const OtlpExportSettings settings_;
  const std::unique_ptr<OtlpSink> sink_;
  const int64_t wall_offset_ns_;
  const SpanIdSource ids_;  // one for all traces, so a step's spans find their parent's

  mutable absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_spans_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t added_ ABSL_GUARDED_BY(mu_) = 0;        // records queued, ever
  uint64_t handled_ ABSL_GUARDED_BY(mu_) = 0;      // records sent or failed, ever
  uint64_t flush_until_ ABSL_GUARDED_BY(mu_) = 0;  // send without waiting until handled_ reaches it
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Counts counts_ ABSL_GUARDED_BY(mu_);
  int64_t last_drop_log_ns_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t last_failure_log_ns_ ABSL_GUARDED_BY(mu_) = -1;
  std::thread thread_;
};

}  // namespace tessera::frontend
