// Request-rate estimation for the scheduler's control loop (seed 001 §1.5, §2.4, §4).
//
// RateMonitor counts arrivals per model in fixed windows (default 500 ms, the gpulet artifact's
// RATE_INTERVAL) and folds each closed window's rate into an exponentially weighted moving
// average with α = 2/(N + 1), N = epoch / window (N = 40 for the 20 s epoch): the EWMA's centre of
// mass is half an epoch back, so a plan follows the last epoch's load without chasing one burst.
// It has no clock of its own: callers pass times in ms from any fixed origin, non-decreasing, so
// the server's control loop, the simulator and tests step it alike.
//
// PoissonHeadroomRps turns a mean rate into the rate to plan for, so that a Poisson arrival
// process exceeds it in at most 1 % of seconds.
//
// Thread-safety: RateMonitor is thread-safe (request threads Record, the control loop reads).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tessera::scheduler {

struct RateMonitorOptions {
  double window_ms = 500;   // counting window, ms (> 0)
  double epoch_ms = 20000;  // scheduling epoch, ms (≥ window_ms): N = epoch_ms / window_ms
};

class RateMonitor {
 public:
  explicit RateMonitor(RateMonitorOptions options = {});

  // `count` arrivals of `model` at `now_ms`. Closes the windows that ended before, first.
  void Record(std::string_view model, double now_ms, int64_t count = 1);
  // Closes every window that ended at or before `now_ms` and folds it into the averages: a model's
  // first closed window sets its average, later ones (including empty ones, which decay it) move
  // it by α. Times before the current window are treated as inside it.
  void Advance(double now_ms);

  // The averaged rate of `model` in requests/s; 0 for a model never seen.
  double Rate(std::string_view model) const;
  // Every model seen, with its averaged rate.
  std::map<std::string, double> Rates() const;

  double alpha() const { return alpha_; }
  const RateMonitorOptions& options() const { return options_; }

 private:
  struct Stream {
    int64_t count = 0;   // arrivals in the open window
    double average = 0;  // EWMA over closed windows, requests/s
    bool has_average = false;
  };
  void AdvanceLocked(double now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RateMonitorOptions options_;
  const double alpha_;
  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  double window_start_ms_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Stream, std::less<>> streams_ ABSL_GUARDED_BY(mu_);
};

// The rate to plan for given a mean of `mean_rps` (seed 001 §2.4 [R] ADD_RATE): up to 550 rps,
// the smallest k with P(Poisson(mean over 1 s) ≤ k) ≥ 0.99 (mean 100 → 124); above, where the
// Poisson tail is within 10 % of the mean, mean × 1.1. 0 for a mean ≤ 0.
double PoissonHeadroomRps(double mean_rps);

}  // namespace tessera::scheduler
