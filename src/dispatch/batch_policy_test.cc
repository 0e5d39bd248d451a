#include "tessera/dispatch/batch_policy.h"

#include <gtest/gtest.h>

namespace tessera::dispatch {
namespace {

constexpr uint64_t kMs = 1000000;

BatchPolicyOptions Batching(int64_t max, uint64_t delay_ns, std::vector<int64_t> preferred = {}) {
  return BatchPolicyOptions{true, max, std::move(preferred), delay_ns};
}

std::vector<PendingRequest> Rows(std::vector<int64_t> rows, uint64_t arrival = 0) {
  std::vector<PendingRequest> pending;
  for (int64_t r : rows) pending.push_back({r, arrival, 7});
  return pending;
}

TEST(BatchPolicyTest, EmptyQueueWaitsForArrival) {
  BatchDecision d = DecideBatch({}, 0, Batching(8, kMs));
  EXPECT_EQ(d.count, 0u);
  EXPECT_EQ(d.wake_at_ns, 0u);
}

TEST(BatchPolicyTest, NoBatchingRunsOneAtATime) {
  BatchDecision d = DecideBatch(Rows({1, 1, 1}), 0, BatchPolicyOptions{});
  EXPECT_EQ(d.count, 1u);
}

TEST(BatchPolicyTest, ZeroDelayTakesEverythingThatFits) {
  BatchDecision d = DecideBatch(Rows({1, 2, 3, 4}), 0, Batching(8, 0));
  EXPECT_EQ(d.count, 3u);  // 1+2+3 = 6; +4 would overflow 8
}

TEST(BatchPolicyTest, WaitsUntilOldestRequestsDelayExpires) {
  auto pending = Rows({1, 1}, 10 * kMs);
  BatchDecision d = DecideBatch(pending, 10 * kMs + 1, Batching(8, 2 * kMs));
  EXPECT_EQ(d.count, 0u);
  EXPECT_EQ(d.wake_at_ns, 12 * kMs);
  d = DecideBatch(pending, 12 * kMs, Batching(8, 2 * kMs));
  EXPECT_EQ(d.count, 2u);
}

TEST(BatchPolicyTest, FullBatchGoesAtOnce) {
  BatchDecision d = DecideBatch(Rows({4, 4}), 0, Batching(8, 100 * kMs));
  EXPECT_EQ(d.count, 2u);
}

TEST(BatchPolicyTest, OverflowingNextRequestSendsWhatFits) {
  BatchDecision d = DecideBatch(Rows({3, 3, 3}), 0, Batching(8, 100 * kMs));
  EXPECT_EQ(d.count, 2u);
}

TEST(BatchPolicyTest, PreferredSizeSendsThatPrefix) {
  // Rows accumulate 2, 4, 5: the longest prefix at a preferred size is 2 requests (4 rows).
  BatchDecision d = DecideBatch(Rows({2, 2, 1}), 0, Batching(8, 100 * kMs, {4, 8}));
  EXPECT_EQ(d.count, 2u);
}

TEST(BatchPolicyTest, DifferentShapesAreNotMixed) {
  std::vector<PendingRequest> pending = {{1, 0, 1}, {1, 0, 1}, {1, 0, 2}, {1, 0, 1}};
  BatchDecision d = DecideBatch(pending, 0, Batching(8, 100 * kMs));
  EXPECT_EQ(d.count, 2u);
}

TEST(BatchPolicyTest, OversizedRequestStillRunsAlone) {
  BatchDecision d = DecideBatch(Rows({16}), 0, Batching(8, 100 * kMs));
  EXPECT_EQ(d.count, 1u);
}

}  // namespace
}  // namespace tessera::dispatch
