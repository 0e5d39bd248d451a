#include "scenario.h"

#include <array>
#include <filesystem>
#include <set>
#include <string_view>

#include "tessera/common/yaml_util.h"

namespace tessera::bench {
namespace {

using yaml::YamlMap;

constexpr std::array<std::string_view, 10> kTopKeys = {
    "server",        "mode",     "seed",  "warmup_s", "duration_s", "drain_s", "request_timeout_s",
    "max_in_flight", "channels", "models"};
constexpr std::array<std::string_view, 14> kModelKeys = {
    "name",  "version",       "slo_ms",      "batch_size", "arrival",     "rate",   "rate_schedule",
    "trace", "trace_speedup", "concurrency", "input",      "input_files", "inputs", "comment"};
constexpr std::array<std::string_view, 2> kStepKeys = {"at_s", "rate"};
constexpr std::array<std::string_view, 3> kTensorKeys = {"name", "datatype", "shape"};
constexpr std::array<std::string_view, 2> kModes = {"open", "closed"};
constexpr std::array<std::string_view, 4> kArrivals = {"poisson", "uniform", "constant", "trace"};
constexpr std::array<std::string_view, 3> kFills = {"random", "zeros", "files"};
constexpr std::array<std::string_view, 14> kDatatypes = {
    "BOOL",  "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
    "INT32", "INT64", "FP16",   "FP32",   "FP64",   "BF16", "BYTES"};

constexpr double kMaxRate = 1e7;
constexpr double kMaxSeconds = 7 * 24 * 3600.0;

std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || base_dir.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(base_dir) / path).lexically_normal().string();
}

Status ReadModel(const YamlMap& m, const std::string& base_dir, ModelLoad& load) {
  if (!m.Has("name")) return m.Missing("name");
  TESSERA_RETURN_IF_ERROR(m.GetString("name", &load.name));
  if (load.name.empty()) {
    return yaml::ErrorAt(m.source(), m.KeyLine("name"), m.PathOf("name"), "must not be empty");
  }
  TESSERA_RETURN_IF_ERROR(m.GetString("version", &load.version));
  TESSERA_RETURN_IF_ERROR(m.GetDouble("slo_ms", 0, 1e7, &load.slo_ms));
  TESSERA_RETURN_IF_ERROR(m.GetInt("batch_size", 1, 1 << 20, &load.batch_size));
  std::string arrival(ArrivalKindName(load.arrival));
  TESSERA_RETURN_IF_ERROR(m.GetEnum("arrival", kArrivals, &arrival));
  load.arrival = ParseArrivalKind(arrival).value();
  if (m.Has("rate") && m.Has("rate_schedule")) {
    return yaml::ErrorAt(m.source(), m.KeyLine("rate_schedule"), m.PathOf("rate_schedule"),
                         "give either rate or rate_schedule, not both");
  }
  if (m.Has("rate")) {
    double rate = 0;
    TESSERA_RETURN_IF_ERROR(m.GetDouble("rate", 0, kMaxRate, &rate));
    load.rate = RateSchedule::Constant(rate);
  }
  if (std::optional<YAML::Node> node = m.Get("rate_schedule")) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                             yaml::ReadList(m.source(), *node, m.PathOf("rate_schedule")));
    std::vector<RateStep> steps;
    for (size_t i = 0; i < items.size(); ++i) {
      std::string path = yaml::IndexPath(m.PathOf("rate_schedule"), i);
      TESSERA_ASSIGN_OR_RETURN(YamlMap step,
                               YamlMap::Create(m.source(), items[i], path, kStepKeys));
      if (!step.Has("at_s")) return step.Missing("at_s");
      if (!step.Has("rate")) return step.Missing("rate");
      RateStep s;
      TESSERA_RETURN_IF_ERROR(step.GetDouble("at_s", 0, kMaxSeconds, &s.start_s));
      TESSERA_RETURN_IF_ERROR(step.GetDouble("rate", 0, kMaxRate, &s.rate));
      steps.push_back(s);
    }
    StatusOr<RateSchedule> schedule = RateSchedule::Create(std::move(steps));
    if (!schedule.ok()) {
      return yaml::ErrorAt(m.source(), m.KeyLine("rate_schedule"), m.PathOf("rate_schedule"),
                           std::string(schedule.status().message()));
    }
    load.rate = *std::move(schedule);
  }
  TESSERA_RETURN_IF_ERROR(m.GetString("trace", &load.trace_path));
  load.trace_path = Resolve(base_dir, load.trace_path);
  TESSERA_RETURN_IF_ERROR(m.GetDouble("trace_speedup", 1e-6, 1e6, &load.trace_speedup));
  if (load.arrival == ArrivalKind::kTrace && load.trace_path.empty()) {
    return yaml::ErrorAt(m.source(), m.KeyLine("arrival"), m.PathOf("trace"),
                         "arrival: trace needs a trace file (trace: <file.csv>)");
  }
  if (load.arrival != ArrivalKind::kTrace && !load.trace_path.empty()) {
    return yaml::ErrorAt(m.source(), m.KeyLine("trace"), m.PathOf("trace"),
                         "a trace file is only used with arrival: trace");
  }
  TESSERA_RETURN_IF_ERROR(m.GetInt("concurrency", 1, 1 << 20, &load.concurrency));
  std::string fill(InputFillName(load.fill));
  TESSERA_RETURN_IF_ERROR(m.GetEnum("input", kFills, &fill));
  load.fill = fill == "zeros"   ? InputFill::kZeros
              : fill == "files" ? InputFill::kFiles
                                : InputFill::kRandom;
  if (std::optional<YAML::Node> node = m.Get("input_files")) {
    if (!node->IsMap()) {
      return yaml::ErrorAt(m.source(), *node, m.PathOf("input_files"),
                           "expected a map of input name to file, got " + yaml::Describe(*node));
    }
    for (const auto& kv : *node) {
      std::string key = kv.first.as<std::string>();
      TESSERA_ASSIGN_OR_RETURN(
          std::string file,
          yaml::ReadString(m.source(), kv.second, yaml::JoinPath(m.PathOf("input_files"), key)));
      load.input_files[key] = Resolve(base_dir, file);
    }
  }
  if (load.fill == InputFill::kFiles && load.input_files.empty()) {
    return yaml::ErrorAt(m.source(), m.KeyLine("input"), m.PathOf("input_files"),
                         "input: files needs input_files: {<input name>: <file>}");
  }
  if (std::optional<YAML::Node> node = m.Get("inputs")) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                             yaml::ReadList(m.source(), *node, m.PathOf("inputs")));
    for (size_t i = 0; i < items.size(); ++i) {
      std::string path = yaml::IndexPath(m.PathOf("inputs"), i);
      TESSERA_ASSIGN_OR_RETURN(YamlMap t, YamlMap::Create(m.source(), items[i], path, kTensorKeys));
      for (std::string_view key : kTensorKeys) {
        if (!t.Has(key)) return t.Missing(key);
      }
      TensorSpec spec;
      TESSERA_RETURN_IF_ERROR(t.GetString("name", &spec.name));
      TESSERA_RETURN_IF_ERROR(t.GetEnum("datatype", kDatatypes, &spec.datatype));
      TESSERA_ASSIGN_OR_RETURN(spec.shape, yaml::ReadIntList(m.source(), *t.Get("shape"),
                                                             t.PathOf("shape"), 0, 1 << 30));
      load.inputs.push_back(std::move(spec));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view LoadModeName(LoadMode mode) { return mode == LoadMode::kOpen ? "open" : "closed"; }

std::string_view InputFillName(InputFill fill) {
  switch (fill) {
    case InputFill::kRandom:
      return "random";
    case InputFill::kZeros:
      return "zeros";
    case InputFill::kFiles:
      return "files";
  }
  return "?";
}

StatusOr<Scenario> ParseScenario(const std::string& text, const std::string& source,
                                 const std::string& base_dir) {
  TESSERA_ASSIGN_OR_RETURN(YAML::Node doc, yaml::ParseDocument(text, source));
  TESSERA_ASSIGN_OR_RETURN(YamlMap root, YamlMap::Create(source, doc, "", kTopKeys));
  Scenario s;
  TESSERA_RETURN_IF_ERROR(root.GetString("server", &s.server));
  std::string mode(LoadModeName(s.mode));
  TESSERA_RETURN_IF_ERROR(root.GetEnum("mode", kModes, &mode));
  s.mode = mode == "closed" ? LoadMode::kClosed : LoadMode::kOpen;
  int64_t seed = static_cast<int64_t>(s.seed);
  TESSERA_RETURN_IF_ERROR(root.GetInt("seed", 0, INT64_MAX, &seed));
  s.seed = static_cast<uint64_t>(seed);
  TESSERA_RETURN_IF_ERROR(root.GetDouble("warmup_s", 0, kMaxSeconds, &s.warmup_s));
  TESSERA_RETURN_IF_ERROR(root.GetDouble("duration_s", 0.001, kMaxSeconds, &s.duration_s));
  TESSERA_RETURN_IF_ERROR(root.GetDouble("drain_s", 0, kMaxSeconds, &s.drain_s));
  TESSERA_RETURN_IF_ERROR(
      root.GetDouble("request_timeout_s", 0.001, kMaxSeconds, &s.request_timeout_s));
  TESSERA_RETURN_IF_ERROR(root.GetInt("max_in_flight", 1, 1 << 24, &s.max_in_flight));
  TESSERA_RETURN_IF_ERROR(root.GetInt("channels", 1, 64, &s.channels));
  if (!root.Has("models")) return root.Missing("models");
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> models,
                           yaml::ReadList(source, *root.Get("models"), "models"));
  std::set<std::string> names;
  for (size_t i = 0; i < models.size(); ++i) {
    std::string path = yaml::IndexPath("models", i);
    TESSERA_ASSIGN_OR_RETURN(YamlMap m, YamlMap::Create(source, models[i], path, kModelKeys));
    ModelLoad load;
    TESSERA_RETURN_IF_ERROR(ReadModel(m, base_dir, load));
    if (!names.insert(load.name).second) {
      return yaml::ErrorAt(source, m.KeyLine("name"), m.PathOf("name"),
                           "model \"" + load.name + "\" is listed twice");
    }
    if (s.mode == LoadMode::kOpen && load.arrival != ArrivalKind::kTrace && !m.Has("rate") &&
        !m.Has("rate_schedule")) {
      return yaml::ErrorAt(source, m.line(), m.path(),
                           "open-loop load needs rate or rate_schedule (or arrival: trace)");
    }
    s.models.push_back(std::move(load));
  }
  TESSERA_RETURN_IF_ERROR(ValidateScenario(s));
  return s;
}

StatusOr<Scenario> LoadScenario(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, yaml::ReadFileToString(path));
  return ParseScenario(text, path, std::filesystem::path(path).parent_path().string());
}

Status ValidateScenario(const Scenario& scenario) {
  if (scenario.models.empty()) {
    return absl::InvalidArgumentError("the scenario has no models");
  }
  std::set<std::string> names;
  for (const ModelLoad& m : scenario.models) {
    if (!names.insert(m.name).second) {
      return absl::InvalidArgumentError("model \"" + m.name + "\" is listed twice");
    }
    if (scenario.mode == LoadMode::kClosed && m.arrival == ArrivalKind::kTrace) {
      return absl::InvalidArgumentError("model \"" + m.name +
                                        "\": trace replay is open-loop (mode: open)");
    }
  }
  if (scenario.server.empty()) return absl::InvalidArgumentError("no server address");
  return absl::OkStatus();
}

}  // namespace tessera::bench
