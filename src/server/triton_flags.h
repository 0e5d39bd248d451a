// tritonserver command-line flags that have no Tessera name of their own, so that a Triton launch
// line (a Kubernetes manifest, a start script) starts tessera-server unchanged.
//
// Three kinds:
//   - flags that map onto a server setting (--exit-timeout-secs is shutdown.drain_secs,
//     --strict-model-config=true turns completion from the model file off, --allow-http=false
//     turns the HTTP endpoint off, the log flags set the start-up log settings, ...);
//   - Triton's behaviour switches Tessera implements (--exit-on-error, --strict-readiness);
//   - tuning flags of Triton's own machinery (memory pools, backend and repo-agent folders, load
//     threads): accepted, and named in the log as not used, since they change no answer.
// A value Tessera cannot honour (--allow-grpc=false: the gRPC endpoint is always on) is an error
// naming the flag, as is a combination that contradicts itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "tessera/common/logging.h"
#include "tessera/common/server_config.h"
#include "tessera/common/status.h"

namespace tessera::server {

class TritonFlags {
 public:
  // Adds the flags to `app` (in their own group of --help); `app` must outlive this object.
  explicit TritonFlags(CLI::App* app);

  // After parsing: applies the flags given to `config`, and the log flags to `log` (for
  // UpdateLogSettings once logging is up). `ignored` gets one line per accepted flag that has no
  // effect here. INVALID_ARGUMENT names a flag whose value cannot be honoured.
  Status Apply(ServerConfig* config, LogSettingsUpdate* log,
               std::vector<std::string>* ignored) const;

 private:
  bool Given(const char* flag) const { return app_->count(flag) > 0; }

  CLI::App* app_;
  int exit_timeout_secs_ = 0;
  bool strict_model_config_ = false;
  bool exit_on_error_ = false;
  bool strict_readiness_ = false;
  bool allow_grpc_ = true;
  bool allow_http_ = true;
  bool allow_metrics_ = true;
  std::string grpc_address_, http_address_, metrics_address_;
  int http_thread_count_ = 0;
  std::string model_config_name_;
  std::vector<std::string> trace_config_;
  int64_t trace_count_ = -1;
  int64_t trace_log_frequency_ = 0;
  ServerConfig::GrpcKeepalive keepalive_;
  bool keepalive_permit_without_calls_ = false;
  std::string response_compression_;
  bool reuse_grpc_port_ = false, reuse_http_port_ = false;
  bool model_namespacing_ = false;
  bool allow_cpu_metrics_ = true;
  bool allow_gpu_metrics_ = true;
  int64_t metrics_interval_ms_ = 2000;
  std::vector<std::string> metrics_config_;
  int64_t response_cache_byte_size_ = 0;
  bool log_info_ = true, log_warning_ = true, log_error_ = true;
  std::string log_format_, log_file_;
  // Tuning flags with no effect here, by name; repeatable ones keep every value.
  std::vector<std::pair<std::string, std::vector<std::string>>> unused_;
};

}  // namespace tessera::server
