#include "dispatcher_model.h"

#include <algorithm>
#include <cmath>

namespace tessera::sim {

// Stream 0 of the seed is the jitter; arrivals use streams 1.. (simulator.cc).
DispatcherModel::DispatcherModel(std::vector<const scheduler::ModelProfile*> profiles,
                                 const std::map<std::string, int, std::less<>>* model_index,
                                 SlowdownFn slowdown, DispatcherOptions options, EventQueue* events,
                                 RequestSink* sink)
    : profiles_(std::move(profiles)),
      model_index_(model_index),
      slowdown_(std::move(slowdown)),
      options_(options),
      events_(events),
      sink_(sink),
      jitter_rng_(options.seed, 0),
      targets_(profiles_.size()),
      routers_(profiles_.size()),
      unrouted_(profiles_.size()) {}

void DispatcherModel::InstallPlan(const scheduler::Plan& plan, double now_ms) {
  std::vector<Request> moved;
  for (auto& queue : unrouted_) {
    moved.insert(moved.end(), queue.begin(), queue.end());
    queue.clear();
  }
  for (GpuletState& g : gpulets_) {
    if (g.retired) continue;
    g.retired = true;
    g.phase = Phase::kIdle;
    ++g.timer_gen;  // a pending round timer is void
    for (Slot& s : g.slots) {
      moved.insert(moved.end(), s.queue.begin(), s.queue.end());
      s.queue.clear();
    }
  }

  for (auto& t : targets_) t.clear();
  std::vector<std::vector<double>> weights(profiles_.size());
  for (const scheduler::Gpulet& spec : plan.gpulets) {
    if (spec.models.empty()) continue;
    GpuletState g;
    g.gpu = spec.gpu;
    g.partition_pct = spec.partition_pct;
    g.duty_ms = spec.duty_ms;
    if (plan.partitions_exclusive) {
      // The gpulet owns its partition; only its own concurrent batches (eager mode) share it.
      g.pool = static_cast<int>(pools_.size());
      pools_.push_back(Pool{static_cast<double>(spec.partition_pct), {}});
    } else {
      auto [it, inserted] = gpu_pools_.try_emplace(spec.gpu, static_cast<int>(pools_.size()));
      if (inserted) pools_.push_back(Pool{100.0, {}});
      g.pool = it->second;
    }
    const int index = static_cast<int>(gpulets_.size());
    for (const scheduler::GpuletModel& m : spec.models) {
      const int model = model_index_->find(m.model)->second;
      targets_[model].push_back({index, static_cast<int>(g.slots.size())});
      weights[model].push_back(m.rate_rps);
      g.slots.push_back(Slot{model, m.batch, {}, false});
    }
    gpulets_.push_back(std::move(g));
  }
  for (size_t m = 0; m < profiles_.size(); ++m) {
    routers_[m] = WeightedRoundRobin(weights[m]);
  }

  std::sort(moved.begin(), moved.end(), [](const Request& x, const Request& y) {
    return x.arrival_ms != y.arrival_ms ? x.arrival_ms < y.arrival_ms : x.id < y.id;
  });
  for (const Request& r : moved) Route(r, now_ms);
}

void DispatcherModel::Route(const Request& request, double now_ms) {
  WeightedRoundRobin& router = routers_[request.model];
  if (router.empty()) {
    unrouted_[request.model].push_back(request);
    return;
  }
  const Target& target = targets_[request.model][router.Pick()];
  Enqueue(target.gpulet, target.slot, request, now_ms);
}

void DispatcherModel::Enqueue(int gpulet, int slot, const Request& request, double now_ms) {
  GpuletState& g = gpulets_[gpulet];
  g.slots[slot].queue.push_back(request);
  if (g.duty_ms > 0) {
    MaybeStartRound(gpulet, now_ms);
  } else {
    TryEager(gpulet, slot, now_ms);
  }
}

bool DispatcherModel::AllFull(const GpuletState& g) const {
  for (const Slot& s : g.slots) {
    if (static_cast<int>(s.queue.size()) < s.batch) return false;
  }
  return true;
}

bool DispatcherModel::AllEmpty(const GpuletState& g) const {
  for (const Slot& s : g.slots) {
    if (!s.queue.empty()) return false;
  }
  return true;
}

// The round rule (simulator.h): a round starts when the previous one has ended and a request is
// queued (work-conserving); with wait_for_duty, also not before d after the previous round's start
// unless every model already has a full batch. With nothing queued the gpulet idles until the
// next arrival.
void DispatcherModel::MaybeStartRound(int gpulet, double now_ms) {
  GpuletState& g = gpulets_[gpulet];
  if (g.retired || g.phase == Phase::kRunning) return;
  if (options_.wait_for_duty && g.phase == Phase::kWaiting &&
      now_ms < g.round_start_ms + g.duty_ms && !AllFull(g)) {
    return;
  }
  if (AllEmpty(g)) {
    g.phase = Phase::kIdle;
    return;
  }
  g.phase = Phase::kRunning;
  g.round_start_ms = now_ms;
  g.next_slot = 0;
  ++g.timer_gen;
  RunNextSlot(gpulet, now_ms);
}

// Runs the next model of the round that has requests; when none is left the round is over.
void DispatcherModel::RunNextSlot(int gpulet, double now_ms) {
  GpuletState& g = gpulets_[gpulet];
  if (g.retired) return;
  while (g.next_slot < g.slots.size()) {
    const int slot = static_cast<int>(g.next_slot++);
    DropExpired(g, g.slots[slot], now_ms);
    if (!g.slots[slot].queue.empty()) {
      StartBatch(gpulet, slot, now_ms);
      return;
    }
  }
  g.phase = Phase::kWaiting;
  const double due_ms = g.round_start_ms + g.duty_ms;
  if (!options_.wait_for_duty || now_ms >= due_ms || AllFull(g)) {
    MaybeStartRound(gpulet, now_ms);
  } else {
    events_->Push(due_ms, EventType::kRoundTimer, gpulet, ++g.timer_gen);
  }
}

void DispatcherModel::OnRoundTimer(int gpulet, uint64_t gen, double now_ms) {
  GpuletState& g = gpulets_[gpulet];
  if (gen != g.timer_gen || g.phase != Phase::kWaiting) return;
  MaybeStartRound(gpulet, now_ms);
}

void DispatcherModel::TryEager(int gpulet, int slot, double now_ms) {
  GpuletState& g = gpulets_[gpulet];
  Slot& s = g.slots[slot];
  if (g.retired || s.busy) return;
  DropExpired(g, s, now_ms);
  if (s.queue.empty()) return;
  s.busy = true;
  StartBatch(gpulet, slot, now_ms);
}

// A request that would miss its deadline even if its batch started now and ran at profile speed
// cannot be saved; with SLO-aware dropping it is dropped rather than served late. Queues are FIFO
// of one model, so deadlines ascend and only the head needs checking.
void DispatcherModel::DropExpired(const GpuletState& g, Slot& slot, double now_ms) {
  if (!options_.slo_drop) return;
  const scheduler::ModelProfile& profile = *profiles_[slot.model];
  while (!slot.queue.empty()) {
    const int size = std::min<int>(slot.batch, static_cast<int>(slot.queue.size()));
    if (now_ms + profile.LatencyMs(size, g.partition_pct) <= slot.queue.front().deadline_ms) break;
    sink_->Dropped(slot.queue.front(), now_ms);
    slot.queue.pop_front();
  }
}

void DispatcherModel::StartBatch(int gpulet, int slot_index, double now_ms) {
  GpuletState& g = gpulets_[gpulet];
  Slot& slot = g.slots[slot_index];
  const int size = std::min<int>(slot.batch, static_cast<int>(slot.queue.size()));
  Batch batch;
  batch.gpulet = gpulet;
  batch.slot = slot_index;
  batch.size = size;
  batch.requests.assign(slot.queue.begin(), slot.queue.begin() + size);
  slot.queue.erase(slot.queue.begin(), slot.queue.begin() + size);

  const scheduler::ModelProfile& profile = *profiles_[slot.model];
  // Interference against everything already running on the GPU, the worst neighbour counting
  // (seed 001 §3 [R]: max over co-runners), fixed for the batch's life.
  double factor = 1.0;
  for (const auto& [id, other] : running_) {
    const GpuletState& og = gpulets_[other.gpulet];
    if (og.gpu != g.gpu) continue;
    const Slot& os = og.slots[other.slot];
    factor = std::max(factor, slowdown_(profile, size, g.partition_pct, *profiles_[os.model],
                                        other.size, og.partition_pct));
  }
  const double jitter =
      options_.jitter_sigma > 0 ? std::exp(options_.jitter_sigma * jitter_rng_.Normal()) : 1.0;
  batch.remaining_ms = profile.LatencyMs(size, g.partition_pct) * factor * jitter;
  batch.updated_ms = now_ms;
  batch.speed = 0;  // set by UpdatePool

  const int64_t id = next_batch_id_++;
  running_.emplace(id, std::move(batch));
  pools_[g.pool].batches.push_back(id);
  UpdatePool(g.pool, now_ms, id);
}

// Processor sharing: every running batch claims its gpulet's partition and runs at
// min(1, capacity / Σ claims). Work done so far is booked at the old speeds first; batches whose
// speed changed get a new finish event (the old one is void by generation).
void DispatcherModel::UpdatePool(int pool_index, double now_ms, int64_t new_batch) {
  Pool& pool = pools_[pool_index];
  double claims = 0;
  for (int64_t id : pool.batches) {
    Batch& b = running_.at(id);
    b.remaining_ms = std::max(0.0, b.remaining_ms - (now_ms - b.updated_ms) * b.speed);
    b.updated_ms = now_ms;
    claims += gpulets_[b.gpulet].partition_pct;
  }
  const double speed = claims > 0 ? std::min(1.0, pool.capacity_pct / claims) : 1.0;
  for (int64_t id : pool.batches) {
    Batch& b = running_.at(id);
    if (b.speed == speed && id != new_batch) continue;
    b.speed = speed;
    events_->Push(now_ms + b.remaining_ms / speed, EventType::kBatchFinish, id, ++b.gen);
  }
}

void DispatcherModel::OnBatchFinish(int64_t batch_id, uint64_t gen, double now_ms) {
  auto it = running_.find(batch_id);
  if (it == running_.end() || it->second.gen != gen) return;
  Batch batch = std::move(it->second);
  running_.erase(it);
  GpuletState& g = gpulets_[batch.gpulet];
  auto& members = pools_[g.pool].batches;
  members.erase(std::find(members.begin(), members.end(), batch_id));
  UpdatePool(g.pool, now_ms, -1);

  for (const Request& r : batch.requests) sink_->Completed(r, now_ms);
  if (g.duty_ms > 0) {
    RunNextSlot(batch.gpulet, now_ms);
  } else {
    g.slots[batch.slot].busy = false;
    TryEager(batch.gpulet, batch.slot, now_ms);
  }
}

}  // namespace tessera::sim
