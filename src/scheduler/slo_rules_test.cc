#include "slo_rules.h"

#include <algorithm>
#include <cmath>
#include <random>

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

TEST(SloRulesTest, RoundBatchAddsASpareSlotForTinySharedBatches) {
  // m₁: e^−m·(1 + m) = 0.99 at m = 0.148555.
  EXPECT_NEAR(RoundBatchMaxMean(1, true), 0.148555, 1e-6);
  EXPECT_EQ(RoundBatchMaxMean(2, true), 1);
  EXPECT_EQ(RoundBatchMaxMean(3, true), 3);
  EXPECT_EQ(RoundBatchMaxMean(7, true), 7);
  EXPECT_EQ(RoundBatchMaxMean(1, false), 1);
  // Shared rounds, m = d·r/1000 with r = 1000 rps: P(N ≤ 1) = e^−0.1·1.1 = 0.9953 → 1;
  // e^−0.16·1.16 = 0.9885 → ⌈0.16⌉ + 1 = 2; m = 1 → 2; 1.5 and 2 → 3; above 2, ⌈m⌉.
  EXPECT_EQ(RoundBatch(0.1, 1000, true), 1);
  EXPECT_EQ(RoundBatch(0.16, 1000, true), 2);
  EXPECT_EQ(RoundBatch(1, 1000, true), 2);
  EXPECT_EQ(RoundBatch(1.5, 1000, true), 3);
  EXPECT_EQ(RoundBatch(2, 1000, true), 3);
  EXPECT_EQ(RoundBatch(2.5, 1000, true), 3);
  EXPECT_EQ(RoundBatch(4.2, 1000, true), 5);
  // A step duty d = 1000·m₁/r stays at batch 1 despite rounding.
  EXPECT_EQ(RoundBatch(1000 * RoundBatchMaxMean(1, true) / 86, 86, true), 1);
  // A lone model: ⌈m⌉.
  EXPECT_EQ(RoundBatch(0.5, 1000, false), 1);
  EXPECT_EQ(RoundBatch(1.5, 1000, false), 2);
}

TEST(SloRulesTest, SharedRoundPlansTheSpareSlot) {
  // L(b) = 2 + b, two members at 100 rps, SLO 30. Candidate duties 1000·M(k)/100:
  //   d = 1.49 (b 1, 1): Σ L = 6 > d; capped 30 − 6 = 24 is not below the step: no round.
  //   d = 10   (b 2, 2): Σ L = 8 ≤ 10, 8 + 10 = 18 ≤ 30: occupancy 0.8.
  //   d = 30   (b 3, 3): Σ L = 10, 10 + 30 > 30; capped d = 30 − 10 = 20 in (10, 30):
  //            m = 2 → b = 3 each, Σ L = 10 ≤ 20, 10 + 20 = 30 ≤ 30: occupancy 0.5, the best.
  // (The paper's b = ⌈m⌉ takes d = 20 with batches 2, occupancy 0.4.)
  const ModelProfile a = LinearProfileForTest("a", 2, 1);
  std::optional<Round> round = FitRound({{&a, 100, 30, 1}, {&a, 100, 30, 1}}, 100, 1, 32);
  ASSERT_TRUE(round.has_value());
  EXPECT_DOUBLE_EQ(round->duty_ms, 20);
  EXPECT_EQ(round->batches, (std::vector<int>{3, 3}));
  EXPECT_DOUBLE_EQ(round->occupancy, 0.5);
  // Alone, the same model keeps ⌈m⌉: d = 20, b = 2, L = 4, 4 + 20 ≤ 30 (d = 30: 5 + 30 > 30).
  round = FitRound({{&a, 100, 30, 1}}, 100, 1, 32);
  ASSERT_TRUE(round.has_value());
  EXPECT_DOUBLE_EQ(round->duty_ms, 20);
  EXPECT_EQ(round->batches, (std::vector<int>{2}));
}

TEST(SloRulesTest, RoundFailsWhenSloTooTight) {
  const ModelProfile a = LinearProfileForTest("a", 10, 1);
  std::vector<RoundMember> members = {{&a, 100, 15, 1}, {&a, 100, 15, 1}};
  EXPECT_FALSE(FitRound(members, 100, 1, 32).has_value());
}

// The straightforward search FitRound must agree with: every duty where a batch may step
// (1000·k/r_j, and 1000·m₁/r_j where the burst slot starts) and every SLO-capped duty between
// them, each evaluated from the profile with the burst rule written from its definition
// (slo_rules.h): ⌈m⌉, plus one in a shared round when ⌈m⌉ ≤ 2 and P(N ≤ 1) < 0.99.
std::optional<Round> ReferenceFitRound(const std::vector<RoundMember>& members, int pct,
                                       double margin, int max_batch) {
  const bool shared = members.size() > 1;
  auto p_at_most_one = [](double mean) { return std::exp(-mean) * (1 + mean); };
  double m1_lo = 0;
  double m1_hi = 1;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (m1_lo + m1_hi);
    (p_at_most_one(mid) >= 0.99 ? m1_lo : m1_hi) = mid;
  }
  auto batch_at = [&](double d, const RoundMember& m) {
    const double mean = d * m.rate_rps / 1000.0;
    int b = std::max(1, static_cast<int>(std::ceil(mean - 1e-9)));
    if (shared && b <= 2 && p_at_most_one(mean) < 0.99 * (1 - 1e-9)) ++b;
    return b;
  };
  std::vector<double> duties;
  double min_slo = 1e300;
  for (const RoundMember& m : members) {
    min_slo = std::min(min_slo, m.slo_ms);
    for (int k = 1; k <= max_batch; ++k) duties.push_back(1000.0 * k / m.rate_rps);
    if (shared) duties.push_back(1000.0 * m1_lo / m.rate_rps);
  }
  std::sort(duties.begin(), duties.end());
  duties.erase(std::unique(duties.begin(), duties.end()), duties.end());
  auto evaluate = [&](double d) -> std::optional<Round> {
    Round r;
    r.duty_ms = d;
    double total = 0;
    for (const RoundMember& m : members) {
      const int b = batch_at(d, m);
      if (b > max_batch) return std::nullopt;
      r.batches.push_back(b);
      r.latencies_ms.push_back(
          ScheduledLatencyMs(*m.profile, b, pct, m.interference_factor, margin));
      total += r.latencies_ms.back();
    }
    if (total > d || total + d > min_slo) return std::nullopt;
    r.occupancy = total / d;
    return r;
  };
  std::optional<Round> best;
  double left = 0;
  for (double duty : duties) {
    std::vector<double> candidates = {duty};
    double total = 0;
    for (const RoundMember& m : members) {
      const int b = batch_at(duty, m);
      total += ScheduledLatencyMs(*m.profile, std::min(b, max_batch), pct, m.interference_factor,
                                  margin);
    }
    const double capped = min_slo - total;
    if (capped > left * (1 + 1e-9) && capped < duty) candidates.push_back(capped);
    for (double d : candidates) {
      auto r = evaluate(d);
      if (r && (!best || r->occupancy < best->occupancy - 1e-12)) best = r;
    }
    left = duty;
  }
  return best;
}

TEST(SloRulesTest, FitRoundMatchesTheStraightforwardSearch) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<ModelProfile> profiles;
  for (int i = 0; i < 6; ++i) {
    profiles.push_back(
        LinearProfileForTest("m" + std::to_string(i), 0.2 + 5 * unit(rng), 0.05 + 2 * unit(rng)));
  }
  std::vector<std::vector<double>> tables(profiles.size());
  int found = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int pct = std::vector<int>{20, 40, 50, 60, 80, 100}[trial % 6];
    const bool with_tables = trial % 2 == 0;
    std::vector<RoundMember> members;
    const int n = 1 + trial % 3;
    for (int j = 0; j < n; ++j) {
      const size_t p = (trial * 7 + j * 3) % profiles.size();
      tables[p].assign(33, 0);
      for (int b = 1; b <= 32; ++b) tables[p][b] = profiles[p].LatencyMs(b, pct);
      members.push_back({&profiles[p], 5 + 1500 * unit(rng) * unit(rng), 5 + 200 * unit(rng),
                         1 + 0.3 * unit(rng), with_tables ? &tables[p] : nullptr});
    }
    const auto fast = FitRound(members, pct, 1.1, 32);
    const auto reference = ReferenceFitRound(members, pct, 1.1, 32);
    ASSERT_EQ(fast.has_value(), reference.has_value()) << "trial " << trial;
    if (!fast) continue;
    ++found;
    EXPECT_DOUBLE_EQ(fast->duty_ms, reference->duty_ms) << "trial " << trial;
    EXPECT_EQ(fast->batches, reference->batches) << "trial " << trial;
  }
  EXPECT_GT(found, 100);
}

}  // namespace
}  // namespace tessera::scheduler
