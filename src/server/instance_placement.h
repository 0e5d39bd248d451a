// Which executor each instance of a model runs on, from its config's instance_group.
//
// The pool's executors (slots 0..base_slots-1) all run on the server's device: the CPU, or GPU 0
// on a GPU server. On a GPU server instance groups are placed as in Triton:
//   - `kind: KIND_CPU`: the group's instances run on a CPU executor (the CPU engine), started on
//     first need and shared by every KIND_CPU instance after it;
//   - other groups: `count` instances on each GPU of `gpus`, or on every GPU when it is empty;
//     GPU 0 is the pool's executors (round robin across models), GPU k an executor on `cuda:k`
//     started on first need. An id the server has no GPU for is an error.
// On a CPU server every instance takes the pool's executors, whatever its kind: a Triton config
// written for a GPU still serves on a machine without one.
// A model the CUDA backend refuses still loads when its groups are KIND_AUTO: the model manager
// loads it again with CpuFallback's config, on a CPU executor.
//
// Thread-safety: Place is thread-safe (models load in parallel).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "tessera/common/status.h"
#include "tessera/repository/model_config.h"

namespace tessera::server {

struct InstancePlacementOptions {
  int base_slots = 1;               // the pool's executors, started with it
  std::string base_device = "cpu";  // theirs: "cpu" or "cuda:0"
  int gpu_count = 0;                // GPUs the server sees (0 on a CPU server)
  // Starts one more executor on `device` ("cpu" or "cuda:N") and returns its slot. Null: no
  // executors can be added, and every instance takes the pool's executors.
  std::function<StatusOr<int>(const std::string& device)> add_executor;
};

class InstancePlacer {
 public:
  explicit InstancePlacer(InstancePlacementOptions options);

  // One slot per instance, in group order (no group: one default KIND_AUTO group of 1). With
  // `worker_batch_sizes` one slot for all the workers (they share one executor's weights), the
  // first place the first group asks for.
  // INVALID_ARGUMENT names a group whose `gpus` lists a GPU the server does not have;
  // UNAVAILABLE says why an executor could not be started.
  StatusOr<std::vector<int>> Place(const repository::ModelConfig& config);

  // The config to load instead when a GPU executor refused the model as UNIMPLEMENTED (the CUDA
  // backend has no kernel for one of its ops, say): on a GPU server that can start executors, a
  // config whose groups are all KIND_AUTO (none, or no KIND_GPU one) gets them as KIND_CPU, with
  // the same counts and no `gpus`, as Triton's onnxruntime backend runs on the CPU what CUDA
  // cannot. nullopt when a group asks for KIND_GPU (the refusal stands) or nothing would move.
  std::optional<repository::ModelConfig> CpuFallback(const repository::ModelConfig& config) const;

  // The device `slot` runs on (for logs).
  std::string DeviceOf(int slot) const;

 private:
  bool on_gpu() const { return options_.base_device != "cpu"; }
  // The devices a group's instances go to, `count` on each; "" stands for the pool's executors.
  std::vector<std::string> GroupDevices(const repository::InstanceGroupConfig& group) const;
  // The next slot on `device`, starting its executor on first need.
  StatusOr<int> NextSlot(const std::string& device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const InstancePlacementOptions options_;
  mutable std::mutex mu_;
  uint32_t next_base_ ABSL_GUARDED_BY(mu_) = 0;            // round robin over the pool's executors
  std::map<std::string, int> added_ ABSL_GUARDED_BY(mu_);  // device -> slot started for it
};

}  // namespace tessera::server
