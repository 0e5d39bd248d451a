#include "tessera/common/server_config.h"

#include <array>
#include <cstdint>
#include <exception>
#include <string_view>

#include "absl/strings/numbers.h"
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
constexpr std::array<std::string_view, 6> kGrpcKeys = {
    "address", "port", "max_message_bytes", "max_inflating_bytes", "allow_client_shm", "tls"};
constexpr std::array<std::string_view, 5> kHttpKeys = {"address", "port", "threads",
                                                       "idle_timeout_s", "tls"};
constexpr std::array<std::string_view, 4> kTlsKeys = {"cert", "key", "client_ca", "reload_secs"};
constexpr std::array<std::string_view, 2> kMetricsKeys = {"address", "port"};
constexpr std::array<std::string_view, 4> kRepositoryKeys = {"path", "control_mode", "poll_secs",
                                                             "auto_complete"};
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
constexpr std::array<std::string_view, 5> kTraceKeys = {"file", "level", "rate", "count",
                                                        "log_frequency"};
constexpr std::array<std::string_view, 2> kTraceLevels = {"OFF", "TIMESTAMPS"};

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

// A tls section. A certificate needs its key and the other way round; client CAs need both.
Status TlsSection(const YamlMap& endpoint, const std::array<std::string_view, 4>& known_keys,
                  TlsFiles& tls) {
  return Section(endpoint, "tls", known_keys, [&](const YamlMap& m) -> Status {
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
    return TlsSection(m, kTlsKeys, config.grpc_tls);
  }));
  TESSERA_RETURN_IF_ERROR(Section(root, "http", kHttpKeys, [&](const YamlMap& m) -> Status {
    TESSERA_RETURN_IF_ERROR(m.GetString("address", &config.http_address));
    TESSERA_RETURN_IF_ERROR(m.GetInt("port", -1, kMaxPort, &config.http_port));
    TESSERA_RETURN_IF_ERROR(m.GetInt("threads", 1, 4096, &config.http_threads));
    TESSERA_RETURN_IF_ERROR(m.GetInt("idle_timeout_s", 1, 86400, &config.http_idle_timeout_s));
    return TlsSection(m, kTlsKeys, config.http_tls);
  }));
  TESSERA_RETURN_IF_ERROR(Section(root, "metrics", kMetricsKeys, [&](const YamlMap& m) -> Status {
    TESSERA_RETURN_IF_ERROR(m.GetString("address", &config.metrics_address));
    return m.GetInt("port", 0, kMaxPort, &config.metrics_port);
  }));
  TESSERA_RETURN_IF_ERROR(
      Section(root, "repository", kRepositoryKeys, [&](const YamlMap& m) -> Status {
        TESSERA_RETURN_IF_ERROR(m.GetString("path", &config.model_repository));
        std::string mode(ModelControlModeName(config.model_control_mode));
        TESSERA_RETURN_IF_ERROR(m.GetEnum("control_mode", kControlModes, &mode));
        // Cannot fail: GetEnum admitted only known names.
        config.model_control_mode = ParseModelControlMode(mode).value_or(config.model_control_mode);
        TESSERA_RETURN_IF_ERROR(m.GetInt("poll_secs", 1, INT32_MAX, &config.repository_poll_secs));
        return m.GetBool("auto_complete", &config.auto_complete_config);
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
    TESSERA_RETURN_IF_ERROR(m.GetString("file", &config.trace_file));
    TESSERA_RETURN_IF_ERROR(m.GetEnum("level", kTraceLevels, &config.trace_level));
    TESSERA_RETURN_IF_ERROR(m.GetInt("rate", 1, INT64_MAX, &config.trace_rate));
    TESSERA_RETURN_IF_ERROR(m.GetInt("count", -1, INT64_MAX, &config.trace_count));
    TESSERA_RETURN_IF_ERROR(
        m.GetInt("log_frequency", 0, INT64_MAX, &config.trace_log_frequency));
    if (config.trace_level != "OFF" && config.trace_file.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(source), ": trace.level ", config.trace_level, " needs trace.file"));
    }
    return absl::OkStatus();
  });
}

}  // namespace

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
