#include "tessera/dispatch/model_queue.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <limits>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"
#include "tessera/common/thread_name.h"

namespace tessera::dispatch {

uint64_t ShapeKey(const Request& request, bool leading_batch_dim, const std::vector<bool>& ragged) {
  uint64_t key = 0;
  for (size_t k = 0; k < request.inputs.size(); ++k) {
    if (k < ragged.size() && ragged[k]) continue;
    const TensorView& input = request.inputs[k];
    if (IsAbsent(input)) {  // no rank is this large: apart from any given shape
      key = absl::HashOf(key, std::numeric_limits<size_t>::max());
      continue;
    }
    size_t first = leading_batch_dim && !input.shape.empty() ? 1 : 0;
    for (size_t i = first; i < input.shape.size(); ++i) {
      key = absl::HashOf(key, input.shape[i]);
    }
    key = absl::HashOf(key, input.shape.size());
  }
  return key;
}

namespace {

Lane InstancesLane(std::vector<std::unique_ptr<BatchRunner>> runners) {
  Lane lane;
  lane.plan.label = "instances";
  for (auto& runner : runners) lane.runners.push_back(std::shared_ptr<BatchRunner>(std::move(runner)));
  return lane;
}

}  // namespace

ModelQueue::ModelQueue(ModelQueueOptions options, std::vector<std::unique_ptr<BatchRunner>> runners,
                       std::shared_ptr<ModelStats> stats, const Clock* clock)
    : ModelQueue(std::move(options), InstancesLane(std::move(runners)), std::move(stats), clock) {}

ModelQueue::ModelQueue(ModelQueueOptions options, Lane lane, std::shared_ptr<ModelStats> stats,
                       const Clock* clock)
    : options_(std::move(options)),
      stats_(std::move(stats)),
      clock_(clock ? clock : &default_clock_),
      batched_(options_.policy.batching && options_.policy.max_batch_size > 0),
      limits_levels_(options_.max_queue_size > 0 || !options_.max_queue_size_by_level.empty()) {
  if (Status valid = ValidateLane(lane, options_.model_label); !valid.ok()) {
    // The callers validate configs first; never run a lane whose workers do not match.
    spdlog::error("{}; its workers take batches without sizes", valid.message());
    lane.worker_batch_sizes.clear();
  }
  LanePtr state = MakeLane(std::move(lane));
  std::lock_guard lock(mu_);
  StartWorkers(state);
  lanes_.push_back(std::move(state));
}

ModelQueue::~ModelQueue() { Shutdown(); }

ModelQueue::LanePtr ModelQueue::MakeLane(Lane lane) {
  auto state = std::make_shared<LaneState>();
  state->plan = std::move(lane.plan);
  if (state->plan.weight <= 0) state->plan.weight = 1;
  state->runners = std::move(lane.runners);
  for (int64_t size : lane.worker_batch_sizes) {
    SizedWorkerState worker;
    worker.batch_size = size;
    state->sized.push_back(std::move(worker));
  }
  return state;
}

void ModelQueue::StartWorkers(const LanePtr& lane) {
  if (!lane->sized.empty()) {
    for (size_t i = 0; i < lane->runners.size(); ++i) {
      lane->workers.emplace_back([this, lane, i] { SizedWorkerLoop(lane, i); });
    }
    return;
  }
  for (const auto& runner : lane->runners) {
    // A duty-cycle round is one batch at a time by the plan's arithmetic (seed 001 §2.4).
    const int depth = lane->plan.duty_cycle ? 1 : runner->max_in_flight();
    if (depth > 1) {
      auto pipe = std::make_unique<PipeState>();
      pipe->runner = runner.get();
      pipe->depth = depth;
      pipe->try_submit = runner->supports_try_submit();
      PipeState* p = pipe.get();
      lane->pipes.push_back(std::move(pipe));
      lane->workers.emplace_back([this, lane, p] { PipelinedWorkerLoop(lane, p); });
    } else {
      lane->workers.emplace_back([this, lane, r = runner.get()] { WorkerLoop(lane, r); });
    }
  }
}

ModelQueue::LanePtr ModelQueue::Route() {
  if (lanes_.size() == 1) return lanes_.front();
  // Smooth weighted round robin: every lane gains its weight, the richest is chosen and pays the
  // total, so a 3:1 split interleaves A A B A ... instead of sending bursts.
  double total = 0;
  LanePtr chosen;
  for (const LanePtr& lane : lanes_) {
    lane->wrr_current += lane->plan.weight;
    total += lane->plan.weight;
    if (!chosen || lane->wrr_current > chosen->wrr_current) chosen = lane;
  }
  chosen->wrr_current -= total;
  return chosen;
}

Status ModelQueue::Enqueue(std::unique_ptr<Request>&& request) {
  return EnqueueImpl(std::move(request), /*admitted=*/false);
}

Status ModelQueue::EnqueueAdmitted(std::unique_ptr<Request>&& request) {
  return EnqueueImpl(std::move(request), /*admitted=*/true);
}

Status ModelQueue::EnqueueImpl(std::unique_ptr<Request>&& request, bool admitted) {
  const uint64_t key = ShapeKey(*request, batched_, options_.ragged_inputs);
  auto refused = [this] {
    return absl::AbortedError(
        absl::StrCat("model '", options_.model_label, "' is not accepting requests (unloading)"));
  };
  std::unique_lock lock(mu_);
  if (stopping_ || (!accepting_ && !admitted)) return refused();
  // Counted only when some level has a limit: a model without one pays no map per request.
  size_t* level_queued = limits_levels_ ? &queued_by_level_[request->priority] : nullptr;
  if (level_queued != nullptr && !admitted) {
    auto limit_at = options_.max_queue_size_by_level.find(request->priority);
    const uint32_t limit = limit_at == options_.max_queue_size_by_level.end()
                               ? options_.max_queue_size
                               : limit_at->second;
    if (limit > 0 && *level_queued >= limit) {
      return absl::UnavailableError(absl::StrCat(
          "queue of model '", options_.model_label, "' is full (max_queue_size ", limit,
          request->priority > 0 ? absl::StrCat(" at priority level ", request->priority) : "",
          ")"));
    }
  }
  LanePtr lane = Route();
  // A single-runner lane copies the inputs into its runner's pool now, off the batch's critical
  // path. Under the lock on purpose: slots are then taken in queue order, so a batch is a
  // contiguous run of them (out-of-order slots would make the runner gather instead); a copy
  // costs microseconds (~1.4 µs for a 12 KB request).
  // A multi-granularity lane stages into its first worker's pool region, which all its workers
  // read from: a worker's batch is the next consecutive run of the queue, so of the pool too.
  if (lane->runners.size() == 1 || !lane->sized.empty()) lane->runners.front()->Stage(*request);
  // Behind every request of its level or a higher one (a lower number): arrival order within a
  // level. Without priority levels every request has 0 and this is push_back.
  auto at = lane->queue.end();
  while (at != lane->queue.begin() && std::prev(at)->request->priority > request->priority) --at;
  lane->queue.insert(at, Queued{std::move(request), key});
  ++queued_;
  if (level_queued != nullptr) ++*level_queued;
  // A pipelined runner with room takes a ready submission from this thread: waking its worker
  // for it would cost a context switch per request.
  // Runners at their limit need nobody: the thread that gets their next result takes the queue.
  PipeState* ready_pipe = nullptr;
  std::vector<Taken> ready;
  bool wake_worker = lane->pipes.empty();  // other lanes' workers take every batch themselves
  for (const auto& pipe : lane->pipes) {
    if (!pipe->try_submit) {
      wake_worker = true;
      continue;
    }
    if (pipe->in_flight >= pipe->depth) continue;
    ready = TakeReadyLocked(*lane, *pipe);
    if (!ready.empty()) {
      ready_pipe = pipe.get();
    } else {
      WakeForRuleLocked(*lane, *pipe);  // the batching rule says wait: the worker waits it out
    }
    break;
  }
  lock.unlock();
  stats_->RecordArrival();  // also counts it pending: one lock per request, not two
  if (wake_worker) lane->cv.notify_one();  // on a multi-granularity lane it hands out for all
  if (ready_pipe != nullptr) Launch(lane, ready_pipe, std::move(ready), /*may_wait=*/false);
  return absl::OkStatus();
}

void ModelQueue::StopAccepting() {
  std::lock_guard lock(mu_);
  accepting_ = false;
}

bool ModelQueue::IdleLocked() const { return queued_ == 0 && running_batches_ == 0; }

bool ModelQueue::WaitIdle(int64_t timeout_ms) {
  std::unique_lock lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [this] { return IdleLocked(); });
}

void ModelQueue::Shutdown(const std::string& reason) {
  std::lock_guard lifecycle(lifecycle_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  std::vector<Queued> abandoned;
  std::vector<LanePtr> lanes;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    accepting_ = false;
    lanes = lanes_;
    for (const LanePtr& lane : lanes_) {
      for (Queued& queued : lane->queue) abandoned.push_back(std::move(queued));
      lane->queue.clear();
    }
    queued_ = 0;
    queued_by_level_.clear();
  }
  for (const LanePtr& lane : lanes) {
    WakeWorkers(*lane);
    for (std::thread& worker : lane->workers) worker.join();
    lane->workers.clear();
  }
  for (Queued& queued : abandoned) {
    stats_->AddPending(-1);
    uint64_t waited = clock_->NowNs() - queued.request->arrival_ns;
    stats_->RecordFailure("REJECTED", waited);
    queued.request->done(absl::UnavailableError(
        absl::StrCat("model '", options_.model_label, "': request abandoned: ", reason)));
  }
  idle_cv_.notify_all();
}

size_t ModelQueue::pending() const {
  std::lock_guard lock(mu_);
  return queued_;
}

BatchDecision ModelQueue::DecideLocked(LaneState& lane, uint64_t now) {
  // A request has >= 1 row, so more than max rows + 1 entries never matter to the decision.
  int64_t max_rows = lane.plan.duty_cycle ? lane.plan.duty.max_rows : options_.policy.max_batch_size;
  size_t scan = lane.queue.size();
  if (max_rows > 0) scan = std::min(scan, static_cast<size_t>(max_rows) + 1);
  std::vector<PendingRequest> pending;
  pending.reserve(scan);
  for (size_t i = 0; i < scan; ++i) {
    const Request& request = *lane.queue[i].request;
    pending.push_back(
        PendingRequest{request.batch_size, request.arrival_ns, lane.queue[i].shape_key});
  }
  if (lane.plan.duty_cycle) {
    return DecideDutyCycleBatch(pending, now, DutyBuildStart(lane, pending.front().arrival_ns),
                                lane.plan.duty);
  }
  return DecideBatch(pending, now, options_.policy);
}

ModelQueue::Taken ModelQueue::TakeBatch(LaneState& lane, std::unique_lock<std::mutex>& lock) {
  Taken taken;
  const uint64_t now = clock_->NowNs();
  const BatchDecision decision = DecideLocked(lane, now);
  if (decision.count == 0) {
    if (decision.wake_at_ns > now) {
      lane.cv.wait_for(lock, std::chrono::nanoseconds(decision.wake_at_ns - now));
    } else {
      lane.cv.wait(lock);
    }
    return taken;
  }
  return PopBatch(lane, decision.count, now);
}

uint64_t ModelQueue::DutyBuildStart(const LaneState& lane, uint64_t oldest_arrival_ns) const {
  uint64_t build_start = std::max(lane.last_dispatch_ns, oldest_arrival_ns);
  // A plan makes duty + latency ≤ SLO exactly (seed 001 §2.4), so a request that arrived as the
  // round began would finish right at its deadline, and any wake-up jitter would push it over.
  // Close the round early enough for the oldest request to finish with a guard to spare.
  const uint64_t run_ns = lane.plan.expected_run_ns;
  if (options_.slo_ns > 0 && run_ns > 0 && lane.plan.duty.duty_ns > 0) {
    const uint64_t guard_ns = std::min<uint64_t>(1'000'000, options_.slo_ns / 20);
    const uint64_t deadline = oldest_arrival_ns + options_.slo_ns;
    const uint64_t latest_start = deadline > run_ns + guard_ns ? deadline - run_ns - guard_ns : 0;
    if (latest_start < build_start + lane.plan.duty.duty_ns) {
      build_start = latest_start > lane.plan.duty.duty_ns ? latest_start - lane.plan.duty.duty_ns : 0;
    }
  }
  return build_start;
}

bool ModelQueue::TimedOut(const Request& request, uint64_t now) {
  return request.queue_timeout_ns > 0 && now > request.arrival_ns &&
         now - request.arrival_ns > request.queue_timeout_ns;
}

ModelQueue::Taken ModelQueue::PopBatch(LaneState& lane, size_t count, uint64_t now) {
  Taken taken;
  const bool may_drop = options_.slo_drop && options_.slo_ns > 0 && lane.plan.expected_run_ns > 0;
  for (size_t i = 0; i < count; ++i) {
    std::unique_ptr<Request> request = std::move(lane.queue.front().request);
    lane.queue.pop_front();
    if (limits_levels_) --queued_by_level_[request->priority];
    if ((request->cancelled && request->cancelled()) || TimedOut(*request, now) ||
        (may_drop &&
         MissesSlo(request->arrival_ns, now, options_.slo_ns, lane.plan.expected_run_ns))) {
      taken.dropped.push_back(std::move(request));
    } else {
      taken.batch.push_back(std::move(request));
    }
  }
  queued_ -= count;
  lane.last_dispatch_ns = now;
  return taken;
}

uint64_t ModelQueue::HandOutSized(LaneState& lane) {
  if (lane.queue.empty()) return 0;
  std::vector<SizedWorker> workers;
  int64_t largest = 0;
  for (const SizedWorkerState& worker : lane.sized) {
    workers.push_back(SizedWorker{worker.batch_size, !worker.busy});
    largest = std::max(largest, worker.batch_size);
  }
  // Every idle worker may take at most `largest` rows, so this many requests decide every handout.
  const size_t scan = std::min(lane.queue.size(), lane.sized.size() * (static_cast<size_t>(largest) + 1));
  std::vector<PendingRequest> pending;
  pending.reserve(scan);
  for (size_t i = 0; i < scan; ++i) {
    const Request& request = *lane.queue[i].request;
    pending.push_back(
        PendingRequest{request.batch_size, request.arrival_ns, lane.queue[i].shape_key});
  }
  const uint64_t now = clock_->NowNs();
  // The lane's normal rule, with the chosen worker's size as its row limit. Without dynamic
  // batching's queue delay a worker takes what is there at once (E²bird never waits to fill one).
  BatchRule rule = [&](const std::vector<PendingRequest>& window, int64_t max_rows) {
    if (lane.plan.duty_cycle) {
      DutyCyclePolicy duty = lane.plan.duty;
      duty.max_rows = max_rows;
      return DecideDutyCycleBatch(window, now, DutyBuildStart(lane, window.front().arrival_ns), duty);
    }
    BatchPolicyOptions policy;
    policy.batching = true;
    policy.max_batch_size = max_rows;
    policy.max_queue_delay_ns = options_.policy.batching ? options_.policy.max_queue_delay_ns : 0;
    return DecideBatch(window, now, policy);
  };
  SizedDecision decision = DecideSizedBatches(pending, workers, rule);
  for (const SizedHandout& handout : decision.handouts) {
    SizedWorkerState& worker = lane.sized[handout.worker];
    worker.handed = PopBatch(lane, handout.count, now);
    worker.busy = true;
    ++running_batches_;  // counted from the handout, so WaitIdle never sees it as neither
  }
  if (!decision.handouts.empty()) lane.cv.notify_all();  // wake the workers handed a batch
  return decision.wake_at_ns;
}

void ModelQueue::Drop(std::vector<std::unique_ptr<Request>> dropped, const LanePlan& plan) {
  const uint64_t now = clock_->NowNs();
  for (const auto& request : dropped) {
    const uint64_t waited = now - request->arrival_ns;
    if (request->cancelled && request->cancelled()) {
      // Nobody waits for this answer; it is sent for the callback's bookkeeping.
      stats_->RecordFailure("CANCELED", waited);
      request->done(absl::CancelledError(
          absl::StrFormat("model '%s': request cancelled by the client while queued (%.1f ms)",
                          options_.model_label, waited / 1e6)));
      continue;
    }
    if (TimedOut(*request, now)) {
      stats_->RecordFailure("REJECTED", waited);
      request->done(absl::UnavailableError(absl::StrFormat(
          "model '%s': request timeout expired: queued %.1f ms, its queue timeout is %.1f ms "
          "(dynamic_batching.default_queue_policy, or the request's timeout parameter)",
          options_.model_label, waited / 1e6, request->queue_timeout_ns / 1e6)));
      continue;
    }
    stats_->RecordSloDrop(waited);
    request->done(absl::UnavailableError(absl::StrFormat(
        "model '%s': request dropped: it can no longer meet its SLO of %.1f ms (queued %.1f ms; "
        "a batch on %s takes %.1f ms)",
        options_.model_label, options_.slo_ns / 1e6, waited / 1e6, plan.label,
        plan.expected_run_ns / 1e6)));
  }
}

void ModelQueue::WorkerLoop(LanePtr lane, BatchRunner* runner) {
  SetCurrentThreadName("ts-batcher");
  std::unique_lock lock(mu_);
  while (!stopping_ && !lane->retired) {
    if (lane->queue.empty()) {
      lane->cv.wait(lock);
      continue;
    }
    Taken taken = TakeBatch(*lane, lock);
    if (taken.batch.empty() && taken.dropped.empty()) continue;
    ++running_batches_;
    const bool more_waiting = !lane->queue.empty();
    lock.unlock();
    if (more_waiting) lane->cv.notify_one();  // another idle runner of the lane may take the rest
    stats_->AddPending(-static_cast<int64_t>(taken.batch.size() + taken.dropped.size()));
    if (!taken.dropped.empty()) Drop(std::move(taken.dropped), lane->plan);
    if (!taken.batch.empty()) RunBatch(runner, std::move(taken.batch));
    lock.lock();
    --running_batches_;
    if (IdleLocked()) idle_cv_.notify_all();
  }
}

namespace {

// Set while this thread starts a submission, so that a result delivered inside that call (a
// runner that fails at once) does not start the next submission from the same stack: the worker
// takes it instead, and a run of failures cannot recurse through the whole queue.
thread_local bool starting_submission = false;

}  // namespace

std::vector<ModelQueue::Taken> ModelQueue::TakeUnbatchedLocked(LaneState& lane) {
  // Requests of one submission of an unbatched lane: enough to amortise a round trip, few enough
  // that the first answers are not held up behind many.
  constexpr size_t kMaxUnbatchedPerSubmission = 32;
  // The lane's other runners get their share of what is queued.
  const size_t share = (lane.queue.size() + lane.runners.size() - 1) / lane.runners.size();
  const size_t count = std::min(share, kMaxUnbatchedPerSubmission);
  const uint64_t now = clock_->NowNs();
  std::vector<Taken> taken;
  while (!lane.queue.empty() && taken.size() < count) taken.push_back(PopBatch(lane, 1, now));
  return taken;
}

std::vector<ModelQueue::Taken> ModelQueue::TakeReadyLocked(LaneState& lane, PipeState& pipe) {
  std::vector<Taken> taken;
  if (pipe.in_flight >= pipe.depth || lane.queue.empty() || lane.retired || stopping_) return taken;
  if (batched_) {
    const uint64_t now = clock_->NowNs();
    const BatchDecision decision = DecideLocked(lane, now);
    if (decision.count == 0) return taken;  // the worker waits out the queue delay
    taken.push_back(PopBatch(lane, decision.count, now));
  } else {
    taken = TakeUnbatchedLocked(lane);
  }
  ++pipe.in_flight;
  ++running_batches_;
  return taken;
}

void ModelQueue::PipelinedWorkerLoop(LanePtr lane, PipeState* pipe) {
  SetCurrentThreadName("ts-batcher");
  PipeState& me = *pipe;
  std::unique_lock lock(mu_);
  while (true) {
    if (!me.handoff.empty()) {
      // Taken by a thread that could not start it; it left the queue, so it runs even when the
      // lane retired or the queue stops.
      std::vector<Taken> taken = std::move(me.handoff.front());
      me.handoff.pop_front();
      lock.unlock();
      Launch(lane, pipe, std::move(taken), /*may_wait=*/true);
      lock.lock();
      continue;
    }
    if (stopping_ || lane->retired) break;
    if (me.in_flight >= me.depth) {
      me.capacity_cv.wait(lock);
      continue;
    }
    if (lane->queue.empty()) {
      lane->cv.wait(lock);
      continue;
    }
    std::vector<Taken> taken;
    if (batched_) {
      Taken batch = TakeBatch(*lane, lock);  // may wait for the queue delay; then decide again
      if (batch.batch.empty() && batch.dropped.empty()) continue;
      taken.push_back(std::move(batch));
    } else {
      taken = TakeUnbatchedLocked(*lane);
    }
    ++me.in_flight;
    ++running_batches_;
    const bool more_waiting = !lane->queue.empty();
    lock.unlock();
    if (more_waiting) lane->cv.notify_one();  // another idle runner of the lane may take the rest
    Launch(lane, pipe, std::move(taken), /*may_wait=*/true);
    lock.lock();
  }
  // Retired or stopping: what was submitted still finishes here before the worker is joined
  // (FinishSubmission starts nothing new on a retired lane or a stopping queue).
  while (true) {
    me.capacity_cv.wait(lock, [&] { return me.in_flight == 0 || !me.handoff.empty(); });
    if (me.handoff.empty()) break;
    std::vector<Taken> taken = std::move(me.handoff.front());
    me.handoff.pop_front();
    lock.unlock();
    Launch(lane, pipe, std::move(taken), /*may_wait=*/true);
    lock.lock();
  }
}

void ModelQueue::Launch(const LanePtr& lane, PipeState* pipe, std::vector<Taken> taken,
                        bool may_wait) {
  size_t requests = 0;
  std::vector<std::unique_ptr<Request>> dropped;
  auto batches = std::make_shared<std::vector<std::vector<std::unique_ptr<Request>>>>();
  for (Taken& t : taken) {
    requests += t.batch.size() + t.dropped.size();
    for (auto& request : t.dropped) dropped.push_back(std::move(request));
    if (!t.batch.empty()) batches->push_back(std::move(t.batch));
  }
  const size_t dropped_count = dropped.size();
  stats_->AddPending(-static_cast<int64_t>(requests));
  if (!dropped.empty()) Drop(std::move(dropped), lane->plan);
  const bool was_starting = starting_submission;
  starting_submission = true;
  if (batches->empty()) {
    FinishSubmission(lane, pipe);
    starting_submission = was_starting;
    return;
  }

  BatchRunner* runner = pipe->runner;
  const uint64_t start_ns = clock_->NowNs();
  auto remaining = std::make_shared<std::atomic<size_t>>(batches->size());
  std::vector<std::vector<const Request*>> views(batches->size());
  std::vector<BatchOutcomeCallback> done;
  done.reserve(batches->size());
  for (size_t i = 0; i < batches->size(); ++i) {
    for (const auto& request : (*batches)[i]) views[i].push_back(request.get());
    // The submission is finished when its last batch is; then its place may take another.
    done.push_back([this, lane, pipe, batches, i, start_ns, remaining](BatchOutcome outcome) {
      CompleteBatch(*pipe->runner, (*batches)[i], start_ns, std::move(outcome));
      (*batches)[i].clear();  // frees the requests (and their pool slots) now
      if (remaining->fetch_sub(1) == 1) FinishSubmission(lane, pipe);
    });
  }
  bool started = true;
  if (may_wait) {
    runner->Submit(views, std::move(done));
  } else {
    started = runner->TrySubmit(views, done);
  }
  starting_submission = was_starting;
  if (started) return;

  // Not started and no callback ran: the requests go back to being one submission, for the worker.
  std::vector<Taken> back;
  for (auto& batch : *batches) back.push_back(Taken{std::move(batch), {}});
  stats_->AddPending(static_cast<int64_t>(requests - dropped_count));
  {
    std::lock_guard lock(mu_);
    pipe->handoff.push_back(std::move(back));
  }
  pipe->capacity_cv.notify_one();
  lane->cv.notify_all();  // the worker may be waiting for an arrival instead
}

void ModelQueue::FinishSubmission(const LanePtr& lane, PipeState* pipe) {
  std::vector<Taken> next;
  {
    std::lock_guard lock(mu_);
    --pipe->in_flight;
    --running_batches_;
    // The thread with the result starts the next ready submission (no worker wake-up); not from
    // inside a submission's own start, nor once the lane retired or the queue stops.
    if (pipe->try_submit && !starting_submission) next = TakeReadyLocked(*lane, *pipe);
    if (next.empty()) {
      // Notified under the lock: once it is released the worker may return, and with it the lane.
      if (!pipe->try_submit || starting_submission || stopping_ || lane->retired) {
        pipe->capacity_cv.notify_one();
        lane->cv.notify_all();  // the worker may be waiting for an arrival instead
      } else {
        WakeForRuleLocked(*lane, *pipe);
      }
      if (IdleLocked()) idle_cv_.notify_all();
      return;
    }
  }
  Launch(lane, pipe, std::move(next), /*may_wait=*/false);
}

void ModelQueue::WakeWorkers(LaneState& lane) {
  lane.cv.notify_all();
  // A pipelined worker at its limit waits on its pipe, which finishing submissions notify only
  // when the worker has something to do.
  for (const auto& pipe : lane.pipes) pipe->capacity_cv.notify_all();
}

void ModelQueue::WakeForRuleLocked(LaneState& lane, PipeState& pipe) {
  // Requests wait while the pipe has room: only the batching rule's delay holds them, and only
  // the worker waits one out.
  if (lane.queue.empty() || pipe.in_flight >= pipe.depth) return;
  pipe.capacity_cv.notify_one();
  lane.cv.notify_all();
}

void ModelQueue::SizedWorkerLoop(LanePtr lane, size_t index) {
  SetCurrentThreadName("ts-batcher");
  BatchRunner* runner = lane->runners[index].get();
  SizedWorkerState& me = lane->sized[index];  // the vector never changes size
  std::unique_lock lock(mu_);
  while (true) {
    if (me.handed) {
      // A handed batch runs even when the lane retired or the queue stops: it left the queue.
      Taken taken = std::move(*me.handed);
      me.handed.reset();
      lock.unlock();
      stats_->AddPending(-static_cast<int64_t>(taken.batch.size() + taken.dropped.size()));
      if (!taken.dropped.empty()) Drop(std::move(taken.dropped), lane->plan);
      if (!taken.batch.empty()) {
        stats_->RecordWorkerBatch(me.batch_size);
        RunBatch(runner, std::move(taken.batch));
      }
      lock.lock();
      me.busy = false;
      --running_batches_;
      if (IdleLocked()) idle_cv_.notify_all();
      continue;
    }
    if (stopping_ || lane->retired) break;
    const uint64_t wake_at = HandOutSized(*lane);
    if (me.handed) continue;
    const uint64_t now = clock_->NowNs();
    if (wake_at > now) {
      lane->cv.wait_for(lock, std::chrono::nanoseconds(wake_at - now));
    } else {
      lane->cv.wait(lock);
    }
  }
}

void ModelQueue::RunBatch(BatchRunner* runner, std::vector<std::unique_ptr<Request>> batch) {
  const uint64_t start_ns = clock_->NowNs();
  std::vector<const Request*> views;
  for (const auto& request : batch) views.push_back(request.get());
  CompleteBatch(*runner, batch, start_ns, runner->Run(views));
}

void ModelQueue::CompleteBatch(const BatchRunner& runner,
                               const std::vector<std::unique_ptr<Request>>& batch,
                               uint64_t start_ns, BatchOutcome result) {
  const uint64_t end_ns = clock_->NowNs();
  int64_t rows = 0;
  for (const auto& request : batch) rows += request->batch_size;
  if (result.ok() && result->size() != batch.size()) {
    result = absl::InternalError(absl::StrCat(runner.Describe(), " returned ", result->size(),
                                              " responses for ", batch.size(), " requests"));
  }
  if (result.ok()) {
    stats_->RecordExecution(rows, result->front().timing);
    for (size_t i = 0; i < batch.size(); ++i) {
      Response& response = (*result)[i];
      response.timing.queue_ns += start_ns - batch[i]->arrival_ns;  // plus the runner's own
      response.batch_size = rows;
      stats_->RecordSuccess(batch[i]->batch_size, end_ns - batch[i]->arrival_ns, response.timing);
      batch[i]->done(std::move(response));
    }
  } else {
    spdlog::warn("batch of {} request(s) on {} failed: {}", batch.size(), runner.Describe(),
                 result.status().message());
    for (const auto& request : batch) {
      stats_->RecordFailure("BACKEND", end_ns - request->arrival_ns);
      request->done(result.status());
    }
  }
}

}  // namespace tessera::dispatch
