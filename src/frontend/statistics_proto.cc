#include "statistics_proto.h"

#include "absl/strings/str_cat.h"

namespace tessera::frontend {
namespace {

void FillDuration(const dispatch::Duration& from, inference::StatisticDuration* to) {
  to->set_count(from.count);
  to->set_ns(from.ns);
}

}  // namespace

void FillModelStatistics(const ModelStatsEntry& entry, inference::ModelStatistics* out) {
  dispatch::ModelStatsSnapshot s = entry.stats->Snapshot();
  out->set_name(entry.name);
  out->set_version(absl::StrCat(entry.version));
  out->set_last_inference(s.last_inference_ms);
  out->set_inference_count(s.inference_count);
  out->set_execution_count(s.execution_count);
  auto* infer = out->mutable_inference_stats();
  FillDuration(s.success, infer->mutable_success());
  FillDuration(s.fail, infer->mutable_fail());
  FillDuration(s.queue, infer->mutable_queue());
  FillDuration(s.compute_input, infer->mutable_compute_input());
  FillDuration(s.compute_infer, infer->mutable_compute_infer());
  FillDuration(s.compute_output, infer->mutable_compute_output());
  FillDuration(s.cache_hit, infer->mutable_cache_hit());
  FillDuration(s.cache_miss, infer->mutable_cache_miss());
  for (const auto& [size, batch] : s.batch_stats) {
    auto* b = out->add_batch_stats();
    b->set_batch_size(static_cast<uint64_t>(size));
    FillDuration(batch.compute_input, b->mutable_compute_input());
    FillDuration(batch.compute_infer, b->mutable_compute_infer());
    FillDuration(batch.compute_output, b->mutable_compute_output());
  }
}

}  // namespace tessera::frontend
