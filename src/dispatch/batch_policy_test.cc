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

TEST(DutyCycleBatchTest, WaitsForTheRoundWhileTheBatchIsNotFull) {
  DutyCyclePolicy policy{4, 10'000'000};
  BatchDecision d = DecideDutyCycleBatch(Rows({1, 1}), 3'000'000, 1'000'000, policy);
  EXPECT_EQ(d.count, 0u);
  EXPECT_EQ(d.wake_at_ns, 11'000'000u);  // the round started at 1 ms and lasts 10 ms
}

TEST(DutyCycleBatchTest, DispatchesAtTheEndOfTheRoundWithWhatItHas) {
  DutyCyclePolicy policy{4, 10'000'000};
  BatchDecision d = DecideDutyCycleBatch(Rows({1, 1}), 11'000'000, 1'000'000, policy);
  EXPECT_EQ(d.count, 2u);
}

TEST(DutyCycleBatchTest, DispatchesAsSoonAsThePlannedBatchIsFull) {
  DutyCyclePolicy policy{4, 10'000'000};
  BatchDecision d = DecideDutyCycleBatch(Rows({1, 2, 1, 1, 1}), 2'000'000, 1'000'000, policy);
  EXPECT_EQ(d.count, 3u);  // 1 + 2 + 1 = 4 rows; the rest waits for the next round
}

TEST(DutyCycleBatchTest, NeverExceedsThePlannedRowsExceptForOneOversizedRequest) {
  DutyCyclePolicy policy{2, 10'000'000};
  EXPECT_EQ(DecideDutyCycleBatch(Rows({1, 2}), 0, 0, policy).count, 1u);
  EXPECT_EQ(DecideDutyCycleBatch(Rows({5, 1}), 0, 0, policy).count, 1u);
}

TEST(DutyCycleBatchTest, ADifferentShapeClosesTheBatch) {
  DutyCyclePolicy policy{8, 10'000'000};
  auto pending = Rows({1, 1, 1});
  pending[2].shape_key = 9;
  EXPECT_EQ(DecideDutyCycleBatch(pending, 0, 0, policy).count, 2u);
}

TEST(DutyCycleBatchTest, NoRoundMeansDispatchNow) {
  DutyCyclePolicy policy{8, 0};
  EXPECT_EQ(DecideDutyCycleBatch(Rows({1}), 0, 0, policy).count, 1u);
  EXPECT_EQ(DecideDutyCycleBatch({}, 0, 0, policy).count, 0u);
}

TEST(MissesSloTest, JudgesTheFinishTimeAgainstTheDeadline) {
  // Arrived at 0 with a 10 ms SLO; the batch runs 4 ms.
  EXPECT_FALSE(MissesSlo(0, 6'000'000, 10'000'000, 4'000'000));
  EXPECT_TRUE(MissesSlo(0, 6'000'001, 10'000'000, 4'000'000));
  EXPECT_FALSE(MissesSlo(0, 60'000'000, 0, 4'000'000));   // no SLO
  EXPECT_FALSE(MissesSlo(0, 60'000'000, 10'000'000, 0));  // no planned latency
}

}  // namespace
}  // namespace tessera::dispatch
