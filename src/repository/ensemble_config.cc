#include "ensemble_config.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::repository {
namespace {

using yaml::YamlMap;

constexpr std::array<std::string_view, 1> kSchedulingKeys = {"step"};
constexpr std::array<std::string_view, 5> kStepKeys = {"model_name", "model_version", "input_map",
                                                       "output_map", "model_namespace"};
// Keys that set up a model's own instances and batches: an ensemble has none, its composing
// models do.
constexpr std::array<std::string_view, 4> kNotForEnsembles = {"dynamic_batching", "instance_group",
                                                              "worker_batch_sizes", "model_warmup"};

// A `{model tensor: ensemble tensor}` map, sorted by the model tensor's name.
StatusOr<std::vector<std::pair<std::string, std::string>>> ReadTensorMap(std::string_view source,
                                                                         const YAML::Node& node,
                                                                         const std::string& path) {
  if (!node.IsMap() || node.size() == 0) {
    return yaml::ErrorAt(source, node, path,
                         absl::StrCat("expected a non-empty map of the model's tensor names to "
                                      "ensemble tensor names, got ",
                                      node.IsMap() ? "an empty map" : yaml::Describe(node)));
  }
  std::vector<std::pair<std::string, std::string>> entries;
  for (auto it = node.begin(); it != node.end(); ++it) {
    TESSERA_ASSIGN_OR_RETURN(std::string from, yaml::ReadString(source, it->first, path));
    const std::string entry_path = yaml::JoinPath(path, from);
    TESSERA_ASSIGN_OR_RETURN(std::string to, yaml::ReadString(source, it->second, entry_path));
    if (from.empty() || to.empty()) {
      return yaml::ErrorAt(source, it->first, entry_path, "tensor names must not be empty");
    }
    for (const auto& [seen, unused] : entries) {
      if (seen == from) return yaml::ErrorAt(source, it->first, entry_path, "is given twice");
    }
    entries.emplace_back(std::move(from), std::move(to));
  }
  std::sort(entries.begin(), entries.end());
  return entries;
}

// The data flow: every tensor a step reads exists, each is made once, no cycle, every ensemble
// output is made, every ensemble input is read.
Status CheckDataFlow(std::string_view source, int line, const ModelConfig& config) {
  auto fail = [&](const std::string& reason) {
    return yaml::ErrorAt(source, line, "ensemble_scheduling", reason);
  };
  std::map<std::string, std::string> made_by;  // ensemble tensor -> who makes it
  for (const TensorConfig& input : config.inputs) made_by[input.name] = "an ensemble input";
  for (size_t s = 0; s < config.ensemble_steps.size(); ++s) {
    for (const auto& [output, tensor] : config.ensemble_steps[s].output_map) {
      const std::string maker = absl::StrCat("step[", s, "] (", config.ensemble_steps[s].model_name,
                                             " output '", output, "')");
      auto [it, fresh] = made_by.emplace(tensor, maker);
      if (!fresh) {
        return fail(absl::StrCat("tensor '", tensor, "' is made by ", maker, " and by ", it->second,
                                 "; each ensemble tensor has one source"));
      }
    }
  }
  std::set<std::string> read;
  for (size_t s = 0; s < config.ensemble_steps.size(); ++s) {
    for (const auto& [input, tensor] : config.ensemble_steps[s].input_map) {
      if (!made_by.count(tensor)) {
        return fail(absl::StrCat("step[", s, "] (", config.ensemble_steps[s].model_name,
                                 ") reads tensor '", tensor, "' into its input '", input,
                                 "', but no ensemble input or step output is called that"));
      }
      read.insert(tensor);
    }
  }
  for (const TensorConfig& output : config.outputs) {
    auto it = made_by.find(output.name);
    if (it == made_by.end() || it->second == "an ensemble input") {
      return fail(
          absl::StrCat("ensemble output '", output.name, "' is not the output of any step"));
    }
  }
  // Steps run once their inputs exist; whatever never becomes runnable waits on a cycle.
  std::set<std::string> ready;
  for (const TensorConfig& input : config.inputs) ready.insert(input.name);
  std::vector<bool> ran(config.ensemble_steps.size(), false);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t s = 0; s < config.ensemble_steps.size(); ++s) {
      const EnsembleStep& step = config.ensemble_steps[s];
      const bool runnable =
          std::all_of(step.input_map.begin(), step.input_map.end(),
                      [&](const auto& entry) { return ready.count(entry.second); });
      if (ran[s] || !runnable) continue;
      ran[s] = progress = true;
      for (const auto& entry : step.output_map) ready.insert(entry.second);
    }
  }
  std::vector<std::string> stuck;
  for (size_t s = 0; s < ran.size(); ++s) {
    if (!ran[s])
      stuck.push_back(absl::StrCat("step[", s, "] (", config.ensemble_steps[s].model_name, ")"));
  }
  if (!stuck.empty()) {
    return fail(absl::StrCat(absl::StrJoin(stuck, ", "),
                             " wait on each other's outputs (a cycle), so they could never run"));
  }
  for (const TensorConfig& input : config.inputs) {
    if (!read.count(input.name)) {
      return fail(absl::StrCat("ensemble input '", input.name, "' is not read by any step"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

Status ReadEnsembleScheduling(const YamlMap& root, ModelConfig& config) {
  std::string_view source = root.source();
  std::optional<YAML::Node> node = root.Get("ensemble_scheduling");
  if (!config.is_ensemble()) {
    if (node) {
      return yaml::ErrorAt(source, root.KeyLine("ensemble_scheduling"), "ensemble_scheduling",
                           "needs platform: ensemble");
    }
    return absl::OkStatus();
  }
  for (std::string_view key : kNotForEnsembles) {
    if (root.Has(key)) {
      return yaml::ErrorAt(source, root.KeyLine(key), key,
                           "an ensemble has no instances or batches of its own (its composing "
                           "models do); remove it");
    }
  }
  if (config.inputs.empty() || config.outputs.empty()) {
    return yaml::ErrorAt(source, root.KeyLine("platform"),
                         config.inputs.empty() ? "input" : "output",
                         "an ensemble has no model file to complete it from: list its inputs and "
                         "outputs");
  }
  for (const auto* tensors : {&config.inputs, &config.outputs}) {
    for (const TensorConfig& tensor : *tensors) {
      if (tensor.reshape) {
        return yaml::ErrorAt(source, root.KeyLine(tensors == &config.inputs ? "input" : "output"),
                             tensor.name,
                             "an ensemble tensor cannot be reshaped (reshape its composing "
                             "model's tensor instead)");
      }
    }
  }
  if (!node) return root.Missing("ensemble_scheduling");
  TESSERA_ASSIGN_OR_RETURN(YamlMap scheduling,
                           YamlMap::Create(source, *node, "ensemble_scheduling", kSchedulingKeys));
  std::optional<YAML::Node> steps = scheduling.Get("step");
  if (!steps) return scheduling.Missing("step");
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                           yaml::ReadList(source, *steps, scheduling.PathOf("step")));
  if (items.empty()) {
    return yaml::ErrorAt(source, *steps, scheduling.PathOf("step"), "must list at least one step");
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string path = yaml::IndexPath(scheduling.PathOf("step"), i);
    TESSERA_ASSIGN_OR_RETURN(YamlMap m, YamlMap::Create(source, items[i], path, kStepKeys));
    EnsembleStep step;
    std::optional<YAML::Node> name = m.Get("model_name");
    if (!name) return m.Missing("model_name");
    TESSERA_ASSIGN_OR_RETURN(step.model_name,
                             yaml::ReadString(source, *name, m.PathOf("model_name")));
    if (step.model_name.empty()) {
      return yaml::ErrorAt(source, *name, m.PathOf("model_name"), "is empty");
    }
    if (step.model_name == config.name) {
      return yaml::ErrorAt(source, *name, m.PathOf("model_name"),
                           "an ensemble cannot be a step of itself");
    }
    TESSERA_RETURN_IF_ERROR(m.GetInt("model_version", -1, INT64_MAX, &step.model_version));
    if (step.model_version == 0) step.model_version = -1;  // Triton's proto3 default: the latest
    std::string model_namespace;
    TESSERA_RETURN_IF_ERROR(m.GetString("model_namespace", &model_namespace));
    if (!model_namespace.empty()) {
      return yaml::ErrorAt(source, m.KeyLine("model_namespace"), m.PathOf("model_namespace"),
                           "is reserved in Triton and not supported");
    }
    for (const char* key : {"input_map", "output_map"}) {
      std::optional<YAML::Node> map = m.Get(key);
      if (!map) return m.Missing(key);
      TESSERA_ASSIGN_OR_RETURN(auto entries, ReadTensorMap(source, *map, m.PathOf(key)));
      (std::string_view(key) == "input_map" ? step.input_map : step.output_map) =
          std::move(entries);
    }
    config.ensemble_steps.push_back(std::move(step));
  }
  return CheckDataFlow(source, root.KeyLine("ensemble_scheduling"), config);
}

}  // namespace tessera::repository
