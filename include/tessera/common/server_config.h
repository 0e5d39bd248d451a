// Server configuration: configs/server.yaml (format: docs/server-config.md). Every key has a default;
// command-line flags override the file. Unknown keys are errors naming the file, line and key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/common/status.h"

namespace tessera {

enum class ModelControlMode { kNone, kPoll, kExplicit };

// TLS for one endpoint, as PEM files (paths relative to the working directory). No certificate =
// plaintext.
struct TlsFiles {
  std::string cert;  // certificate chain, the server's own first
  std::string key;   // the private key of that first certificate (unencrypted)
  std::string
      client_ca;         // CA certificates; set = clients must present one they signed (mutual TLS)
  int reload_secs = 60;  // the files are read again this often (certificate rotation)
  bool enabled() const { return !cert.empty(); }
};

// The API groups an endpoint can restrict to clients that send a header (Triton's
// --grpc-restricted-protocol and --http-restricted-api, with its names: health, metadata,
// inference, shared-memory, model-config, model-repository, statistics, trace, logging).
enum class ApiGroup {
  kHealth,
  kMetadata,
  kInference,
  kSharedMemory,
  kModelConfig,
  kModelRepository,
  kStatistics,
  kTrace,
  kLogging,
};
inline constexpr int kApiGroupCount = 9;
std::string_view ApiGroupName(ApiGroup group);

// Requests to `apis` must carry the header `header` with `value`. On gRPC the header (metadata
// key) is triton-grpc-protocol-<header>, as Triton names it. `header` is lower case (HTTP header
// names are case-insensitive, gRPC metadata keys lower case).
struct RestrictedApis {
  std::vector<ApiGroup> apis;
  std::string header;
  std::string value;
};

// A quantile a latency summary reports and its allowed rank error (Triton's summary_quantiles).
struct SummaryQuantileSpec {
  double quantile = 0;
  double error = 0;
};
// Triton's: 0.5:0.05, 0.9:0.01, 0.95:0.001, 0.99:0.001, 0.999:0.001.
std::vector<SummaryQuantileSpec> DefaultSummaryQuantiles();
// Triton's "<quantile>:<error>,...": each quantile in (0, 1), each error in (0, min(q, 1 - q)],
// so the band it allows stays inside [0, 1].
StatusOr<std::vector<SummaryQuantileSpec>> ParseSummaryQuantiles(std::string_view text);

struct ServerConfig {
  // Network.
  std::string grpc_address = "0.0.0.0";
  int grpc_port = 8001;
  std::string http_address = "0.0.0.0";
  int http_port = 8000;   // -1 = no HTTP endpoint, 0 = any free port
  int http_threads = 64;  // HTTP requests worked on at once (parsing, routing; not waiting)
  int http_idle_timeout_s = 30;  // an HTTP connection that sends nothing for this long is closed
  std::string metrics_address = "0.0.0.0";
  int metrics_port = 8002;  // 0 = no metrics endpoint
  bool cpu_metrics = true;  // nv_cpu_* on /metrics (Triton: --allow-cpu-metrics)
  bool gpu_metrics = true;  // nv_gpu_* where NVML sees GPUs (Triton: --allow-gpu-metrics)
  int64_t metrics_interval_ms = 2000;  // how often they are sampled (Triton: --metrics-interval-ms)
  // Per-model latency metrics (Triton's --metrics-config): the cumulative
  // nv_inference_*_duration_us and cache duration counters, and quantile summaries
  // (nv_inference_*_summary_us) over 60 s.
  bool metrics_counter_latencies = true;
  bool metrics_summary_latencies = false;
  std::vector<SummaryQuantileSpec> metrics_summary_quantiles = DefaultSummaryQuantiles();
  int64_t max_grpc_message_bytes = 2147483647;  // INT32_MAX, as Triton and its clients use
  // Memory compressed requests may take at once while inflated (both endpoints); 0 = a quarter of
  // the machine's memory.
  int64_t max_inflating_bytes = 0;
  bool allow_client_shm = false;  // the system shared-memory extension (Triton: --allow-client-shm)
  // gRPC's HTTP/2 keepalive and ping policy (grpc.keepalive; Triton's --grpc-keepalive-* and
  // --grpc-http2-* flags); -1 = gRPC's default.
  struct GrpcKeepalive {
    int64_t time_ms = -1;
    int64_t timeout_ms = -1;
    int64_t permit_without_calls = -1;  // 0 or 1
    int64_t http2_max_pings_without_data = -1;
    int64_t http2_min_recv_ping_interval_without_data_ms = -1;
    int64_t http2_max_ping_strikes = -1;
  };
  GrpcKeepalive grpc_keepalive;
  // none | low | medium | high: how inference answers are compressed for clients that accept it
  // (Triton: --grpc-infer-response-compression-level).
  std::string grpc_response_compression = "none";
  // Whether another process may bind the same port (SO_REUSEPORT); Triton: --reuse-grpc-port,
  // --reuse-http-port, both off there. gRPC's own default is on.
  bool grpc_reuse_port = false;
  bool http_reuse_port = false;
  TlsFiles grpc_tls;              // grpc.tls (Triton: --grpc-use-ssl, --grpc-server-cert, ...)
  TlsFiles http_tls;              // http.tls
  // grpc.restricted / http.restricted: an API appears in one group at most; the rest are open.
  std::vector<RestrictedApis> grpc_restricted;
  std::vector<RestrictedApis> http_restricted;

  // Repository.
  // Scanned as one; a model name must be unique across them (Triton: --model-repository, repeated).
  std::vector<std::string> model_repositories = {"configs/models"};
  ModelControlMode model_control_mode = ModelControlMode::kPoll;
  int repository_poll_secs = 5;
  // A model config without input/output (or no config file) is completed from the model file, as
  // in Triton; false refuses such models (Triton: --disable-auto-complete-config).
  bool auto_complete_config = true;
  // A model that fails to load at start ends the server (exit code 1) rather than leaving it
  // serving the others (Triton: --exit-on-error, default true there).
  bool exit_on_error = false;
  // The server is ready (ServerReady, /v2/health/ready) only while every model it was asked to
  // load is ready: none failed its load or is loading (Triton: --strict-readiness, default true
  // there).
  bool strict_readiness = false;
  // Each model folder's configs/<name>.pbtxt (or .yaml) in place of its config.pbtxt /
  // config.yaml, where it has one; "" = none (Triton: --model-config-name).
  std::string model_config_name;

  // Executors.
  std::string executor_binary;  // empty = tessera-executor beside the server binary
  std::string devices = "auto";    // auto | cpu | gpu
  int cpu_executors = 1;           // executors (CPU partitions) on a machine with no GPU
  int threads_per_executor = 0;    // 0 = cores / cpu_executors
  int64_t input_ring_bytes = 64ll << 20;
  int64_t output_ring_bytes = 64ll << 20;
  // Batches one instance may have sent to its executor before the first is answered: 2 overlaps
  // the hand-off of the next with the running one; 1 sends each only when the last is answered.
  int batches_in_flight = 2;
  // CPU executors run a batch on their receive thread (no worker wake-up) when the instance is
  // idle and its recent runs took at most this long; 0 = always on the instance's worker thread.
  int inline_run_max_us = 50;
  // Memory a CPU executor may allocate (RLIMIT_DATA), in MiB: past it an allocation fails and the
  // load or batch that asked gets RESOURCE_EXHAUSTED, instead of the kernel's OOM killer ending the
  // executor and every model on it. -1 = three quarters of the machine's memory; 0 = no limit.
  int64_t executor_memory_limit_mb = -1;
  // The executors' copy of the input pool (E²bird's GPU-resident pool): auto = on the GPU for GPU
  // executors, none on the CPU; host = a host copy (runs the staging protocol on any machine,
  // for tests); off = batches read the shared-memory ring.
  std::string input_mirror = "auto";
  std::string partition_mechanism = "auto";  // auto | mps | green | none
  bool mps_start_daemon = false;     // start nvidia-cuda-mps-control -d when none runs
  std::string mps_pipe_directory;    // "" = $CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps
  std::string scheduler_policy = "triton";   // gpulet | temporal | spatial | triton

  // Control loop (policies other than triton): profiles folder (profiles/<device>, read by the
  // planner; "" = none, the loop then leaves every model on its configured instances), epoch
  // length, rate-counting window, and whether requests that can no longer meet their SLO are
  // dropped at dispatch.
  std::string scheduler_profiles;
  double scheduler_epoch_secs = 20;
  int scheduler_rate_window_ms = 500;
  bool scheduler_slo_drop = true;

  // Shutdown.
  int shutdown_drain_secs = 30;

  // Logging.
  int log_verbose = 0;
  // Clients may change the log settings (Triton's LogSettings RPC; reading them is always allowed).
  bool allow_log_settings = false;

  // Request tracing (Triton's trace extension; TraceSetting RPC changes all but the file).
  // Mode "triton" writes traces as JSON to trace_file; "opentelemetry" sends them as OTLP spans
  // to a collector (trace_otel), TIMESTAMPS level only.
  std::string trace_mode = "triton";
  std::string trace_file;             // "" = none: in mode triton the level must stay OFF
  std::string trace_level = "OFF";    // OFF | TIMESTAMPS | TENSORS | TIMESTAMPS,TENSORS
  int64_t trace_rate = 1000;          // one request in `rate`
  int64_t trace_count = -1;           // -1 = no limit
  int64_t trace_log_frequency = 0;    // 0 = write at stop; N = every N traces to file.<i>
  // Mode opentelemetry's exporter (trace.opentelemetry, or tritonserver's --trace-config
  // opentelemetry,<setting>=<value>). Unset values come from the OTEL_* environment variables,
  // then OpenTelemetry's defaults (frontend::ResolveOtlpExport).
  struct OtelTrace {
    std::optional<std::string> url;  // the collector's OTLP/HTTP traces URL
    // Resource attributes, in the order given (a key given twice: the last one holds).
    std::vector<std::pair<std::string, std::string>> resource;
    // HTTP headers sent with each export (a collector's API key), as resource.
    std::vector<std::pair<std::string, std::string>> headers;
    std::optional<int64_t> bsp_max_queue_size;         // spans waiting; more are dropped
    std::optional<int64_t> bsp_schedule_delay_ms;      // the longest a span waits for export
    std::optional<int64_t> bsp_max_export_batch_size;  // spans per export, <= the queue size
    bool any() const {
      return url || !resource.empty() || !headers.empty() || bsp_max_queue_size ||
             bsp_schedule_delay_ms || bsp_max_export_batch_size;
    }
  };
  OtelTrace trace_otel;

  // Triton's response cache, for models whose config enables response_cache; 0 = none.
  int64_t response_cache_bytes = 0;
};

std::string_view ModelControlModeName(ModelControlMode mode);

// Why `name` cannot be a model_config_name ('/', NUL, a leading '.'), or "".
std::string CheckConfigName(const std::string& name);
StatusOr<ModelControlMode> ParseModelControlMode(std::string_view text);
// The byte size in tritonserver's --cache-config value "local,size=<bytes>".
StatusOr<int64_t> ParseCacheConfig(std::string_view text);

// Triton's "<api>,<api>,...:<header>=<value>" (--grpc-restricted-protocol, --http-restricted-api);
// `flag` names the flag in messages.
StatusOr<RestrictedApis> ParseRestrictedApisFlag(std::string_view text, std::string_view flag);
// The groups of one endpoint: INVALID_ARGUMENT when an API is in two of them (`what` names the
// endpoint's setting).
Status CheckRestrictedApis(const std::vector<RestrictedApis>& groups, std::string_view what);

// Triton's trace levels, each OFF, TIMESTAMPS or TENSORS (a level may be named more than once, each
// adding a kind of detail): "OFF", "TIMESTAMPS", "TENSORS" or "TIMESTAMPS,TENSORS". OFF beside
// another level, or an unknown one, is INVALID_ARGUMENT naming it.
StatusOr<std::string> CanonicalTraceLevel(const std::vector<std::string>& levels);

// The trace settings' combined checks, once YAML and flags are applied: a level other than OFF
// needs trace_file in mode triton; mode opentelemetry takes no TENSORS level; opentelemetry
// settings need that mode. INVALID_ARGUMENT naming the settings; `source` prefixes the message.
Status CheckTraceConfig(const ServerConfig& config, std::string_view source);

// Parses server YAML text; `source` names the file in error messages.
StatusOr<ServerConfig> ParseServerConfig(const std::string& yaml_text, const std::string& source);
StatusOr<ServerConfig> LoadServerConfigFile(const std::string& path);

}  // namespace tessera
