#include "tessera/dispatch/model_stats.h"

#include <array>

#include "prometheus/summary.h"
#include "tessera/common/clock.h"

namespace tessera::dispatch {
namespace {

void Add(Duration& duration, uint64_t ns) {
  ++duration.count;
  duration.ns += ns;
}

enum SummaryKind : size_t {
  kRequest,
  kQueue,
  kComputeInput,
  kComputeInfer,
  kComputeOutput,
  kCacheHit,
  kCacheMiss,
  kSummaryKinds
};

LatencySummary ToLatencySummary(const prometheus::Summary& summary) {
  const prometheus::ClientMetric metric = summary.Collect();
  LatencySummary out;
  out.count = metric.summary.sample_count;
  out.sum_us = metric.summary.sample_sum;
  for (const auto& q : metric.summary.quantile) out.quantiles_us.emplace_back(q.quantile, q.value);
  return out;
}

}  // namespace

// prometheus-cpp's Summary: CKMS quantiles over a 60 s window in 5 age buckets, Triton's setting.
class LatencySummaryRecorder {
 public:
  explicit LatencySummaryRecorder(const prometheus::Summary::Quantiles& quantiles)
      : summaries_{prometheus::Summary(quantiles), prometheus::Summary(quantiles),
                   prometheus::Summary(quantiles), prometheus::Summary(quantiles),
                   prometheus::Summary(quantiles), prometheus::Summary(quantiles),
                   prometheus::Summary(quantiles)} {}

  void Observe(SummaryKind kind, uint64_t ns) { summaries_[kind].Observe(ns / 1e3); }

  LatencySummaries Values() const {
    LatencySummaries out;
    out.request = ToLatencySummary(summaries_[kRequest]);
    out.queue = ToLatencySummary(summaries_[kQueue]);
    out.compute_input = ToLatencySummary(summaries_[kComputeInput]);
    out.compute_infer = ToLatencySummary(summaries_[kComputeInfer]);
    out.compute_output = ToLatencySummary(summaries_[kComputeOutput]);
    out.cache_hit = ToLatencySummary(summaries_[kCacheHit]);
    out.cache_miss = ToLatencySummary(summaries_[kCacheMiss]);
    return out;
  }

 private:
  std::array<prometheus::Summary, kSummaryKinds> summaries_;
};

namespace {

std::unique_ptr<LatencySummaryRecorder> MakeRecorder(const std::vector<SummaryQuantile>& wanted) {
  if (wanted.empty()) return nullptr;
  prometheus::Summary::Quantiles quantiles;
  for (const SummaryQuantile& q : wanted) quantiles.emplace_back(q.quantile, q.error);
  return std::make_unique<LatencySummaryRecorder>(quantiles);
}

}  // namespace

ModelStats::ModelStats() = default;
ModelStats::ModelStats(const std::vector<SummaryQuantile>& summary_quantiles)
    : summaries_(MakeRecorder(summary_quantiles)) {}
ModelStats::~ModelStats() = default;

void ModelStats::RecordSuccess(int64_t rows, uint64_t request_ns, const RequestTiming& timing) {
  std::unique_lock lock(mu_);
  stats_.last_inference_ms = WallNs() / 1000000;
  stats_.inference_count += static_cast<uint64_t>(rows);
  Add(stats_.success, request_ns);
  Add(stats_.queue, timing.queue_ns);
  Add(stats_.compute_input, timing.compute_input_ns);
  Add(stats_.compute_infer, timing.compute_infer_ns);
  Add(stats_.compute_output, timing.compute_output_ns);
  lock.unlock();
  if (summaries_ != nullptr) {
    summaries_->Observe(kRequest, request_ns);
    summaries_->Observe(kQueue, timing.queue_ns);
    summaries_->Observe(kComputeInput, timing.compute_input_ns);
    summaries_->Observe(kComputeInfer, timing.compute_infer_ns);
    summaries_->Observe(kComputeOutput, timing.compute_output_ns);
  }
}

void ModelStats::RecordCacheHit(uint64_t request_ns, uint64_t lookup_ns) {
  {
    std::lock_guard lock(mu_);
    stats_.last_inference_ms = WallNs() / 1000000;
    Add(stats_.success, request_ns);
    Add(stats_.cache_hit, lookup_ns);
  }
  if (summaries_ != nullptr) {
    summaries_->Observe(kRequest, request_ns);
    summaries_->Observe(kCacheHit, lookup_ns);
  }
}

void ModelStats::RecordCacheMiss(uint64_t lookup_and_insert_ns) {
  {
    std::lock_guard lock(mu_);
    Add(stats_.cache_miss, lookup_and_insert_ns);
  }
  if (summaries_ != nullptr) summaries_->Observe(kCacheMiss, lookup_and_insert_ns);
}

void ModelStats::RecordFailure(const std::string& reason, uint64_t request_ns) {
  std::lock_guard lock(mu_);
  Add(stats_.fail, request_ns);
  ++stats_.failures_by_reason[reason];
}

void ModelStats::RecordExecution(int64_t batch_size, const RequestTiming& batch_timing) {
  std::lock_guard lock(mu_);
  ++stats_.execution_count;
  BatchStats& batch = stats_.batch_stats[batch_size];
  Add(batch.compute_input, batch_timing.compute_input_ns);
  Add(batch.compute_infer, batch_timing.compute_infer_ns);
  Add(batch.compute_output, batch_timing.compute_output_ns);
}

void ModelStats::AddPending(int64_t delta) {
  std::lock_guard lock(mu_);
  stats_.pending = static_cast<uint64_t>(static_cast<int64_t>(stats_.pending) + delta);
}

void ModelStats::RecordArrival() {
  std::lock_guard lock(mu_);
  ++stats_.arrivals;
  ++stats_.pending;
}

void ModelStats::RecordSloDrop(uint64_t request_ns) {
  std::lock_guard lock(mu_);
  Add(stats_.fail, request_ns);
  ++stats_.failures_by_reason["REJECTED"];
  ++stats_.slo_dropped;
}

void ModelStats::RecordWorkerBatch(int64_t worker_batch_size) {
  std::lock_guard lock(mu_);
  ++stats_.worker_batches[worker_batch_size];
}

void ModelStats::SetActiveSequences(uint64_t count) {
  std::lock_guard lock(mu_);
  stats_.active_sequences = count;
}

ModelStatsSnapshot ModelStats::Snapshot() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::optional<LatencySummaries> ModelStats::Summaries() const {
  if (summaries_ == nullptr) return std::nullopt;
  return summaries_->Values();
}

}  // namespace tessera::dispatch
