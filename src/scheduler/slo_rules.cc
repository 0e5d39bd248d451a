#include "slo_rules.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera::scheduler {

double ScheduledLatencyMs(const ModelProfile& profile, int batch, int partition_pct,
                          double interference_factor, double margin) {
  return profile.LatencyMs(batch, partition_pct) * interference_factor * margin;
}

int MaxSaturatedBatch(const ModelProfile& profile, int partition_pct, double slo_ms,
                      double interference_factor, double margin, int max_batch) {
  max_batch = std::min(max_batch, profile.max_batch());
  for (int b = max_batch; b >= 1; --b) {
    if (2 * ScheduledLatencyMs(profile, b, partition_pct, interference_factor, margin) <= slo_ms) {
      return b;
    }
  }
  return 0;
}

double SaturatedThroughputRps(const ModelProfile& profile, int batch, int partition_pct,
                              double interference_factor, double margin) {
  return batch * 1000.0 /
         ScheduledLatencyMs(profile, batch, partition_pct, interference_factor, margin);
}

int MaxResidueBatch(const ModelProfile& profile, int partition_pct, double rate_rps, double slo_ms,
                    double interference_factor, double margin, int max_batch) {
  if (rate_rps <= 0) return 0;
  max_batch = std::min(max_batch, profile.max_batch());
  for (int b = max_batch; b >= 1; --b) {
    const double latency =
        ScheduledLatencyMs(profile, b, partition_pct, interference_factor, margin);
    const double duty = 1000.0 * b / rate_rps;
    if (latency <= duty && latency + duty <= slo_ms) return b;
  }
  return 0;
}

namespace {

// The largest mean m with P(N ≤ 1) = e^−m·(1 + m) ≥ kBurstQuantile, N ~ Poisson(m): below it a
// round rarely sees a second request and batch 1 stays. P falls with m; bisection on [0, 1]
// (at m = 1, P = 2/e ≈ 0.74 is below any quantile worth using).
double SingleRequestMaxMean() {
  static const double max_mean = [] {
    double lo = 0;
    double hi = 1;
    for (int i = 0; i < 100; ++i) {
      const double mid = 0.5 * (lo + hi);
      (std::exp(-mid) * (1 + mid) >= kBurstQuantile ? lo : hi) = mid;
    }
    return lo;
  }();
  return max_mean;
}

}  // namespace

int RoundBatch(double duty_ms, double rate_rps, bool shared) {
  const double mean = duty_ms * rate_rps / 1000.0;
  // The epsilons keep a duty at a step point, d = 1000·RoundBatchMaxMean(k)/r, at batch k.
  const int mean_batch = std::max(1, static_cast<int>(std::ceil(mean - 1e-9)));
  if (!shared || mean_batch > kSpareSlotMaxBatch) return mean_batch;
  if (mean <= SingleRequestMaxMean() * (1 + 1e-9) + 1e-12) return 1;
  return mean_batch + 1;
}

double RoundBatchMaxMean(int k, bool shared) {
  if (!shared) return k;
  if (k <= 1) return SingleRequestMaxMean();
  if (k <= kSpareSlotMaxBatch) return k - 1;  // ⌈m⌉ + 1 ≤ k
  return k;  // k = kSpareSlotMaxBatch + 1 also holds every m in (kSpareSlotMaxBatch − 1, k]
}

namespace {

// Scheduled latencies of the members, computed once per (member, batch): FitRound visits up to
// members × max_batch duties and the planners call it in their inner loops.
class LatencyCache {
 public:
  LatencyCache(const std::vector<RoundMember>& members, int partition_pct, double margin,
               int max_batch)
      : members_(members), partition_pct_(partition_pct), margin_(margin) {
    latencies_.resize(members.size());
    for (size_t i = 0; i < members.size(); ++i) {
      caps_.push_back(std::min(max_batch, members[i].profile->max_batch()));
      if (members[i].latency_by_batch == nullptr) latencies_[i].assign(caps_.back() + 1, -1.0);
    }
  }
  int cap(size_t i) const { return caps_[i]; }
  double Latency(size_t i, int batch) {
    const RoundMember& m = members_[i];
    if (m.latency_by_batch != nullptr) {
      return (*m.latency_by_batch)[batch] * m.interference_factor * margin_;
    }
    double& cached = latencies_[i][batch];
    if (cached < 0) {
      cached =
          ScheduledLatencyMs(*m.profile, batch, partition_pct_, m.interference_factor, margin_);
    }
    return cached;
  }

 private:
  const std::vector<RoundMember>& members_;
  int partition_pct_;
  double margin_;
  std::vector<int> caps_;
  std::vector<std::vector<double>> latencies_;
};

// Σ latency of the round of length `duty_ms`, or -1 when a batch exceeds its cap.
double TotalLatency(const std::vector<RoundMember>& members, LatencyCache& cache, double duty_ms) {
  double total = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    const int batch = RoundBatch(duty_ms, members[i].rate_rps, members.size() > 1);
    if (batch > cache.cap(i)) return -1;
    total += cache.Latency(i, batch);
  }
  return total;
}

}  // namespace

std::optional<Round> FitRound(const std::vector<RoundMember>& members, int partition_pct,
                              double margin, int max_batch) {
  if (members.empty()) return std::nullopt;
  double min_slo = members.front().slo_ms;
  // Whether every member's latency is known not to fall with the batch (then Σ L + d only grows
  // with d, and the search may stop at the first step past the SLO).
  bool monotone = true;
  for (const RoundMember& m : members) {
    if (m.rate_rps <= 0) return std::nullopt;
    min_slo = std::min(min_slo, m.slo_ms);
    const std::vector<double>* table = m.latency_by_batch;
    const int cap = std::min(max_batch, m.profile->max_batch());
    if (table == nullptr || static_cast<int>(table->size()) <= cap) {
      monotone = false;
      continue;
    }
    for (int b = 2; b <= cap && monotone; ++b) monotone = (*table)[b] >= (*table)[b - 1];
  }
  LatencyCache cache(members, partition_pct, margin, max_batch);
  const bool shared = members.size() > 1;
  // Candidate step points d = 1000·RoundBatchMaxMean(k)/r_j in ascending order, k = 1..max_batch
  // per member: a merge of the members' sequences (equal values once).
  std::vector<int> next_k(members.size(), 1);
  double best_duty = 0;
  double best_occupancy = 2;
  double left = 0;  // the batches are constant for duties in (left, duty]
  while (true) {
    double duty = std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < members.size(); ++j) {
      if (next_k[j] <= max_batch) {
        duty = std::min(duty, 1000.0 * RoundBatchMaxMean(next_k[j], shared) / members[j].rate_rps);
      }
    }
    if (!std::isfinite(duty)) break;
    for (size_t j = 0; j < members.size(); ++j) {
      if (next_k[j] <= max_batch &&
          1000.0 * RoundBatchMaxMean(next_k[j], shared) / members[j].rate_rps == duty) {
        ++next_k[j];
      }
    }
    const double total = TotalLatency(members, cache, duty);
    if (total < 0) break;  // longer rounds need even larger batches
    // The longest feasible round in (left, duty] has the lowest occupancy: the step point itself
    // unless the SLO caps it at min SLO − Σ latency. The cap matters for tight SLOs at low rates
    // (LeNet: SLO 5 ms at 100 rps, rounds of 10 ms never fit): a round shorter than the
    // inter-arrival time with batch 1 does (the artifact's small-rate case, seed 001 §2.4 [R]).
    double d = std::min(duty, min_slo - total);
    if (d < duty && !(d > left * (1 + 1e-9))) d = -1;
    if (d > 0) {
      const double t = d < duty ? TotalLatency(members, cache, d) : total;
      if (t >= 0 && t <= d && t + d <= min_slo && t / d < best_occupancy - 1e-12) {
        best_occupancy = t / d;
        best_duty = d;
      }
    }
    // Every later round is longer than this step: past the SLO it cannot fit, and with latencies
    // that do not fall with the batch neither can one whose Σ L + d already reaches it.
    if (duty >= min_slo || (monotone && duty + total >= min_slo)) break;
    left = duty;
  }
  if (best_duty <= 0) return std::nullopt;
  Round round;
  round.duty_ms = best_duty;
  double total = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    const int batch = RoundBatch(best_duty, members[i].rate_rps, members.size() > 1);
    round.batches.push_back(batch);
    round.latencies_ms.push_back(cache.Latency(i, batch));
    total += round.latencies_ms.back();
  }
  round.occupancy = total / best_duty;
  return round;
}

}  // namespace tessera::scheduler
