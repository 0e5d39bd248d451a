// One model version's request queue and its batch workers.
//
// Requests are enqueued by the frontend; one worker thread per instance (a BatchRunner, e.g. a model
// instance in an executor process) takes batches chosen by DecideBatch and runs them, so at most one
// batch runs per instance at a time. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "tessera/common/clock.h"
#include "tessera/common/status.h"
#include "tessera/dispatch/batch_policy.h"
#include "tessera/dispatch/model_stats.h"
#include "tessera/dispatch/request.h"

namespace tessera::dispatch {

// Runs one batch on one instance. Called by a single worker thread per runner.
class BatchRunner {
 public:
  virtual ~BatchRunner() = default;
  // `batch` holds >= 1 requests with equal non-batch shapes and total rows <= max batch size.
  // Returns one Response per request, in order (outputs split per request and filtered to the
  // requested names), or one error that fails the whole batch. Responses' timing has compute_*
  // filled; queue_ns is filled by the queue.
  virtual StatusOr<std::vector<Response>> Run(const std::vector<const Request*>& batch) = 0;
  // For log and error messages: "mlp/1 on executor 0".
  virtual std::string Describe() const = 0;
  // Called when `request` is routed to this runner ahead of its batch (planned lanes only), on the
  // enqueuing thread. May copy the inputs into the runner's input pool and set request.staged;
  // must not fail the request: with no pool space it leaves it unstaged and Run gathers instead.
  virtual void Stage(Request& /*request*/) {}
};

struct ModelQueueOptions {
  std::string model_label;  // "mlp/1", for messages
  BatchPolicyOptions policy;
  uint32_t max_queue_size = 0;  // 0 = unbounded
};

class ModelQueue {
 public:
  ModelQueue(ModelQueueOptions options, std::vector<std::unique_ptr<BatchRunner>> runners,
             std::shared_ptr<ModelStats> stats, const Clock* clock = nullptr);
  ~ModelQueue();  // Shutdown()

  ModelQueue(const ModelQueue&) = delete;
  ModelQueue& operator=(const ModelQueue&) = delete;

  // Takes the request (moving from `request`) and later calls `done` exactly once. On error the
  // request is left with the caller and `done` is never called: UNAVAILABLE when the queue is full,
  // ABORTED when the queue stopped accepting (its version is being replaced or unloaded; the
  // caller may look the model up again and retry on the new version).
  Status Enqueue(std::unique_ptr<Request>&& request);

  // Stops taking new requests; queued and running ones still complete.
  void StopAccepting();
  // Blocks until nothing is queued or running, or until `timeout_ms`; true when idle.
  bool WaitIdle(int64_t timeout_ms);
  // Stops the workers; requests still queued fail with UNAVAILABLE naming `reason`.
  void Shutdown(const std::string& reason = "model unloaded");

  size_t pending() const;

 private:
  void WorkerLoop(BatchRunner* runner);
  std::vector<std::unique_ptr<Request>> TakeBatch(std::unique_lock<std::mutex>& lock)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ModelQueueOptions options_;
  const std::vector<std::unique_ptr<BatchRunner>> runners_;
  const std::shared_ptr<ModelStats> stats_;
  SteadyClock default_clock_;
  const Clock* clock_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // new request, stop, or a wake time passed
  std::condition_variable idle_cv_;  // a batch finished or the queue emptied
  struct Queued {
    std::unique_ptr<Request> request;
    uint64_t shape_key = 0;
  };
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  int running_batches_ ABSL_GUARDED_BY(mu_) = 0;
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

// Hash of the non-batch dims of every input: requests with equal keys can share a batch.
uint64_t ShapeKey(const Request& request, bool leading_batch_dim);

}  // namespace tessera::dispatch
