// Request tracing settings (Triton's trace extension): which requests get their timestamps
// recorded, and where the traces go. Set in server.yaml (trace:) or on the command line, read and
// changed at run time with the TraceSetting RPC (all but the mode, the file and the exporter).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/common/server_config.h"
#include "tessera/common/status.h"

namespace tessera::frontend {

struct TraceSettings {
  // OFF, TIMESTAMPS, TENSORS, or both as "TIMESTAMPS,TENSORS" (Triton's level may be given more
  // than once: each names a kind of detail).
  std::string level = "OFF";
  // Trace one request in `rate`; 0 = none by rate (in mode opentelemetry, requests that carry a
  // W3C traceparent are traced whatever the rate and count).
  int64_t rate = 1000;
  int64_t count = -1;         // traces still to take; -1 = no limit, 0 = tracing has stopped
  // 0: every trace goes to `file` when the server stops; N > 0: each N traces go to
  // `file`.0, `file`.1, ... as they are taken (and the rest at stop).
  int64_t log_frequency = 0;
  std::string file;  // "" = no trace file, so in mode triton the level must stay OFF
};

// Mode opentelemetry: where and how the traces go, as OTLP spans over HTTP (binary protobuf) to
// a collector, batched as OpenTelemetry's batch span processor does.
struct OtlpExportSettings {
  std::string url = "http://localhost:4318/v1/traces";
  // Resource attributes of every span (keys unique, in order); service.name is always there.
  std::vector<std::pair<std::string, std::string>> resource;
  std::vector<std::pair<std::string, std::string>> headers;  // sent with each export
  int64_t max_queue_size = 2048;        // spans waiting for export; more are dropped (counted)
  int64_t schedule_delay_ms = 5000;     // the longest a span waits before its batch is sent
  int64_t max_export_batch_size = 512;  // spans per export
  int64_t timeout_ms = 10000;           // one export's HTTP request, connection included
};

// The exporter settings of `otel` (server.yaml / flags), what it leaves unset taken from the
// OpenTelemetry SDK's environment variables (`getenv`; OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_[TRACES_]HEADERS,
// OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT, OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME, OTEL_BSP_*),
// then the defaults above. INVALID_ARGUMENT naming the setting or variable for a URL that is not
// http(s)://, a malformed list, a value that is not a positive integer, or a batch size above the
// queue size.
StatusOr<OtlpExportSettings> ResolveOtlpExport(
    const ServerConfig::OtelTrace& otel, const std::function<const char*(const char*)>& getenv);

}  // namespace tessera::frontend
