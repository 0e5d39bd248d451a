// The executor side of the server <-> executor protocol (docs/executor-protocol.md): owns the model
// instances of one device partition, runs batches whose inputs the server put in the input ring and
// returns outputs through the output ring.
//
// Threads: Run() is the receive loop (the caller's thread); one loader thread runs LoadModel
// requests one after another; each loaded instance has a worker thread that runs its batches in
// arrival order, so a slow model never blocks the receive loop or the other instances. Replies from
// all threads go through the ControlChannel, whose Send is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "executor/input_mirror.h"
#include "tessera/common/status.h"
#include "tessera/engine/engine.h"
#include "tessera/executor.pb.h"
#include "tessera/ipc/control_channel.h"
#include "tessera/ipc/ring_allocator.h"
#include "tessera/ipc/shared_memory.h"

namespace tessera::executor {

// Makes an engine model for one LoadModel request; `shared_weights` is set when the request
// carries another executor's weights to map (engine::ModelOptions::import_weights). Called on the
// loader thread only.
using ModelLoader = std::function<StatusOr<std::unique_ptr<engine::Model>>(
    const ipc::LoadModel& request, const engine::WeightImport* shared_weights)>;

struct ExecutorOptions {
  int executor_id = 0;
  std::string device = "cpu";  // reported in Hello
  // Longest a finished batch waits for output-ring space (freed by ReleaseOutputs) before it is
  // answered with an error, in milliseconds.
  int64_t output_wait_timeout_ms = 10000;
  // Alignment of every output tensor inside the output ring, in bytes.
  uint64_t output_alignment = 256;
  // A batch for an idle instance whose recent runs took at most this long runs on the receive
  // thread itself: waking the instance's thread and switching to it costs more than such a batch.
  // Longer runs keep their thread, so a slow model never holds up other instances' messages.
  // 0 = never. tessera-executor sets it for CPU executors only (not checked on a GPU yet).
  uint64_t inline_run_max_ns = 0;
  // The limit tessera-executor put on this process's memory (MiB, 0 = none): named in the errors
  // of loads and batches that run out of memory.
  int64_t memory_limit_mb = 0;
  // Required. tessera-executor passes one that calls engine::LoadOnnxModel; tests pass fakes.
  ModelLoader loader;
  // Optional: makes the input mirror over the input ring (input_mirror.h). When it fails the
  // executor serves from the ring and logs why; the server announces staged inputs only to an
  // executor that has a mirror (Hello.stages_inputs).
  std::function<StatusOr<std::unique_ptr<InputMirror>>(void* ring, uint64_t bytes)>
      make_input_mirror;
};

class Executor {
 public:
  // Takes ownership of the connected channel and of both mapped rings (opened, not created: the
  // server owns their names).
  static StatusOr<std::unique_ptr<Executor>> Create(
      ExecutorOptions options, std::unique_ptr<ipc::ControlChannel> channel,
      std::unique_ptr<ipc::SharedMemoryRegion> input_ring,
      std::unique_ptr<ipc::SharedMemoryRegion> output_ring);

  // Stops (as Stop()) and joins every thread if Run() was never called or has returned.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Sends Hello, then serves messages until Shutdown or end of stream; before returning, finishes
  // the running load and every queued batch. OK on Shutdown or peer EOF; an error if Hello could
  // not be sent or the stream was corrupt. Call once.
  Status Run();

  // Thread-safe: makes Run() return soon (the channel is shut down; replies still pending are
  // lost).
  void Stop();

 private:
  struct Instance;

  Executor(ExecutorOptions options, std::unique_ptr<ipc::ControlChannel> channel,
           std::unique_ptr<ipc::SharedMemoryRegion> input_ring,
           std::unique_ptr<ipc::SharedMemoryRegion> output_ring);

  // Receive-loop handlers. They never wait on a model; HandleInfer may run a short batch itself
  // (ExecutorOptions::inline_run_max_ns).
  void HandleLoad(const ipc::LoadModel& load);
  void HandleUnload(const ipc::UnloadModel& unload);
  void HandleInfer(const ipc::InferBatch& infer);
  void HandleRelease(const ipc::ReleaseOutputs& release);
  void HandleInputsStaged(const ipc::InputsStaged& staged);
  // Answers with the instance's exported weights (and their descriptor) or why not.
  void HandleExportWeights(const ipc::ExportWeights& request);

  void LoaderLoop();
  // "; this executor may allocate at most N MiB (executors.memory_limit_mb)", or "" without a
  // limit: appended to the out-of-memory errors of loads and batches.
  std::string MemoryLimitNote() const;
  void InstanceLoop(Instance* instance);
  // Runs one batch on the receive thread (the instance is marked busy); its result is held in
  // inline_results_ until the burst of buffered frames is handled.
  void RunInline(Instance& instance, const ipc::InferBatch& infer);
  void SendInlineResults();
  // Runs one batch on `instance` and builds the BatchResult (ok or not). With `no_output_space`
  // set, it does not wait for output-ring space: lacking it, it sets *no_output_space and the
  // result is not ok.
  ipc::BatchResult RunBatch(Instance& instance, const ipc::InferBatch& infer,
                            bool* no_output_space = nullptr);
  // Reserves output-ring ranges for all of `byte_sizes` at once (all or nothing, so two batches
  // waiting for space never hold half of it each), waiting up to output_wait_timeout_ms; or, with
  // `no_space` set, not at all (then an empty vector and *no_space = true when the ring is full).
  StatusOr<std::vector<uint64_t>> AllocateOutputs(uint64_t batch_id,
                                                  const std::vector<uint64_t>& byte_sizes,
                                                  bool* no_space = nullptr);
  // Stops the loader and every instance and joins their threads.
  void Drain();
  void Send(const ipc::ControlMessage& message);
  void SendLoadResult(const std::string& key, const Status& status, uint64_t weight_bytes,
                      const engine::WeightImportOutcome& sharing = {});

  const ExecutorOptions options_;
  const std::unique_ptr<ipc::ControlChannel> channel_;
  const std::unique_ptr<ipc::SharedMemoryRegion> input_ring_;
  const std::unique_ptr<ipc::SharedMemoryRegion> output_ring_;

  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Instance>> instances_ ABSL_GUARDED_BY(mu_);
  // Unloaded instances whose worker may still be finishing batches; joined later.
  std::vector<std::unique_ptr<Instance>> retired_ ABSL_GUARDED_BY(mu_);
  struct QueuedLoad {
    ipc::LoadModel request;
    UniqueFd shared_weights;  // the descriptor that came with request.shared_weights
  };
  std::deque<QueuedLoad> load_queue_ ABSL_GUARDED_BY(mu_);
  // Keys queued or being loaded; and those of them unloaded before their load finished.
  std::set<std::string> loading_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> cancelled_loads_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread loader_thread_;

  absl::Mutex out_mu_;
  ipc::RingAllocator out_ring_ ABSL_GUARDED_BY(out_mu_);
  // batch_id -> its output ranges, until ReleaseOutputs.
  std::unordered_map<uint64_t, std::vector<uint64_t>> batch_outputs_ ABSL_GUARDED_BY(out_mu_);
  // Set when draining: nobody will send ReleaseOutputs any more, so waiting for space is futile.
  bool out_closed_ ABSL_GUARDED_BY(out_mu_) = false;
  absl::CondVar out_space_;

  // Results of inline runs, held while more frames are buffered so that a burst of batches is
  // answered with one write (the instance threads do the same); receive thread only.
  std::vector<ipc::ControlMessage> inline_results_;
  uint64_t first_inline_result_ns_ = 0;

  // Staging runs on the receive thread, lookups on whichever thread runs the batch.
  absl::Mutex mirror_mu_;
  std::unique_ptr<InputMirror> mirror_ ABSL_GUARDED_BY(mirror_mu_);
  bool mirror_failed_ ABSL_GUARDED_BY(mirror_mu_) = false;  // a Stage error was logged
  std::atomic<uint64_t> mirrored_inputs_{0};

  std::atomic<bool> send_failed_{false};  // logged once; later failures are the same story
  bool ran_ = false;                      // Run() was called; only touched by the owner's thread
};

}  // namespace tessera::executor
