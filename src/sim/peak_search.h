// SLO-preserved peak throughput (seed 001 §5.1, §5.4) and the planner-only max schedulable rate
// (§5.2, Fig. 17), for a workload of models with relative rates.
//
// Peak: raise the total rate until more than 1 % of requests violate their SLO (a rate the planner
// calls unschedulable fails without simulating); exponential ramp, then bisection to a relative
// resolution; `runs` independent searches with consecutive seeds, median reported (§5.1: "3 runs,
// median"). The search assumes success is monotone in the rate, as the paper's does.
//
// Thread-safety: plain functions; the callbacks are called from the calling thread only.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessera/common/status.h"
#include "tessera/scheduler/plan.h"
#include "tessera/scheduler/profile.h"
#include "tessera/sim/simulator.h"

namespace tessera::sim {

struct WorkloadModel {
  std::string model;
  std::string profile;  // empty = model
  double slo_ms = 0;
  double weight = 1;  // share of the total rate: weight / Σ weights
};

struct Workload {
  std::string name;
  int num_gpus = 4;
  std::vector<WorkloadModel> models;
};

// What the caller adds to a rate before planning; planners plan for exactly the rate they get.
enum class Headroom {
  kNone,
  // The gpulet artifact's ADD_RATE (seed 001 §2.4 [R]): for rates ≤ 550 rps the 99th percentile
  // of a Poisson count over one second, above that ×1.1.
  kPoisson99,
};

// "none" | "poisson99".
StatusOr<Headroom> ParseHeadroom(std::string_view name);
std::string_view HeadroomName(Headroom headroom);

// scheduler::PoissonHeadroomRps (smallest k with P(Poisson(rate) ≤ k) ≥ 0.99 for rate ≤ 550,
// else 1.1·rate), but never below `rate`; 0 for rate 0.
double Poisson99Rps(double rate_rps);

// Per-model demands at `total_rps` (rate = total·weight/Σ weight), with headroom applied.
std::vector<scheduler::ModelDemand> DemandsAt(const Workload& workload, double total_rps,
                                              Headroom headroom);

// INVALID_ARGUMENT for an empty workload, duplicate names, SLO ≤ 0, weight < 0 or Σ weight = 0,
// or num_gpus < 1.
Status ValidateWorkload(const Workload& workload);

using PlanFn = std::function<StatusOr<scheduler::Plan>(
    const std::vector<scheduler::ModelDemand>& demands, int num_gpus)>;

struct SearchOptions {
  double start_rps = 100;    // total rate of the first probe
  double resolution = 0.02;  // stop when (fail − pass) ≤ resolution · pass
  double min_rps = 1;        // below this the answer is 0
  double max_rps = 1e6;      // the search does not go past this
};

// One tried rate.
struct Probe {
  double total_rps = 0;
  bool schedulable = false;
  double violation_pct = -1;  // −1 when not simulated
  bool pass = false;
};

struct SearchResult {
  double max_rps = 0;         // largest passing rate found; 0 when min_rps fails
  std::vector<Probe> probes;  // in the order tried
};

// The largest rate at which `probe` passes: from start_rps doubling while it passes (halving while
// it fails), then bisection until the bracket is within the resolution.
StatusOr<SearchResult> SearchMaxRate(const std::function<StatusOr<Probe>(double)>& probe,
                                     const SearchOptions& options);

struct PeakOptions {
  SearchOptions search;
  int runs = 3;                // independent searches, seeds sim.seed, sim.seed + 1, ...
  double slo_target_pct = 99;  // a rate passes when ≥ this % of requests meet their SLO
  Headroom headroom = Headroom::kPoisson99;
  ArrivalKind arrival = ArrivalKind::kPoisson;  // kPoisson or kConstant
  SimOptions sim;  // duration, warm-up, jitter, base seed, dropping (no epochs)
};

struct PeakResult {
  double peak_rps = 0;  // median of the runs' peaks
  std::vector<SearchResult> runs;
  int plans = 0;  // planner calls (plans are shared between runs by rate)
  int simulations = 0;
};

StatusOr<PeakResult> FindPeak(const Workload& workload, const scheduler::ProfileSet& profiles,
                              const PlanFn& plan, const SlowdownFn& true_interference,
                              const PeakOptions& options);

// The largest total rate whose plan the planner calls schedulable; no simulation.
StatusOr<SearchResult> MaxSchedulableRate(const Workload& workload, const PlanFn& plan,
                                          const SearchOptions& options, Headroom headroom);

}  // namespace tessera::sim
