// Building blocks the baseline planners share (temporal, spatial, triton, ideal): input checks,
// memory admission, cached latency / utilisation tables, a fast round fitter with the exact rules
// of FitRound, and the evaluation of one GPU's gpulets under interference.
//
// Internal to src/scheduler; not a contract. Everything here is single-threaded: a planner owns
// its ProfileCache and uses it from one thread at a time, like the planner itself.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "slo_rules.h"
#include "tessera/common/status.h"
#include "tessera/scheduler/interference.h"
#include "tessera/scheduler/plan.h"
#include "tessera/scheduler/planner.h"
#include "tessera/scheduler/profile.h"

namespace tessera::scheduler::baseline {

// One demand with its profile resolved.
struct Demand {
  std::string model;
  const ModelProfile* profile = nullptr;
  double rate_rps = 0;
  double slo_ms = 0;
  int index = 0;  // position in the caller's demand list
  // What a plan must route: rate − options.rate_slack_rps, at least 0 (the artifact's TRP_SLACK:
  // that much left uncovered counts as served, seed 001 §2.4 [R]).
  double target_rps = 0;
};

// Rates within this of each other are equal (float noise of rate arithmetic), rps.
inline constexpr double kRateEpsilon = 1e-6;

// The errors planner.h documents for MakePlan: INVALID_ARGUMENT for bad options, num_gpus < 1, a
// duplicate model, a negative rate or a non-positive SLO; NOT_FOUND for a model with no profile.
// Returns every demand (rate 0 included), in the caller's order.
StatusOr<std::vector<Demand>> ResolveDemands(const std::vector<ModelDemand>& demands, int num_gpus,
                                             const ProfileSet& profiles,
                                             const PlannerOptions& options);

// Memory one GPU may hold, MB: memory_room × (options.gpu_memory_mb, else the device's memory);
// +infinity when neither is known (0), so memory never refuses anything.
double UsableMemoryMb(const ProfileSet& profiles, const PlannerOptions& options);

// Largest batch of `profile` under `options`.
int MaxBatch(const ModelProfile& profile, const PlannerOptions& options);

// Latency and utilisation of one model on one partition, per batch (index b = 1..max_batch;
// index 0 unused). latency_ms is L(b,p) straight from the profile: scheduled latency is
// latency_ms[b]·factor·margin, computed in that order so it equals ScheduledLatencyMs bit for bit.
struct PartitionTable {
  const ModelProfile* profile = nullptr;
  int partition_pct = 0;
  int max_batch = 0;
  std::vector<double> latency_ms;
  std::vector<double> l2_util;
  std::vector<double> dram_util;
};

class ProfileCache {
 public:
  explicit ProfileCache(int max_batch) : max_batch_(max_batch) {}
  // Built on first use; the reference stays valid for the cache's lifetime.
  const PartitionTable& Get(const ModelProfile* profile, int partition_pct);

 private:
  int max_batch_;
  std::map<std::pair<const ModelProfile*, int>, PartitionTable> tables_;
};

// Saturated gpulet (seed 001 §2.4): largest b with 2·L(b)·f·margin ≤ SLO (0 if none) and its
// throughput b·1000/(L·f·margin), as MaxSaturatedBatch / SaturatedThroughputRps compute them.
struct Saturated {
  int batch = 0;
  double latency_ms = 0;
  double throughput_rps = 0;
};
Saturated SaturatedOn(const PartitionTable& table, double slo_ms, double factor, double margin);

// A member of a round for FastFitRound.
struct FastMember {
  const PartitionTable* table = nullptr;
  double rate_rps = 0;
  double slo_ms = 0;
  double factor = 1;
};

// Which feasible round to return: the one with the lowest occupancy (FitRound's choice, best for
// packing), or the shortest duty (smallest batches, so the least interference on the neighbour).
enum class RoundChoice { kMinOccupancy, kMinDuty };

// FitRound's rules and candidate duties over cached tables (seed 001 §2.4): b_j = RoundBatch(d,
// r_j), Σ L_j ≤ d, Σ L_j + d ≤ SLO_j. Same result as FitRound for kMinOccupancy.
std::optional<Round> FastFitRound(const std::vector<FastMember>& members, double margin,
                                  RoundChoice choice = RoundChoice::kMinOccupancy);

// One GPU's gpulets for EvaluateGpu. A saturated member is alone in its gpulet and runs
// back-to-back batches of its max saturated batch; its rate is whatever that serves. Round members
// time-share their gpulet at the given rates.
struct MemberSpec {
  const Demand* demand = nullptr;
  bool saturated = false;
  double rate_rps = 0;  // round members only
};
struct GpuletSpec {
  int partition_pct = 100;
  std::vector<MemberSpec> members;
};

// The evaluated gpulet: duty, and per member (spec order) batch, scheduled latency, served rate.
struct GpuletEval {
  double duty_ms = 0;
  double occupancy = 0;
  std::vector<int> batches;
  std::vector<double> latencies_ms;
  std::vector<double> rates_rps;
};

// Evaluates the gpulets of one GPU together: every member's latency carries the interference
// factor of seed 001 §4.4 — the max over the members of the other gpulets on the GPU, at their
// batches — and batches depend on those factors, so the rounds are refitted until the batches
// settle (a fixed point; at most a few passes). The result satisfies exactly what CheckPlan
// checks: rounds recomputed with the factors of the final batches still meet every rule. Tries
// lowest-occupancy rounds first and, if they interfere too much, shortest-duty rounds. nullopt
// when no consistent evaluation is found, or a saturated member has no batch meeting 2·L ≤ SLO.
// Empty gpulets are allowed (eval with no members).
std::optional<std::vector<GpuletEval>> EvaluateGpu(const std::vector<GpuletSpec>& gpulets,
                                                   ProfileCache& cache,
                                                   const InterferenceModel& interference,
                                                   const PlannerOptions& options);

// GPU memory of a gpulet set: per non-empty gpulet its models' memory plus the process overhead.
double GpuMemoryMb(const std::vector<GpuletSpec>& gpulets, const PlannerOptions& options);

// The plan's Gpulet for an evaluated spec.
Gpulet MakeGpulet(int gpu, const GpuletSpec& spec, const GpuletEval& eval);

// Names of `demands` with a target above kRateEpsilon that `covered` marks false, in demand
// order.
std::vector<std::string> UncoveredModels(const std::vector<Demand>& demands,
                                         const std::vector<bool>& covered);

}  // namespace tessera::scheduler::baseline
