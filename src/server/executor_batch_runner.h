// Batch runners that run a model instance on one executor of the pool, and the pieces the model
// manager and the plan applier share to put instances there (the LoadModel message, warm-up).
//
// Thread-safety: a runner is used by its lane's worker (Run, Submit), by enqueuing threads (Stage,
// TrySubmit) and by executor reader threads (TrySubmit, from a finished submission).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "executor_pool.h"
#include "tessera/dispatch/model_queue.h"
#include "tessera/repository/model_config.h"

namespace tessera::server {

// The executor's LoadModel message for `config` at `version` (files under `model_path`).
ipc::LoadModel BuildLoadModel(const repository::ModelConfig& config, int64_t version,
                              const std::string& model_path, const std::string& instance_key);

class ExecutorBatchRunner : public dispatch::BatchRunner {
 public:
  ExecutorBatchRunner(ExecutorPool* pool, int slot, std::string key,
                      std::shared_ptr<const repository::ModelConfig> config)
      : pool_(pool), slot_(slot), key_(std::move(key)), config_(std::move(config)) {}

  StatusOr<std::vector<dispatch::Response>> Run(
      const std::vector<const dispatch::Request*>& batch) override;
  std::string Describe() const override;
  // executors.batches_in_flight; Submit sends without waiting, answers arrive on the executor's
  // reader thread.
  int max_in_flight() const override;
  void Submit(const std::vector<std::vector<const dispatch::Request*>>& batches,
              std::vector<dispatch::BatchOutcomeCallback> done) override;
  // Submit while the executor is up (SubmitBatches never waits); false while it restarts.
  bool supports_try_submit() const override { return true; }
  bool TrySubmit(const std::vector<std::vector<const dispatch::Request*>>& batches,
                 std::vector<dispatch::BatchOutcomeCallback>& done) override;
  // Stages into the pool region of `pool_key_` when one is set (see SharePoolOf); else nothing.
  void Stage(dispatch::Request& request) override;

  // Makes this runner one of a multi-granularity model's workers: requests are staged into the
  // pool region of instance `pool_key` (the first worker's), and batches read from there.
  void SharePoolOf(std::string pool_key) { pool_key_ = std::move(pool_key); }

 protected:
  ExecutorPool* pool_;
  int slot_;
  std::string key_;
  std::shared_ptr<const repository::ModelConfig> config_;
  std::string pool_key_;  // empty: the runner's own instance (and no staging but a gpulet's)
};

// A model's share of a planned gpulet: the models of one gpulet take turns (one batch at a time,
// through `round_gate`), as the plan's round assumes (seed 001 §2.2), and requests routed here are
// staged into the executor's input pool ahead of their batch.
class GpuletBatchRunner final : public ExecutorBatchRunner {
 public:
  GpuletBatchRunner(ExecutorPool* pool, int slot, std::string key,
                    std::shared_ptr<const repository::ModelConfig> config,
                    std::shared_ptr<std::mutex> round_gate, std::string gpulet_label)
      : ExecutorBatchRunner(pool, slot, std::move(key), std::move(config)),
        round_gate_(std::move(round_gate)),
        gpulet_label_(std::move(gpulet_label)) {}

  StatusOr<std::vector<dispatch::Response>> Run(
      const std::vector<const dispatch::Request*>& batch) override;
  void Stage(dispatch::Request& request) override;
  std::string Describe() const override;
  int max_in_flight() const override { return 1; }  // the round gate is held for the whole batch

 private:
  std::shared_ptr<std::mutex> round_gate_;
  std::string gpulet_label_;
};

// Runs a batch of `rows` zero-filled rows through the instance twice, so that its first real batch
// does not pay for first-touch allocation, memory planning or CUDA graph capture. Models with a
// variable non-batch dim cannot be warmed without a real request: OK, nothing run.
Status WarmUp(ExecutorProcess& process, const std::string& instance_key,
              const repository::ModelConfig& config, int64_t rows);

// Runs one of the config's model_warmup samples through the instance (count times, at least
// twice). INVALID_ARGUMENT naming the sample when it does not fit the model's inputs (a name, type
// or fixed dim that differs, an input left out).
Status WarmUpSample(ExecutorProcess& process, const std::string& instance_key,
                    const repository::ModelConfig& config, const repository::WarmupSample& sample);

}  // namespace tessera::server
