#include "tessera/dispatch/model_queue.h"

#include <chrono>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera::dispatch {

uint64_t ShapeKey(const Request& request, bool leading_batch_dim) {
  uint64_t key = 0;
  for (const TensorView& input : request.inputs) {
    size_t first = leading_batch_dim && !input.shape.empty() ? 1 : 0;
    for (size_t i = first; i < input.shape.size(); ++i) {
      key = absl::HashOf(key, input.shape[i]);
    }
    key = absl::HashOf(key, input.shape.size());
  }
  return key;
}

ModelQueue::ModelQueue(ModelQueueOptions options, std::vector<std::unique_ptr<BatchRunner>> runners,
                       std::shared_ptr<ModelStats> stats, const Clock* clock)
    : options_(std::move(options)),
      runners_(std::move(runners)),
      stats_(std::move(stats)),
      clock_(clock ? clock : &default_clock_) {
  workers_.reserve(runners_.size());
  for (const auto& runner : runners_) {
    workers_.emplace_back([this, r = runner.get()] { WorkerLoop(r); });
  }
}

ModelQueue::~ModelQueue() { Shutdown(); }

Status ModelQueue::Enqueue(std::unique_ptr<Request>&& request) {
  const bool batched = options_.policy.batching && options_.policy.max_batch_size > 0;
  uint64_t key = ShapeKey(*request, batched);
  {
    std::lock_guard lock(mu_);
    if (!accepting_ || stopping_) {
      return absl::AbortedError(
          absl::StrCat("model '", options_.model_label, "' is not accepting requests (unloading)"));
    }
    if (options_.max_queue_size > 0 && queue_.size() >= options_.max_queue_size) {
      return absl::UnavailableError(absl::StrCat("queue of model '", options_.model_label,
                                                 "' is full (max_queue_size ",
                                                 options_.max_queue_size, ")"));
    }
    queue_.push_back(Queued{std::move(request), key});
  }
  stats_->AddPending(1);
  work_cv_.notify_all();
  return absl::OkStatus();
}

void ModelQueue::StopAccepting() {
  std::lock_guard lock(mu_);
  accepting_ = false;
}

bool ModelQueue::WaitIdle(int64_t timeout_ms) {
  std::unique_lock lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [this] { return queue_.empty() && running_batches_ == 0; });
}

void ModelQueue::Shutdown(const std::string& reason) {
  std::deque<Queued> abandoned;
  {
    std::lock_guard lock(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
    accepting_ = false;
    abandoned.swap(queue_);
  }
  work_cv_.notify_all();
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
  workers_.clear();
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
  return queue_.size();
}

std::vector<std::unique_ptr<Request>> ModelQueue::TakeBatch(std::unique_lock<std::mutex>& lock) {
  std::vector<std::unique_ptr<Request>> batch;
  // A request has >= 1 row, so more than max_batch_size + 1 entries never matter to the decision.
  size_t scan = queue_.size();
  if (options_.policy.max_batch_size > 0) {
    scan = std::min(scan, static_cast<size_t>(options_.policy.max_batch_size) + 1);
  }
  std::vector<PendingRequest> pending;
  pending.reserve(scan);
  for (size_t i = 0; i < scan; ++i) {
    pending.push_back(
        PendingRequest{queue_[i].request->batch_size, queue_[i].request->arrival_ns,
                       queue_[i].shape_key});
  }
  uint64_t now = clock_->NowNs();
  BatchDecision decision = DecideBatch(pending, now, options_.policy);
  if (decision.count == 0) {
    if (decision.wake_at_ns > now) {
      work_cv_.wait_for(lock, std::chrono::nanoseconds(decision.wake_at_ns - now));
    } else {
      work_cv_.wait(lock);
    }
    return batch;
  }
  for (size_t i = 0; i < decision.count; ++i) {
    batch.push_back(std::move(queue_.front().request));
    queue_.pop_front();
  }
  return batch;
}

void ModelQueue::WorkerLoop(BatchRunner* runner) {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (queue_.empty()) {
      work_cv_.wait(lock);
      continue;
    }
    std::vector<std::unique_ptr<Request>> batch = TakeBatch(lock);
    if (batch.empty()) continue;
    ++running_batches_;
    const bool more_waiting = !queue_.empty();
    lock.unlock();
    if (more_waiting) work_cv_.notify_one();  // another idle instance may take the rest
    stats_->AddPending(-static_cast<int64_t>(batch.size()));

    const uint64_t start_ns = clock_->NowNs();
    std::vector<const Request*> views;
    int64_t rows = 0;
    for (const auto& request : batch) {
      views.push_back(request.get());
      rows += request->batch_size;
    }
    StatusOr<std::vector<Response>> result = runner->Run(views);
    const uint64_t end_ns = clock_->NowNs();

    if (result.ok() && result->size() != batch.size()) {
      result = absl::InternalError(absl::StrCat(runner->Describe(), " returned ", result->size(),
                                                " responses for ", batch.size(), " requests"));
    }
    if (result.ok()) {
      stats_->RecordExecution(rows, result->front().timing);
      for (size_t i = 0; i < batch.size(); ++i) {
        Response& response = (*result)[i];
        response.timing.queue_ns = start_ns - batch[i]->arrival_ns;
        response.batch_size = rows;
        stats_->RecordSuccess(batch[i]->batch_size, end_ns - batch[i]->arrival_ns,
                              response.timing);
        batch[i]->done(std::move(response));
      }
    } else {
      spdlog::warn("batch of {} request(s) on {} failed: {}", batch.size(), runner->Describe(),
                   result.status().message());
      for (const auto& request : batch) {
        stats_->RecordFailure("BACKEND", end_ns - request->arrival_ns);
        request->done(result.status());
      }
    }
    batch.clear();

    lock.lock();
    --running_batches_;
    if (queue_.empty() && running_batches_ == 0) idle_cv_.notify_all();
  }
}

}  // namespace tessera::dispatch
