// One model version's request queue and its batch workers.
//
// Requests are enqueued by the frontend and routed to one of the version's lanes (weighted, when
// the plan spreads the model over several gpulets). Each lane has its own queue; one worker thread
// per runner (a BatchRunner: a model instance in an executor process) takes batches by the lane's
// rule — Triton's dynamic batcher (DecideBatch) or a planned gpulet's duty cycle
// (DecideDutyCycleBatch) — so one batch builds while one runs per runner. A runner that takes
// several submissions at once (pipelined) gets them from whichever thread finds one ready (the
// enqueuing thread, or the one with the previous result); its worker waits out queue delays. A lane whose runners
// have batch sizes (multi-granularity workers, E²bird) hands batches to its idle workers by
// DecideSizedBatches instead, largest fitting worker first, and they run concurrently. With slo_drop, a request
// that can no longer meet the model's SLO is answered UNAVAILABLE at dispatch instead of being run
// late. The lanes can be replaced while serving (ReplaceLanes). Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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

// One batch's outcome: a Response per request, in order, or one error for the whole batch.
using BatchOutcome = StatusOr<std::vector<Response>>;
using BatchOutcomeCallback = std::function<void(BatchOutcome)>;

// Runs batches on one instance. Run is called by the runner's worker thread; Submit and TrySubmit
// (pipelined runners) by the worker or by whichever thread finds a submission ready.
class BatchRunner {
 public:
  virtual ~BatchRunner() = default;
  // `batch` holds >= 1 requests with equal non-batch shapes and total rows <= max batch size.
  // Returns one Response per request, in order (outputs split per request and filtered to the
  // requested names), or one error that fails the whole batch. Responses' timing has compute_*
  // filled; queue_ns only a wait inside the runner (an executor's queue): the queue adds its own.
  virtual StatusOr<std::vector<Response>> Run(const std::vector<const Request*>& batch) = 0;
  // For log and error messages: "mlp/1 on executor 0".
  virtual std::string Describe() const = 0;
  // Called when `request` is routed to this runner ahead of its batch (single-runner lanes), on
  // the enqueuing thread with the queue locked (keep it short, never block). May copy the inputs into the runner's input pool and set request.staged;
  // must not fail the request: with no pool space it leaves it unstaged and Run gathers instead.
  virtual void Stage(Request& /*request*/) {}

  // How many submissions (see Submit) the runner takes before the first has finished. 1: the
  // queue calls Run and waits for it, so a batch is formed only when the runner is free. More:
  // the queue calls Submit and forms the next submission while earlier ones run, which hides the
  // hand-off to an executor process behind the running batch.
  virtual int max_in_flight() const { return 1; }
  // Starts `batches` in order, each one run of the model, and returns without waiting for them.
  // `done[i]` gets batch i's outcome exactly once, from any thread, possibly before Submit
  // returns. Only called when max_in_flight() > 1; this default runs them one by one.
  virtual void Submit(const std::vector<std::vector<const Request*>>& batches,
                      std::vector<BatchOutcomeCallback> done) {
    for (size_t i = 0; i < batches.size(); ++i) done[i](Run(batches[i]));
  }
  // Whether TrySubmit may start submissions. When true, the queue sends a submission from the
  // thread that finds it ready (the one that enqueued a request, or the one that received the
  // previous submission's result) instead of waking the runner's worker thread for it.
  virtual bool supports_try_submit() const { return false; }
  // Submit for threads that must not wait (gRPC threads, an executor's reader thread): starts
  // `batches` and returns true, or returns false having started nothing and called no `done`
  // when it could not start them at once (its executor is restarting); the worker then submits
  // them with Submit.
  virtual bool TrySubmit(const std::vector<std::vector<const Request*>>& /*batches*/,
                         std::vector<BatchOutcomeCallback>& /*done*/) {
    return false;
  }
};

struct ModelQueueOptions {
  std::string model_label;  // "mlp/1", for messages
  BatchPolicyOptions policy;  // the rules of lanes that have no duty cycle (Triton-like)
  // Requests one priority level may have queued (in every lane together); 0 = unbounded. Each level
  // counts its own, as Triton's per-level queues do; without levels every request is level 0.
  uint32_t max_queue_size = 0;
  std::map<uint32_t, uint32_t> max_queue_size_by_level = {};  // levels not at max_queue_size
  uint64_t slo_ns = 0;          // the model's latency SLO; 0 = none
  bool slo_drop = false;        // drop requests that can no longer meet slo_ns (see LanePlan)
  // By input index, the inputs whose shapes need not agree within a batch (Triton's
  // allow_ragged_batch: the model takes them flat). Empty = none.
  std::vector<bool> ragged_inputs = {};
};

// How one lane batches and how much of the model's traffic it takes.
struct LanePlan {
  // Share of the model's requests routed to this lane, by smooth weighted round robin over the
  // lanes (the plan's rate_rps on the gpulet). ≤ 0 counts as 1.
  double weight = 1;
  // true: rounds of a planned gpulet (DecideDutyCycleBatch); false: options.policy (DecideBatch).
  bool duty_cycle = false;
  DutyCyclePolicy duty;
  // Planned run time of one batch, for SLO-aware dropping; 0 = this lane never drops.
  uint64_t expected_run_ns = 0;
  std::string label;  // "gpulet 2 (cpu cores 0-1, 100 %)", for logs
};

// A lane: its own request queue and the runners (one worker thread each) that take batches from
// it. A planned gpulet is a lane with one runner; the Triton-like default is one lane with a runner
// per instance.
struct Lane {
  LanePlan plan;
  std::vector<std::shared_ptr<BatchRunner>> runners;
  // Multi-granularity workers: empty (the runners take batches by the lane's rule, each up to the
  // lane's row limit), or one batch size per runner, each ≥ 1 (E²bird's powers of two): every
  // batch then goes to one worker and holds at most its size in rows (DecideSizedBatches).
  std::vector<int64_t> worker_batch_sizes;
};

// What ReplaceLanes did, for the control loop's logs and metrics.
struct LaneSwap {
  // How long dispatching was held for the switch: routing changed and queued requests were moved
  // while no lane could take a batch (GSLICE's swap gap, seed 000 §4.6).
  uint64_t gap_ns = 0;
  size_t moved_requests = 0;  // queued in the old lanes, re-routed to the new ones
  uint64_t drain_ns = 0;      // until the old lanes' running batches finished
};

class ModelQueue {
 public:
  // One lane with `runners` under options.policy.
  ModelQueue(ModelQueueOptions options, std::vector<std::unique_ptr<BatchRunner>> runners,
             std::shared_ptr<ModelStats> stats, const Clock* clock = nullptr);
  // One lane as given (its plan.duty_cycle false: options.policy). The lane must pass ValidateLane.
  ModelQueue(ModelQueueOptions options, Lane lane, std::shared_ptr<ModelStats> stats,
             const Clock* clock = nullptr);
  ~ModelQueue();  // Shutdown()

  ModelQueue(const ModelQueue&) = delete;
  ModelQueue& operator=(const ModelQueue&) = delete;

  // Takes the request (moving from `request`) and later calls `done` exactly once. On error the
  // request is left with the caller and `done` is never called: UNAVAILABLE when the queue is full,
  // ABORTED when the queue stopped accepting (its version is being replaced or unloaded; the
  // caller may look the model up again and retry on the new version).
  Status Enqueue(std::unique_ptr<Request>&& request);
  // Enqueue for a request its caller accepted earlier and held back (a sequence's next request,
  // sequence_batcher.h): neither StopAccepting nor max_queue_size refuses it, so a drain answers
  // it; only a Shutdown queue does (ABORTED).
  Status EnqueueAdmitted(std::unique_ptr<Request>&& request);

  // Active/shadow switch (GSLICE §4.6): `lanes` (already loaded and warm) take over at a batch
  // boundary. New requests and every request still queued in the old lanes go to the new lanes;
  // batches already running on the old lanes finish there; then their workers exit. Blocks until
  // they have. No request fails because of a switch. INVALID_ARGUMENT for no lanes or a lane
  // without runners; FAILED_PRECONDITION after Shutdown.
  StatusOr<LaneSwap> ReplaceLanes(std::vector<Lane> lanes);
  // INVALID_ARGUMENT naming the lane when it has no runner or its worker_batch_sizes do not
  // match its runners (count, or a size < 1).
  static Status ValidateLane(const Lane& lane, const std::string& model_label);
  // The labels of the lanes serving now, in order.
  std::vector<std::string> LaneLabels() const;

  // Stops taking new requests; queued and running ones still complete.
  void StopAccepting();
  // Blocks until nothing is queued or running, or until `timeout_ms`; true when idle.
  bool WaitIdle(int64_t timeout_ms);
  // Stops the workers; requests still queued fail with UNAVAILABLE naming `reason`.
  void Shutdown(const std::string& reason = "model unloaded");

  size_t pending() const;

 private:
  Status EnqueueImpl(std::unique_ptr<Request>&& request, bool admitted);

  struct Queued {
    std::unique_ptr<Request> request;
    uint64_t shape_key = 0;
  };
  struct Taken {
    std::vector<std::unique_ptr<Request>> batch;
    std::vector<std::unique_ptr<Request>> dropped;  // missed their SLO
  };
  // A runner with max_in_flight() > 1 (pipelined): its submissions in flight. Guarded by mu_.
  struct PipeState {
    BatchRunner* runner = nullptr;
    int depth = 1;
    bool try_submit = false;  // runner->supports_try_submit()
    int in_flight = 0;        // submissions started (or handed to the worker) and not finished
    // Submissions a non-waiting thread took but the runner could not start at once (TrySubmit
    // false): the worker starts them with Submit.
    std::deque<std::vector<Taken>> handoff;
    // A submission finished or was handed off. The worker at its limit waits here, not on the
    // lane's cv: an arrival then wakes only workers that can take it.
    std::condition_variable capacity_cv;
  };
  // A multi-granularity lane's worker: its batch size and the batch handed to it.
  struct SizedWorkerState {
    int64_t batch_size = 1;
    bool busy = false;              // handed a batch, until it has run it
    std::optional<Taken> handed;    // set by HandOutSized, taken by the worker's thread
  };
  struct LaneState {
    LanePlan plan;
    std::vector<std::shared_ptr<BatchRunner>> runners;
    std::vector<SizedWorkerState> sized;  // one per runner for multi-granularity lanes, else empty
    std::vector<std::unique_ptr<PipeState>> pipes;  // one per pipelined runner, else empty
    std::deque<Queued> queue;
    std::condition_variable cv;  // a request arrived, the lane retired, or stop
    double wrr_current = 0;      // smooth weighted round robin state
    uint64_t last_dispatch_ns = 0;
    int running = 0;
    bool retired = false;
    std::vector<std::thread> workers;
  };

  using LanePtr = std::shared_ptr<LaneState>;  // shared with the lane's worker threads

  static LanePtr MakeLane(Lane lane);
  void StartWorkers(const LanePtr& lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  LanePtr Route() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerLoop(LanePtr lane, BatchRunner* runner);
  void SizedWorkerLoop(LanePtr lane, size_t index);
  Taken TakeBatch(LaneState& lane, std::unique_lock<std::mutex>& lock)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The lane's batching rule applied to what is queued now (the queue is not empty).
  BatchDecision DecideLocked(LaneState& lane, uint64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When the batch building now on a duty-cycle lane began (see TakeBatch).
  uint64_t DutyBuildStart(const LaneState& lane, uint64_t oldest_arrival_ns) const;
  // Pops the first `count` queued requests of `lane`, splitting off those that miss the SLO.
  Taken PopBatch(LaneState& lane, size_t count, uint64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `request` has outlived its queue timeout at `now`.
  static bool TimedOut(const Request& request, uint64_t now);
  // Hands batches to the idle workers of a multi-granularity lane (DecideSizedBatches); returns
  // when to decide again if nothing arrives (0 = only on arrival or a worker finishing).
  uint64_t HandOutSized(LaneState& lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The worker of a runner with max_in_flight() > 1: takes the next submission while earlier
  // ones run (unbatched lanes send every queued request, each its own batch, as one submission).
  // Threads that find a submission ready without waiting start it themselves (TakeReadyLocked,
  // Launch); the worker starts the rest: those a batching rule makes wait, and hand-offs.
  void PipelinedWorkerLoop(LanePtr lane, PipeState* pipe);
  // The submission `pipe` may start now without waiting, counted in flight; empty when the pipe
  // is full, the queue is empty, or the lane's batching rule says wait.
  std::vector<Taken> TakeReadyLocked(LaneState& lane, PipeState& pipe)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unbatched lanes: up to a share of what is queued, each request its own batch.
  std::vector<Taken> TakeUnbatchedLocked(LaneState& lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes every worker of `lane` wherever it waits (the lane retired or the queue stops).
  static void WakeWorkers(LaneState& lane);
  // Wakes `pipe`'s worker when requests wait although the pipe has room (the batching rule's
  // delay, which only the worker waits out).
  void WakeForRuleLocked(LaneState& lane, PipeState& pipe) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts a submission taken for `pipe` (counted in flight). `may_wait`: from the worker, which
  // calls Submit; otherwise TrySubmit, handing the submission to the worker when it refuses.
  void Launch(const LanePtr& lane, PipeState* pipe, std::vector<Taken> taken, bool may_wait);
  // A submission of `pipe` finished (on the thread that got its last result): frees its place and
  // starts the next ready submission from here.
  void FinishSubmission(const LanePtr& lane, PipeState* pipe);
  void RunBatch(BatchRunner* runner, std::vector<std::unique_ptr<Request>> batch);
  // Records `outcome` of `batch` (started at start_ns) and answers every request.
  void CompleteBatch(const BatchRunner& runner, const std::vector<std::unique_ptr<Request>>& batch,
                     uint64_t start_ns, BatchOutcome outcome);
  void Drop(std::vector<std::unique_ptr<Request>> dropped, const LanePlan& plan);
  bool IdleLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ModelQueueOptions options_;
  const std::shared_ptr<ModelStats> stats_;
  SteadyClock default_clock_;
  const Clock* clock_;
  const bool batched_;
  const bool limits_levels_;  // a queue limit applies to some level: queued_by_level_ is kept

  std::mutex lifecycle_mu_;  // serializes ReplaceLanes and Shutdown (both join workers)
  mutable std::mutex mu_;
  std::condition_variable idle_cv_;  // a batch finished or the queue emptied
  std::vector<LanePtr> lanes_ ABSL_GUARDED_BY(mu_);  // serving now
  bool shut_down_ = false;                          // guarded by lifecycle_mu_
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;  // over every lane
  std::map<uint32_t, size_t> queued_by_level_ ABSL_GUARDED_BY(mu_);  // the same, by priority level
  int running_batches_ ABSL_GUARDED_BY(mu_) = 0;
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

// Hash of the non-batch dims of every input but the `ragged` ones (by input index), and of which
// optional inputs are absent: requests with equal keys can share a batch.
uint64_t ShapeKey(const Request& request, bool leading_batch_dim,
                  const std::vector<bool>& ragged = {});

}  // namespace tessera::dispatch
