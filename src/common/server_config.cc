#include "tessera/common/server_config.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tessera/common/yaml_util.h"

namespace tessera {
namespace {

using yaml::YamlMap;

constexpr std::array<std::string_view, 3> kControlModes = {"none", "poll", "explicit"};
constexpr std::array<std::string_view, 3> kDevices = {"auto", "cpu", "gpu"};
constexpr std::array<std::string_view, 4> kPartitionMechanisms = {"auto", "mps", "green", "none"};
constexpr std::array<std::string_view, 4> kSchedulerPolicies = {"gpulet", "temporal", "spatial",
                                                                "triton"};

constexpr int64_t kMaxPort = 65535;
// grpc++ takes the message limit as an int.
constexpr int64_t kMaxGrpcMessageBytes = INT32_MAX;
// A ring must hold at least one small request; below this it is surely a typo (units are bytes).
constexpr int64_t kMinRingBytes = 4096;

constexpr std::array<std::string_view, 10> kSections = {
    "grpc",      "http",     "metrics", "repository", "executors",
    "scheduler", "shutdown", "log",     "trace",      "response_cache"};
constexpr std::array<std::string_view, 1> kResponseCacheKeys = {"size_bytes"};
constexpr std::array<std::string_view, 10> kGrpcKeys = {
    "address", "port",       "max_message_bytes", "max_inflating_bytes", "allow_client_shm",
    "tls",     "restricted", "keepalive",         "reuse_port",          "response_compression"};
constexpr std::array<std::string_view, 6> kKeepaliveKeys = {
    "time_ms",
    "timeout_ms",
    "permit_without_calls",
    "http2_max_pings_without_data",
    "http2_min_recv_ping_interval_without_data_ms",
    "http2_max_ping_strikes"};
constexpr std::array<std::string_view, 4> kCompressionLevels = {"none", "low", "medium", "high"};
constexpr std::array<std::string_view, 7> kHttpKeys = {
    "address", "port", "threads", "idle_timeout_s", "tls", "restricted", "reuse_port"};
constexpr std::array<std::string_view, 4> kRestrictedKeys = {"apis", "header", "value",
                                                             "value_file"};
// In ApiGroup's order.
constexpr std::array<std::string_view, kApiGroupCount> kApiGroupNames = {
    "health",           "metadata",   "inference", "shared-memory", "model-config",
    "model-repository", "statistics", "trace",     "logging"};
constexpr std::array<std::string_view, 4> kTlsKeys = {"cert", "key", "client_ca", "reload_secs"};
constexpr std::array<std::string_view, 8> kMetricsKeys = {"address",
                                                          "port",
                                                          "cpu",
                                                          "gpu",
                                                          "interval_ms",
                                                          "counter_latencies",
                                                          "summary_latencies",
                                                          "summary_quantiles"};
constexpr std::array<std::string_view, 7> kRepositoryKeys = {
    "path",          "control_mode",     "poll_secs",  "auto_complete",
    "exit_on_error", "strict_readiness", "config_name"};
constexpr std::array<std::string_view, 12> kExecutorKeys = {"binary",
                                                            "devices",
                                                            "cpu_executors",
                                                            "threads_per_executor",
                                                            "input_ring_bytes",
                                                            "output_ring_bytes",
                                                            "partition_mechanism",
                                                            "mps",
                                                            "batches_in_flight",
                                                            "inline_run_max_us",
                                                            "memory_limit_mb",
                                                            "input_mirror"};
constexpr std::array<std::string_view, 3> kInputMirrors = {"auto", "host", "off"};
constexpr std::array<std::string_view, 2> kMpsKeys = {"start_daemon", "pipe_directory"};
constexpr std::array<std::string_view, 5> kSchedulerKeys = {"policy", "profiles", "epoch_secs",
                                                            "rate_window_ms", "slo_drop"};
constexpr std::array<std::string_view, 1> kShutdownKeys = {"drain_secs"};
constexpr std::array<std::string_view, 2> kLogKeys = {"verbose", "allow_settings_rpc"};
constexpr std::array<std::string_view, 7> kTraceKeys = {
    "file", "level", "rate", "count", "log_frequency", "mode", "opentelemetry"};
constexpr std::array<std::string_view, 2> kTraceModes = {"triton", "opentelemetry"};
constexpr std::array<std::string_view, 6> kOtelKeys = {"url",
                                                       "resource",
                                                       "headers",
                                                       "bsp_max_queue_size",
                                                       "bsp_schedule_delay",
                                                       "bsp_max_export_batch_size"};

// Reads the optional section `key` of `root` with `read`; an absent section keeps the defaults.
template <size_t N, typename ReadSection>
Status Section(const YamlMap& root, std::string_view key,
               const std::array<std::string_view, N>& known_keys, ReadSection read) {
  std::optional<YAML::Node> node = root.Get(key);
  if (!node) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(YamlMap section,
                           YamlMap::Create(root.source(), *node, root.PathOf(key), known_keys));
  return read(section);
}

// A map of strings under `key` (resource attributes, headers), in the order written.
Status StringPairs(const YamlMap& m, std::string_view key,
                   std::vector<std::pair<std::string, std::string>>& pairs) {
  std::optional<YAML::Node> node = m.Get(key);
  if (!node || node->IsNull()) return absl::OkStatus();
  if (!node->IsMap()) {
    return yaml::ErrorAt(
        m.source(), *node, m.PathOf(key),
        absl::StrCat("expected a map of names to values, got ", yaml::Describe(*node)));
  }
  for (const auto& item : *node) {
    TESSERA_ASSIGN_OR_RETURN(std::string name,
                             yaml::ReadString(m.source(), item.first, m.PathOf(key)));
    if (name.empty()) return yaml::ErrorAt(m.source(), item.first, m.PathOf(key), "empty name");
    const std::string path = yaml::JoinPath(m.PathOf(key), name);
    TESSERA_ASSIGN_OR_RETURN(std::string value, yaml::ReadString(m.source(), item.second, path));
    pairs.emplace_back(std::move(name), std::move(value));
  }
  return absl::OkStatus();
}

// trace.opentelemetry: what is given is kept as set; the rest stays unset for the environment.
Status OtelSection(const YamlMap& trace, ServerConfig::OtelTrace& otel) {
  return Section(trace, "opentelemetry", kOtelKeys, [&](const YamlMap& m) -> Status {
    if (m.Has("url")) TESSERA_RETURN_IF_ERROR(m.GetString("url", &otel.url.emplace()));
    TESSERA_RETURN_IF_ERROR(StringPairs(m, "resource", otel.resource));
    TESSERA_RETURN_IF_ERROR(StringPairs(m, "headers", otel.headers));
    for (auto [key, out] :
         {std::pair{"bsp_max_queue_size", &otel.bsp_max_queue_size},
          std::pair{"bsp_schedule_delay", &otel.bsp_schedule_delay_ms},
          std::pair{"bsp_max_export_batch_size", &otel.bsp_max_export_batch_size}}) {
      if (m.Has(key)) TESSERA_RETURN_IF_ERROR(m.GetInt(key, 1, INT32_MAX, &out->emplace()));
    }
    return absl::OkStatus();
  });
}

// A tls section. A certificate needs its key and the other way round; client CAs need both.
Status TlsSection(const YamlMap& endpoint, TlsFiles& tls) {
  return Section(endpoint, "tls", kTlsKeys, [&](const YamlMap& m) -> Status {
    TESSERA_RETURN_IF_ERROR(m.GetString("cert", &tls.cert));
    TESSERA_RETURN_IF_ERROR(m.GetString("key", &tls.key));
    TESSERA_RETURN_IF_ERROR(m.GetString("client_ca", &tls.client_ca));
    TESSERA_RETURN_IF_ERROR(m.GetInt("reload_secs", 1, 86400, &tls.reload_secs));
    auto needs = [&](std::string_view key, std::string_view because) {
      return yaml::ErrorAt(m.source(), m.KeyLine(because), m.PathOf(key),
                           absl::StrCat("must be set too when ", m.PathOf(because), " is"));
    };
    if (!tls.cert.empty() && tls.key.empty()) return needs("key", "cert");
    if (tls.cert.empty() && !tls.key.empty()) return needs("cert", "key");
    if (tls.cert.empty() && !tls.client_ca.empty()) return needs("cert", "client_ca");
    return absl::OkStatus();
  });
}

std::optional<ApiGroup> ApiGroupNamed(std::string_view name) {
  for (int i = 0; i < kApiGroupCount; ++i) {
    if (kApiGroupNames[i] == name) return static_cast<ApiGroup>(i);
  }
  return std::nullopt;
}

// Why `header` cannot name a restriction's header, or "" when it can (then lower-cased): both
// endpoints must match it, so it is an HTTP token that gRPC also takes as a metadata key.
std::string HeaderProblem(std::string& header) {
  if (header.empty()) return "is empty";
  for (char& c : header) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    const bool allowed =
        (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!allowed) {
      return absl::StrCat("\"", header, "\" is not a header name (letters, digits, '-', '_', '.')");
    }
  }
  return "";
}

// Why `value` cannot be a header's value, or "". The value itself is never put in a message.
std::string ValueProblem(std::string_view value) {
  if (value.empty()) return "is empty";
  for (char c : value) {
    // What a gRPC metadata value (not -bin) and an HTTP header value can both carry.
    if (c < 0x20 || c > 0x7e) return "holds a character other than printable ASCII";
  }
  if (value.front() == ' ' || value.back() == ' ') {
    return "starts or ends with a space (HTTP drops it)";
  }
  return "";
}

// `grpc.keepalive`: gRPC's keepalive and ping policy, each key optional.
Status KeepaliveSection(const YamlMap& grpc, ServerConfig::GrpcKeepalive& keepalive) {
  std::optional<YAML::Node> node = grpc.Get("keepalive");
  if (!node) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(
      YamlMap m, YamlMap::Create(grpc.source(), *node, grpc.PathOf("keepalive"), kKeepaliveKeys));
  TESSERA_RETURN_IF_ERROR(m.GetInt("time_ms", 1, INT32_MAX, &keepalive.time_ms));
  TESSERA_RETURN_IF_ERROR(m.GetInt("timeout_ms", 1, INT32_MAX, &keepalive.timeout_ms));
  bool permit = false;
  if (m.Has("permit_without_calls")) {
    TESSERA_RETURN_IF_ERROR(m.GetBool("permit_without_calls", &permit));
    keepalive.permit_without_calls = permit ? 1 : 0;
  }
  TESSERA_RETURN_IF_ERROR(m.GetInt("http2_max_pings_without_data", 0, INT32_MAX,
                                   &keepalive.http2_max_pings_without_data));
  TESSERA_RETURN_IF_ERROR(m.GetInt("http2_min_recv_ping_interval_without_data_ms", 0, INT32_MAX,
                                   &keepalive.http2_min_recv_ping_interval_without_data_ms));
  return m.GetInt("http2_max_ping_strikes", 0, INT32_MAX, &keepalive.http2_max_ping_strikes);
}

// `repository.path`: one folder, or a list of them.
Status RepositoryPaths(const YamlMap& m, std::vector<std::string>& paths) {
  std::optional<YAML::Node> node = m.Get("path");
  if (!node) return absl::OkStatus();
  const std::string_view source = m.source();
  if (!node->IsSequence()) {
    TESSERA_ASSIGN_OR_RETURN(std::string path, yaml::ReadString(source, *node, m.PathOf("path")));
    paths = {path};
    return absl::OkStatus();
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> entries,
                           yaml::ReadList(source, *node, m.PathOf("path")));
  if (entries.empty()) {
    return yaml::ErrorAt(source, m.KeyLine("path"), m.PathOf("path"), "lists no folder");
  }
  paths.clear();
  for (size_t i = 0; i < entries.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(
        std::string path,
        yaml::ReadString(source, entries[i], yaml::IndexPath(m.PathOf("path"), i)));
    paths.push_back(std::move(path));
  }
  return absl::OkStatus();
}

// An endpoint's optional `restricted` list of {apis, header, value | value_file}.
Status RestrictedSection(const YamlMap& endpoint, std::vector<RestrictedApis>& groups) {
  std::optional<YAML::Node> node = endpoint.Get("restricted");
  if (!node) return absl::OkStatus();
  const std::string_view source = endpoint.source();
  const std::string path = endpoint.PathOf("restricted");
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> entries, yaml::ReadList(source, *node, path));
  groups.clear();
  for (size_t i = 0; i < entries.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(
        YamlMap m, YamlMap::Create(source, entries[i], yaml::IndexPath(path, i), kRestrictedKeys));
    RestrictedApis group;
    std::optional<YAML::Node> apis = m.Get("apis");
    if (!apis) return m.Missing("apis");
    TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> names,
                             yaml::ReadList(source, *apis, m.PathOf("apis")));
    if (names.empty()) {
      return yaml::ErrorAt(source, m.KeyLine("apis"), m.PathOf("apis"), "lists no API");
    }
    for (size_t j = 0; j < names.size(); ++j) {
      TESSERA_ASSIGN_OR_RETURN(
          std::string name,
          yaml::ReadEnum(source, names[j], yaml::IndexPath(m.PathOf("apis"), j), kApiGroupNames));
      group.apis.push_back(*ApiGroupNamed(name));
    }
    if (!m.Has("header")) return m.Missing("header");
    TESSERA_RETURN_IF_ERROR(m.GetString("header", &group.header));
    if (std::string problem = HeaderProblem(group.header); !problem.empty()) {
      return yaml::ErrorAt(source, m.KeyLine("header"), m.PathOf("header"), problem);
    }
    // value_file: a mounted Secret, so that the value is not in the config itself.
    if (m.Has("value") == m.Has("value_file")) {
      return yaml::ErrorAt(source, m.line(), m.path(), "needs one of value and value_file");
    }
    std::string_view value_key = m.Has("value") ? "value" : "value_file";
    if (m.Has("value")) {
      TESSERA_RETURN_IF_ERROR(m.GetString("value", &group.value));
    } else {
      std::string file;
      TESSERA_RETURN_IF_ERROR(m.GetString("value_file", &file));
      StatusOr<std::string> text = yaml::ReadFileToString(file);
      if (!text.ok()) {
        const absl::string_view why = text.status().message();
        return yaml::ErrorAt(source, m.KeyLine(value_key), m.PathOf(value_key),
                             std::string_view(why.data(), why.size()));
      }
      group.value = *std::move(text);
      // A file written by `echo` or an editor ends with a newline that is not part of the value.
      while (!group.value.empty() && (group.value.back() == '\n' || group.value.back() == '\r')) {
        group.value.pop_back();
      }
    }
    if (std::string problem = ValueProblem(group.value); !problem.empty()) {
      return yaml::ErrorAt(source, m.KeyLine(value_key), m.PathOf(value_key), problem);
    }
    groups.push_back(std::move(group));
  }
  if (Status overlap = CheckRestrictedApis(groups, path); !overlap.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        yaml::AsAbsl(source), ":", endpoint.KeyLine("restricted"), ": ", overlap.message()));
  }
  return absl::OkStatus();
}

Status ParseInto(const YAML::Node& doc, std::string_view source, ServerConfig& config) {
  TESSERA_ASSIGN_OR_RETURN(YamlMap root, YamlMap::Create(source, doc, "", kSections));

  TESSERA_RETURN_IF_ERROR(Section(root, "grpc", kGrpcKeys, [&](const YamlMap& m) -> Status {
    TESSERA_RETURN_IF_ERROR(m.GetString("address", &config.grpc_address));
    TESSERA_RETURN_IF_ERROR(m.GetInt("port", 0, kMaxPort, &config.grpc_port));
    TESSERA_RETURN_IF_ERROR(
        m.GetInt("max_message_bytes", 1, kMaxGrpcMessageBytes, &config.max_grpc_message_bytes));
    TESSERA_RETURN_IF_ERROR(
        m.GetInt("max_inflating_bytes", 0, INT64_MAX, &config.max_inflating_bytes));
    TESSERA_RETURN_IF_ERROR(m.GetBool("allow_client_shm", &config.allow_client_shm));
    TESSERA_RETURN_IF_ERROR(m.GetBool("reuse_port", &config.grpc_reuse_port));
    TESSERA_RETURN_IF_ERROR(
        m.GetEnum("response_compression", kCompressionLevels, &config.grpc_response_compression));
    TESSERA_RETURN_IF_ERROR(KeepaliveSection(m, config.grpc_keepalive));
    TESSERA_RETURN_IF_ERROR(RestrictedSection(m, config.grpc_restricted));
    return TlsSection(m, config.grpc_tls);
  }));
  TESSERA_RETURN_IF_ERROR(Section(root, "http", kHttpKeys, [&](const YamlMap& m) -> Status {
    TESSERA_RETURN_IF_ERROR(m.GetString("address", &config.http_address));
    TESSERA_RETURN_IF_ERROR(m.GetInt("port", -1, kMaxPort, &config.http_port));
    TESSERA_RETURN_IF_ERROR(m.GetInt("threads", 1, 4096, &config.http_threads));
    TESSERA_RETURN_IF_ERROR(m.GetInt("idle_timeout_s", 1, 86400, &config.http_idle_timeout_s));
    TESSERA_RETURN_IF_ERROR(m.GetBool("reuse_port", &config.http_reuse_port));
    TESSERA_RETURN_IF_ERROR(RestrictedSection(m, config.http_restricted));
    return TlsSection(m, config.http_tls);
  }));
  TESSERA_RETURN_IF_ERROR(Section(root, "metrics", kMetricsKeys, [&](const YamlMap& m) -> Status {
    TESSERA_RETURN_IF_ERROR(m.GetString("address", &config.metrics_address));
    TESSERA_RETURN_IF_ERROR(m.GetBool("cpu", &config.cpu_metrics));
    TESSERA_RETURN_IF_ERROR(m.GetBool("gpu", &config.gpu_metrics));
    TESSERA_RETURN_IF_ERROR(m.GetInt("interval_ms", 10, 3600000, &config.metrics_interval_ms));
    TESSERA_RETURN_IF_ERROR(m.GetBool("counter_latencies", &config.metrics_counter_latencies));
    TESSERA_RETURN_IF_ERROR(m.GetBool("summary_latencies", &config.metrics_summary_latencies));
    if (m.Has("summary_quantiles")) {
      std::string text;
      TESSERA_RETURN_IF_ERROR(m.GetString("summary_quantiles", &text));
      auto quantiles = ParseSummaryQuantiles(text);
      if (!quantiles.ok()) {
        return yaml::ErrorAt(m.source(), m.KeyLine("summary_quantiles"),
                             m.PathOf("summary_quantiles"),
                             std::string(quantiles.status().message()));
      }
      config.metrics_summary_quantiles = *std::move(quantiles);
    }
    return m.GetInt("port", 0, kMaxPort, &config.metrics_port);
  }));
  TESSERA_RETURN_IF_ERROR(
      Section(root, "repository", kRepositoryKeys, [&](const YamlMap& m) -> Status {
        TESSERA_RETURN_IF_ERROR(RepositoryPaths(m, config.model_repositories));
        std::string mode(ModelControlModeName(config.model_control_mode));
        TESSERA_RETURN_IF_ERROR(m.GetEnum("control_mode", kControlModes, &mode));
        // Cannot fail: GetEnum admitted only known names.
        config.model_control_mode = ParseModelControlMode(mode).value_or(config.model_control_mode);
        TESSERA_RETURN_IF_ERROR(m.GetInt("poll_secs", 1, INT32_MAX, &config.repository_poll_secs));
        TESSERA_RETURN_IF_ERROR(m.GetBool("auto_complete", &config.auto_complete_config));
        TESSERA_RETURN_IF_ERROR(m.GetBool("exit_on_error", &config.exit_on_error));
        TESSERA_RETURN_IF_ERROR(m.GetBool("strict_readiness", &config.strict_readiness));
        TESSERA_RETURN_IF_ERROR(m.GetString("config_name", &config.model_config_name));
        if (std::string why = CheckConfigName(config.model_config_name); !why.empty()) {
          return yaml::ErrorAt(m.source(), m.KeyLine("config_name"), m.PathOf("config_name"), why);
        }
        return absl::OkStatus();
      }));
  TESSERA_RETURN_IF_ERROR(
      Section(root, "executors", kExecutorKeys, [&](const YamlMap& m) -> Status {
        TESSERA_RETURN_IF_ERROR(m.GetString("binary", &config.executor_binary));
        TESSERA_RETURN_IF_ERROR(m.GetEnum("devices", kDevices, &config.devices));
        TESSERA_RETURN_IF_ERROR(m.GetInt("cpu_executors", 1, INT32_MAX, &config.cpu_executors));
        TESSERA_RETURN_IF_ERROR(
            m.GetInt("threads_per_executor", 0, INT32_MAX, &config.threads_per_executor));
        TESSERA_RETURN_IF_ERROR(
            m.GetInt("input_ring_bytes", kMinRingBytes, INT64_MAX, &config.input_ring_bytes));
        TESSERA_RETURN_IF_ERROR(
            m.GetInt("output_ring_bytes", kMinRingBytes, INT64_MAX, &config.output_ring_bytes));
        TESSERA_RETURN_IF_ERROR(m.GetInt("batches_in_flight", 1, 64, &config.batches_in_flight));
        TESSERA_RETURN_IF_ERROR(
            m.GetInt("inline_run_max_us", 0, 1'000'000, &config.inline_run_max_us));
        TESSERA_RETURN_IF_ERROR(
            m.GetInt("memory_limit_mb", -1, int64_t{1} << 40, &config.executor_memory_limit_mb));
        TESSERA_RETURN_IF_ERROR(m.GetEnum("input_mirror", kInputMirrors, &config.input_mirror));
        TESSERA_RETURN_IF_ERROR(
            m.GetEnum("partition_mechanism", kPartitionMechanisms, &config.partition_mechanism));
        return Section(m, "mps", kMpsKeys, [&](const YamlMap& mps) -> Status {
          TESSERA_RETURN_IF_ERROR(mps.GetBool("start_daemon", &config.mps_start_daemon));
          return mps.GetString("pipe_directory", &config.mps_pipe_directory);
        });
      }));
  TESSERA_RETURN_IF_ERROR(Section(root, "scheduler", kSchedulerKeys, [&](const YamlMap& m) -> Status {
    TESSERA_RETURN_IF_ERROR(m.GetEnum("policy", kSchedulerPolicies, &config.scheduler_policy));
    TESSERA_RETURN_IF_ERROR(m.GetString("profiles", &config.scheduler_profiles));
    TESSERA_RETURN_IF_ERROR(m.GetDouble("epoch_secs", 0.1, 86400, &config.scheduler_epoch_secs));
    TESSERA_RETURN_IF_ERROR(
        m.GetInt("rate_window_ms", 10, 600000, &config.scheduler_rate_window_ms));
    TESSERA_RETURN_IF_ERROR(m.GetBool("slo_drop", &config.scheduler_slo_drop));
    if (config.scheduler_rate_window_ms > config.scheduler_epoch_secs * 1000) {
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(source), ": scheduler.rate_window_ms (", config.scheduler_rate_window_ms,
          ") must not be longer than scheduler.epoch_secs (", config.scheduler_epoch_secs, " s)"));
    }
    return absl::OkStatus();
  }));
  TESSERA_RETURN_IF_ERROR(Section(root, "shutdown", kShutdownKeys, [&](const YamlMap& m) {
    return m.GetInt("drain_secs", 0, INT32_MAX, &config.shutdown_drain_secs);
  }));
  TESSERA_RETURN_IF_ERROR(Section(root, "log", kLogKeys, [&](const YamlMap& m) -> Status {
    TESSERA_RETURN_IF_ERROR(m.GetInt("verbose", 0, INT32_MAX, &config.log_verbose));
    return m.GetBool("allow_settings_rpc", &config.allow_log_settings);
  }));
  TESSERA_RETURN_IF_ERROR(
      Section(root, "response_cache", kResponseCacheKeys, [&](const YamlMap& m) -> Status {
        return m.GetInt("size_bytes", 0, INT64_MAX, &config.response_cache_bytes);
      }));
  return Section(root, "trace", kTraceKeys, [&](const YamlMap& m) -> Status {
    TESSERA_RETURN_IF_ERROR(m.GetEnum("mode", kTraceModes, &config.trace_mode));
    TESSERA_RETURN_IF_ERROR(OtelSection(m, config.trace_otel));
    TESSERA_RETURN_IF_ERROR(m.GetString("file", &config.trace_file));
    if (std::optional<YAML::Node> level = m.Get("level")) {
      // One level, or a list of them (TIMESTAMPS and TENSORS together).
      std::vector<std::string> levels;
      if (level->IsSequence()) {
        TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                                 yaml::ReadList(source, *level, m.PathOf("level")));
        for (const YAML::Node& item : items) {
          TESSERA_ASSIGN_OR_RETURN(levels.emplace_back(),
                                   yaml::ReadString(source, item, m.PathOf("level")));
        }
      } else {
        TESSERA_ASSIGN_OR_RETURN(std::string text,
                                 yaml::ReadString(source, *level, m.PathOf("level")));
        for (absl::string_view part : absl::StrSplit(text, ',')) {
          levels.emplace_back(absl::StripAsciiWhitespace(part));
        }
      }
      StatusOr<std::string> canonical = CanonicalTraceLevel(levels);
      if (!canonical.ok()) {
        return yaml::ErrorAt(source, *level, m.PathOf("level"),
                             std::string(canonical.status().message()));
      }
      config.trace_level = *std::move(canonical);
    }
    TESSERA_RETURN_IF_ERROR(m.GetInt("rate", 0, INT64_MAX, &config.trace_rate));
    TESSERA_RETURN_IF_ERROR(m.GetInt("count", -1, INT64_MAX, &config.trace_count));
    TESSERA_RETURN_IF_ERROR(
        m.GetInt("log_frequency", 0, INT64_MAX, &config.trace_log_frequency));
    return CheckTraceConfig(config, source);
  });
}

}  // namespace

Status CheckTraceConfig(const ServerConfig& config, std::string_view source) {
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(yaml::AsAbsl(source), ": ", what));
  };
  if (config.trace_mode == "opentelemetry") {
    if (config.trace_level.find("TENSORS") != std::string::npos) {
      return error(absl::StrCat("trace level ", config.trace_level,
                                ": mode opentelemetry records TIMESTAMPS only (as Triton's)"));
    }
    return absl::OkStatus();
  }
  if (config.trace_otel.any()) {
    return error(
        "OpenTelemetry settings (trace.opentelemetry, --trace-config opentelemetry,...) need "
        "trace mode opentelemetry (trace.mode, or --trace-config mode=opentelemetry)");
  }
  if (config.trace_level != "OFF" && config.trace_file.empty()) {
    return error(absl::StrCat("trace level ", config.trace_level,
                              " needs a trace file (trace.file, or --trace-file) in mode triton"));
  }
  return absl::OkStatus();
}

StatusOr<std::string> CanonicalTraceLevel(const std::vector<std::string>& levels) {
  bool off = false, timestamps = false, tensors = false;
  for (const std::string& level : levels) {
    if (level == "OFF") {
      off = true;
    } else if (level == "TIMESTAMPS") {
      timestamps = true;
    } else if (level == "TENSORS") {
      tensors = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "trace level must be OFF, TIMESTAMPS or TENSORS (or both of the last two), got \"", level,
          "\""));
    }
  }
  if (off && (timestamps || tensors)) {
    return absl::InvalidArgumentError("trace level OFF cannot be named beside another level");
  }
  if (timestamps && tensors) return std::string("TIMESTAMPS,TENSORS");
  if (timestamps) return std::string("TIMESTAMPS");
  if (tensors) return std::string("TENSORS");
  return std::string("OFF");
}

std::vector<SummaryQuantileSpec> DefaultSummaryQuantiles() {
  return {{0.5, 0.05}, {0.9, 0.01}, {0.95, 0.001}, {0.99, 0.001}, {0.999, 0.001}};
}

StatusOr<std::vector<SummaryQuantileSpec>> ParseSummaryQuantiles(std::string_view text) {
  std::vector<SummaryQuantileSpec> quantiles;
  for (absl::string_view pair : absl::StrSplit(yaml::AsAbsl(text), ',')) {
    pair = absl::StripAsciiWhitespace(pair);
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("summary quantile \"", pair, "\": ", why,
                                                     " (expected <quantile>:<error>,..., such as ",
                                                     "0.5:0.05,0.99:0.001)"));
    };
    const size_t colon = pair.find(':');
    if (colon == absl::string_view::npos) return bad("no ':' between the quantile and its error");
    SummaryQuantileSpec q;
    if (!absl::SimpleAtod(pair.substr(0, colon), &q.quantile) || !(q.quantile > 0) ||
        !(q.quantile < 1)) {
      return bad("the quantile must be a number between 0 and 1, both excluded");
    }
    if (!absl::SimpleAtod(pair.substr(colon + 1), &q.error) || !(q.error > 0) ||
        q.error > std::min(q.quantile, 1 - q.quantile)) {
      return bad(absl::StrCat("the error must be a number in (0, ",
                              std::min(q.quantile, 1 - q.quantile),
                              "], so that the quantile's band stays inside [0, 1]"));
    }
    for (const SummaryQuantileSpec& seen : quantiles) {
      if (seen.quantile == q.quantile) return bad("that quantile is already listed");
    }
    quantiles.push_back(q);
  }
  return quantiles;
}

std::string CheckConfigName(const std::string& name) {
  if (name.find('/') != std::string::npos || name.find('\0') != std::string::npos ||
      (!name.empty() && name.front() == '.')) {
    return absl::StrCat(
        "'", name, "' is not a config name (a file name without its .pbtxt/.yaml, such as h100)");
  }
  return "";
}

std::string_view ModelControlModeName(ModelControlMode mode) {
  switch (mode) {
    case ModelControlMode::kNone:
      return "none";
    case ModelControlMode::kPoll:
      return "poll";
    case ModelControlMode::kExplicit:
      return "explicit";
  }
  return "unknown";
}

StatusOr<ModelControlMode> ParseModelControlMode(std::string_view text) {
  if (text == "none") return ModelControlMode::kNone;
  if (text == "poll") return ModelControlMode::kPoll;
  if (text == "explicit") return ModelControlMode::kExplicit;
  return absl::InvalidArgumentError(absl::StrCat("model control mode must be one of ",
                                                 yaml::JoinNames(kControlModes), ", got \"",
                                                 yaml::AsAbsl(text), "\""));
}

std::string_view ApiGroupName(ApiGroup group) {
  const int index = static_cast<int>(group);
  return index >= 0 && index < kApiGroupCount ? kApiGroupNames[index] : "unknown";
}

StatusOr<RestrictedApis> ParseRestrictedApisFlag(std::string_view text, std::string_view flag) {
  // The text after '=' is a secret: messages quote only what comes before it.
  const size_t colon = text.find(':');
  const size_t equals = colon == std::string_view::npos ? colon : text.find('=', colon + 1);
  auto bad = [&](std::string_view reason) {
    return absl::InvalidArgumentError(absl::StrCat(
        yaml::AsAbsl(flag), " \"", yaml::AsAbsl(text.substr(0, std::min(equals, text.size()))),
        equals == std::string_view::npos ? "" : "=...", "\": ", yaml::AsAbsl(reason),
        " (expected <api>,<api>,...:<header>=<value>; the APIs: ", yaml::JoinNames(kApiGroupNames),
        ")"));
  };
  if (colon == std::string_view::npos) return bad("no ':' after the APIs");
  if (equals == std::string_view::npos) return bad("no '=' between the header and its value");
  RestrictedApis group;
  for (std::string_view rest = text.substr(0, colon);;) {
    const size_t comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    std::optional<ApiGroup> api = ApiGroupNamed(name);
    if (!api) return bad(absl::StrCat("unknown API \"", yaml::AsAbsl(name), "\""));
    group.apis.push_back(*api);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  group.header = std::string(text.substr(colon + 1, equals - colon - 1));
  if (std::string problem = HeaderProblem(group.header); !problem.empty()) {
    return bad(absl::StrCat("the header ", problem));
  }
  group.value = std::string(text.substr(equals + 1));
  if (std::string problem = ValueProblem(group.value); !problem.empty()) {
    return bad(absl::StrCat("the value ", problem));
  }
  return group;
}

Status CheckRestrictedApis(const std::vector<RestrictedApis>& groups, std::string_view what) {
  std::array<bool, kApiGroupCount> seen{};
  for (const RestrictedApis& group : groups) {
    for (ApiGroup api : group.apis) {
      if (std::exchange(seen[static_cast<int>(api)], true)) {
        return absl::InvalidArgumentError(absl::StrCat(
            yaml::AsAbsl(what), ": ", yaml::AsAbsl(ApiGroupName(api)),
            " is restricted twice; an API takes one header (and one group may list it only once)"));
      }
    }
  }
  return absl::OkStatus();
}

StatusOr<ServerConfig> ParseServerConfig(const std::string& yaml_text, const std::string& source) {
  // yaml-cpp reports misuse by throwing; this is the boundary where that becomes a Status.
  try {
    TESSERA_ASSIGN_OR_RETURN(YAML::Node doc, yaml::ParseDocument(yaml_text, source));
    ServerConfig config;
    TESSERA_RETURN_IF_ERROR(ParseInto(doc, source, config));
    return config;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", e.what()));
  }
}

StatusOr<ServerConfig> LoadServerConfigFile(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, yaml::ReadFileToString(path));
  return ParseServerConfig(text, path);
}

StatusOr<int64_t> ParseCacheConfig(std::string_view text) {
  // Triton's form: <cache>,<key>=<value>; the local cache's one key is its size in bytes.
  constexpr std::string_view kLocal = "local,size=";
  int64_t bytes = 0;
  if (!text.starts_with(kLocal) ||
      !absl::SimpleAtoi(absl::string_view(text.data() + kLocal.size(), text.size() - kLocal.size()),
                        &bytes) ||
      bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cache-config \"", std::string(text),
        "\": expected local,size=<bytes> (the in-process cache; Triton's redis cache is not "
        "supported)"));
  }
  return bytes;
}

}  // namespace tessera
