#include "tessera/scheduler/rate_monitor.h"

#include <algorithm>
#include <cmath>

namespace tessera::scheduler {
namespace {

// Where the 99th percentile of Poisson(λ) is within 10 % of λ the artifact switches from the
// exact quantile to a flat 10 % (seed 001 §2.4 [R] ADD_RATE).
constexpr double kExactQuantileUpToRps = 550;
constexpr double kQuantile = 0.99;
constexpr double kFlatHeadroom = 1.1;

}  // namespace

RateMonitor::RateMonitor(RateMonitorOptions options)
    : options_(options),
      // seed 001 §1.5 [R] EWMA.cpp: α = 2/(N + 1), N = windows per epoch.
      alpha_(2.0 / (std::max(1.0, options.epoch_ms / std::max(1e-9, options.window_ms)) + 1)) {}

void RateMonitor::Record(std::string_view model, double now_ms, int64_t count) {
  absl::MutexLock lock(&mu_);
  AdvanceLocked(now_ms);
  auto it = streams_.find(model);
  if (it == streams_.end()) it = streams_.emplace(std::string(model), Stream{}).first;
  it->second.count += count;
}

void RateMonitor::Advance(double now_ms) {
  absl::MutexLock lock(&mu_);
  AdvanceLocked(now_ms);
}

void RateMonitor::AdvanceLocked(double now_ms) {
  const double window = options_.window_ms;
  if (!started_) {
    // Windows are aligned to the first time seen.
    started_ = true;
    window_start_ms_ = now_ms;
    return;
  }
  if (now_ms < window_start_ms_ + window) return;
  const int64_t closed = static_cast<int64_t>(std::floor((now_ms - window_start_ms_) / window));
  for (auto& [name, s] : streams_) {
    // The first closed window holds the counts; any further ones were empty.
    const double rate = s.count * 1000.0 / window;
    int64_t empty = closed - 1;
    if (s.has_average) {
      s.average = alpha_ * rate + (1 - alpha_) * s.average;
    } else {
      s.average = rate;
      s.has_average = true;
    }
    if (empty > 0) s.average *= std::pow(1 - alpha_, static_cast<double>(empty));
    s.count = 0;
  }
  window_start_ms_ += closed * window;
}

double RateMonitor::Rate(std::string_view model) const {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(model);
  return it == streams_.end() ? 0 : it->second.average;
}

std::map<std::string, double> RateMonitor::Rates() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, double> rates;
  for (const auto& [name, s] : streams_) rates[name] = s.average;
  return rates;
}

double PoissonHeadroomRps(double mean_rps) {
  if (!(mean_rps > 0)) return 0;
  if (mean_rps > kExactQuantileUpToRps) return mean_rps * kFlatHeadroom;
  // CDF by summing the pmf upward from k = 0; e^−550 ≈ 1e−239 is still a normal double.
  double pmf = std::exp(-mean_rps);
  double cdf = pmf;
  int k = 0;
  while (cdf < kQuantile) {
    ++k;
    pmf *= mean_rps / k;
    cdf += pmf;
  }
  return k;
}

}  // namespace tessera::scheduler
