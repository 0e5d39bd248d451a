#include "tessera/dispatch/model_stats.h"

#include "tessera/common/clock.h"

namespace tessera::dispatch {
namespace {

void Add(Duration& duration, uint64_t ns) {
  ++duration.count;
  duration.ns += ns;
}

}  // namespace

void ModelStats::RecordSuccess(int64_t rows, uint64_t request_ns, const RequestTiming& timing) {
  std::lock_guard lock(mu_);
  stats_.last_inference_ms = WallNs() / 1000000;
  stats_.inference_count += static_cast<uint64_t>(rows);
  Add(stats_.success, request_ns);
  Add(stats_.queue, timing.queue_ns);
  Add(stats_.compute_input, timing.compute_input_ns);
  Add(stats_.compute_infer, timing.compute_infer_ns);
  Add(stats_.compute_output, timing.compute_output_ns);
}

void ModelStats::RecordCacheHit(uint64_t request_ns, uint64_t lookup_ns) {
  std::lock_guard lock(mu_);
  stats_.last_inference_ms = WallNs() / 1000000;
  Add(stats_.success, request_ns);
  Add(stats_.cache_hit, lookup_ns);
}

void ModelStats::RecordCacheMiss(uint64_t lookup_and_insert_ns) {
  std::lock_guard lock(mu_);
  Add(stats_.cache_miss, lookup_and_insert_ns);
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

}  // namespace tessera::dispatch
