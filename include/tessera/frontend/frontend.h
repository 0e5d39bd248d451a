// The network side of the server: the KServe v2 / Triton gRPC endpoint
// (inference.GRPCInferenceService) and the KServe v2 HTTP/REST endpoint, which share one inference
// path, one set of client shared-memory regions and one request tracer. (The Prometheus endpoint
// is metrics.h.)
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tessera/common/server_config.h"
#include "tessera/common/status.h"
#include "tessera/frontend/server_core.h"
#include "tessera/frontend/trace_settings.h"

namespace tessera::frontend {

struct FrontendOptions {
  std::string grpc_address = "0.0.0.0";
  int grpc_port = 8001;  // 0 = pick a free port (see Frontend::grpc_port())
  // The largest request or answer either endpoint takes or sends.
  int64_t max_message_bytes = 2147483647;
  // gRPC's keepalive and ping policy (unset values keep gRPC's defaults).
  ServerConfig::GrpcKeepalive grpc_keepalive;
  // none | low | medium | high: gRPC's default compression for answers; a client that does not
  // accept compression gets them plain.
  std::string grpc_response_compression = "none";
  bool grpc_reuse_port = false;  // SO_REUSEPORT on each endpoint's listening socket
  bool http_reuse_port = false;
  // Memory that compressed requests may take, all together, while they are inflated and parsed
  // (inflate_budget.h); past it one is refused with UNAVAILABLE.
  int64_t max_inflating_bytes = int64_t{1} << 32;
  std::string http_address = "0.0.0.0";
  int http_port = -1;  // -1 = no HTTP endpoint, 0 = pick a free port (see Frontend::http_port())
  // HTTP requests worked on at once (inflating, parsing, routing, a model load): threads that no
  // connection holds. An inference waiting for its answer and a slow or idle client hold none.
  int http_threads = 64;
  // An HTTP connection that sends nothing for this long (idle keep-alive, or a request that stops
  // coming) is closed; one waiting for its answer is not.
  int http_idle_timeout_s = 30;
  // TLS of each endpoint (no certificate = plaintext). gRPC reads its files again every
  // reload_secs and may ask clients for certificates; HTTP reads them once. /metrics stays plain.
  TlsFiles grpc_tls;
  TlsFiles http_tls;
  // APIs only clients sending a header may call (api_access.h); the others are open.
  std::vector<RestrictedApis> grpc_restricted;
  std::vector<RestrictedApis> http_restricted;
  std::string metrics_address = "0.0.0.0";
  int metrics_port = 8002;  // 0 = no metrics endpoint
  std::string server_version = "0.1.0";
  // The system shared-memory extension: clients may register POSIX shm objects for the server to
  // read inputs from and write outputs to. Off by default, as in Triton (--allow-client-shm).
  bool allow_client_shm = false;
  // Clients may change the log settings (LogSettings RPC); reading them is always allowed.
  bool allow_log_settings = false;
  // Request tracing (TraceSetting RPC); off unless a level and a trace file are given.
  TraceSettings trace;
  // Set: mode opentelemetry, the traces go as spans to this collector instead of trace.file.
  std::optional<OtlpExportSettings> otlp;
  // Triton's response cache (--cache-config local,size=N) for the models whose config enables
  // response_cache; 0 = no cache.
  uint64_t response_cache_bytes = 0;
};

// Reads and checks one endpoint's TLS files as its start would (nothing to check when `files` has
// no certificate), so that a server can refuse to start before it loads models. INVALID_ARGUMENT
// names the config key (`what` is "grpc.tls" or "http.tls") and the file.
Status CheckTlsFiles(const TlsFiles& files, std::string_view what);

class Frontend {
 public:
  // Starts serving. `core` must outlive the frontend.
  static StatusOr<std::unique_ptr<Frontend>> Start(const FrontendOptions& options,
                                                   ServerCore* core);
  virtual ~Frontend() = default;

  virtual int grpc_port() const = 0;
  virtual int http_port() const = 0;  // -1 when there is no HTTP endpoint
  // For a shutdown, when the drain begins: grpc.health.v1.Health answers NOT_SERVING from now on
  // (ServerReady and HTTP's /v2/health/ready follow ServerCore::HealthReady by themselves).
  virtual void StopServing() = 0;
  // grpc.health.v1.Health takes ServerCore::HealthReady's answer now; for the core to call when
  // that answer may have changed (strict readiness: a model loaded, failed or unloaded).
  virtual void RefreshHealth() = 0;
  // For a shutdown, once the server refuses new requests (ServerCore::IsReady false): returns when
  // no ModelInfer call has arrived for `quiet_ms`, or after `max_ms`. Calls already on the wire
  // then get the refusal, not a transport-level cancel from Shutdown. Logs how many were refused.
  virtual void RefuseUntilQuiet(int64_t quiet_ms, int64_t max_ms) = 0;
  // Stops accepting new calls, waits up to `deadline_ms` for running ones, then cancels the rest.
  virtual void Shutdown(int64_t deadline_ms) = 0;
};

}  // namespace tessera::frontend
