#include "model_manager.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ensemble_runner.h"
#include "executor_batch_runner.h"
#include "spdlog/spdlog.h"
#include "tessera/repository/model_completion.h"

namespace tessera::server {

namespace {

std::string LoadFilesRoot(const ModelManagerOptions& options) {
  if (!options.load_files_root.empty()) return options.load_files_root;
  std::error_code ec;
  std::filesystem::path temp = std::filesystem::temp_directory_path(ec);
  if (ec) temp = "/tmp";
  return (temp / absl::StrCat("tessera-", getpid(), "-loaded-files")).string();
}

}  // namespace

ModelManager::ModelManager(ModelManagerOptions options, ExecutorPool* pool)
    : options_(std::move(options)),
      pool_(pool),
      placer_(
          {pool->size(), pool->base_launch().device, options_.gpu_count, options_.add_executor}),
      override_folders_(std::make_unique<LoadOverrideFolders>(LoadFilesRoot(options_))) {}

ModelManager::~ModelManager() { UnloadAll(); }

void ModelManager::SetState(const std::string& name, const std::string& state,
                            const std::string& reason, bool load_failed) {
  {
    std::lock_guard lock(mu_);
    ModelRecord& record = models_[name];
    record.state = state;
    record.reason = reason;
    record.load_failed = load_failed;
  }
  NotifyHealth();
}

std::shared_ptr<ModelManager::LoadedVersion> ModelManager::NewLoadedVersion(
    const repository::ModelConfig& config, const repository::ModelVersion& version) {
  auto loaded = std::make_shared<LoadedVersion>();
  loaded->version = version.version;
  loaded->model_path = version.model_path;
  loaded->config = std::make_shared<const repository::ModelConfig>(config);
  loaded->stats = std::make_shared<dispatch::ModelStats>(options_.latency_summary_quantiles);
  loaded->load_id = next_load_id_++;
  return loaded;
}

ComposingModelLookup ModelManager::ComposingModels() {
  return [this](const std::string& name, int64_t number) {
    return GetReadyModel(name, number < 0 ? "" : std::to_string(number));
  };
}

void ModelManager::UnloadEnsemblesBrokenBy(const std::string& model) {
  std::vector<std::pair<std::string, std::shared_ptr<const repository::ModelConfig>>> ensembles;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, record] : models_) {
      if (record.versions.empty()) continue;
      const auto& config = record.versions.rbegin()->second->config;
      const auto& steps = config->ensemble_steps;
      if (config->is_ensemble() &&
          std::any_of(steps.begin(), steps.end(), [&](const repository::EnsembleStep& step) {
            return step.model_name == model;
          })) {
        ensembles.emplace_back(name, config);
      }
    }
  }
  for (const auto& [name, config] : ensembles) {
    Status fits = CheckEnsembleSteps(*config, ComposingModels());
    if (fits.ok()) continue;
    const std::string why = absl::StrCat("composing model '", model,
                                         "' was reloaded and no longer fits: ", fits.message());
    spdlog::error("ensemble '{}': {}", name, why);
    UnloadLocked(name, why).IgnoreError();
  }
}

StatusOr<std::shared_ptr<ModelManager::LoadedVersion>> ModelManager::LoadEnsembleVersion(
    const repository::ModelConfig& config, const repository::ModelVersion& version) {
  ComposingModelLookup lookup = ComposingModels();
  Status fits = CheckEnsembleSteps(config, lookup);
  if (!fits.ok()) {
    return absl::Status(fits.code(),
                        absl::StrCat("failed to load ensemble '", config.name, "' version ",
                                     version.version, ": ", fits.message()));
  }
  std::shared_ptr<LoadedVersion> loaded = NewLoadedVersion(config, version);
  dispatch::ModelQueueOptions queue_options;
  queue_options.model_label = absl::StrCat(config.name, "/", version.version);
  // One request per submission: the composing models' queues batch the steps.
  queue_options.policy.batching = false;
  queue_options.policy.max_batch_size = config.max_batch_size;
  queue_options.slo_ns = static_cast<uint64_t>(config.slo_ms * 1e6);
  std::vector<std::unique_ptr<dispatch::BatchRunner>> runners;
  runners.push_back(
      std::make_unique<EnsembleRunner>(loaded->config, version.version, std::move(lookup)));
  loaded->queue =
      std::make_shared<dispatch::ModelQueue>(queue_options, std::move(runners), loaded->stats);
  return loaded;
}

StatusOr<std::shared_ptr<ModelManager::LoadedVersion>> ModelManager::LoadVersion(
    const repository::ModelConfig& file_config, const repository::ModelVersion& version) {
  if (file_config.is_ensemble()) return LoadEnsembleVersion(file_config, version);
  // A config that leaves out inputs or outputs (or a folder without one) is completed from this
  // version's model file, as Triton does for ONNX models.
  if (!options_.auto_complete_config && repository::NeedsCompletion(file_config)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", file_config.name, "': its config lists no ",
        file_config.inputs.empty() ? "input" : "output",
        ", and completing it from the model file is off (--disable-auto-complete-config, or "
        "repository.auto_complete: false): list the model's inputs and outputs in its config"));
  }
  StatusOr<repository::ModelConfig> completed =
      repository::CompleteFromModelFile(file_config, version.model_path);
  if (!completed.ok()) {
    return absl::Status(completed.status().code(),
                        absl::StrCat("failed to load model '", file_config.name, "' version ",
                                     version.version, ": ", completed.status().message()));
  }
  if (repository::NeedsCompletion(file_config)) {
    for (const std::string& note : completed->notes) {
      spdlog::info("model '{}' version {}: completed from {}: {}", completed->name, version.version,
                   version.model_path, note);
    }
  }
  if (completed->dynamic_batching.enabled) {
    // The file is read again for this note only when it is needed: the completion read it only
    // if the config left something out.
    StatusOr<repository::OnnxSignature> signature =
        repository::ReadOnnxSignature(version.model_path);
    if (signature.ok() && repository::QuantizesOverTheBatch(*signature)) {
      spdlog::warn(
          "model '{}' version {}: DynamicQuantizeLinear takes its 8-bit range over the whole "
          "batch, so with dynamic_batching a request's outputs depend on the requests batched "
          "with it (docs/engine.md, \"Dynamically quantized models\")",
          completed->name, version.version);
    }
  }
  std::shared_ptr<LoadedVersion> loaded = NewLoadedVersion(*completed, version);
  std::vector<std::unique_ptr<dispatch::BatchRunner>> runners;
  Status status = LoadInstances(*loaded, &runners);
  if (status.code() == absl::StatusCode::kUnimplemented) {
    // A GPU executor's engine cannot run the model (an op without a CUDA kernel, say). KIND_AUTO
    // leaves the device to the server, so the model runs on the CPU, and its config says so.
    if (std::optional<repository::ModelConfig> on_cpu = placer_.CpuFallback(*completed)) {
      std::shared_ptr<LoadedVersion> cpu_loaded = NewLoadedVersion(*on_cpu, version);
      std::vector<std::unique_ptr<dispatch::BatchRunner>> cpu_runners;
      const Status on_cpu_status = LoadInstances(*cpu_loaded, &cpu_runners);
      if (on_cpu_status.ok()) {
        spdlog::warn(
            "model '{}' version {}: the GPU cannot run it ({}); its KIND_AUTO instances run on "
            "the CPU instead (instance_group kind KIND_CPU says so, KIND_GPU makes this an error)",
            completed->name, version.version, status.message());
        loaded = std::move(cpu_loaded);
        runners = std::move(cpu_runners);
        status = on_cpu_status;
      }
    }
  }
  if (!status.ok()) {
    // A model the engine cannot run is the model's fault, as every other refusal of its file.
    return absl::Status(
        status.code() == absl::StatusCode::kUnimplemented ? absl::StatusCode::kInvalidArgument
                                                          : status.code(),
        absl::StrCat("failed to load model '", completed->name, "' version ", version.version, " (",
                     version.model_path, "): ", status.message()));
  }
  const repository::ModelConfig& config = *loaded->config;
  const bool sized = !config.worker_batch_sizes.empty();
  const int worker_slot = loaded->instances.front().slot;

  dispatch::ModelQueueOptions queue_options;
  queue_options.model_label = absl::StrCat(config.name, "/", version.version);
  // A stateful model is batched by its sequence strategy's rule (one request per sequence at a
  // time reaches the queue), any other by dynamic_batching's.
  const repository::SequenceBatchingConfig& sequence = config.sequence_batching;
  queue_options.policy.batching =
      (config.dynamic_batching.enabled || sequence.enabled) && config.max_batch_size > 0;
  queue_options.policy.max_batch_size = config.max_batch_size;
  for (const repository::TensorConfig& input : config.inputs) {
    queue_options.ragged_inputs.push_back(input.allow_ragged_batch);
  }
  const std::vector<int>& preferred = sequence.enabled
                                          ? sequence.preferred_batch_sizes
                                          : config.dynamic_batching.preferred_batch_sizes;
  queue_options.policy.preferred_batch_sizes.assign(preferred.begin(), preferred.end());
  std::sort(queue_options.policy.preferred_batch_sizes.begin(),
            queue_options.policy.preferred_batch_sizes.end());
  queue_options.policy.max_queue_delay_ns =
      (sequence.enabled ? sequence.max_queue_delay_microseconds
                        : config.dynamic_batching.max_queue_delay_microseconds) *
      1000;
  queue_options.max_queue_size = config.dynamic_batching.default_queue_policy.max_queue_size;
  for (const auto& [level, policy] : config.dynamic_batching.priority_queue_policy) {
    queue_options.max_queue_size_by_level[level] = policy.max_queue_size;
  }
  queue_options.slo_ns = static_cast<uint64_t>(config.slo_ms * 1e6);
  queue_options.slo_drop = options_.slo_drop;
  if (!sized) {
    loaded->queue = std::make_shared<dispatch::ModelQueue>(queue_options, std::move(runners),
                                                           loaded->stats);
    AttachSequenceBatcher(*loaded);
    return loaded;
  }
  // The workers' sizes are the batching rule: batch even without a dynamic_batching key (a
  // queue delay from it still applies to batches smaller than every idle worker).
  queue_options.policy.batching = true;
  dispatch::Lane lane;
  lane.plan.label = absl::StrCat("workers ", absl::StrJoin(config.worker_batch_sizes, "/"),
                                 " on executor ", worker_slot);
  // Every worker reads the first worker's pool region: the queue stages each request there in
  // queue order, and a worker's batch is the next consecutive run of the queue.
  for (auto& runner : runners) {
    static_cast<ExecutorBatchRunner*>(runner.get())->SharePoolOf(loaded->instances.front().key);
    lane.runners.push_back(std::move(runner));
  }
  lane.worker_batch_sizes.assign(config.worker_batch_sizes.begin(), config.worker_batch_sizes.end());
  spdlog::info("model {}: {}", queue_options.model_label, lane.plan.label);
  loaded->queue = std::make_shared<dispatch::ModelQueue>(queue_options, std::move(lane),
                                                         loaded->stats);
  AttachSequenceBatcher(*loaded);
  return loaded;
}

void ModelManager::AttachSequenceBatcher(LoadedVersion& loaded) {
  const repository::ModelConfig& config = *loaded.config;
  if (!config.sequence_batching.enabled) return;
  dispatch::SequenceBatcherOptions options;
  options.model_label = absl::StrCat(config.name, "/", loaded.version);
  options.batched = config.max_batch_size > 0;
  options.idle_timeout_ns = config.sequence_batching.max_sequence_idle_microseconds * 1000;
  options.controls = config.sequence_batching.controls;
  options.states = config.sequence_batching.states;
  for (const repository::TensorConfig& output : config.outputs) {
    options.outputs.push_back(output.name);
  }
  loaded.sequences =
      std::make_shared<dispatch::SequenceBatcher>(std::move(options), loaded.queue, loaded.stats);
}

bool ModelManager::IsEnsembleEntry(const repository::ModelEntry& entry) {
  return entry.config.ok() && entry.config->is_ensemble();
}

std::vector<const repository::ModelEntry*> ModelManager::InLoadOrder(
    const std::vector<repository::ModelEntry>& entries) {
  std::vector<const repository::ModelEntry*> order;
  std::map<std::string, const repository::ModelEntry*> ensembles;
  for (const repository::ModelEntry& entry : entries) {
    if (IsEnsembleEntry(entry)) {
      ensembles[entry.name] = &entry;
    } else {
      order.push_back(&entry);
    }
  }
  // Depth first, each ensemble after those its steps name; `placed` also stops a loop.
  std::set<std::string> placed;
  std::function<void(const repository::ModelEntry*)> place = [&](const repository::ModelEntry* e) {
    if (!placed.insert(e->name).second) return;
    for (const repository::EnsembleStep& step : e->config->ensemble_steps) {
      if (auto inner = ensembles.find(step.model_name); inner != ensembles.end()) {
        place(inner->second);
      }
    }
    order.push_back(e);
  };
  for (const auto& [name, entry] : ensembles) place(entry);
  return order;
}

Status ModelManager::LoadInstances(LoadedVersion& loaded,
                                   std::vector<std::unique_ptr<dispatch::BatchRunner>>* runners) {
  const repository::ModelConfig& config = *loaded.config;
  // Multi-granularity workers: one instance per size, all on one executor, so they share the
  // weights (the engine loads a model file once per process) and run on their own threads.
  const bool sized = !config.worker_batch_sizes.empty();
  TESSERA_ASSIGN_OR_RETURN(std::vector<int> slots, placer_.Place(config));
  Status status;
  for (size_t i = 0; i < slots.size() && status.ok(); ++i) {
    const int slot = slots[i];
    ipc::LoadModel load =
        BuildLoadModel(config, loaded.version, loaded.model_path,
                       absl::StrCat(config.name, "/", loaded.version, "#", next_instance_id_++));
    status = pool_->LoadInstance(slot, load);
    if (status.ok()) {
      if (const std::string device = placer_.DeviceOf(slot);
          device != pool_->base_launch().device) {
        spdlog::info("model '{}' version {}: instance {} runs on executor {} ({})", config.name,
                     loaded.version, load.instance_key(), slot, device);
      }
      loaded.instances.push_back({slot, load.instance_key()});
      runners->push_back(
          std::make_unique<ExecutorBatchRunner>(pool_, slot, load.instance_key(), loaded.config));
    }
  }
  if (status.ok()) status = WarmUpInstances(loaded, sized);
  if (!status.ok()) {
    for (const Instance& instance : loaded.instances) {
      pool_->UnloadInstance(instance.slot, instance.key);
    }
    loaded.instances.clear();
    runners->clear();
  }
  return status;
}

Status ModelManager::WarmUpInstances(const LoadedVersion& loaded, bool sized) {
  // The first Run of each input shape plans the activation memory and builds the kernels'
  // primitives (oneDNN convolutions: milliseconds each), which made a model's first requests up to
  // ~100x slower than the next ones. Running the batch sizes the model will most often see once
  // here moves that cost out of serving, before the model reports READY. A failure fails the
  // load: the inputs are zeros, which the engine's operators run like any other values, so a
  // model that fails on them is broken (a corrupt attribute, say) and would fail every request.
  const repository::ModelConfig& config = *loaded.config;
  const auto start = std::chrono::steady_clock::now();
  if (!sized && !config.model_warmup.empty()) {
    // The config's own samples instead (Triton's model_warmup): shapes the defaults cannot know,
    // such as a variable sequence length. A sample that fails fails the load, as below.
    std::vector<std::string> names;
    for (const repository::WarmupSample& sample : config.model_warmup) names.push_back(sample.name);
    for (const Instance& instance : loaded.instances) {
      auto process = pool_->Acquire(instance.slot, instance.key);
      for (const repository::WarmupSample& sample : config.model_warmup) {
        Status warmed = process.ok() ? WarmUpSample(**process, instance.key, config, sample)
                                     : process.status();
        if (!warmed.ok()) {
          return warmed.code() == absl::StatusCode::kInternal
                     ? absl::InvalidArgumentError(warmed.message())
                     : warmed;
        }
      }
    }
    spdlog::info("model {}/{}: warmed up {} instance(s) with model_warmup [{}] in {:.1f} ms",
                 config.name, loaded.version, loaded.instances.size(), absl::StrJoin(names, ", "),
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    return absl::OkStatus();
  }
  std::vector<int64_t> all_sizes;
  for (size_t i = 0; i < loaded.instances.size(); ++i) {
    std::vector<int64_t> sizes;
    if (sized) {
      sizes.push_back(config.worker_batch_sizes[i]);
    } else {
      sizes.push_back(1);
      if (config.max_batch_size > 1) sizes.push_back(config.max_batch_size);
    }
    const Instance& instance = loaded.instances[i];
    auto process = pool_->Acquire(instance.slot, instance.key);
    for (int64_t rows : sizes) {
      Status warmed = process.ok() ? WarmUp(**process, instance.key, config, rows) : process.status();
      if (!warmed.ok()) {
        // A model that fails on zeros is a bad model, whatever code the executor gave its
        // failure. Other codes (an executor that went away, inputs too large for the ring) keep
        // theirs.
        if (warmed.code() != absl::StatusCode::kInternal &&
            warmed.code() != absl::StatusCode::kInvalidArgument) {
          return warmed;
        }
        return absl::InvalidArgumentError(absl::StrCat(warmed.message(), " (inputs all zeros)"));
      }
      if (std::find(all_sizes.begin(), all_sizes.end(), rows) == all_sizes.end()) {
        all_sizes.push_back(rows);
      }
    }
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("model {}/{}: warmed up {} instance(s) at batch sizes [{}] in {:.1f} ms", config.name,
               loaded.version, loaded.instances.size(), absl::StrJoin(all_sizes, ", "), ms);
  return absl::OkStatus();
}

void ModelManager::Retire(VersionMap versions, const std::string& why) {
  for (auto& [number, version] : versions) {
    // A stateful model's held requests reach the queue only as their sequences move on.
    if (version->sequences) {
      version->sequences->StopAccepting();
      version->sequences->WaitIdle(options_.drain_timeout_ms);
    }
    version->queue->StopAccepting();
    if (!version->queue->WaitIdle(options_.drain_timeout_ms)) {
      spdlog::warn("model {}/{}: requests still queued after {} ms; failing them", version->config->name,
                   number, options_.drain_timeout_ms);
    }
    version->queue->Shutdown(why);
    for (const Instance& instance : version->instances) {
      pool_->UnloadInstance(instance.slot, instance.key);
    }
  }
}

Status ModelManager::LoadLocked(const std::string& name, const repository::ModelEntry* scanned,
                                const std::string& override_folder) {
  repository::ModelEntry entry;
  if (scanned) {
    entry = *scanned;
  } else {
    auto found = repository::FindModel(options_.repository_roots, name, options_.scan);
    if (!found.ok()) return found.status();
    entry = std::move(found).value();
  }

  bool serving = false;
  {
    std::lock_guard lock(mu_);
    auto it = models_.find(name);
    serving = it != models_.end() && !it->second.versions.empty();
  }
  auto fail = [&](const Status& status) {
    spdlog::error("{}", status.message());
    if (serving) {
      // The running versions keep serving: a broken edit must not take a model down.
      SetState(name, "READY", absl::StrCat("reload failed, still serving the previous version: ",
                                           status.message()));
    } else {
      SetState(name, "UNAVAILABLE", std::string(status.message()), /*load_failed=*/true);
    }
    return status;
  };

  Status servable = repository::CheckServable(entry);
  if (!servable.ok()) return fail(servable);
  if (!serving) SetState(name, "LOADING", "");

  const repository::ModelConfig& config = *entry.config;
  if (config.is_ensemble() && options_.control_mode == ModelControlMode::kExplicit) {
    // As in Triton, loading an ensemble loads the composing models it needs, ensembles inside it
    // included; one already on the way down is not loaded again (a loop must not recurse, and
    // CheckEnsembleSteps refuses it).
    ensembles_loading_.insert(name);
    for (const repository::EnsembleStep& step : config.ensemble_steps) {
      if (ensembles_loading_.count(step.model_name) || GetReadyModel(step.model_name, "").ok()) {
        continue;
      }
      auto composing =
          repository::FindModel(options_.repository_roots, step.model_name, options_.scan);
      if (composing.ok() && composing->config.ok()) {
        LoadLocked(step.model_name, &*composing).IgnoreError();  // CheckEnsembleSteps says why
      }
    }
    ensembles_loading_.erase(name);
  }
  // Triton fields a config.pbtxt carries that Tessera reads but does not act on.
  for (const std::string& note : config.notes) spdlog::warn("model '{}': {}", name, note);
  if (config.response_cache && !options_.response_cache) {
    spdlog::warn(
        "model '{}': response_cache: not used, the server has no response cache "
        "(--cache-config local,size=<bytes>, or response_cache.size_bytes)",
        name);
  }
  VersionMap fresh;
  for (int64_t number : entry.selected_versions) {
    const repository::ModelVersion* version = entry.FindVersion(number);
    auto loaded = LoadVersion(config, *version);
    if (!loaded.ok()) {
      Retire(std::move(fresh), "load failed");
      return fail(loaded.status());
    }
    fresh[number] = std::move(loaded).value();
  }

  VersionMap old;
  {
    std::lock_guard lock(mu_);
    ModelRecord& record = models_[name];
    old.swap(record.versions);
    record.versions = std::move(fresh);
    record.state = "READY";
    record.reason.clear();
    record.load_failed = false;
    record.fingerprint = entry.fingerprint;
  }
  NotifyHealth();
  std::vector<int64_t> numbers(entry.selected_versions.begin(), entry.selected_versions.end());
  spdlog::info("model '{}' ready, version(s) {}{}", name, absl::StrJoin(numbers, ", "),
               old.empty() ? "" : " (replacing the previous load)");
  const bool reloaded = !old.empty();
  Retire(std::move(old), "replaced by a new load");
  KeepOverrideFolder(name, override_folder);
  if (reloaded) UnloadEnsemblesBrokenBy(name);
  return absl::OkStatus();
}

Status ModelManager::UnloadLocked(const std::string& name, const std::string& why) {
  VersionMap old;
  {
    std::lock_guard lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      return absl::NotFoundError(absl::StrCat("model '", name, "' is not loaded"));
    }
    old.swap(it->second.versions);
    it->second.state = "UNAVAILABLE";
    it->second.reason = why;
    it->second.load_failed = false;  // unloaded on purpose
  }
  NotifyHealth();
  Retire(std::move(old), why);
  KeepOverrideFolder(name, "");
  spdlog::info("model '{}' unloaded ({})", name, why);
  return absl::OkStatus();
}

std::vector<std::string> ModelManager::LoadAtStartup(
    const std::vector<std::string>& explicit_models) {
  std::lock_guard lifecycle(lifecycle_mu_);
  std::vector<std::string> failed;
  auto scan = repository::ScanRepositories(options_.repository_roots, options_.scan);
  if (!scan.ok()) {
    spdlog::error("cannot read the model repository: {}", scan.status().message());
    failed.push_back(absl::StrCat("the repository: ", scan.status().message()));
    return failed;
  }
  std::set<std::string> wanted(explicit_models.begin(), explicit_models.end());
  const bool all = options_.control_mode != ModelControlMode::kExplicit || wanted.count("*");
  // Ensembles last, each after the ensembles it runs: they need their composing models loaded.
  for (const repository::ModelEntry* entry : InLoadOrder(scan->models)) {
    if (!all && !wanted.erase(entry->name)) continue;
    if (Status loaded = LoadLocked(entry->name, entry); !loaded.ok()) {
      failed.push_back(absl::StrCat(entry->name, ": ", loaded.message()));
    }
  }
  wanted.erase("*");
  for (const std::string& name : wanted) {
    spdlog::error("--load-model {}: no such model in {}", name,
                  absl::StrJoin(options_.repository_roots, ", "));
    failed.push_back(absl::StrCat(name, ": no such model (--load-model)"));
  }
  last_scan_ = std::move(scan).value();
  return failed;
}

void ModelManager::PollOnce() {
  std::lock_guard lifecycle(lifecycle_mu_);
  auto scan = repository::ScanRepositories(options_.repository_roots, options_.scan);
  if (!scan.ok()) {
    spdlog::error("repository poll failed: {}", scan.status().message());
    return;
  }
  repository::RepositoryDiff diff = repository::Diff(last_scan_, *scan);
  for (const std::string& name : diff.removed) {
    UnloadLocked(name, "removed from the repository").IgnoreError();
  }
  std::set<std::string> polled(diff.added.begin(), diff.added.end());
  polled.insert(diff.changed.begin(), diff.changed.end());
  const std::set<std::string> added(diff.added.begin(), diff.added.end());
  const std::vector<const repository::ModelEntry*> order = InLoadOrder(scan->models);
  for (const repository::ModelEntry* entry : order) {  // ensembles after the models they run
    if (!polled.count(entry->name)) continue;
    spdlog::info("repository poll: model '{}' {}", entry->name,
                 added.count(entry->name) ? "added" : "changed");
    LoadLocked(entry->name, entry).IgnoreError();
  }
  // An ensemble that is not serving, typically because a composing model was missing when it
  // loaded, is tried again once this poll has loaded one of its composing models (in load order,
  // so an ensemble that loads here lets the ones that run it try again too).
  for (const repository::ModelEntry* entry : order) {
    if (!IsEnsembleEntry(*entry) || polled.count(entry->name) ||
        GetReadyModel(entry->name, "").ok()) {
      continue;
    }
    const auto& steps = entry->config->ensemble_steps;
    if (std::any_of(steps.begin(), steps.end(), [&](const repository::EnsembleStep& step) {
          return polled.count(step.model_name) && GetReadyModel(step.model_name, "").ok();
        })) {
      spdlog::info("repository poll: ensemble '{}' tried again (a model it runs was loaded)",
                   entry->name);
      if (LoadLocked(entry->name, entry).ok()) polled.insert(entry->name);
    }
  }
  last_scan_ = std::move(scan).value();
}

void ModelManager::BeginShutdown() {
  ready_ = false;
  std::lock_guard lock(mu_);
  for (auto& [name, record] : models_) {
    for (auto& [number, version] : record.versions) {
      if (version->sequences) version->sequences->StopAccepting();
      version->queue->StopAccepting();
    }
  }
}

bool ModelManager::WaitIdle(int64_t timeout_ms) {
  std::vector<std::shared_ptr<LoadedVersion>> versions;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, record] : models_) {
      for (auto& [number, version] : record.versions) versions.push_back(version);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto left_ms = [&] {
    return std::max<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 deadline - std::chrono::steady_clock::now())
                                 .count(),
                             0);
  };
  bool idle = true;
  for (auto& version : versions) {
    // Sequences first: their held requests still go to the queue.
    if (version->sequences) idle &= version->sequences->WaitIdle(left_ms());
    idle &= version->queue->WaitIdle(left_ms());
  }
  return idle;
}

void ModelManager::UnloadAll() {
  std::lock_guard lifecycle(lifecycle_mu_);
  std::vector<std::string> names;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, record] : models_) {
      if (!record.versions.empty()) names.push_back(name);
    }
  }
  for (const std::string& name : names) UnloadLocked(name, "server shutting down").IgnoreError();
}

}  // namespace tessera::server
