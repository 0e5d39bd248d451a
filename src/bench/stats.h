// Outcomes of requests and the statistics tessera-bench reports from them.
//
// Every request the load generator meant to send has one Outcome, whether it was sent, answered,
// failed or never sent, so nothing is hidden: counts always add up
//   intended = ok + sum(errors by status) + not_sent + unfinished.
// Definitions (docs/bench.md):
//   window        requests whose *scheduled* send time falls in [measure_begin, measure_end)
//   throughput    successful responses of window requests / window length (requests/s)
//   goodput       successful responses within the SLO / window length
//   violation %   100 * (intended - within SLO) / intended: errors, client drops and slow answers
//                 all violate the SLO
//   late send     a request sent more than `late_threshold_ns` after its scheduled time (client
//   lag) percentiles   nearest rank over successful latencies (Percentile below)
//
// Thread-safety: plain values and functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessera::bench {

// Outcome codes besides gRPC's (0 = OK, 1..16 = grpc::StatusCode).
inline constexpr int kNotSent = -1;     // dropped by the client (in-flight limit reached)
inline constexpr int kUnfinished = -2;  // no answer by the end of the drain period

struct Outcome {
  int32_t model = 0;  // index into the scenario's models
  int32_t code = kUnfinished;
  int64_t scheduled_ns = 0;  // intended send time, ns from the run start
  int64_t sent_ns = -1;      // actual send time, ns from the run start (-1: not sent)
  int64_t done_ns = -1;      // completion time, ns from the run start (-1: none)
  int64_t latency_ns() const { return done_ns - sent_ns; }
};

// Nearest-rank percentile of ascending `sorted`: the smallest value v with at least p% of the
// values <= v (p in (0, 100]; p = 100 is the maximum). 0 for an empty list.
int64_t Percentile(const std::vector<int64_t>& sorted, double p);

// Name of an outcome code: "OK", "NOT_FOUND", ..., "CLIENT_DROPPED", "UNFINISHED".
std::string OutcomeCodeName(int code);

struct LatencySummary {
  int64_t count = 0;
  double mean_ms = 0, p50_ms = 0, p90_ms = 0, p95_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0,
         min_ms = 0;
};
LatencySummary SummarizeLatencies(std::vector<int64_t> latencies_ns);

struct Summary {
  std::string model;  // "overall" for the total
  double slo_ms = 0;  // 0 = no SLO (every success counts as good)
  double window_s = 0;
  int64_t intended = 0;
  int64_t sent = 0;
  int64_t ok = 0;
  int64_t within_slo = 0;
  int64_t not_sent = 0;
  int64_t unfinished = 0;
  int64_t late_sends = 0;
  std::map<std::string, int64_t> errors;  // by status name; excludes CLIENT_DROPPED/UNFINISHED
  int64_t error_count = 0;
  double intended_rate = 0;  // requests/s
  double send_rate = 0;      // requests/s actually sent
  double throughput = 0;     // requests/s
  double goodput = 0;        // requests/s
  double violation_pct = 0;
  LatencySummary latency;      // of successful requests
  double send_lag_p99_ms = 0;  // actual - scheduled send time
  double send_lag_max_ms = 0;
  // perf_analyzer's stability rule on 3 equal sub-windows (serving-systems.md §4.4): throughput
  // and p99 latency each within `stability_pct` (max/min - 1).
  std::vector<double> subwindow_throughput;
  std::vector<double> subwindow_p99_ms;
  bool stable = false;
};

struct SummaryOptions {
  int64_t measure_begin_ns = 0;
  int64_t measure_end_ns = 0;
  int64_t late_threshold_ns = 1'000'000;  // 1 ms
  double stability_pct = 10;
};

// One Summary per model (in `models` order) followed by the overall one. `slo_ms[i]` is model i's
// SLO (0 = none).
std::vector<Summary> Summarize(const std::vector<Outcome>& outcomes,
                               const std::vector<std::string>& models,
                               const std::vector<double>& slo_ms, const SummaryOptions& options);

// Per-second timeline of a run (all requests, warm-up included), by completion time for answers
// and by send time for sends: what the goodput-over-time plot shows.
struct TimelinePoint {
  int64_t second = 0;
  std::string model;
  int64_t sent = 0, ok = 0, within_slo = 0, errors = 0;
  double p99_ms = 0;
};
std::vector<TimelinePoint> Timeline(const std::vector<Outcome>& outcomes,
                                    const std::vector<std::string>& models,
                                    const std::vector<double>& slo_ms);

}  // namespace tessera::bench
