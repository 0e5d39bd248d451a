// Ensembles (Triton's platform "ensemble"): a request to the ensemble becomes requests to its
// composing models, each step started as soon as the tensors it reads exist, so independent steps
// run at once and the steps of different requests overlap. The ensemble is served through a
// ModelQueue like any model (statistics, max_queue_size, draining on unload); its runner is this
// EnsembleRunner, which takes every submission at once and never waits: the waiting happens in
// the composing models' queues, which batch the steps of many ensemble requests together.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/dispatch/model_queue.h"
#include "tessera/frontend/server_core.h"
#include "tessera/repository/model_config.h"

namespace tessera::server {

// The ready version of a composing model: `version` -1 = its latest.
using ComposingModelLookup =
    std::function<StatusOr<frontend::ReadyModel>(const std::string& name, int64_t version)>;

// Checks an ensemble against its composing models as they are loaded now: each step's model is
// ready, takes exactly the inputs the step maps and has the outputs it maps, the data types agree
// along every edge of the flow and at the ensemble's outputs, and a batching ensemble's models
// batch at least as much. INVALID_ARGUMENT (UNAVAILABLE for a model that is not ready) naming the
// step, the model and the tensor.
Status CheckEnsembleSteps(const repository::ModelConfig& ensemble,
                          const ComposingModelLookup& lookup);

class EnsembleRunner final : public dispatch::BatchRunner {
 public:
  EnsembleRunner(std::shared_ptr<const repository::ModelConfig> config, int64_t version,
                 ComposingModelLookup lookup);

  // Submits and waits (the queue uses Submit; this is for completeness of the interface).
  StatusOr<std::vector<dispatch::Response>> Run(
      const std::vector<const dispatch::Request*>& batch) override;
  std::string Describe() const override;
  // Ensemble requests cost nothing while their steps wait in other queues: no limit worth
  // holding them back for.
  int max_in_flight() const override { return 1 << 16; }
  void Submit(const std::vector<std::vector<const dispatch::Request*>>& batches,
              std::vector<dispatch::BatchOutcomeCallback> done) override;
  bool supports_try_submit() const override { return true; }
  bool TrySubmit(const std::vector<std::vector<const dispatch::Request*>>& batches,
                 std::vector<dispatch::BatchOutcomeCallback>& done) override;

 private:
  std::shared_ptr<const repository::ModelConfig> config_;
  int64_t version_;
  ComposingModelLookup lookup_;
};

}  // namespace tessera::server
