// The frontend's view of the server: everything the KServe v2 service needs, behind one narrow
// interface, so the gRPC layer depends on neither executors nor the repository's lifecycle code.
// Implemented by the server's ModelManager; a fake implements it in frontend tests.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/common/status.h"
#include "tessera/dispatch/model_queue.h"
#include "tessera/dispatch/model_stats.h"
#include "tessera/dispatch/sequence_batcher.h"
#include "tessera/repository/model_config.h"

namespace tessera::frontend {

// A ready model version, pinned for the duration of one request: holding it keeps the queue alive
// even if the version is unloaded meanwhile (the queue then drains and refuses new work).
struct ReadyModel {
  std::string name;
  int64_t version = 0;
  std::vector<int64_t> ready_versions;  // every ready version of this model, ascending
  std::shared_ptr<const repository::ModelConfig> config;
  std::shared_ptr<dispatch::ModelQueue> queue;
  std::shared_ptr<dispatch::ModelStats> stats;
  // A stateful model's (sequence_batching) requests go through this, in front of `queue`; null
  // for other models.
  std::shared_ptr<dispatch::SequenceBatcher> sequences;
  // Unique to this load of this version in the server's lifetime: a reload of the same version
  // number (a changed model file) gets a new one, so answers cached for the old file are never
  // served for the new one.
  uint64_t load_id = 0;
};

struct ModelIndexEntry {
  std::string name;
  std::string version;  // "" when the model has no loaded version
  std::string state;    // READY, LOADING, UNAVAILABLE, UNLOADING
  std::string reason;   // why it is not READY, when known
};

struct ModelStatsEntry {
  std::string name;
  int64_t version = 0;
  std::shared_ptr<dispatch::ModelStats> stats;
  std::map<std::string, std::string> metric_tags;  // the config's: labels "_<key>" on /metrics
};

// A load request's parameters (Triton's model repository extension).
struct LoadOverrides {
  // "config": Triton's ModelConfig as JSON, used in place of the repository's config file.
  std::optional<std::string> config_json;
  // "file:<path>": the files of the model folder to load from, in place of the repository's
  // folder, by path inside it ("1/model.onnx"). Needs `config_json`.
  std::map<std::string, std::string> files;

  bool empty() const { return !config_json && files.empty(); }
};

class ServerCore {
 public:
  virtual ~ServerCore() = default;

  // False once shutdown has begun: new inference is refused, in-flight work drains.
  virtual bool IsReady() const = 0;
  // What ServerReady and /v2/health/ready answer: IsReady, and with strict readiness also every
  // model asked for ready. A server not ready in this sense still serves the models it has.
  virtual bool HealthReady() const { return IsReady(); }

  // `version` "" = the latest ready version. NOT_FOUND for an unknown model or version,
  // UNAVAILABLE (with the reason) for a known one that is not ready, INVALID_ARGUMENT for a
  // version string that is not a number.
  virtual StatusOr<ReadyModel> GetReadyModel(const std::string& name,
                                             const std::string& version) const = 0;

  virtual std::vector<ModelIndexEntry> RepositoryIndex(bool ready_only) const = 0;

  // Blocking; returns once the model is ready or failed. FAILED_PRECONDITION unless the model
  // control mode is explicit. Empty `overrides` load the repository's folder as it is.
  virtual Status LoadModel(const std::string& name, const LoadOverrides& overrides) = 0;
  // `unload_dependents`: an ensemble's composing models go too, those no other loaded ensemble
  // runs.
  virtual Status UnloadModel(const std::string& name, bool unload_dependents) = 0;

  // Statistics of ready versions; name "" = all models, version "" = all versions.
  virtual StatusOr<std::vector<ModelStatsEntry>> Statistics(const std::string& name,
                                                            const std::string& version) const = 0;
};

}  // namespace tessera::frontend
