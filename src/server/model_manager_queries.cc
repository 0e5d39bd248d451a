// ModelManager's answers to the frontend and the control loop: readiness, model lookup, the
// repository index, statistics and the served models (model_manager.cc loads and unloads).
#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "executor_batch_runner.h"
#include "model_manager.h"

namespace tessera::server {

bool ModelManager::IsReady() const { return ready_.load(); }

bool ModelManager::HealthReady() const {
  if (!IsReady()) return false;
  if (!options_.strict_readiness) return true;
  std::lock_guard lock(mu_);
  for (const auto& [name, record] : models_) {
    if (record.load_failed || record.state == "LOADING") return false;
  }
  return true;
}

void ModelManager::SetHealthListener(std::function<void()> listener) {
  std::lock_guard lock(health_mu_);
  health_listener_ = std::move(listener);
}

void ModelManager::NotifyHealth() {
  if (!options_.strict_readiness) return;  // HealthReady then changes only at shutdown
  std::lock_guard lock(health_mu_);
  if (health_listener_) health_listener_();
}

StatusOr<frontend::ReadyModel> ModelManager::GetReadyModel(const std::string& name,
                                                           const std::string& version) const {
  int64_t wanted = -1;
  if (!version.empty() && (!absl::SimpleAtoi(version, &wanted) || wanted < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model version '", version, "' is not a version number"));
  }
  std::lock_guard lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
  }
  const ModelRecord& record = it->second;
  if (record.versions.empty()) {
    return absl::UnavailableError(absl::StrCat("model '", name, "' is not ready (", record.state,
                                               record.reason.empty() ? "" : ": ", record.reason,
                                               ")"));
  }
  auto chosen = wanted < 0 ? std::prev(record.versions.end()) : record.versions.find(wanted);
  if (chosen == record.versions.end()) {
    std::vector<int64_t> ready;
    for (const auto& [number, v] : record.versions) ready.push_back(number);
    return absl::NotFoundError(absl::StrCat("model '", name, "' has no ready version ", wanted,
                                            " (ready: ", absl::StrJoin(ready, ", "), ")"));
  }
  frontend::ReadyModel model;
  model.name = name;
  model.version = chosen->first;
  for (const auto& [number, v] : record.versions) model.ready_versions.push_back(number);
  model.config = chosen->second->config;
  model.queue = chosen->second->queue;
  model.sequences = chosen->second->sequences;
  model.load_id = chosen->second->load_id;
  model.stats = chosen->second->stats;
  return model;
}

std::vector<ServedModel> ModelManager::ServedModels() const {
  std::lock_guard lock(mu_);
  std::vector<ServedModel> served;
  for (const auto& [name, record] : models_) {
    if (record.versions.empty()) continue;
    const LoadedVersion& latest = *record.versions.rbegin()->second;
    if (latest.config->is_ensemble()) continue;  // no instances of its own to plan
    ServedModel model;
    model.name = name;
    model.version = latest.version;
    model.model_path = latest.model_path;
    model.config = latest.config;
    model.queue = latest.queue;
    model.stats_by_version.reserve(record.versions.size());
    for (const auto& [number, version] : record.versions) {
      model.stats_by_version.push_back(version->stats);
    }
    for (const Instance& instance : latest.instances) {
      model.base_lane.runners.push_back(
          std::make_shared<ExecutorBatchRunner>(pool_, instance.slot, instance.key, latest.config));
    }
    model.base_lane.plan.label = "instances";
    const std::vector<int>& sizes = latest.config->worker_batch_sizes;
    if (!sizes.empty() && sizes.size() == latest.instances.size()) {
      model.base_lane.worker_batch_sizes.assign(sizes.begin(), sizes.end());
      model.base_lane.plan.label = absl::StrCat("workers ", absl::StrJoin(sizes, "/"));
    }
    served.push_back(std::move(model));
  }
  return served;
}

void ModelManager::SetPlanNotes(std::map<std::string, std::string> notes) {
  std::lock_guard lock(mu_);
  plan_notes_ = std::move(notes);
}

std::vector<frontend::ModelIndexEntry> ModelManager::RepositoryIndex(bool ready_only) const {
  std::set<std::string> names;
  if (auto scan = repository::ScanRepositories(options_.repository_roots, options_.scan);
      scan.ok()) {
    for (const auto& entry : scan->models) names.insert(entry.name);
  }
  std::lock_guard lock(mu_);
  for (const auto& [name, record] : models_) names.insert(name);
  std::vector<frontend::ModelIndexEntry> index;
  for (const std::string& name : names) {
    auto it = models_.find(name);
    if (it == models_.end()) {
      if (!ready_only) index.push_back({name, "", "UNAVAILABLE", "not loaded"});
      continue;
    }
    const ModelRecord& record = it->second;
    if (record.versions.empty()) {
      if (!ready_only) index.push_back({name, "", record.state, record.reason});
      continue;
    }
    auto note = plan_notes_.find(name);
    std::string reason = record.reason;
    if (note != plan_notes_.end()) {
      reason = reason.empty() ? note->second : absl::StrCat(reason, "; ", note->second);
    }
    for (const auto& [number, version] : record.versions) {
      index.push_back({name, absl::StrCat(number), "READY", reason});
    }
  }
  return index;
}

StatusOr<std::vector<frontend::ModelStatsEntry>> ModelManager::Statistics(
    const std::string& name, const std::string& version) const {
  int64_t wanted = -1;
  if (!version.empty() && !absl::SimpleAtoi(version, &wanted)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model version '", version, "' is not a version number"));
  }
  std::lock_guard lock(mu_);
  if (!name.empty() && !models_.count(name)) {
    return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
  }
  std::vector<frontend::ModelStatsEntry> entries;
  for (const auto& [model_name, record] : models_) {
    if (!name.empty() && model_name != name) continue;
    for (const auto& [number, loaded] : record.versions) {
      if (wanted >= 0 && number != wanted) continue;
      entries.push_back({model_name, number, loaded->stats, loaded->config->metric_tags});
    }
  }
  if (!name.empty() && wanted >= 0 && entries.empty()) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' has no ready version ", wanted));
  }
  return entries;
}

}  // namespace tessera::server
