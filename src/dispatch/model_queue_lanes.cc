// ModelQueue's lanes as a whole: checking a lane, and the active/shadow switch to new lanes
// (GSLICE §4.6), kept apart from the per-request path in model_queue.cc.
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tessera/dispatch/model_queue.h"

namespace tessera::dispatch {

Status ModelQueue::ValidateLane(const Lane& lane, const std::string& model_label) {
  if (lane.runners.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", model_label, "': lane '", lane.plan.label, "' has no runner"));
  }
  const std::vector<int64_t>& sizes = lane.worker_batch_sizes;
  if (!sizes.empty() && sizes.size() != lane.runners.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", model_label, "': lane '", lane.plan.label, "' has ", sizes.size(),
                     " worker batch sizes for ", lane.runners.size(), " runners (one per runner)"));
  }
  for (int64_t size : sizes) {
    if (size < 1) {
      return absl::InvalidArgumentError(absl::StrCat("model '", model_label, "': lane '",
                                                     lane.plan.label, "' has worker batch size ",
                                                     size, " (must be ≥ 1)"));
    }
  }
  return absl::OkStatus();
}

StatusOr<LaneSwap> ModelQueue::ReplaceLanes(std::vector<Lane> lanes) {
  if (lanes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", options_.model_label, "': a switch needs at least one lane"));
  }
  for (const Lane& lane : lanes) {
    TESSERA_RETURN_IF_ERROR(ValidateLane(lane, options_.model_label));
  }
  std::lock_guard lifecycle(lifecycle_mu_);
  if (shut_down_) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", options_.model_label, "' is shut down"));
  }
  std::vector<LanePtr> fresh;
  for (Lane& lane : lanes) fresh.push_back(MakeLane(std::move(lane)));

  LaneSwap swap;
  std::vector<LanePtr> old;
  uint64_t switched_ns = 0;
  {
    std::lock_guard lock(mu_);
    for (const LanePtr& lane : fresh) StartWorkers(lane);
    const uint64_t start_ns = clock_->NowNs();
    old.swap(lanes_);
    lanes_ = fresh;
    for (const LanePtr& lane : old) {
      lane->retired = true;
      for (Queued& queued : lane->queue) {
        queued.request->staged.reset();  // it was staged in the old runner's pool
        LanePtr target = Route();
        target->queue.push_back(std::move(queued));
        ++swap.moved_requests;
      }
      lane->queue.clear();
    }
    switched_ns = clock_->NowNs();
    swap.gap_ns = switched_ns - start_ns;
  }
  for (const LanePtr& lane : fresh) lane->cv.notify_all();
  for (const LanePtr& lane : old) {
    WakeWorkers(*lane);
    for (std::thread& worker : lane->workers) worker.join();  // after their running batch
    lane->workers.clear();
  }
  swap.drain_ns = clock_->NowNs() - switched_ns;
  return swap;
}

std::vector<std::string> ModelQueue::LaneLabels() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> labels;
  for (const LanePtr& lane : lanes_) labels.push_back(lane->plan.label);
  return labels;
}

}  // namespace tessera::dispatch
