#include "tessera/dispatch/model_stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::dispatch {
namespace {

using ::testing::DoubleNear;
using ::testing::Pair;

RequestTiming Timing(uint64_t queue_us, uint64_t infer_us) {
  RequestTiming timing;
  timing.queue_ns = queue_us * 1000;
  timing.compute_input_ns = 1000;
  timing.compute_infer_ns = infer_us * 1000;
  timing.compute_output_ns = 2000;
  return timing;
}

TEST(ModelStatsTest, KeepsNoSummariesUnlessAsked) {
  ModelStats stats;
  stats.RecordSuccess(1, 5000, Timing(1, 2));
  EXPECT_FALSE(stats.Summaries().has_value());
  EXPECT_EQ(stats.Snapshot().success.count, 1u);
  EXPECT_FALSE(ModelStats(std::vector<SummaryQuantile>{}).Summaries().has_value());
}

TEST(ModelStatsTest, SummariesReportTheQuantilesOfEachLatency) {
  ModelStats stats({{0.5, 0.01}, {0.9, 0.01}, {0.99, 0.001}});
  // Requests of 1..1000 us, queued 1..1000 us, running 2000..1001 us: a known distribution.
  for (uint64_t i = 1; i <= 1000; ++i) stats.RecordSuccess(1, i * 1000, Timing(i, 2001 - i));
  stats.RecordFailure("BACKEND", 99'000'000);  // failures stay out of the summaries
  std::optional<LatencySummaries> summaries = stats.Summaries();
  ASSERT_TRUE(summaries.has_value());
  const LatencySummary& request = summaries->request;
  EXPECT_EQ(request.count, 1000u);
  EXPECT_DOUBLE_EQ(request.sum_us, 500500);
  // Within each quantile's rank error: the 50th of 1..1000 is 500 +- 10 ranks.
  ASSERT_EQ(request.quantiles_us.size(), 3u);
  EXPECT_THAT(request.quantiles_us[0], Pair(0.5, DoubleNear(500, 10)));
  EXPECT_THAT(request.quantiles_us[1], Pair(0.9, DoubleNear(900, 10)));
  EXPECT_THAT(request.quantiles_us[2], Pair(0.99, DoubleNear(990, 1)));
  EXPECT_THAT(summaries->queue.quantiles_us[0], Pair(0.5, DoubleNear(500, 10)));
  EXPECT_THAT(summaries->compute_infer.quantiles_us[1], Pair(0.9, DoubleNear(1900, 10)));
  EXPECT_DOUBLE_EQ(summaries->compute_input.sum_us, 1000);
  EXPECT_DOUBLE_EQ(summaries->compute_output.sum_us, 2000);
  EXPECT_EQ(summaries->cache_hit.count, 0u);
}

TEST(ModelStatsTest, CacheHitsAndMissesHaveTheirOwnSummaries) {
  ModelStats stats({{0.5, 0.05}});
  stats.RecordCacheMiss(40'000);
  stats.RecordSuccess(1, 100'000, Timing(10, 50));
  stats.RecordCacheHit(8'000, 3'000);
  stats.RecordCacheHit(6'000, 5'000);
  LatencySummaries summaries = *stats.Summaries();
  EXPECT_EQ(summaries.cache_miss.count, 1u);
  EXPECT_DOUBLE_EQ(summaries.cache_miss.sum_us, 40);
  EXPECT_EQ(summaries.cache_hit.count, 2u);
  EXPECT_DOUBLE_EQ(summaries.cache_hit.sum_us, 8);
  // A hit is a successful request: in the request summary, as in the success counter, but it
  // neither queued nor ran.
  EXPECT_EQ(summaries.request.count, 3u);
  EXPECT_DOUBLE_EQ(summaries.request.sum_us, 114);
  EXPECT_EQ(summaries.queue.count, 1u);
}

}  // namespace
}  // namespace tessera::dispatch
