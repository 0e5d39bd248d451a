// The simulator's model of Tessera's data plane: routing of requests to gpulets, per-(model,
// gpulet) queues, duty-cycle rounds or eager (Triton-like) batching, and batch execution with
// interference, jitter and processor sharing. The rules are stated in
// include/tessera/sim/simulator.h and docs/simulator.md; this is their one implementation.
//
// Thread-compatible: driven by one Simulation from its event loop.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "event_queue.h"
#include "random.h"
#include "router.h"
#include "tessera/scheduler/plan.h"
#include "tessera/scheduler/profile.h"
#include "tessera/sim/simulator.h"

namespace tessera::sim {

struct Request {
  uint64_t id = 0;
  int model = 0;  // index into the simulation's models
  double arrival_ms = 0;
  double deadline_ms = 0;  // arrival + SLO
};

// Where finished requests go.
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  virtual void Completed(const Request& request, double now_ms) = 0;
  virtual void Dropped(const Request& request, double now_ms) = 0;
};

struct DispatcherOptions {
  double jitter_sigma = 0;
  uint64_t seed = 1;
  bool slo_drop = false;
  bool wait_for_duty = false;
};

class DispatcherModel {
 public:
  // `profiles[m]` is model m's profile; `model_index` maps plan model names to m. Pointers must
  // outlive this object.
  DispatcherModel(std::vector<const scheduler::ModelProfile*> profiles,
                  const std::map<std::string, int, std::less<>>* model_index, SlowdownFn slowdown,
                  DispatcherOptions options, EventQueue* events, RequestSink* sink);

  // Makes `plan` (validated by the caller) the one serving. The gpulets of the previous plan
  // retire: a batch they are running finishes and is delivered, but they start no more; every
  // request queued at them (or queued unrouted for want of a gpulet) is routed again through the
  // new plan, oldest first. No request is lost.
  void InstallPlan(const scheduler::Plan& plan, double now_ms);

  // Routes a new request to one of its model's gpulets (smooth WRR on rate_rps) and lets that
  // gpulet react. With no gpulet for the model it waits unrouted until a plan serves the model.
  void Route(const Request& request, double now_ms);

  void OnRoundTimer(int gpulet, uint64_t gen, double now_ms);
  void OnBatchFinish(int64_t batch_id, uint64_t gen, double now_ms);

  // Calls f(request) for every request queued, unrouted or in a running batch.
  template <typename F>
  void ForEachPending(F f) const {
    for (const auto& queue : unrouted_) {
      for (const Request& r : queue) f(r);
    }
    for (const GpuletState& g : gpulets_) {
      for (const Slot& s : g.slots) {
        for (const Request& r : s.queue) f(r);
      }
    }
    for (const auto& [id, batch] : running_) {
      for (const Request& r : batch.requests) f(r);
    }
  }

  int64_t batches_started() const { return next_batch_id_; }

 private:
  enum class Phase { kIdle, kRunning, kWaiting };

  struct Slot {  // one model on one gpulet
    int model = 0;
    int batch = 1;
    std::deque<Request> queue;
    bool busy = false;  // eager mode: its instance is running a batch
  };

  struct GpuletState {
    int gpu = 0;
    int partition_pct = 100;
    double duty_ms = 0;
    int pool = 0;
    bool retired = false;
    std::vector<Slot> slots;
    // Round state (duty_ms > 0).
    Phase phase = Phase::kIdle;
    double round_start_ms = 0;
    size_t next_slot = 0;
    uint64_t timer_gen = 0;
  };

  struct Batch {
    int gpulet = 0;
    int slot = 0;
    int size = 0;
    std::vector<Request> requests;
    double remaining_ms = 0;  // work left at speed 1
    double speed = 1;
    double updated_ms = 0;  // when remaining_ms was last brought up to date
    uint64_t gen = 0;       // finish-event generation
  };

  struct Pool {  // compute shared by processor sharing
    double capacity_pct = 100;
    std::vector<int64_t> batches;  // running, in start order
  };

  struct Target {
    int gpulet = 0;
    int slot = 0;
  };

  void Enqueue(int gpulet, int slot, const Request& request, double now_ms);
  void MaybeStartRound(int gpulet, double now_ms);
  void RunNextSlot(int gpulet, double now_ms);
  void TryEager(int gpulet, int slot, double now_ms);
  void DropExpired(const GpuletState& g, Slot& slot, double now_ms);
  void StartBatch(int gpulet, int slot, double now_ms);
  void UpdatePool(int pool, double now_ms, int64_t new_batch);
  bool AllFull(const GpuletState& g) const;
  bool AllEmpty(const GpuletState& g) const;

  std::vector<const scheduler::ModelProfile*> profiles_;
  const std::map<std::string, int, std::less<>>* model_index_;
  SlowdownFn slowdown_;
  DispatcherOptions options_;
  EventQueue* events_;
  RequestSink* sink_;
  Rng jitter_rng_;

  std::vector<GpuletState> gpulets_;  // every gpulet ever installed; retired ones stay
  std::vector<Pool> pools_;
  std::map<int, int> gpu_pools_;               // non-exclusive plans: GPU → its shared pool
  std::vector<std::vector<Target>> targets_;   // per model, in the current plan
  std::vector<WeightedRoundRobin> routers_;    // per model
  std::vector<std::deque<Request>> unrouted_;  // per model
  std::map<int64_t, Batch> running_;           // ordered, so iteration is deterministic
  int64_t next_batch_id_ = 0;
};

}  // namespace tessera::sim
