// Samples requests for tracing and writes their timestamps and, at level TENSORS, their input and
// output tensors as JSON (Triton's trace extension), or, in mode opentelemetry, sends their
// timestamps as spans to a collector (otlp_exporter.h). Global settings, with per-model overrides
// of level, rate and count; the trace file and how often it is written are global only.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "inference/grpc_service.pb.h"
#include "otlp_exporter.h"
#include "tessera/common/status.h"
#include "tessera/dispatch/request.h"
#include "tessera/frontend/trace_settings.h"
#include "trace_record.h"

namespace tessera::frontend {

// What one TraceSetting call changes: keys it names, each with its new value, or nullopt when the
// call clears it (an empty value list: a model's setting falls back to the global one, a global
// setting to its default).
struct TraceSettingsUpdate {
  std::map<std::string, std::optional<std::string>> values;
};

// What to record of one sampled request: the levels its settings name.
struct TraceLevels {
  bool timestamps = false;
  bool tensors = false;
  explicit operator bool() const { return timestamps || tensors; }
};

// The tensor a trace shows for `view`'s bytes; `activity` as in TracedTensor.
TracedTensor TraceTensor(const char* activity, const std::string& name, DataType dtype,
                         const Shape& shape, std::string_view bytes);

class RequestTracer {
 public:
  // Mode triton: traces go to settings.file as JSON. `settings` is checked as an update of the
  // defaults would be.
  static StatusOr<std::unique_ptr<RequestTracer>> Create(const TraceSettings& settings);
  // Mode opentelemetry: traces go as spans to `sink` (null: the collector at export.url, over
  // HTTP). settings.file is not used; a TENSORS level is refused.
  static StatusOr<std::unique_ptr<RequestTracer>> CreateOpenTelemetry(
      const TraceSettings& settings, const OtlpExportSettings& export_settings,
      std::unique_ptr<OtlpSink> sink = nullptr);
  // Writes the traces not written yet.
  ~RequestTracer();

  // The settings that apply to `model` ("" = the global ones).
  TraceSettings Get(const std::string& model) const;
  // Applies `update` to `model`'s settings ("" = global). INVALID_ARGUMENT naming the key for an
  // unknown key, a bad value, a global-only key sent for a model, or trace_file (set at start
  // only: a client must not choose where the server writes); FAILED_PRECONDITION when a level
  // other than OFF is asked for with no trace file. Nothing changes on an error.
  Status Update(const std::string& model, const TraceSettingsUpdate& update);

  // Whether traces go out as OpenTelemetry spans (so a request's trace context matters).
  bool opentelemetry() const { return exporter_ != nullptr; }

  // Per request: whether to trace it, and what of it. Counts it toward its settings' rate and
  // count; in mode opentelemetry a request that carries a trace context is traced whatever they
  // say (unless the level is OFF), and not counted.
  TraceLevels Sample(const std::string& model, bool has_trace_context = false);
  // A new trace id, for a record that must be known by it before it is recorded (a request whose
  // steps name it as their parent).
  uint64_t NewTraceId();
  // Keeps a trace (numbered now unless record.id is set); writes a file when log_frequency traces
  // have gathered, or queues its spans.
  void Record(TraceRecord record);
  // Writes the traces gathered so far (to `file`, or the next `file`.N with log_frequency > 0),
  // or sends the queued spans.
  Status Flush();

 private:
  struct ModelOverride {
    std::optional<std::string> level;
    std::optional<int64_t> rate;
    std::optional<int64_t> count;
    uint64_t seen = 0;
  };

  static StatusOr<std::unique_ptr<RequestTracer>> Create(const TraceSettings& settings,
                                                         std::unique_ptr<OtlpExporter> exporter);
  explicit RequestTracer(TraceSettings settings) : global_(std::move(settings)) {}
  void RefreshEnabled() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  TraceSettings global_ ABSL_GUARDED_BY(mu_);
  uint64_t global_seen_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, ModelOverride> models_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> pending_ ABSL_GUARDED_BY(mu_);  // JSON objects not written yet
  std::vector<std::string> written_ ABSL_GUARDED_BY(mu_);  // log_frequency 0: all, for `file`
  int64_t next_file_index_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // False while no settings can trace anything: the per-request check is then one load.
  std::atomic<bool> enabled_{false};
  // Mode opentelemetry; null in mode triton. Declared last: destroyed first, sending what is
  // queued while the rest is still whole.
  std::unique_ptr<OtlpExporter> exporter_;
};

// The steps of one traced request (an ensemble's, and theirs in turn), each recorded when it is
// answered as a trace of its own whose parent_id is the request it serves, with the request's
// levels, request id and trace context.
class TracedSteps final : public dispatch::StepTraceSink {
 public:
  TracedSteps(std::shared_ptr<RequestTracer> tracer, TraceLevels levels, std::string request_id,
              uint64_t root_id, std::optional<TraceParent> context)
      : tracer_(std::move(tracer)),
        levels_(levels),
        request_id_(std::move(request_id)),
        root_id_(root_id),
        context_(std::move(context)) {}

  uint64_t NewStepId() override { return tracer_->NewTraceId(); }
  void StepDone(uint64_t step_id, uint64_t parent_id, const std::string& model, int64_t version,
                const dispatch::Request& step, const StatusOr<dispatch::Response>& result) override;

 private:
  const std::shared_ptr<RequestTracer> tracer_;
  const TraceLevels levels_;
  const std::string request_id_;
  const uint64_t root_id_;
  const std::optional<TraceParent> context_;
};

// The trace of one request: REQUEST_START at arrival, QUEUE_START once validated, the compute
// phases from the executor's timing (absent when the request failed) and REQUEST_END now.
TraceRecord MakeTrace(std::string model, int64_t version, std::string request_id,
                      uint64_t arrival_ns, uint64_t queue_start_ns,
                      const dispatch::RequestTiming* timing, const Status& status);

// The update a TraceSettingRequest asks for: one value per key (trace_level: one or more levels),
// none to clear it. INVALID_ARGUMENT naming the key when another key has more than one value.
StatusOr<TraceSettingsUpdate> TraceSettingsUpdateFromProto(
    const inference::TraceSettingRequest& request);
// Every setting, as the response lists them (each a one-element list of strings, as Triton's).
void TraceSettingsToProto(const TraceSettings& settings, inference::TraceSettingResponse* response);

}  // namespace tessera::frontend
