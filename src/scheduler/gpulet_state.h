// Internal to the gpulet planner: the GPUs being filled, and how one GPU's gpulets are solved.
//
// A GPU holds up to max_gpulets_per_gpu slots (gpulets) whose partitions add up to ≤ 100 %; the
// rest is free capacity that a new slot may take. Each slot holds members (a model and the rate it
// routes there). Solving a GPU turns members' rates into rounds (duty, batches, latencies) under
// the interference of the other slots on the GPU (seed 001 §2.4, §4.4).
//
// Thread-compatible plain values: the planner copies a Gpu to try a placement and keeps the copy
// only when it is accepted.
#pragma once

#include <string>
#include <vector>

#include "tessera/scheduler/interference.h"
#include "tessera/scheduler/plan.h"
#include "tessera/scheduler/planner.h"
#include "tessera/scheduler/profile.h"

namespace tessera::scheduler::gpulet {

// One demanded model and what the planner derives from its profile once per plan.
struct ModelInfo {
  std::string name;
  const ModelProfile* profile = nullptr;
  double rate_rps = 0;
  double slo_ms = 0;
  // Standalone (no interference) saturated batch and throughput per allowed partition, in the
  // order of Context::partitions (seed 001 §2.5 [R] initSaturateTrp). 0 where even batch 1 misses.
  std::vector<int> sat_batch;
  std::vector<double> sat_rps;
  int knee = -1;  // index of p_eff in Context::partitions; -1 when no partition meets the SLO
  // Partition-% needed per request/s at the knee: the exchange rate that weighs the throughput a
  // placement costs its neighbours against what it gains.
  double pct_per_rps = 0;
  // L(b, partitions[i]) at latency_ms[i][b], b = 1..max batch: the interpolation done once.
  std::vector<std::vector<double>> latency_ms;
};

// Everything fixed during one plan.
struct Context {
  const InterferenceModel* interference = nullptr;
  PlannerOptions options;
  std::vector<int> partitions;  // allowed sizes, ascending, unique
  double gpu_memory_mb = 0;     // 0 = unknown: no memory admission
  std::vector<ModelInfo> models;
};

struct Member {
  int model = 0;        // index into Context::models
  double want_rps = 0;  // rate the planner routes here
  // A saturated member runs back-to-back batches of the largest batch meeting 2·L ≤ SLO and
  // serves min(want, capacity); others run the lowest-occupancy round of their slot.
  bool saturated = false;
  // Results of the last Solve.
  double rate_rps = 0;  // served: want, or the capacity when that is lower
  int batch = 1;
  double latency_ms = 0;
  double factor = 1;  // interference factor the latency was computed with
};

struct Slot {
  int pct = 0;
  double duty_ms = 0;
  std::vector<Member> members;
};

struct Gpu {
  std::vector<Slot> slots;  // only slots with members; free capacity is what they leave

  int UsedPct() const;
  int FreePct() const { return 100 - UsedPct(); }
};

// INVALID_ARGUMENT naming the bad option (empty or out-of-range sizes, limits < 1, ...).
Status ValidatePlannerOptions(const PlannerOptions& options);

// The context for `demands`: validates them (INVALID_ARGUMENT for an empty or duplicate name, a
// negative rate or a non-positive SLO; NOT_FOUND for a missing profile) and derives each model's
// saturated throughputs, knee and latency tables. `interference` must outlive the context.
StatusOr<Context> BuildContext(const ProfileSet& profiles, const InterferenceModel* interference,
                               const PlannerOptions& options,
                               const std::vector<ModelDemand>& demands);

// L(b, pct) for b = 0..max batch of `model` (index 0 unused), or nullptr when pct is not an
// allowed size.
const std::vector<double>* LatencyTable(const Context& context, int model, int pct);

// Recomputes every slot's round on `gpu` (seed 001 §2.4 rules via FitRound / MaxSaturatedBatch),
// with interference factors iterated to a fixed point: factors only grow between iterations, so
// batches settle; a GPU that has not settled after a few iterations counts as infeasible. A
// single-member slot whose round fails falls back to a saturated round serving its capacity (its
// member's rate_rps drops below want_rps: throughput lost). False when a slot has no feasible
// round at all. Deterministic.
bool SolveGpu(const Context& context, Gpu& gpu);

// Memory admission (seed 001 §1.3 [R]): Σ over slots of (Σ model memory + per-gpulet overhead)
// ≤ memory_room × device memory.
bool MemoryFits(const Context& context, const Gpu& gpu);

// Σ over members of (want − served): the throughput a solve could not serve.
double LostRps(const Gpu& gpu, int model);

// The plan's gpulets for `gpus`, GPU by GPU, slot by slot.
std::vector<Gpulet> ToGpulets(const Context& context, const std::vector<Gpu>& gpus);

}  // namespace tessera::scheduler::gpulet
