// Per model-version counters behind both the ModelStatistics RPC and the Prometheus endpoint, so the
// two can never disagree. Thread-safe: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "tessera/dispatch/request.h"

namespace tessera::dispatch {

struct Duration {
  uint64_t count = 0;
  uint64_t ns = 0;
};

struct BatchStats {
  Duration compute_input;
  Duration compute_infer;
  Duration compute_output;
};

struct ModelStatsSnapshot {
  uint64_t last_inference_ms = 0;  // wall clock, ms since the epoch
  uint64_t inference_count = 0;    // rows inferred (a batch-4 request counts 4)
  uint64_t execution_count = 0;    // batches executed
  Duration success;                // end-to-end duration of successful requests
  Duration fail;
  Duration queue;
  Duration compute_input;
  Duration compute_infer;
  Duration compute_output;
  // Requests answered from the response cache (also counted in success; the duration is the
  // lookup and the copy out), and requests the cache did not have (the lookup and the insert).
  Duration cache_hit;
  Duration cache_miss;
  std::map<int64_t, BatchStats> batch_stats;       // by executed batch size
  std::map<std::string, uint64_t> failures_by_reason;  // REJECTED, BACKEND, OTHER, ...
  uint64_t pending = 0;                            // enqueued, not yet executing
  uint64_t arrivals = 0;     // requests accepted into the queue (the control loop's rate source)
  uint64_t slo_dropped = 0;  // requests dropped because they could no longer meet the SLO
  uint64_t active_sequences = 0;  // a stateful model's sequences started and not ended/released
  // Batches run by multi-granularity workers, by the worker's batch size (not the batch's rows).
  std::map<int64_t, uint64_t> worker_batches;
};

// A quantile a latency summary tracks, and the rank error it may have: {0.99, 0.001} reports a
// value between the 98.9th and the 99.1st percentile (Triton's --metrics-config
// summary_quantiles).
struct SummaryQuantile {
  double quantile = 0;
  double error = 0;
};

// One latency's Prometheus summary over the last 60 s: a count and sum since the start, and the
// quantiles of the window, all in microseconds.
struct LatencySummary {
  uint64_t count = 0;
  double sum_us = 0;
  std::vector<std::pair<double, double>> quantiles_us;  // (quantile, value)
};

// What Triton's nv_inference_*_summary_us and cache summaries report. request, queue and compute_*
// are observed for each successful request (request also for cache hits), like the counters.
struct LatencySummaries {
  LatencySummary request;
  LatencySummary queue;
  LatencySummary compute_input;
  LatencySummary compute_infer;
  LatencySummary compute_output;
  LatencySummary cache_hit;
  LatencySummary cache_miss;
};

class LatencySummaryRecorder;

class ModelStats {
 public:
  ModelStats();
  // Also keeps quantile summaries of each latency; none when `summary_quantiles` is empty.
  explicit ModelStats(const std::vector<SummaryQuantile>& summary_quantiles);
  ~ModelStats();
  ModelStats(const ModelStats&) = delete;
  ModelStats& operator=(const ModelStats&) = delete;

  void RecordSuccess(int64_t rows, uint64_t request_ns, const RequestTiming& timing);
  // `reason` is Triton's failure label: REJECTED (queue full / dropped), BACKEND (executor or
  // engine error), OTHER (validation).
  void RecordFailure(const std::string& reason, uint64_t request_ns);
  // A request answered from the response cache: a success that ran nothing.
  void RecordCacheHit(uint64_t request_ns, uint64_t lookup_ns);
  void RecordCacheMiss(uint64_t lookup_and_insert_ns);
  void RecordExecution(int64_t batch_size, const RequestTiming& batch_timing);
  void AddPending(int64_t delta);
  // A request accepted into the queue: counts it in arrivals and in pending.
  void RecordArrival();
  // A request dropped by the SLO rule: a REJECTED failure, also counted in slo_dropped.
  void RecordSloDrop(uint64_t request_ns);
  // A batch handed to a multi-granularity worker of `worker_batch_size`.
  void RecordWorkerBatch(int64_t worker_batch_size);
  void SetActiveSequences(uint64_t count);

  ModelStatsSnapshot Snapshot() const;
  // The summaries' values now; nullopt when this ModelStats keeps none. Computing the quantiles
  // costs more than a Snapshot, so only the metrics endpoint asks.
  std::optional<LatencySummaries> Summaries() const;

 private:
  // Null unless summaries were asked for: then each Record* also observes its latencies there
  // (under the recorder's own locks, after mu_ is released).
  const std::unique_ptr<LatencySummaryRecorder> summaries_;
  mutable std::mutex mu_;
  ModelStatsSnapshot stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::dispatch
