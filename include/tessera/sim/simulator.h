// tessera-sim: a discrete-event simulator that runs a scheduler Plan against request arrivals.
//
// It answers "does this plan keep its SLOs?" without GPUs: requests of each model arrive
// (Poisson, constant or a replayed trace), are routed across the model's gpulets, batched by a
// model of Tessera's dispatcher, and executed for the profiled L(n,p) of the actual batch size,
// slowed by a ground-truth interference model (independent of what the planner assumed) and by
// a seeded log-normal jitter. docs/simulator.md states every rule; the short version:
//
// Dispatcher model, a gpulet with duty_ms = d > 0 (seed 001 §2.2 Fig. 2, §1.4): the gpulet runs
// rounds. A round runs the gpulet's models in plan order; when a model's turn comes it takes the
// oldest min(batch, queued) requests of its queue (none → skipped, no time) and runs them as one
// batch; the round ends when its last batch ends. The next round starts as soon as the previous
// one has ended and a request is queued; an idle gpulet starts one at the next arrival. A request
// is taken at its model's next turn, so while one batch runs the next one builds: one batch
// building + one running per (model, gpulet). A request therefore waits at most one round (≤ Σ L ≤
// d) and then at most Σ L for its own, so a plan keeping Σ L ≤ d and Σ L + d ≤ SLO (seed 001 §2.4,
// src/scheduler/slo_rules.h) meets its SLO at its planned rate with no interference error, up to
// arrival bursts of more than `batch` per round; and under backlog every model still gets `batch`
// per round of ≤ d, its planned rate. The duty cycle is thus a planning bound, not a timer.
// SimOptions::wait_for_duty = true models the gpulet artifact's batcher instead (a round starts
// no earlier than d after the previous round's start, unless every model already has a full batch
// queued): the same worst case, but under Poisson arrivals it wastes the slack between the planned
// and the actual execution time (docs/simulator.md has the measurements).
//
// A gpulet with duty_ms = 0 (Triton-like): each model has its own instance that, whenever it is
// free, takes min(batch, queued) requests at once. Concurrent batches share compute by processor
// sharing: each running batch claims its gpulet's partition p, and runs at speed
// min(1, C / Σ claims) of its pool, where the pool is the GPU (C = 100) when the plan's
// partitions are not exclusive, and the gpulet itself (C = p) when they are. Speeds are
// re-evaluated at every batch start and finish.
//
// Execution time of a batch of n requests on partition p: L(n,p) (profile, interpolated)
// × interference × jitter. Interference = the max of the true model's Factor against every batch
// running on the same GPU when the batch starts (1 when it runs alone), fixed for the batch's
// life; jitter = exp(σ·Z), Z standard normal (median 1).
//
// Determinism: all randomness comes from std::mt19937_64 streams seeded from `seed` (one per
// model's arrivals, one for jitter), turned into uniforms, exponentials and normals by our own
// code, and events at equal times run in the order they were scheduled. The same inputs and seed
// give a byte-identical report with any standard library.
//
// Thread-safety: Simulate() is a pure function of its arguments; run several in parallel freely
// (the callbacks must then be thread-safe themselves).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/common/status.h"
#include "tessera/scheduler/interference.h"
#include "tessera/scheduler/plan.h"
#include "tessera/scheduler/profile.h"

namespace tessera::sim {

enum class ArrivalKind { kPoisson, kConstant, kTrace };

// "poisson" | "constant" | "trace".
std::string_view ArrivalKindName(ArrivalKind kind);

// From `start_s` on (until the next segment), requests arrive at `rate_rps`.
struct RateSegment {
  double start_s = 0;
  double rate_rps = 0;
};

struct Arrivals {
  ArrivalKind kind = ArrivalKind::kPoisson;
  // kPoisson, kConstant: piecewise-constant rate over time, start_s strictly ascending (the rate
  // before the first segment is 0). Empty = the demand's rate_rps from time 0 on. Poisson:
  // exponential gaps of mean 1/rate, restarted at a segment boundary (exact, by memorylessness).
  // Constant: one arrival every 1/rate s, the first 1/rate after the segment starts.
  std::vector<RateSegment> schedule;
  // kTrace: arrival times in seconds from the start, ascending, each ≥ 0.
  std::vector<double> trace_s;
};

// One model stream of the simulation.
struct SimModel {
  // model (unique), profile (empty = model), slo_ms, and rate_rps (the constant rate when
  // arrivals.schedule is empty; ignored for a trace).
  scheduler::ModelDemand demand;
  Arrivals arrivals;
};

// Ground-truth slowdown (≥ 1) of `self` running a batch of self_batch on self_partition_pct while
// `other` runs other_batch on other_partition_pct on the same GPU.
using SlowdownFn = std::function<double(
    const scheduler::ModelProfile& self, int self_batch, int self_partition_pct,
    const scheduler::ModelProfile& other, int other_batch, int other_partition_pct)>;

// No interference at all.
SlowdownFn NoSlowdown();
// Every co-located pair slowed by `factor` (tests, what-if runs).
SlowdownFn ConstantSlowdown(double factor);
// The slowdown an InterferenceModel predicts (a profile set's interference.yaml). Inline so that
// code which never calls it does not need the model's implementation linked in.
inline SlowdownFn SlowdownOf(scheduler::InterferenceModel model) {
  return [model = std::move(model)](const scheduler::ModelProfile& self, int self_batch,
                                    int self_pct, const scheduler::ModelProfile& other,
                                    int other_batch, int other_pct) {
    return model.Factor(self, self_batch, self_pct, other, other_batch, other_pct);
  };
}

// Re-planning at an epoch boundary: the plan in force and the demands at the observed rates →
// a new plan, or nullopt to keep the current one. An error is recorded and the plan kept.
using ReplanFn = std::function<StatusOr<std::optional<scheduler::Plan>>(
    const scheduler::Plan& current, const std::vector<scheduler::ModelDemand>& observed,
    double now_s)>;

struct EpochOptions {
  double epoch_s = 0;  // re-plan every epoch_s seconds; 0 = no epoch loop
  // Arrivals are counted per interval into an EWMA with α = 2/(N+1), N = epoch_s /
  // rate_interval_s: scheduler::RateMonitor, the server's own (seed 001 §1.5 [R]).
  double rate_interval_s = 0.5;
  // Seconds from the decision until the new plan serves (partition preparation, seed 001 §1.3,
  // Fig. 11); the old plan serves meanwhile. A decision taken while another is pending replaces it.
  double prepare_delay_s = 0;
  ReplanFn replan;
};

struct SimOptions {
  double duration_s = 60;  // arrivals are generated in [0, duration_s); the run stops there
  double warmup_s = 5;     // requests arriving earlier are served but not counted
  uint64_t seed = 1;
  double jitter_sigma = 0.03;  // σ of the log-normal latency jitter; 0 = none
  // Drop a request when its batch is formed if it would miss its deadline even if that batch ran
  // at profile speed: now + L(min(batch, queued), p) > arrival + SLO. Dropped requests count as
  // violations (seed 001 §5.2, Fig. 15).
  bool slo_drop = false;
  // Rounds wait for d after the previous round's start (the artifact's batcher); see above.
  bool wait_for_duty = false;
  EpochOptions epoch;
};

// Counts over requests that arrived at or after the warm-up.
struct ModelReport {
  std::string model;
  double slo_ms = 0;
  int64_t arrived = 0;
  int64_t completed = 0;
  int64_t good = 0;        // completed within the SLO
  int64_t late = 0;        // completed after the SLO
  int64_t dropped = 0;     // SLO-aware drops
  int64_t unserved = 0;    // still queued or running at the end, already past the SLO
  int64_t excluded = 0;    // still queued or running at the end, not yet past the SLO: not counted
  double offered_rps = 0;  // arrived / measured window
  double throughput_rps = 0;                  // completed / window
  double goodput_rps = 0;                     // good / window
  double p50_ms = 0, p99_ms = 0, max_ms = 0;  // over completed requests (nearest rank)
  // (late + dropped + unserved) / (arrived − excluded), in %.
  double violation_pct = 0;
};

// One epoch decision of the re-planning loop.
struct EpochRecord {
  double time_s = 0;
  std::string action;   // "kept", "replanned", "error: ..."
  double switch_s = 0;  // when the new plan took (or will take) effect; 0 when kept
  int gpus_used = 0;    // of the plan decided (or kept)
  int partition_sum = 0;
  bool schedulable = true;
  // Requests that arrived during the epoch ending at time_s (all, warm-up included), and how many
  // of them violated their SLO.
  int64_t arrived = 0;
  int64_t violations = 0;
};

struct SimReport {
  double window_s = 0;  // duration − warm-up
  uint64_t seed = 0;
  std::vector<ModelReport> models;  // in input order
  ModelReport total;                // model "total"; slo_ms 0
  int64_t batches = 0;              // batches executed (warm-up included)
  int64_t replans = 0;              // plan switches that took effect
  std::vector<EpochRecord> epochs;
};

// Simulates `plan` serving `models`. INVALID_ARGUMENT for bad input: a plan model not among
// `models`, a model without a profile in `profiles`, bad gpulets (GPU outside the plan, batch < 1,
// partition outside (0,100]), bad arrivals or options. A model with no gpulet in the plan (or
// rate 0 in it) is still offered: its requests queue until a re-plan serves them.
StatusOr<SimReport> Simulate(const scheduler::ProfileSet& profiles, const scheduler::Plan& plan,
                             const std::vector<SimModel>& models,
                             const SlowdownFn& true_interference, const SimOptions& options);

// A fixed-width table: one line per model, then the total (and the epoch log, if any).
std::string ReportToText(const SimReport& report);
// The same as one JSON object (keys as in ModelReport / EpochRecord).
std::string ReportToJson(const SimReport& report);

}  // namespace tessera::sim
