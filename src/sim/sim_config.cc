#include "sim_config.h"

#include <array>
#include <cmath>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tessera/common/yaml_util.h"

namespace tessera::sim {
namespace {

using yaml::YamlMap;

constexpr std::array<std::string_view, 7> kTopKeys = {"name",  "gpus",       "policy",     "models",
                                                      "epoch", "simulation", "description"};
constexpr std::array<std::string_view, 8> kModelKeys = {"name",     "profile", "slo_ms",   "weight",
                                                        "rate_rps", "arrival", "schedule", "trace"};
constexpr std::array<std::string_view, 2> kSegmentKeys = {"start_s", "rate_rps"};
constexpr std::array<std::string_view, 7> kSimulationKeys = {
    "duration_s",    "warmup_s",         "seed", "jitter_sigma", "slo_drop",
    "wait_for_duty", "true_interference"};
constexpr std::array<std::string_view, 6> kEpochKeys = {"epoch_s",  "prepare_s", "rate_interval_s",
                                                        "headroom", "autoscale", "initial_gpus"};
constexpr std::array<std::string_view, 3> kArrivalKinds = {"poisson", "constant", "trace"};
constexpr std::array<std::string_view, 2> kHeadrooms = {"none", "poisson99"};
constexpr double kMaxRate = 1e7;
constexpr double kMaxSeconds = 1e7;

Status ReadSchedule(const YamlMap& m, Arrivals& arrivals) {
  std::optional<YAML::Node> node = m.Get("schedule");
  if (!node) return absl::OkStatus();
  const std::string path = m.PathOf("schedule");
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, yaml::ReadList(m.source(), *node, path));
  if (items.empty())
    return yaml::ErrorAt(m.source(), *node, path, "must list at least one segment");
  for (size_t i = 0; i < items.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(
        YamlMap segment,
        YamlMap::Create(m.source(), items[i], yaml::IndexPath(path, i), kSegmentKeys));
    RateSegment s;
    if (!segment.Has("start_s")) return segment.Missing("start_s");
    if (!segment.Has("rate_rps")) return segment.Missing("rate_rps");
    TESSERA_RETURN_IF_ERROR(segment.GetDouble("start_s", 0, kMaxSeconds, &s.start_s));
    TESSERA_RETURN_IF_ERROR(segment.GetDouble("rate_rps", 0, kMaxRate, &s.rate_rps));
    if (!arrivals.schedule.empty() && s.start_s <= arrivals.schedule.back().start_s) {
      return yaml::ErrorAt(m.source(), segment.line(), segment.PathOf("start_s"),
                           "segments must start at strictly ascending times");
    }
    arrivals.schedule.push_back(s);
  }
  return absl::OkStatus();
}

StatusOr<ScenarioModel> ReadModel(std::string_view source, const YAML::Node& node,
                                  const std::string& path, const std::filesystem::path& base_dir) {
  TESSERA_ASSIGN_OR_RETURN(YamlMap m, YamlMap::Create(source, node, path, kModelKeys));
  ScenarioModel model;
  model.line = m.line();
  if (!m.Has("name")) return m.Missing("name");
  TESSERA_RETURN_IF_ERROR(m.GetString("name", &model.workload.model));
  if (model.workload.model.empty())
    return yaml::ErrorAt(source, m.line(), m.PathOf("name"), "is empty");
  TESSERA_RETURN_IF_ERROR(m.GetString("profile", &model.workload.profile));
  if (!m.Has("slo_ms")) return m.Missing("slo_ms");
  TESSERA_RETURN_IF_ERROR(m.GetDouble("slo_ms", 1e-3, 1e6, &model.workload.slo_ms));
  if (m.Has("rate_rps")) {
    double rate = 0;
    TESSERA_RETURN_IF_ERROR(m.GetDouble("rate_rps", 0, kMaxRate, &rate));
    model.rate_rps = rate;
  }
  model.workload.weight = model.rate_rps.value_or(1.0);
  TESSERA_RETURN_IF_ERROR(m.GetDouble("weight", 0, kMaxRate, &model.workload.weight));

  std::string arrival = "poisson";
  TESSERA_RETURN_IF_ERROR(m.GetEnum("arrival", kArrivalKinds, &arrival));
  model.arrivals.kind = arrival == "poisson"    ? ArrivalKind::kPoisson
                        : arrival == "constant" ? ArrivalKind::kConstant
                                                : ArrivalKind::kTrace;
  TESSERA_RETURN_IF_ERROR(ReadSchedule(m, model.arrivals));
  if (model.arrivals.kind == ArrivalKind::kTrace) {
    if (!m.Has("trace")) {
      return yaml::ErrorAt(source, m.KeyLine("arrival"), m.PathOf("arrival"),
                           "arrival: trace needs a `trace` file");
    }
    if (m.Has("schedule") || m.Has("rate_rps")) {
      return yaml::ErrorAt(source, m.KeyLine("arrival"), m.PathOf("arrival"),
                           "a trace takes no rate_rps or schedule");
    }
    std::string file;
    TESSERA_RETURN_IF_ERROR(m.GetString("trace", &file));
    const std::filesystem::path trace_path =
        std::filesystem::path(file).is_absolute() ? std::filesystem::path(file) : base_dir / file;
    StatusOr<std::string> text = yaml::ReadFileToString(trace_path.string());
    if (!text.ok()) {
      return yaml::ErrorAt(source, m.KeyLine("trace"), m.PathOf("trace"),
                           std::string(text.status().message()));
    }
    TESSERA_ASSIGN_OR_RETURN(model.arrivals.trace_s, ParseTraceText(*text, trace_path.string()));
  } else if (m.Has("trace")) {
    return yaml::ErrorAt(source, m.KeyLine("trace"), m.PathOf("trace"),
                         "a trace file needs arrival: trace");
  }
  return model;
}

Status ReadSimulation(const YamlMap& root, Scenario& scenario) {
  std::optional<YAML::Node> node = root.Get("simulation");
  if (!node) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(YamlMap m,
                           YamlMap::Create(root.source(), *node, "simulation", kSimulationKeys));
  SimOptions& o = scenario.sim;
  TESSERA_RETURN_IF_ERROR(m.GetDouble("duration_s", 1e-3, kMaxSeconds, &o.duration_s));
  TESSERA_RETURN_IF_ERROR(m.GetDouble("warmup_s", 0, kMaxSeconds, &o.warmup_s));
  if (o.warmup_s >= o.duration_s) {
    return yaml::ErrorAt(root.source(), m.KeyLine("warmup_s"), m.PathOf("warmup_s"),
                         "must be less than duration_s");
  }
  int64_t seed = static_cast<int64_t>(o.seed);
  TESSERA_RETURN_IF_ERROR(m.GetInt("seed", 0, INT64_MAX, &seed));
  o.seed = static_cast<uint64_t>(seed);
  TESSERA_RETURN_IF_ERROR(m.GetDouble("jitter_sigma", 0, 2, &o.jitter_sigma));
  TESSERA_RETURN_IF_ERROR(m.GetBool("slo_drop", &o.slo_drop));
  TESSERA_RETURN_IF_ERROR(m.GetBool("wait_for_duty", &o.wait_for_duty));
  if (std::optional<YAML::Node> truth = m.Get("true_interference")) {
    TESSERA_ASSIGN_OR_RETURN(
        scenario.true_interference,
        yaml::ReadString(root.source(), *truth, m.PathOf("true_interference")));
    double factor = 0;
    const std::string& t = scenario.true_interference;
    if (t != "truth" && t != "planner" && t != "none" &&
        !(absl::SimpleAtod(t, &factor) && factor >= 1 && factor <= 10)) {
      return yaml::ErrorAt(
          root.source(), *truth, m.PathOf("true_interference"),
          absl::StrCat("expected truth, planner, none or a factor in [1, 10], got \"", t, "\""));
    }
  }
  return absl::OkStatus();
}

Status ReadEpoch(const YamlMap& root, Scenario& scenario) {
  std::optional<YAML::Node> node = root.Get("epoch");
  if (!node) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(YamlMap m, YamlMap::Create(root.source(), *node, "epoch", kEpochKeys));
  EpochConfig e;
  TESSERA_RETURN_IF_ERROR(m.GetDouble("epoch_s", 1e-3, kMaxSeconds, &e.epoch_s));
  TESSERA_RETURN_IF_ERROR(m.GetDouble("prepare_s", 0, kMaxSeconds, &e.prepare_s));
  TESSERA_RETURN_IF_ERROR(m.GetDouble("rate_interval_s", 1e-3, kMaxSeconds, &e.rate_interval_s));
  if (e.rate_interval_s > e.epoch_s) {
    return yaml::ErrorAt(root.source(), m.KeyLine("rate_interval_s"), m.PathOf("rate_interval_s"),
                         "must not exceed epoch_s");
  }
  std::string headroom(HeadroomName(e.headroom));
  TESSERA_RETURN_IF_ERROR(m.GetEnum("headroom", kHeadrooms, &headroom));
  e.headroom = *ParseHeadroom(headroom);
  TESSERA_RETURN_IF_ERROR(m.GetBool("autoscale", &e.autoscale));
  TESSERA_RETURN_IF_ERROR(m.GetInt("initial_gpus", 1, 1024, &e.initial_gpus));
  scenario.epoch = e;
  return absl::OkStatus();
}

}  // namespace

Workload Scenario::ToWorkload() const {
  Workload w;
  w.name = name;
  w.num_gpus = gpus;
  for (const ScenarioModel& m : models) w.models.push_back(m.workload);
  return w;
}

StatusOr<std::vector<double>> ParseTraceText(const std::string& text, std::string_view source) {
  std::vector<double> times;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    double t = 0;
    if (!absl::SimpleAtod(line, &t) || !std::isfinite(t) || t < 0) {
      return yaml::ErrorAt(
          source, line_number, "",
          absl::StrCat("expected an arrival time in seconds ≥ 0, got \"", line, "\""));
    }
    if (!times.empty() && t < times.back()) {
      return yaml::ErrorAt(
          source, line_number, "",
          absl::StrCat("arrival times must be ascending: ", t, " after ", times.back()));
    }
    times.push_back(t);
  }
  return times;
}

StatusOr<Scenario> ParseScenarioYaml(const std::string& text, std::string_view source,
                                     const std::filesystem::path& base_dir) {
  TESSERA_ASSIGN_OR_RETURN(YAML::Node doc, yaml::ParseDocument(text, source));
  TESSERA_ASSIGN_OR_RETURN(YamlMap root, YamlMap::Create(source, doc, "", kTopKeys));
  Scenario scenario;
  TESSERA_RETURN_IF_ERROR(root.GetString("name", &scenario.name));
  if (!root.Has("gpus")) return root.Missing("gpus");
  TESSERA_RETURN_IF_ERROR(root.GetInt("gpus", 1, 1024, &scenario.gpus));
  if (root.Has("policy")) {
    std::string policy;
    TESSERA_RETURN_IF_ERROR(root.GetString("policy", &policy));
    scenario.policy = policy;
  }
  std::optional<YAML::Node> models = root.Get("models");
  if (!models) return root.Missing("models");
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                           yaml::ReadList(source, *models, "models"));
  if (items.empty())
    return yaml::ErrorAt(source, *models, "models", "must list at least one model");
  std::set<std::string> names;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string path = yaml::IndexPath("models", i);
    TESSERA_ASSIGN_OR_RETURN(ScenarioModel model, ReadModel(source, items[i], path, base_dir));
    if (!names.insert(model.workload.model).second) {
      return yaml::ErrorAt(source, model.line, yaml::JoinPath(path, "name"),
                           absl::StrCat("duplicate model \"", model.workload.model, "\""));
    }
    scenario.models.push_back(std::move(model));
  }
  double total_weight = 0;
  for (const ScenarioModel& m : scenario.models) total_weight += m.workload.weight;
  if (!(total_weight > 0)) {
    return yaml::ErrorAt(source, *models, "models", "the models' weights add up to 0");
  }
  TESSERA_RETURN_IF_ERROR(ReadSimulation(root, scenario));
  TESSERA_RETURN_IF_ERROR(ReadEpoch(root, scenario));
  return scenario;
}

StatusOr<Scenario> LoadScenarioFile(const std::filesystem::path& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, yaml::ReadFileToString(path.string()));
  TESSERA_ASSIGN_OR_RETURN(Scenario scenario,
                           ParseScenarioYaml(text, path.string(), path.parent_path()));
  if (scenario.name.empty()) scenario.name = path.stem().string();
  return scenario;
}

}  // namespace tessera::sim
