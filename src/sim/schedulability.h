// Schedulability study (seed 001 §3.2 Fig. 5, §5.2 Fig. 16): every combination of per-model rate
// levels (default {0, 100, 200} rps: 3⁹ − 1 = 19,682 scenarios for nine models) is planned by two
// policies; counts of schedulable scenarios, of those only one policy schedules, and planning
// times. Planner-only: nothing is simulated.
//
// Thread-safety: plain functions; the callbacks run on the calling thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "peak_search.h"
#include "tessera/common/status.h"

namespace tessera::sim {

struct SchedulabilityOptions {
  std::vector<double> rates_rps = {0, 100, 200};  // levels every model takes
  int num_gpus = 4;
  Headroom headroom = Headroom::kNone;  // applied to each rate before planning
  int64_t limit = 0;                    // > 0: only the first `limit` scenarios
};

struct PlanningTime {
  double mean_ms = 0, p99_ms = 0, max_ms = 0;
};

struct SchedulabilityResult {
  int64_t scenarios = 0;  // combinations tried (all-zero ones excluded)
  std::array<int64_t, 2> schedulable = {0, 0};
  int64_t both = 0, only_first = 0, only_second = 0, neither = 0;
  std::array<PlanningTime, 2> planning;
};

// Combination k (k = 0 .. L^n − 1) gives model i the level rates[(k / L^i) mod L]; models at rate 0
// are left out of the demands, and a combination with every model at 0 is skipped. INVALID_ARGUMENT
// for bad levels (negative, none) or more than 10^7 scenarios; a planner error is returned as is,
// naming the scenario.
StatusOr<SchedulabilityResult> CountSchedulable(const Workload& workload,
                                                const std::array<PlanFn, 2>& planners,
                                                const SchedulabilityOptions& options);

std::string SchedulabilityToText(const SchedulabilityResult& result,
                                 const std::array<std::string, 2>& names);

}  // namespace tessera::sim
