// The server's executors (one per device partition; on a CPU-only machine, CPU core shares) and
// their supervision: a dead executor is restarted and its model instances are loaded again, while
// requests for it wait (bounded) instead of failing.
//
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "executor_process.h"
#include "tessera/common/status.h"

namespace tessera::server {

struct ExecutorPoolOptions {
  int executors = 1;
  ExecutorLaunchOptions launch;  // executor_id/generation are set per executor
  int64_t load_timeout_ms = 120000;
  int64_t restart_wait_ms = 20000;  // how long a batch waits for a restarting executor
};

class ExecutorPool {
 public:
  static StatusOr<std::unique_ptr<ExecutorPool>> Start(const ExecutorPoolOptions& options);
  ~ExecutorPool();  // Stop()

  // The executors started with the pool (slots 0..size()-1); model instances of the repository's
  // configs are placed on these.
  int size() const { return options_.executors; }
  const ExecutorLaunchOptions& base_launch() const { return options_.launch; }

  // Starts one more executor with its own launch settings (a gpulet's partition), supervised like
  // the others, and returns its slot. The slot's executor_id/generation are set here.
  StatusOr<int> AddExecutor(const ExecutorLaunchOptions& launch);
  // Stops an executor added by AddExecutor (its instances must be drained); its slot is not reused.
  void RemoveExecutor(int slot);

  // Loads an instance on executor `slot` and remembers it, so a restarted executor gets it back
  // (with its own weights then: `shared_weights` go along with this load only).
  Status LoadInstance(int slot, const ipc::LoadModel& load,
                      const SharedWeightsHandle* shared_weights = nullptr,
                      bool* weights_shared = nullptr);
  // The weights of `instance_key` on executor `slot`, for a load on another executor of the same
  // device (ExecutorProcess::ExportWeights).
  StatusOr<SharedWeightsHandle> ExportWeights(int slot, const std::string& instance_key);
  void UnloadInstance(int slot, const std::string& instance_key);

  // The running executor of `slot` with `instance_key` loaded; waits while it restarts.
  StatusOr<std::shared_ptr<ExecutorProcess>> Acquire(int slot, const std::string& instance_key);

  // The running executor of `slot` now, without waiting; null while it restarts or was removed.
  std::shared_ptr<ExecutorProcess> Current(int slot) const;
  // Acquire without waiting: null whenever Acquire would wait or fail (it then says why).
  std::shared_ptr<ExecutorProcess> TryAcquire(int slot, const std::string& instance_key) const;

  uint64_t restarts() const;
  // Input-pool counters of every running executor, by slot (they restart from 0 with the process).
  std::map<int, InputPoolCounters> input_pool_counters() const;
  void Stop();

 private:
  struct Slot {
    ExecutorLaunchOptions launch;
    bool removed = false;
    std::shared_ptr<ExecutorProcess> process;  // null while restarting
    int generation = 0;
    bool needs_restart = false;
    std::map<std::string, ipc::LoadModel> instances;  // loaded there, by instance key
  };

  explicit ExecutorPool(const ExecutorPoolOptions& options);
  StatusOr<std::shared_ptr<ExecutorProcess>> Launch(int slot, int generation);
  void SupervisorLoop();

  const ExecutorPoolOptions options_;
  mutable std::mutex mu_;
  std::condition_variable changed_cv_;  // a slot died or came back, or stop
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t restarts_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread supervisor_;
};

}  // namespace tessera::server
