#include "triton_flags.h"

#include <array>
#include <string_view>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace tessera::server {
namespace {

constexpr char kGroup[] = "tritonserver flags";

// Triton flags for its own machinery, which Tessera does not have: each is accepted with any
// value and named in the log. Repeatable, as several of Triton's are (--backend-config).
constexpr std::array<std::string_view, 19> kUnusedFlags = {
    "--pinned-memory-pool-byte-size",
    "--cuda-memory-pool-byte-size",
    "--cuda-virtual-address-size",
    "--model-load-thread-count",
    "--model-load-retry-count",
    "--backend-directory",
    "--backend-config",
    "--repoagent-directory",
    "--min-supported-compute-capability",
    "--buffer-manager-thread-count",
    "--host-policy",
    "--id",
    "--grpc-infer-allocation-pool-size",
    "--http-header-forward-pattern",
    "--grpc-header-forward-pattern",
    "--rate-limit",
    "--rate-limit-resource",
    "--model-load-gpu-limit",
    "--cache-directory",
};

// --trace-config's settings and where they go: "<setting>=<value>", "triton,<setting>=<value>" or
// "opentelemetry,<setting>=<value>". Levels are gathered in `levels` (each level= adds one, as in
// Triton).
Status ApplyTraceConfig(const std::string& entry, ServerConfig* config,
                        std::vector<std::string>* levels) {
  absl::string_view text = entry;
  absl::ConsumePrefix(&text, "triton,");
  const bool otel = absl::ConsumePrefix(&text, "opentelemetry,");
  const size_t equals = text.find('=');
  if (equals == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--trace-config ", entry, ": expected <setting>=<value>"));
  }
  const std::string setting(text.substr(0, equals));
  const std::string value(text.substr(equals + 1));
  auto number = [&](int64_t min, int64_t* out) -> Status {
    if (!absl::SimpleAtoi(value, out) || *out < min) {
      return absl::InvalidArgumentError(
          absl::StrCat("--trace-config ", entry, ": ", setting, " must be an integer >= ", min));
    }
    return absl::OkStatus();
  };
  if (otel) {
    ServerConfig::OtelTrace& o = config->trace_otel;
    if (setting == "url") {
      o.url = value;
      return absl::OkStatus();
    }
    if (setting == "resource") {  // resource=<key>=<value>, repeatable
      const size_t inner = value.find('=');
      if (inner == std::string::npos || inner == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--trace-config ", entry, ": resource must be <key>=<value>, such as service.name=x"));
      }
      o.resource.emplace_back(value.substr(0, inner), value.substr(inner + 1));
      return absl::OkStatus();
    }
    for (auto [name, out] :
         {std::pair{"bsp_max_queue_size", &o.bsp_max_queue_size},
          std::pair{"bsp_schedule_delay", &o.bsp_schedule_delay_ms},
          std::pair{"bsp_max_export_batch_size", &o.bsp_max_export_batch_size}}) {
      if (setting == name) return number(1, &out->emplace());
    }
    return absl::InvalidArgumentError(
        absl::StrCat("--trace-config ", entry,
                     ": unknown opentelemetry setting (known: url, resource, bsp_max_queue_size, "
                     "bsp_schedule_delay, bsp_max_export_batch_size)"));
  }
  if (setting == "mode") {
    if (value != "triton" && value != "opentelemetry") {
      return absl::InvalidArgumentError(
          absl::StrCat("--trace-config ", entry, ": mode must be triton or opentelemetry"));
    }
    config->trace_mode = value;
    return absl::OkStatus();
  }
  if (setting == "level") {
    if (!CanonicalTraceLevel({value}).ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--trace-config ", entry, ": level must be OFF, TIMESTAMPS or TENSORS"));
    }
    levels->push_back(value);
    return absl::OkStatus();
  }
  if (setting == "rate") return number(0, &config->trace_rate);
  if (setting == "count") return number(-1, &config->trace_count);
  if (setting == "file") {  // Triton spells it "triton,file=..."; the bare form is read too
    config->trace_file = value;
    return absl::OkStatus();
  }
  if (setting == "log-frequency") return number(0, &config->trace_log_frequency);
  return absl::InvalidArgumentError(absl::StrCat(
      "--trace-config ", entry,
      ": unknown setting (known: mode, level, rate, count, triton,file, triton,log-frequency, "
      "opentelemetry,<setting>)"));
}

// --metrics-config's "<setting>=<value>": the per-model latency metrics' form. `notes` gets a line
// for a setting accepted without effect.
Status ApplyMetricsConfig(const std::string& entry, ServerConfig* config,
                          std::vector<std::string>* notes) {
  const size_t equals = entry.find('=');
  const std::string setting = entry.substr(0, equals);
  std::string value = equals == std::string::npos ? "" : entry.substr(equals + 1);
  if (equals == std::string::npos || setting.find(',') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-config ", entry,
        ": expected <setting>=<value> (no setting groups: counter_latencies, summary_latencies, "
        "summary_quantiles, histogram_latencies)"));
  }
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
    value = value.substr(1, value.size() - 2);  // as a start script may leave it quoted
  }
  auto boolean = [&](bool* out) -> Status {
    if (value != "true" && value != "false") {
      return absl::InvalidArgumentError(
          absl::StrCat("--metrics-config ", entry, ": ", setting, " must be true or false"));
    }
    *out = value == "true";
    return absl::OkStatus();
  };
  if (setting == "counter_latencies") return boolean(&config->metrics_counter_latencies);
  if (setting == "summary_latencies") return boolean(&config->metrics_summary_latencies);
  if (setting == "summary_quantiles") {
    auto quantiles = ParseSummaryQuantiles(value);
    if (!quantiles.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--metrics-config ", entry, ": ", quantiles.status().message()));
    }
    config->metrics_summary_quantiles = *std::move(quantiles);
    return absl::OkStatus();
  }
  if (setting == "histogram_latencies") {
    bool histograms = false;
    TESSERA_RETURN_IF_ERROR(boolean(&histograms));
    // Triton's only latency histogram is the first response of decoupled models.
    if (histograms) {
      notes->push_back(absl::StrCat("--metrics-config ", entry,
                                    ": no effect (nv_inference_first_response_histogram_ms is "
                                    "for decoupled models, which Tessera does not serve)"));
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--metrics-config ", entry,
      ": unknown setting (known: counter_latencies, summary_latencies, summary_quantiles, "
      "histogram_latencies)"));
}

}  // namespace

TritonFlags::TritonFlags(CLI::App* app) : app_(app) {
  app->add_option("--exit-timeout-secs", exit_timeout_secs_,
                  "Seconds a shutdown waits for running requests (shutdown.drain_secs)")
      ->check(CLI::NonNegativeNumber)
      ->group(kGroup);
  app->add_option("--strict-model-config", strict_model_config_,
                  "true: refuse configs without input/output instead of completing them (as "
                  "--disable-auto-complete-config)")
      ->group(kGroup);
  app->add_option("--exit-on-error", exit_on_error_,
                  "true: exit (code 1) when a model fails to load at start "
                  "(repository.exit_on_error; Tessera's default is false)")
      ->group(kGroup);
  app->add_option("--strict-readiness", strict_readiness_,
                  "true: the server is ready only while every model it was asked to load is "
                  "(repository.strict_readiness; Tessera's default is false)")
      ->group(kGroup);
  app->add_option("--allow-grpc", allow_grpc_, "true only: the gRPC endpoint is always on")
      ->group(kGroup);
  app->add_option("--allow-http", allow_http_, "false: no HTTP endpoint (as --http-port -1)")
      ->group(kGroup);
  app->add_option("--allow-metrics", allow_metrics_, "false: no /metrics endpoint")->group(kGroup);
  app->add_option("--grpc-address", grpc_address_, "Interface of the gRPC endpoint")->group(kGroup);
  app->add_option("--http-address", http_address_, "Interface of the HTTP endpoint")->group(kGroup);
  app->add_option("--metrics-address", metrics_address_, "Interface of /metrics")->group(kGroup);
  app->add_option("--http-thread-count", http_thread_count_, "HTTP requests worked on at once")
      ->check(CLI::Range(1, 4096))
      ->group(kGroup);
  app->add_option("--trace-config", trace_config_,
                  "Tracing settings, repeatable: level= (OFF, TIMESTAMPS, TENSORS; repeat it for "
                  "both), rate=, count=, triton,file=, "
                  "triton,log-frequency= (trace.*)")
      ->group(kGroup);
  app->add_option("--trace-count", trace_count_, "Traces to take; -1 = no limit (trace.count)")
      ->check(CLI::Range(int64_t{-1}, INT64_MAX))
      ->group(kGroup);
  app->add_option("--trace-log-frequency", trace_log_frequency_,
                  "Write traces to a new file every N (trace.log_frequency)")
      ->check(CLI::NonNegativeNumber)
      ->group(kGroup);
  struct Keepalive {
    const char* flag;
    int64_t* value;
    const char* help;
  };
  for (const Keepalive& k : {
           Keepalive{"--grpc-keepalive-time", &keepalive_.time_ms,
                     "Milliseconds between keepalive pings (grpc.keepalive.time_ms)"},
           {"--grpc-keepalive-timeout", &keepalive_.timeout_ms,
            "Milliseconds a keepalive ping waits for its answer (grpc.keepalive.timeout_ms)"},
           {"--grpc-http2-max-pings-without-data", &keepalive_.http2_max_pings_without_data,
            "Pings sent without data between them (grpc.keepalive.http2_max_pings_without_data)"},
           {"--grpc-http2-min-recv-ping-interval-without-data",
            &keepalive_.http2_min_recv_ping_interval_without_data_ms,
            "Shortest interval between a client's pings without data, in ms "
            "(grpc.keepalive.http2_min_recv_ping_interval_without_data_ms)"},
           {"--grpc-http2-max-ping-strikes", &keepalive_.http2_max_ping_strikes,
            "Bad pings before a connection is closed (grpc.keepalive.http2_max_ping_strikes)"},
       }) {
    app->add_option(k.flag, *k.value, k.help)
        ->check(CLI::Range(int64_t{0}, int64_t{INT32_MAX}))
        ->group(kGroup);
  }
  app->add_option("--grpc-keepalive-permit-without-calls", keepalive_permit_without_calls_,
                  "Keepalive pings even without calls (grpc.keepalive.permit_without_calls)")
      ->group(kGroup);
  app->add_option("--grpc-infer-response-compression-level", response_compression_,
                  "Compression of answers for clients that accept it (grpc.response_compression)")
      ->check(CLI::IsMember({"none", "low", "medium", "high"}))
      ->group(kGroup);
  app->add_option("--reuse-grpc-port", reuse_grpc_port_,
                  "Let other processes bind the gRPC port too (grpc.reuse_port)")
      ->group(kGroup);
  app->add_option("--reuse-http-port", reuse_http_port_,
                  "Let other processes bind the HTTP port too (http.reuse_port)")
      ->group(kGroup);
  app->add_option("--model-namespacing", model_namespacing_, "false only: model names are global")
      ->group(kGroup);
  app->add_option("--allow-cpu-metrics", allow_cpu_metrics_,
                  "false: no nv_cpu_* metrics (metrics.cpu)")
      ->group(kGroup);
  app->add_option("--allow-gpu-metrics", allow_gpu_metrics_,
                  "false: no nv_gpu_* metrics (metrics.gpu)")
      ->group(kGroup);
  app->add_option("--metrics-config", metrics_config_,
                  "Latency metrics, repeatable: counter_latencies=, summary_latencies=, "
                  "summary_quantiles=<q>:<error>,... (metrics.*)")
      ->group(kGroup);
  app->add_option("--metrics-interval-ms", metrics_interval_ms_,
                  "How often the CPU metrics are sampled (metrics.interval_ms)")
      ->check(CLI::Range(int64_t{10}, int64_t{3600000}))
      ->group(kGroup);
  app->add_option("--model-config-name", model_config_name_,
                  "Serve each model folder's configs/<name>.pbtxt (or .yaml) where it has one "
                  "(repository.config_name)")
      ->group(kGroup);
  app->add_option("--response-cache-byte-size", response_cache_byte_size_,
                  "Response cache size (Triton's older form of --cache-config local,size=N)")
      ->check(CLI::NonNegativeNumber)
      ->group(kGroup);
  app->add_option("--log-info", log_info_, "Write info lines")->group(kGroup);
  app->add_option("--log-warning", log_warning_, "Write warning lines")->group(kGroup);
  app->add_option("--log-error", log_error_, "Write error lines")->group(kGroup);
  app->add_option("--log-format", log_format_, "default or ISO8601")
      ->check(CLI::IsMember({"default", "ISO8601"}))
      ->group(kGroup);
  app->add_option("--log-file", log_file_, "Append the server's log lines to this file")
      ->group(kGroup);
  // Sized once: CLI11 keeps pointers to the vectors.
  unused_.resize(kUnusedFlags.size());
  for (size_t i = 0; i < kUnusedFlags.size(); ++i) {
    unused_[i].first = std::string(kUnusedFlags[i]);
    app->add_option(unused_[i].first, unused_[i].second, "Triton tuning flag; not used here")
        ->allow_extra_args(false)
        ->group(kGroup);
  }
}

Status TritonFlags::Apply(ServerConfig* config, LogSettingsUpdate* log,
                          std::vector<std::string>* ignored) const {
  if (Given("--allow-grpc") && !allow_grpc_) {
    return absl::InvalidArgumentError(
        "--allow-grpc=false: tessera-server always serves the gRPC endpoint");
  }
  if (Given("--strict-model-config")) {
    if (!strict_model_config_ && app_->count("--disable-auto-complete-config") > 0) {
      return absl::InvalidArgumentError(
          "--strict-model-config=false contradicts --disable-auto-complete-config");
    }
    config->auto_complete_config = !strict_model_config_;
  }
  if (Given("--allow-http") && !allow_http_) {
    if (app_->count("--http-port") > 0) {
      return absl::InvalidArgumentError("--allow-http=false contradicts --http-port");
    }
    config->http_port = -1;
  }
  if (Given("--allow-metrics") && !allow_metrics_) {
    if (app_->count("--metrics-port") > 0) {
      return absl::InvalidArgumentError("--allow-metrics=false contradicts --metrics-port");
    }
    config->metrics_port = 0;
  }
  if (Given("--response-cache-byte-size")) {
    if (app_->count("--cache-config") > 0) {
      return absl::InvalidArgumentError(
          "--response-cache-byte-size and --cache-config both size the response cache: give one");
    }
    config->response_cache_bytes = response_cache_byte_size_;
  }
  if (Given("--exit-timeout-secs")) config->shutdown_drain_secs = exit_timeout_secs_;
  if (Given("--exit-on-error")) config->exit_on_error = exit_on_error_;
  if (Given("--strict-readiness")) config->strict_readiness = strict_readiness_;
  if (Given("--grpc-address")) config->grpc_address = grpc_address_;
  if (Given("--http-address")) config->http_address = http_address_;
  if (Given("--metrics-address")) config->metrics_address = metrics_address_;
  if (Given("--http-thread-count")) config->http_threads = http_thread_count_;
  if (Given("--model-namespacing") && model_namespacing_) {
    return absl::InvalidArgumentError(
        "--model-namespacing=true: model names are global here (one name, one model across "
        "every repository)");
  }
  if (Given("--trace-count")) config->trace_count = trace_count_;
  if (Given("--trace-log-frequency")) config->trace_log_frequency = trace_log_frequency_;
  std::vector<std::string> trace_levels;
  for (const std::string& entry : trace_config_) {
    TESSERA_RETURN_IF_ERROR(ApplyTraceConfig(entry, config, &trace_levels));
  }
  if (!trace_levels.empty()) {
    StatusOr<std::string> level = CanonicalTraceLevel(trace_levels);
    if (!level.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--trace-config level=: ", level.status().message()));
    }
    config->trace_level = *std::move(level);
  }
  ServerConfig::GrpcKeepalive& keepalive = config->grpc_keepalive;
  for (const auto& [flag, from, to] : {
           std::tuple{"--grpc-keepalive-time", keepalive_.time_ms, &keepalive.time_ms},
           {"--grpc-keepalive-timeout", keepalive_.timeout_ms, &keepalive.timeout_ms},
           {"--grpc-http2-max-pings-without-data", keepalive_.http2_max_pings_without_data,
            &keepalive.http2_max_pings_without_data},
           {"--grpc-http2-min-recv-ping-interval-without-data",
            keepalive_.http2_min_recv_ping_interval_without_data_ms,
            &keepalive.http2_min_recv_ping_interval_without_data_ms},
           {"--grpc-http2-max-ping-strikes", keepalive_.http2_max_ping_strikes,
            &keepalive.http2_max_ping_strikes},
       }) {
    if (Given(flag)) *to = from;
  }
  if (Given("--grpc-keepalive-permit-without-calls")) {
    keepalive.permit_without_calls = keepalive_permit_without_calls_ ? 1 : 0;
  }
  if (Given("--grpc-infer-response-compression-level")) {
    config->grpc_response_compression = response_compression_;
  }
  if (Given("--reuse-grpc-port")) config->grpc_reuse_port = reuse_grpc_port_;
  if (Given("--reuse-http-port")) config->http_reuse_port = reuse_http_port_;
  if (Given("--allow-cpu-metrics")) config->cpu_metrics = allow_cpu_metrics_;
  if (Given("--allow-gpu-metrics")) config->gpu_metrics = allow_gpu_metrics_;
  if (Given("--metrics-interval-ms")) config->metrics_interval_ms = metrics_interval_ms_;
  for (const std::string& entry : metrics_config_) {
    TESSERA_RETURN_IF_ERROR(ApplyMetricsConfig(entry, config, ignored));
  }
  if (Given("--model-config-name")) {
    if (std::string why = CheckConfigName(model_config_name_); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--model-config-name: ", why));
    }
    config->model_config_name = model_config_name_;
  }

  if (Given("--log-info")) log->info = log_info_;
  if (Given("--log-warning")) log->warning = log_warning_;
  if (Given("--log-error")) log->error = log_error_;
  if (Given("--log-format")) log->format = log_format_;
  if (Given("--log-file")) log->file = log_file_;

  for (const auto& [flag, values] : unused_) {
    if (values.empty()) continue;
    ignored->push_back(absl::StrCat(flag, " ", absl::StrJoin(values, " "),
                                    ": not used (Triton tuning with no counterpart here)"));
  }
  return absl::OkStatus();
}

}  // namespace tessera::server
