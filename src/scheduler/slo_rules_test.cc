#include "slo_rules.h"

#include "gtest/gtest.h"
#include "profile_fixtures_for_test.h"

namespace tessera::scheduler {
namespace {

using testing::LinearProfileForTest;

// L(b,100) = 2 + b ms.
const ModelProfile& Model() {
  static const ModelProfile p = LinearProfileForTest("m", 2, 1);
  return p;
}

TEST(SloRulesTest, SaturatedBatchIsLargestWithTwiceLatencyWithinSlo) {
  // 2·(2 + b) ≤ 30 → b ≤ 13.
  EXPECT_EQ(MaxSaturatedBatch(Model(), 100, 30, 1, 1, 32), 13);
  // At 50 %: 2·2·(2 + b) ≤ 30 → b ≤ 5.
  EXPECT_EQ(MaxSaturatedBatch(Model(), 50, 30, 1, 1, 32), 5);
  // Margin 1.5: 3·(2 + b) ≤ 30 → b ≤ 8.
  EXPECT_EQ(MaxSaturatedBatch(Model(), 100, 30, 1, 1.5, 32), 8);
  EXPECT_EQ(MaxSaturatedBatch(Model(), 100, 5, 1, 1, 32), 0);  // 2·3 > 5
  EXPECT_EQ(MaxSaturatedBatch(Model(), 100, 1000, 1, 1, 32), 32);
  EXPECT_DOUBLE_EQ(SaturatedThroughputRps(Model(), 13, 100, 1, 1), 13 * 1000.0 / 15);
}

TEST(SloRulesTest, ResidueBatchMeetsLatencyPlusWait) {
  // r = 200 rps: duty = 5·b ms; need 2 + b ≤ 5b and 2 + b + 5b ≤ 40 → b ≤ 6.
  EXPECT_EQ(MaxResidueBatch(Model(), 100, 200, 40, 1, 1, 32), 6);
  // r = 2000 rps: duty = b/2 ms, 2 + b ≤ b/2 never holds.
  EXPECT_EQ(MaxResidueBatch(Model(), 100, 2000, 40, 1, 1, 32), 0);
}

TEST(SloRulesTest, RoundOfTwoModels) {
  const ModelProfile a = LinearProfileForTest("a", 2, 1);
  const ModelProfile b = LinearProfileForTest("b", 4, 0.5);
  std::vector<RoundMember> members = {{&a, 100, 50, 1}, {&b, 200, 50, 1}};
  auto round = FitRound(members, 100, 1, 32);
  ASSERT_TRUE(round.has_value());
  // Every rule holds for the chosen duty.
  const double total = round->latencies_ms[0] + round->latencies_ms[1];
  EXPECT_LE(total, round->duty_ms + 1e-9);
  EXPECT_LE(total + round->duty_ms, 50 + 1e-9);
  EXPECT_GE(round->batches[0], round->duty_ms * 100 / 1000 - 1e-9);
  EXPECT_GE(round->batches[1], round->duty_ms * 200 / 1000 - 1e-9);
  // By hand: d = 20 ms → b = (2, 4), L = 4 + 6 = 10 ≤ 20, 10 + 20 ≤ 50, occupancy 0.5;
  // d = 30 → b = (3, 6), L = 5 + 7 = 12, 12 + 30 = 42 ≤ 50, occupancy 0.4;
  // d = 35 → b = (⌈3.5⌉ = 4, 7), L = 6 + 7.5 = 13.5, 48.5 ≤ 50, occupancy 0.386 (lowest);
  // d = 40 → b = (4, 8), L = 6 + 8 = 14, 54 > 50: infeasible.
  EXPECT_DOUBLE_EQ(round->duty_ms, 35);
  EXPECT_EQ(round->batches, (std::vector<int>{4, 7}));
  EXPECT_NEAR(round->occupancy, 13.5 / 35, 1e-12);
}

TEST(SloRulesTest, ShortRoundForTightSloAtLowRate) {
  // L(1,100) = 0.5 + 0.5 = 1 ms, SLO 5 ms, 100 rps: a round of 1000/100 = 10 ms waits too long,
  // but a 4 ms round with batch 1 meets 1 + 4 ≤ 5 (one request arrives per 2.5 rounds).
  const ModelProfile lenet = LinearProfileForTest("lenet", 0.5, 0.5);
  auto round = FitRound({{&lenet, 100, 5, 1}}, 100, 1, 32);
  ASSERT_TRUE(round.has_value());
  EXPECT_DOUBLE_EQ(round->duty_ms, 4);
  EXPECT_EQ(round->batches, (std::vector<int>{1}));
  EXPECT_DOUBLE_EQ(round->occupancy, 0.25);
  // At 20 %: L = 5 ms, nothing fits.
  EXPECT_FALSE(FitRound({{&lenet, 100, 5, 1}}, 20, 1, 32).has_value());
  // At 500 rps the step at 2 ms (batch 1, L 1) fits and a capped 3.5 ms round needs batch 2
  // (L 1.5): 1.5 + 3.5 = 5, occupancy 0.43 < 0.5.
  round = FitRound({{&lenet, 500, 5, 1}}, 100, 1, 32);
  ASSERT_TRUE(round.has_value());
  EXPECT_DOUBLE_EQ(round->duty_ms, 3.5);
  EXPECT_EQ(round->batches, (std::vector<int>{2}));
}

TEST(SloRulesTest, RoundFailsWhenSloTooTight) {
  const ModelProfile a = LinearProfileForTest("a", 10, 1);
  std::vector<RoundMember> members = {{&a, 100, 15, 1}, {&a, 100, 15, 1}};
  EXPECT_FALSE(FitRound(members, 100, 1, 32).has_value());
}

}  // namespace
}  // namespace tessera::scheduler
