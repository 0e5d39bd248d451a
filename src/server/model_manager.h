// Model lifecycle: which versions of which models are loaded on which executors, their queues and
// statistics. Loads, reloads and unloads keep serving: a new version set becomes visible only once
// every instance of it is loaded, and the old set drains before it is unloaded.
//
// Thread-safety: all methods are thread-safe. Lifecycle operations (load, unload, poll) are
// serialized by one mutex; lookups for inference only take a short read of the model table.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "ensemble_runner.h"
#include "executor_pool.h"
#include "instance_placement.h"
#include "load_override_folders.h"
#include "tessera/common/server_config.h"
#include "tessera/dispatch/sequence_batcher.h"
#include "tessera/frontend/server_core.h"
#include "tessera/repository/repository.h"

namespace tessera::server {

struct ModelManagerOptions {
  std::vector<std::string> repository_roots;  // one or more, scanned as one (repository.h)
  repository::ScanOptions scan;               // how each model folder is read
  ModelControlMode control_mode = ModelControlMode::kPoll;
  int64_t drain_timeout_ms = 30000;  // how long an old version may finish its work on reload/unload
  bool slo_drop = false;  // SLO-aware dropping on planned lanes (server.yaml scheduler.slo_drop)
  // Whether the frontend has a response cache: a model that enables response_cache without one
  // gets a warning at load.
  bool response_cache = false;
  bool auto_complete_config = true;  // false: a config without input/output fails the load
  // HealthReady only while no model asked for is loading or has failed its load (Triton's
  // --strict-readiness); false: ready from start to shutdown.
  bool strict_readiness = false;
  // Where the files of load requests go (LoadOverrideFolders); "" = <temp
  // dir>/tessera-<pid>-loaded-files.
  std::string load_files_root;
  // Each model version's stats also keep latency summaries of these quantiles (the metrics
  // endpoint's nv_inference_*_summary_us); empty: none.
  std::vector<dispatch::SummaryQuantile> latency_summary_quantiles;
  // GPUs the server sees, and how to start an executor on another device, for instance groups
  // that ask for KIND_CPU or name `gpus` on a GPU server (instance_placement.h). The pool's
  // device and size come from the pool.
  int gpu_count = 0;
  std::function<StatusOr<int>(const std::string& device)> add_executor;
};

// A model as the control loop sees it: its newest ready version, the queue serving it, and the
// lane of its configured instances (what it falls back to when the plan gives it no gpulet).
struct ServedModel {
  std::string name;
  int64_t version = 0;
  std::string model_path;
  std::shared_ptr<const repository::ModelConfig> config;
  std::shared_ptr<dispatch::ModelQueue> queue;
  std::vector<std::shared_ptr<dispatch::ModelStats>> stats_by_version;  // every ready version
  dispatch::Lane base_lane;
};

class ModelManager final : public frontend::ServerCore {
 public:
  ModelManager(ModelManagerOptions options, ExecutorPool* pool);
  ~ModelManager() override;

  // Loads every model of the repository (modes none and poll) or the named ones (explicit;
  // "*" = all). A model that fails is logged and marked UNAVAILABLE; others still load. Returns
  // what failed, one line per model ("m: why"; an unreadable repository or an unknown
  // --load-model name counts too), for --exit-on-error.
  std::vector<std::string> LoadAtStartup(const std::vector<std::string>& explicit_models);

  // One repository poll: loads added and changed models, unloads removed ones.
  void PollOnce();

  // Shutdown, step 1: refuse new inference. Step 2: wait for queued work. Step 3: unload all.
  void BeginShutdown();
  bool WaitIdle(int64_t timeout_ms);
  void UnloadAll();

  // Every model with a ready version (the control loop's view).
  std::vector<ServedModel> ServedModels() const;
  // Scheduler notes shown as the READY models' reason in the repository index (e.g.
  // "unschedulable: 130.0 rps do not fit on 1 device"); replaces the previous notes.
  void SetPlanNotes(std::map<std::string, std::string> notes);

  // frontend::ServerCore
  bool IsReady() const override;
  bool HealthReady() const override;
  // Called (on the thread that changed it, never under the manager's locks) whenever HealthReady
  // may have changed, with strict readiness on; null = none. Setting waits for a call under way,
  // so none comes after SetHealthListener(nullptr) returns.
  void SetHealthListener(std::function<void()> listener);
  StatusOr<frontend::ReadyModel> GetReadyModel(const std::string& name,
                                               const std::string& version) const override;
  std::vector<frontend::ModelIndexEntry> RepositoryIndex(bool ready_only) const override;
  Status LoadModel(const std::string& name, const frontend::LoadOverrides& overrides) override;
  Status UnloadModel(const std::string& name, bool unload_dependents) override;
  StatusOr<std::vector<frontend::ModelStatsEntry>> Statistics(
      const std::string& name, const std::string& version) const override;

 private:
  struct Instance {
    int slot = 0;
    std::string key;
  };
  struct LoadedVersion {
    int64_t version = 0;
    std::string model_path;
    std::shared_ptr<const repository::ModelConfig> config;
    std::shared_ptr<dispatch::ModelQueue> queue;
    std::shared_ptr<dispatch::SequenceBatcher> sequences;  // stateful models only
    std::shared_ptr<dispatch::ModelStats> stats;
    std::vector<Instance> instances;
    uint64_t load_id = 0;  // frontend::ReadyModel::load_id
  };
  using VersionMap = std::map<int64_t, std::shared_ptr<LoadedVersion>>;
  struct ModelRecord {
    std::string state = "UNAVAILABLE";  // READY, LOADING, UNAVAILABLE, UNLOADING
    std::string reason;
    VersionMap versions;   // the ready versions
    uint64_t fingerprint = 0;
    bool load_failed = false;  // the last load failed and no version serves (strict readiness)
  };

  // `override_folder`: the folder of a load request's files the entry was scanned from ("" = the
  // repository's); on success it is kept for this load and the previous load's one removed.
  Status LoadLocked(const std::string& name, const repository::ModelEntry* scanned,
                    const std::string& override_folder = "")
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lifecycle_mu_);
  // Notes `folder` ("" = none) as the one `name`'s serving load reads, removing the one before.
  void KeepOverrideFolder(const std::string& name, const std::string& folder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lifecycle_mu_);
  // The models that serving ensembles other than `except` run.
  std::set<std::string> ModelsRunByEnsembles(const std::string& except) const;
  Status UnloadLocked(const std::string& name, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lifecycle_mu_);
  StatusOr<std::shared_ptr<LoadedVersion>> LoadVersion(const repository::ModelConfig& config,
                                                       const repository::ModelVersion& version);
  // A version's record before its queue exists: config, fresh statistics, a new load_id.
  std::shared_ptr<LoadedVersion> NewLoadedVersion(const repository::ModelConfig& config,
                                                  const repository::ModelVersion& version);
  // An ensemble's version: no executors, a queue whose runner sends each request's steps to the
  // composing models (ensemble_runner.h), which must be ready and fit (CheckEnsembleSteps).
  StatusOr<std::shared_ptr<LoadedVersion>> LoadEnsembleVersion(
      const repository::ModelConfig& config, const repository::ModelVersion& version);
  static bool IsEnsembleEntry(const repository::ModelEntry& entry);
  // `entries` as they load: models, then ensembles, each after the ensembles it runs.
  static std::vector<const repository::ModelEntry*> InLoadOrder(
      const std::vector<repository::ModelEntry>& entries);
  // Puts a stateful model's sequence batcher in front of its queue (no-op for other models).
  static void AttachSequenceBatcher(LoadedVersion& loaded);
  // The serving versions of composing models, as ensembles resolve their steps.
  ComposingModelLookup ComposingModels();
  // After `model` was reloaded: the serving ensembles that run it and no longer fit it (other
  // inputs, outputs, types or dims) stop serving, with the reason in the repository index,
  // rather than fail every request at that step. In poll mode they are tried again once a poll
  // loads `model` anew.
  void UnloadEnsemblesBrokenBy(const std::string& model)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(lifecycle_mu_);
  void Retire(VersionMap versions, const std::string& why);
  // Places the instances of `loaded` (its config's instance groups), loads each on its executor
  // and warms them up, adding one runner per instance to `runners`. On failure the instances
  // that loaded are unloaded again and `loaded` has none.
  Status LoadInstances(LoadedVersion& loaded,
                       std::vector<std::unique_ptr<dispatch::BatchRunner>>* runners);
  // Runs every instance of `loaded` once at the batch sizes it will serve most (1 and
  // max_batch_size, or a worker's own size), so no request pays for the first Run of a shape.
  // A model that cannot run those batches fails its load here (the error names the batch and
  // the model's own message) instead of becoming READY and failing every request.
  Status WarmUpInstances(const LoadedVersion& loaded, bool sized);
  void NotifyHealth();
  // `load_failed`: the state comes from a failed load that left nothing serving.
  void SetState(const std::string& name, const std::string& state, const std::string& reason,
                bool load_failed = false);

  const ModelManagerOptions options_;
  ExecutorPool* const pool_;
  std::atomic<bool> ready_{true};
  std::mutex health_mu_;  // held while the listener runs
  std::function<void()> health_listener_ ABSL_GUARDED_BY(health_mu_);
  std::atomic<uint64_t> next_instance_id_{1};
  std::atomic<uint64_t> next_load_id_{1};
  InstancePlacer placer_;

  std::mutex lifecycle_mu_;  // serializes load/unload/poll
  repository::RepositorySnapshot last_scan_ ABSL_GUARDED_BY(lifecycle_mu_);
  // Ensembles whose load is loading the models they run (explicit mode), outermost first.
  std::set<std::string> ensembles_loading_ ABSL_GUARDED_BY(lifecycle_mu_);
  const std::unique_ptr<LoadOverrideFolders> override_folders_;
  // The folder of load-request files each model's serving load reads, for those that have one.
  std::map<std::string, std::string> override_folder_by_model_ ABSL_GUARDED_BY(lifecycle_mu_);

  mutable std::mutex mu_;  // guards the table that inference reads
  std::map<std::string, ModelRecord> models_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> plan_notes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::server
