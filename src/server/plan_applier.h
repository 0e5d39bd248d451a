// Makes a scheduler Plan real on the executors: every gpulet of the plan is an executor process
// started in its partition, with an instance of each of its models loaded and warmed up, and every
// model's queue routes to its gpulets' lanes with the plan's batch, duty cycle and rate split.
//
// A new plan is applied by diff: a gpulet whose device, partition and model versions are unchanged
// keeps its executor (only its lanes' batch/duty/rate change); a gpulet that is new or resized is
// started as a shadow next to the active one, loaded and warmed, and the model's lanes switch to it
// at a batch boundary (ModelQueue::ReplaceLanes, GSLICE §4.6); gpulets no longer used drain and
// their executors exit. A model the plan leaves out falls back to its configured instances. No
// request fails because of a switch.
//
// Thread-compatible: one control loop calls Apply; gpulets() may be read from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "executor_pool.h"
#include "model_manager.h"
#include "tessera/dispatch/model_queue.h"
#include "tessera/partition/partition.h"
#include "tessera/scheduler/plan.h"

namespace tessera::server {

// How a gpulet's executor is placed in its partition: launch settings added to the pool's base.
struct GpuletPlacement {
  int64_t id = -1;                       // handed back to PlanApplierOptions::release
  int threads = 1;                       // compute threads of the executor
  std::vector<std::string> extra_env;    // e.g. CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40
  std::vector<std::string> extra_args;   // e.g. --cpus 0-1
  std::string describe;                  // "cpu 50 % (1 thread)"
};

struct PlanApplierOptions {
  // Places a partition of `partition_pct` % of device `device`. The default (when empty) is CPU
  // core shares by thread count: max(1, round(pct/100 · cpu_cores)) threads.
  std::function<StatusOr<GpuletPlacement>(int device, int partition_pct)> place;
  // Gives a placement back when its gpulet stopped (not called for the default placement).
  std::function<void(int64_t placement_id)> release;
  int cpu_cores = 1;
  int64_t load_timeout_ms = 120000;
};

// Options whose place/release hand out partitions of `partitions` (MPS shares, green contexts or
// CPU core shares, whichever it chose), with cpu_cores its allowed cores. `partitions` must outlive
// the applier.
PlanApplierOptions PlacedBy(partition::PartitionManager* partitions);

// Sizes the input ring of a gpulet's executor for its models (PlanApplier does it before starting
// one): one input-pool region per model, each holding four batches of the model's planned size,
// and a gather part for two batches of the largest. `launch`'s input_ring_bytes
// (executors.input_ring_bytes) is the least it gets; a model with a dynamic input dim adds nothing.
void SizeGpuletInputRing(const scheduler::Gpulet& gpulet,
                         const std::map<std::string, ServedModel>& served,
                         ExecutorLaunchOptions* launch);

// A gpulet as it runs now.
struct AppliedGpulet {
  std::string label;  // "gpulet 3 (device 0, 50 %)"
  int device = 0;
  int partition_pct = 100;
  double duty_ms = 0;
  int executor_slot = -1;
  int64_t placement_id = -1;
  std::string placement;
  std::vector<scheduler::GpuletModel> models;
};

struct ModelSwitch {
  std::string model;
  std::string to;  // lane labels joined, or "instances" for the configured ones
  dispatch::LaneSwap swap;
};

struct ApplyReport {
  int gpulets_started = 0;
  int gpulets_kept = 0;
  int gpulets_stopped = 0;
  std::vector<ModelSwitch> switches;
  std::vector<std::string> errors;  // a gpulet that could not start; its models keep their lanes
  uint64_t start_ns = 0;            // starting, loading and warming the shadows
  int weights_shared = 0;           // shadow loads that mapped a running gpulet's weights
  uint64_t total_ns = 0;
};

class PlanApplier {
 public:
  PlanApplier(PlanApplierOptions options, ExecutorPool* pool);
  ~PlanApplier();  // Shutdown()

  // Applies `plan` to `models` (ModelManager::ServedModels()). Models in the plan that are not
  // served are ignored; served models not in the plan go back to their configured instances.
  ApplyReport Apply(const scheduler::Plan& plan, const std::vector<ServedModel>& models);

  std::vector<AppliedGpulet> gpulets() const;

  // Stops every gpulet executor. Call after the model queues were shut down (server exit).
  void Shutdown();

 private:
  struct Binding {
    std::string identity;  // device, partition and model@version set
    AppliedGpulet gpulet;
    std::shared_ptr<std::mutex> round_gate;
    std::map<std::string, std::string> instance_keys;                     // by model
    std::map<std::string, std::shared_ptr<dispatch::BatchRunner>> runners;  // by model
  };

  // `donors`: running gpulets whose instances of the same model version on the same device may
  // lend their weights to the new gpulet's loads.
  StatusOr<std::shared_ptr<Binding>> StartGpulet(
      const scheduler::Gpulet& gpulet, const std::string& identity,
      const std::map<std::string, ServedModel>& served,
      const std::vector<std::shared_ptr<Binding>>& donors, int* weights_shared);
  // Another executor's weights of `model` on `device`, from the first donor that exports them.
  std::optional<SharedWeightsHandle> WeightsToShare(
      int device, const ServedModel& model, const std::vector<std::shared_ptr<Binding>>& donors);
  void StopGpulet(const Binding& binding);
  StatusOr<GpuletPlacement> Place(int device, int partition_pct) const;

  const PlanApplierOptions options_;
  ExecutorPool* const pool_;
  uint64_t next_gpulet_ = 0;
  uint64_t next_instance_ = 0;
  std::vector<std::shared_ptr<Binding>> bindings_;
  std::map<std::string, std::string> lane_signature_;        // by model: what its lanes are now
  std::map<std::string, const dispatch::ModelQueue*> queue_of_;  // by model: the queue they are on

  mutable std::mutex view_mu_;
  std::vector<AppliedGpulet> view_ ABSL_GUARDED_BY(view_mu_);
};

}  // namespace tessera::server
