// One tessera-executor child process, seen from the server: its shared-memory rings, its control
// channel and the batches in flight on it.
//
// Thread-safety: every public method may be called from any thread. A reader thread receives the
// executor's messages; when the process dies every waiting call fails with UNAVAILABLE naming the
// executor and how it exited, and `on_exit` is called once (from the reader thread).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "input_pool.h"
#include "ragged_batch.h"
#include "tessera/common/status.h"
#include "tessera/dispatch/request.h"
#include "tessera/executor.pb.h"
#include "tessera/ipc/control_channel.h"
#include "tessera/ipc/ring_allocator.h"
#include "tessera/ipc/shared_memory.h"
#include "tessera/repository/model_config.h"

namespace tessera::server {

struct ExecutorLaunchOptions {
  int executor_id = 0;
  int generation = 0;             // bumped on each restart, keeps shm/socket names unique
  std::string binary;             // path of tessera-executor
  std::string device = "cpu";
  int threads = 1;
  uint64_t input_ring_bytes = 64ull << 20;
  uint64_t output_ring_bytes = 64ull << 20;
  int log_verbose = 0;
  int64_t handshake_timeout_ms = 20000;
  int64_t batch_timeout_ms = 300000;  // a batch not answered by then marks the executor hung
  // Batches (for unbatched models: groups of requests sent together) one runner may have on this
  // executor before the first has finished: 1 waits for each result before sending the next; 2
  // sends the next while one runs, hiding the round trip (executors.batches_in_flight).
  int batches_in_flight = 2;
  // Passed as --inline-run-max-us (executors.inline_run_max_us); the executor uses it on the CPU.
  int inline_run_max_us = 50;
  // Passed as --input-mirror (executors.input_mirror).
  std::string input_mirror = "auto";
  // Passed as --memory-limit-mb (executors.memory_limit_mb, resolved: 0 = none); the executor
  // applies it on the CPU.
  int64_t memory_limit_mb = 0;
  // From the executor's partition (partition::ExecutorPlacement): "K=V" entries added to (or
  // replacing those of) the server's environment, and arguments appended to the command line.
  std::vector<std::string> extra_env;
  std::vector<std::string> extra_args;
  // Share of the input ring kept as the input pool (input_pool.h); the rest is for batches
  // gathered at batch time. 0 disables the pool.
  double input_pool_fraction = 0.5;
  // The pool is split into this many equal regions, one per loaded instance; instances loaded
  // beyond that are not pooled.
  int input_pool_instances = 4;
  // Of each input's part of a region, the share kept as the spill area after its sub-ring
  // (InputPoolOptions::spill_share); 0 gathers every batch that straddles the wrap.
  double input_pool_spill_share = InputPoolOptions::kDefaultSpillShare;
};

// What the input pool did, for tests and metrics. Counts since the process started.
struct InputPoolCounters {
  uint64_t batches_pooled = 0;        // sent pointing at pooled bytes, no gather copy
  uint64_t batches_gathered = 0;      // copied into the ring at batch time
  uint64_t requests_staged = 0;       // Stage copied the inputs into the pool
  uint64_t requests_not_staged = 0;   // Stage found no room (or no region for the instance)
  uint64_t gather_bytes = 0;          // bytes copied at batch time
  uint64_t batches_spilled = 0;       // pooled, after copying a wrapped head to the spill area
  uint64_t spill_bytes = 0;           // bytes those copies moved
  uint64_t batches_mirrored = 0;      // answered batches that read an input from the input mirror
  // Summed batch-time critical path, RunBatch's start to InferBatch ready to send, in ns.
  uint64_t prep_ns_pooled = 0;
  uint64_t prep_ns_gathered = 0;
};

// Weights one executor exported (ExecutorProcess::ExportWeights), held by the server until they
// go along with another executor's load.
struct SharedWeightsHandle {
  UniqueFd fd;
  uint64_t bytes = 0;
  std::string layout;
  std::string source;  // "executor 2 (instance m/1@gpulet4)", for logs
};

class ExecutorProcess {
 public:
  // Spawns the child and waits for its Hello. `on_exit(description)` runs once when it dies.
  static StatusOr<std::unique_ptr<ExecutorProcess>> Start(
      const ExecutorLaunchOptions& options, std::function<void(const std::string&)> on_exit);
  ~ExecutorProcess();  // Stop(5000)

  ExecutorProcess(const ExecutorProcess&) = delete;
  ExecutorProcess& operator=(const ExecutorProcess&) = delete;

  // Loads one model instance; blocks until the executor answers. INVALID_ARGUMENT carries the
  // executor's reason (bad model file, config/model mismatch), UNIMPLEMENTED its engine's refusal
  // (an op or precision it has no kernel for), RESOURCE_EXHAUSTED a lack of memory; UNAVAILABLE if
  // it died.
  // With `shared_weights`, the executor maps them instead of loading its own copy where they
  // match (engine::ModelOptions::import_weights); it loads its own otherwise, and logs why.
  // `weights_shared` (optional) tells which.
  Status Load(const ipc::LoadModel& load, int64_t timeout_ms,
              const SharedWeightsHandle* shared_weights = nullptr, bool* weights_shared = nullptr);
  // The weights of loaded instance `instance_key`, for another executor on the same device.
  // UNIMPLEMENTED (the executor's reason) where its backend cannot share them; NOT_FOUND for an
  // unknown instance; UNAVAILABLE if it died; DEADLINE_EXCEEDED past `timeout_ms`.
  StatusOr<SharedWeightsHandle> ExportWeights(const std::string& instance_key, int64_t timeout_ms);
  void Unload(const std::string& instance_key);

  // Copies `request`'s inputs into the instance's part of the input pool, on the caller's thread,
  // ahead of its batch. nullptr when the pool has no room, the instance is not pooled, the request
  // does not match `config`'s inputs, or the process is not running: never an error, RunBatch then
  // gathers. The handle releases the pool slots when destroyed; it may outlive this process.
  std::unique_ptr<dispatch::StagedInputs> Stage(const std::string& instance_key,
                                                const repository::ModelConfig& config,
                                                const dispatch::Request& request);

  // One batch's outcome: a Response per request, or one error for the whole batch.
  using BatchDone = std::function<void(StatusOr<std::vector<dispatch::Response>>)>;

  // Sends `batches` to instance `instance_key` (each one run of the model, run in order) in one
  // write, and returns without waiting, ever: a batch whose inputs must be gathered into the input
  // ring while it has no room waits in this process (in order, behind any other waiting batch) and
  // is sent by the reader thread once answered batches free the room. `done[i]` is called exactly
  // once with batch i's outcome: on this process's reader thread when the result arrives, on the
  // watchdog's kill or the process's death with UNAVAILABLE, or before SubmitBatches returns when
  // batch i cannot be sent. The requests must stay alive until their `done`. Inputs are placed as
  // RunBatch describes. Called on the reader thread itself (from a `done`), the batches go out
  // with the reader's next write, together with its ReleaseOutputs.
  void SubmitBatches(const std::string& instance_key, const repository::ModelConfig& config,
                     const std::vector<std::vector<const dispatch::Request*>>& batches,
                     std::vector<BatchDone> done, const std::string& pool_key = "");

  // Runs `batch` on instance `instance_key`. When every request was staged here for the instance
  // `pool_key` (default: `instance_key`; the workers of a multi-granularity model share their first
  // worker's region) and their pool slots are back to back in batch order, the batch is sent
  // pointing at the pooled bytes; otherwise inputs are gathered into the (non-pool part of the)
  // input ring. Waits for the result, splits outputs per request (filtered to each request's
  // requested outputs).
  StatusOr<std::vector<dispatch::Response>> RunBatch(const std::string& instance_key,
                                                     const repository::ModelConfig& config,
                                                     const std::vector<const dispatch::Request*>& batch,
                                                     const std::string& pool_key = "");

  // Asks the executor to exit, waits up to `timeout_ms`, then kills it.
  void Stop(int64_t timeout_ms);

  InputPoolCounters input_pool_counters() const;
  // The most input bytes a gathered batch can have: the part of the input ring outside the pool.
  uint64_t gather_capacity_bytes() const;

  bool alive() const { return alive_.load(); }
  pid_t pid() const { return pid_; }
  std::string Describe() const;  // "executor 0 (pid 1234)"

 private:
  ExecutorProcess(const ExecutorLaunchOptions& options,
                  std::function<void(const std::string&)> on_exit);
  Status Spawn();
  // A batch sent and not yet answered.
  struct PendingBatch {
    std::string model_name;
    bool batched = false;
    int64_t total_rows = 0;
    std::vector<const dispatch::Request*> requests;
    std::shared_ptr<const RaggedBatching> ragged;  // null: no ragged batching
    std::vector<uint64_t> gather_allocations;  // input-ring offsets to free once answered
    uint64_t prep_ns = 0;
    uint64_t sent_ns = 0;
    BatchDone done;
  };
  // A batch between SubmitBatches and its InferBatch: kept while it waits for gather space.
  struct BatchJob {
    std::string instance_key;
    std::string pool_key;  // whose pool region the inputs may be staged in
    std::string model_name;
    bool batched = false;
    size_t input_count = 0;
    std::vector<const dispatch::Request*> requests;
    BatchDone done;
    // Per input, then per made batch input, for a gathered batch.
    std::vector<uint64_t> gather_bytes;
    std::shared_ptr<const RaggedBatching> ragged;  // null: no ragged batching
    std::vector<MadeTensor> batch_inputs;          // made for this batch (ragged.batch_inputs)
  };
  // InferBatch messages ready to be written (each after the InputsStaged its spill copies need),
  // and their batch ids (registered as pending).
  struct Outbox {
    std::vector<ipc::ControlMessage> messages;
    std::vector<uint64_t> batch_ids;
  };
  // Places `job`'s inputs (pool, or gather space) and queues its InferBatch in `out`; or, with
  // no gather space now (or batches already waiting for it), parks it in deferred_.
  void StartBatch(BatchJob job, Outbox& out);
  // Copies a gathered batch's inputs to `gather_offsets` (relative to the gather ring; empty when
  // pooled at `pooled`), registers it as pending and queues its InferBatch in `out`.
  void QueueBatch(BatchJob job, const std::vector<PoolRange>& pooled,
                  std::vector<uint64_t> gather_offsets, uint64_t start_ns, Outbox& out);
  // Moves a pooled batch's wrapped heads after its tails (InputPool::ContiguousRun) and, with an
  // input mirror, queues their InputsStaged in `out`.
  void CopySpills(const std::vector<SpillCopy>& spills, Outbox& out);
  // Reader thread: sends the parked batches that now have gather space, in order.
  void StartDeferred(Outbox& out);
  // Writes `out` (after a ReleaseOutputs for `release`, when not empty) in one write; fails
  // every batch of it that the write did not deliver.
  void Flush(Outbox& out, std::vector<uint64_t>* release = nullptr);
  // Gather space for each of `bytes`, all or nothing; the offsets are relative to gather_base_.
  bool AllocateGatherLocked(const std::vector<uint64_t>& bytes, std::vector<uint64_t>* offsets)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ring_mu_);
  // Splits the outputs of an answered batch per request; frees its inputs.
  StatusOr<std::vector<dispatch::Response>> FinishBatch(PendingBatch& pending,
                                                        const ipc::BatchResult& result);
  void ReleaseGathered(const PendingBatch& pending);
  // Removes and returns batch `batch_id`'s entry; nullopt when another path already answered it.
  std::optional<PendingBatch> TakePending(uint64_t batch_id);
  void ReaderLoop();
  // Hands a WeightsExport (and the descriptor that came with it) to its ExportWeights call.
  void FinishExport(const ipc::WeightsExport& reply);
  void WatchdogLoop();
  void HandleExit();
  std::string WaitForExitDescription(int64_t timeout_ms);

  const ExecutorLaunchOptions options_;
  std::function<void(const std::string&)> on_exit_;
  std::string socket_path_;
  std::unique_ptr<ipc::SharedMemoryRegion> input_ring_;
  std::unique_ptr<ipc::SharedMemoryRegion> output_ring_;
  std::unique_ptr<ipc::ControlListener> listener_;
  std::unique_ptr<ipc::ControlChannel> channel_;
  pid_t pid_ = -1;
  std::atomic<bool> alive_{false};
  bool stages_inputs_ = false;  // Hello.stages_inputs: announce staged requests (InputsStaged)
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> next_batch_id_{1};
  std::thread reader_;
  std::thread watchdog_;
  std::condition_variable watchdog_cv_;  // stop

  // The input ring is [0, pool bytes) for the input pool, then the gather ring from gather_base_.
  std::shared_ptr<InputPool> input_pool_;
  uint64_t gather_base_ = 0;
  std::atomic<uint64_t> batches_pooled_{0};
  std::atomic<uint64_t> batches_gathered_{0};
  std::atomic<uint64_t> gather_bytes_{0};
  std::atomic<uint64_t> batches_spilled_{0};
  std::atomic<uint64_t> spill_bytes_{0};
  std::atomic<uint64_t> batches_mirrored_{0};
  std::atomic<uint64_t> prep_ns_pooled_{0};
  std::atomic<uint64_t> prep_ns_gathered_{0};

  std::mutex ring_mu_;
  ipc::RingAllocator input_allocator_ ABSL_GUARDED_BY(ring_mu_);
  // Gathered batches waiting for input-ring space, oldest first. Space comes back only when the
  // reader thread finishes answered batches, so the reader sends these (StartDeferred).
  std::deque<BatchJob> deferred_ ABSL_GUARDED_BY(ring_mu_);
  std::atomic<size_t> deferred_count_{0};  // deferred_.size(), read without the lock
  bool ring_closed_ ABSL_GUARDED_BY(ring_mu_) = false;  // the process exited: park nothing more

  // The process whose reader thread this is: SubmitBatches called from a `done` queues its
  // batches in the reader's outbox instead of writing them itself.
  static thread_local const ExecutorProcess* reader_of_;
  // Owned by the reader thread: batches submitted from it and outputs to give back, written
  // together once the burst of results it is reading ends.
  Outbox reader_outbox_;
  std::vector<uint64_t> reader_release_;

  std::mutex reap_mu_;
  std::mutex mu_;
  std::map<uint64_t, PendingBatch> pending_batches_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::promise<Status>> pending_loads_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> shared_loads_ ABSL_GUARDED_BY(mu_);  // loaded, mapping shared weights
  std::map<uint64_t, std::promise<StatusOr<SharedWeightsHandle>>> pending_exports_
      ABSL_GUARDED_BY(mu_);
  uint64_t next_export_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::string exit_description_ ABSL_GUARDED_BY(mu_);
  bool exited_ ABSL_GUARDED_BY(mu_) = false;
  bool reaped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tessera::server
