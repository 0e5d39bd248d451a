// ModelManager's explicit model control: the load and unload requests of Triton's model
// repository extension, with a load's config and files in place of the repository's.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model_manager.h"
#include "spdlog/spdlog.h"

namespace tessera::server {
namespace {

Status NeedsExplicitMode(ModelControlMode mode) {
  return absl::FailedPreconditionError(absl::StrCat(
      "explicit model load/unload needs --model-control-mode=explicit (the server runs in ",
      std::string(ModelControlModeName(mode)), " mode)"));
}

}  // namespace

Status ModelManager::LoadModel(const std::string& name, const frontend::LoadOverrides& overrides) {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    return NeedsExplicitMode(options_.control_mode);
  }
  if (!IsReady()) return absl::UnavailableError("server is shutting down");
  std::lock_guard lifecycle(lifecycle_mu_);
  if (overrides.empty()) return LoadLocked(name, nullptr);
  if (!overrides.config_json) {  // the frontend refuses these already
    return absl::InvalidArgumentError("a load's files need its config");
  }

  // With files, they are the model folder; without, the repository's folder is served with the
  // request's config (as in Triton).
  TESSERA_RETURN_IF_ERROR(repository::CheckModelName(name));
  std::string folder;
  std::string dir;
  if (overrides.files.empty()) {
    StatusOr<std::string> found = repository::FindModelFolder(options_.repository_roots, name);
    if (!found.ok()) {
      if (found.status().code() != absl::StatusCode::kNotFound) return found.status();
      return absl::NotFoundError(
          absl::StrCat(found.status().message(),
                       ": a load with a 'config' parameter and no 'file:<path>' ones serves the "
                       "repository's folder with that config"));
    }
    dir = *found;
  } else {
    TESSERA_ASSIGN_OR_RETURN(folder, override_folders_->Create(overrides.files));
    dir = folder;
  }
  StatusOr<repository::ModelEntry> entry =
      repository::ScanModelFolderWithConfig(dir, name, *overrides.config_json);
  if (!entry.ok()) {
    override_folders_->Remove(folder);
    return entry.status();
  }
  spdlog::info("model '{}': loading with the load request's config{}", name,
               folder.empty()
                   ? std::string(" and the repository's files")
                   : absl::StrCat(" and its ", overrides.files.size(), " file(s) in ", folder));
  Status loaded = LoadLocked(name, &*entry, folder);
  if (!loaded.ok()) override_folders_->Remove(folder);
  return loaded;
}

void ModelManager::KeepOverrideFolder(const std::string& name, const std::string& folder) {
  auto it = override_folder_by_model_.find(name);
  std::string previous = it == override_folder_by_model_.end() ? "" : it->second;
  if (folder.empty()) {
    if (it != override_folder_by_model_.end()) override_folder_by_model_.erase(it);
  } else {
    override_folder_by_model_[name] = folder;
  }
  if (previous != folder) override_folders_->Remove(previous);
}

std::set<std::string> ModelManager::ModelsRunByEnsembles(const std::string& except) const {
  std::set<std::string> run;
  std::lock_guard lock(mu_);
  for (const auto& [name, record] : models_) {
    if (name == except) continue;
    for (const auto& [number, version] : record.versions) {
      for (const repository::EnsembleStep& step : version->config->ensemble_steps) {
        run.insert(step.model_name);
      }
    }
  }
  return run;
}

Status ModelManager::UnloadModel(const std::string& name, bool unload_dependents) {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    return NeedsExplicitMode(options_.control_mode);
  }
  std::lock_guard lifecycle(lifecycle_mu_);
  std::set<std::string> composing;
  if (unload_dependents) {
    std::lock_guard lock(mu_);
    if (auto it = models_.find(name); it != models_.end()) {
      for (const auto& [number, version] : it->second.versions) {
        for (const repository::EnsembleStep& step : version->config->ensemble_steps) {
          if (step.model_name != name) composing.insert(step.model_name);
        }
      }
    }
  }
  TESSERA_RETURN_IF_ERROR(UnloadLocked(name, "unloaded"));
  if (composing.empty()) return absl::OkStatus();
  // Triton unloads "any dependent model that was loaded along with the requested model"; one
  // another ensemble still runs stays, or that ensemble would fail every request.
  const std::set<std::string> still_run = ModelsRunByEnsembles(name);
  std::vector<std::string> kept;
  for (const std::string& model : composing) {
    if (still_run.count(model)) {
      kept.push_back(model);
      continue;
    }
    if (!GetReadyModel(model, "").ok()) continue;
    UnloadLocked(model, absl::StrCat("unloaded with ensemble '", name, "' (unload_dependents)"))
        .IgnoreError();
  }
  if (!kept.empty()) {
    spdlog::info("ensemble '{}' unloaded; kept {} (other ensembles run them)", name,
                 absl::StrJoin(kept, ", "));
  }
  return absl::OkStatus();
}

}  // namespace tessera::server
