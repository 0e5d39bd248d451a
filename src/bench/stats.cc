#include "stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace tessera::bench {
namespace {

constexpr const char* kGrpcCodeNames[] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

double Ms(int64_t ns) { return static_cast<double>(ns) * 1e-6; }

bool WithinStability(const std::vector<double>& values, double pct) {
  if (values.empty()) return false;
  auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  if (*lo <= 0) return *hi <= 0;
  return (*hi / *lo - 1.0) * 100.0 <= pct;
}

struct Accumulator {
  std::vector<int64_t> latencies;
  std::vector<int64_t> lags;
  std::vector<std::vector<int64_t>> sub_latencies = std::vector<std::vector<int64_t>>(3);
  std::vector<int64_t> sub_ok = std::vector<int64_t>(3, 0);
};

}  // namespace

int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  if (p <= 0) return sorted.front();
  // Rank ceil(p/100 * n), 1-based; the small epsilon keeps 99.9% of 1000 at rank 999, not 1000,
  // despite floating-point error in p/100 * n.
  double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()) - 1e-9);
  size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

std::string OutcomeCodeName(int code) {
  if (code == kNotSent) return "CLIENT_DROPPED";
  if (code == kUnfinished) return "UNFINISHED";
  if (code >= 0 && code <= 16) return kGrpcCodeNames[code];
  return absl::StrCat("CODE_", code);
}

LatencySummary SummarizeLatencies(std::vector<int64_t> latencies_ns) {
  LatencySummary s;
  s.count = static_cast<int64_t>(latencies_ns.size());
  if (latencies_ns.empty()) return s;
  std::sort(latencies_ns.begin(), latencies_ns.end());
  double sum = std::accumulate(latencies_ns.begin(), latencies_ns.end(), 0.0);
  s.mean_ms = Ms(1) * sum / static_cast<double>(latencies_ns.size());
  s.min_ms = Ms(latencies_ns.front());
  s.p50_ms = Ms(Percentile(latencies_ns, 50));
  s.p90_ms = Ms(Percentile(latencies_ns, 90));
  s.p95_ms = Ms(Percentile(latencies_ns, 95));
  s.p99_ms = Ms(Percentile(latencies_ns, 99));
  s.p999_ms = Ms(Percentile(latencies_ns, 99.9));
  s.max_ms = Ms(latencies_ns.back());
  return s;
}

std::vector<Summary> Summarize(const std::vector<Outcome>& outcomes,
                               const std::vector<std::string>& models,
                               const std::vector<double>& slo_ms, const SummaryOptions& options) {
  const size_t n = models.size();
  std::vector<Summary> out(n + 1);
  std::vector<Accumulator> acc(n + 1);
  const int64_t begin = options.measure_begin_ns;
  const int64_t end = options.measure_end_ns;
  const double window_s = static_cast<double>(end - begin) * 1e-9;
  for (size_t i = 0; i <= n; ++i) {
    out[i].model = i < n ? models[i] : "overall";
    out[i].slo_ms = i < n ? slo_ms[i] : 0;
    out[i].window_s = window_s;
  }
  for (const Outcome& o : outcomes) {
    if (o.scheduled_ns < begin || o.scheduled_ns >= end) continue;
    if (o.model < 0 || static_cast<size_t>(o.model) >= n) continue;
    const double slo = slo_ms[o.model];
    const int sub = std::min<int>(
        2, static_cast<int>(3 * (o.scheduled_ns - begin) / std::max<int64_t>(1, end - begin)));
    for (size_t target : {static_cast<size_t>(o.model), n}) {
      Summary& s = out[target];
      Accumulator& a = acc[target];
      ++s.intended;
      if (o.sent_ns >= 0) {
        ++s.sent;
        int64_t lag = o.sent_ns - o.scheduled_ns;
        a.lags.push_back(lag);
        if (lag > options.late_threshold_ns) ++s.late_sends;
      }
      if (o.code == 0) {
        ++s.ok;
        a.latencies.push_back(o.latency_ns());
        a.sub_latencies[sub].push_back(o.latency_ns());
        ++a.sub_ok[sub];
        if (slo <= 0 || Ms(o.latency_ns()) <= slo) ++s.within_slo;
      } else if (o.code == kNotSent) {
        ++s.not_sent;
      } else if (o.code == kUnfinished) {
        ++s.unfinished;
      } else {
        ++s.errors[OutcomeCodeName(o.code)];
        ++s.error_count;
      }
    }
  }
  for (size_t i = 0; i <= n; ++i) {
    Summary& s = out[i];
    Accumulator& a = acc[i];
    if (window_s > 0) {
      s.intended_rate = s.intended / window_s;
      s.send_rate = s.sent / window_s;
      s.throughput = s.ok / window_s;
      s.goodput = s.within_slo / window_s;
    }
    s.violation_pct =
        s.intended > 0 ? 100.0 * static_cast<double>(s.intended - s.within_slo) / s.intended : 0;
    s.latency = SummarizeLatencies(std::move(a.latencies));
    std::sort(a.lags.begin(), a.lags.end());
    s.send_lag_p99_ms = Ms(Percentile(a.lags, 99));
    s.send_lag_max_ms = a.lags.empty() ? 0 : Ms(a.lags.back());
    for (int k = 0; k < 3; ++k) {
      s.subwindow_throughput.push_back(window_s > 0 ? a.sub_ok[k] / (window_s / 3) : 0);
      std::sort(a.sub_latencies[k].begin(), a.sub_latencies[k].end());
      s.subwindow_p99_ms.push_back(Ms(Percentile(a.sub_latencies[k], 99)));
    }
    s.stable = WithinStability(s.subwindow_throughput, options.stability_pct) &&
               WithinStability(s.subwindow_p99_ms, options.stability_pct);
  }
  return out;
}

std::vector<TimelinePoint> Timeline(const std::vector<Outcome>& outcomes,
                                    const std::vector<std::string>& models,
                                    const std::vector<double>& slo_ms) {
  // (second, model) -> point; model index n is "overall".
  const size_t n = models.size();
  std::map<std::pair<int64_t, size_t>, TimelinePoint> points;
  std::map<std::pair<int64_t, size_t>, std::vector<int64_t>> latencies;
  auto point = [&](int64_t second, size_t m) -> TimelinePoint& {
    TimelinePoint& p = points[{second, m}];
    p.second = second;
    p.model = m < n ? models[m] : "overall";
    return p;
  };
  for (const Outcome& o : outcomes) {
    if (o.model < 0 || static_cast<size_t>(o.model) >= n) continue;
    for (size_t m : {static_cast<size_t>(o.model), n}) {
      if (o.sent_ns >= 0) ++point(o.sent_ns / 1'000'000'000, m).sent;
      if (o.done_ns < 0) continue;
      TimelinePoint& p = point(o.done_ns / 1'000'000'000, m);
      if (o.code == 0) {
        ++p.ok;
        const double slo = slo_ms[o.model];
        if (slo <= 0 || Ms(o.latency_ns()) <= slo) ++p.within_slo;
        latencies[{p.second, m}].push_back(o.latency_ns());
      } else {
        ++p.errors;
      }
    }
  }
  std::vector<TimelinePoint> out;
  for (auto& [key, p] : points) {
    auto it = latencies.find(key);
    if (it != latencies.end()) {
      std::sort(it->second.begin(), it->second.end());
      p.p99_ms = Ms(Percentile(it->second, 99));
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace tessera::bench
