// Arrival processes of tessera-bench: when each request of one model is sent, as offsets in
// nanoseconds from the start of a run.
//
// Open-loop load (as in the serving papers, e.g. seed 001 §5) sends requests at times drawn in
// advance, whatever the server answers. A schedule is computed before the run starts so that the
// sender only sleeps until each offset; schedules are deterministic for a given seed.
//
// Rates are requests per second and may change over time (a RateSchedule of piecewise-constant
// steps). Inter-arrival gaps for rate r:
//   poisson   exponential with mean 1/r (a Poisson process)
//   uniform   uniform on [0, 2/r] (mean 1/r, less bursty than Poisson)
//   constant  exactly 1/r
// A step with rate 0 sends nothing. At a step boundary the process restarts at the new rate (for
// Poisson this is exact: the process is memoryless).
//
// Thread-safety: plain functions and values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/common/status.h"

namespace tessera::bench {

enum class ArrivalKind { kPoisson, kUniform, kConstant, kTrace };

// "poisson" | "uniform" | "constant" | "trace".
std::string_view ArrivalKindName(ArrivalKind kind);
StatusOr<ArrivalKind> ParseArrivalKind(std::string_view name);

// One step of a rate schedule: from `start_s` (seconds from the run start) on, `rate` requests/s.
struct RateStep {
  double start_s = 0;
  double rate = 0;
};

// Piecewise-constant rate over time. Steps are sorted by start_s; the first starts at 0; the last
// lasts until the end of the run.
class RateSchedule {
 public:
  static RateSchedule Constant(double rate) { return RateSchedule({{0, rate}}); }
  // Checks: non-empty, first start 0, strictly increasing starts, rates finite and ≥ 0.
  static StatusOr<RateSchedule> Create(std::vector<RateStep> steps);

  const std::vector<RateStep>& steps() const { return steps_; }
  // Rate at `t_s` seconds.
  double RateAt(double t_s) const;
  // Expected number of arrivals in [0, duration_s) (the integral of the rate).
  double ExpectedCount(double duration_s) const;
  // The same schedule with every rate multiplied by `factor` (peak search scales rates this way).
  RateSchedule Scaled(double factor) const;

 private:
  explicit RateSchedule(std::vector<RateStep> steps) : steps_(std::move(steps)) {}
  std::vector<RateStep> steps_;
};

// Send offsets (ns, ascending, all < duration_s) of `kind` (not kTrace) for `schedule` over
// [0, duration_s). `seed` makes the draw reproducible.
std::vector<int64_t> GenerateArrivals(ArrivalKind kind, const RateSchedule& schedule,
                                      double duration_s, uint64_t seed);

// Sample mean and (unbiased) variance of the gaps between consecutive offsets, in seconds; used by
// tests and by the report's "arrival check".
struct GapStats {
  size_t gaps = 0;
  double mean_s = 0;
  double variance_s2 = 0;
};
GapStats ComputeGapStats(const std::vector<int64_t>& offsets_ns);

}  // namespace tessera::bench
