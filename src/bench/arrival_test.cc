#include "arrival.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tessera::bench {
namespace {

// Tolerances are 5 standard errors of the estimate for the sample size at hand, so a correct
// generator fails with probability < 1e-6 for any seed; the seeds are fixed anyway.
constexpr double kSigmas = 5;

TEST(ArrivalTest, PoissonGapsHaveExponentialMeanAndVariance) {
  const double rate = 1000, duration = 20;  // about 20000 gaps
  std::vector<int64_t> t =
      GenerateArrivals(ArrivalKind::kPoisson, RateSchedule::Constant(rate), duration, 42);
  const double expected_n = rate * duration;
  EXPECT_NEAR(static_cast<double>(t.size()), expected_n, kSigmas * std::sqrt(expected_n));
  GapStats g = ComputeGapStats(t);
  const double n = static_cast<double>(g.gaps);
  const double mean = 1 / rate, variance = 1 / (rate * rate);
  EXPECT_NEAR(g.mean_s, mean, kSigmas * mean / std::sqrt(n));
  // Var(s^2) ~ (mu4 - sigma^4) / n with mu4 = 9 / rate^4 for an exponential.
  EXPECT_NEAR(g.variance_s2, variance, kSigmas * std::sqrt(8 / n) * variance);
}

TEST(ArrivalTest, PoissonCountsPerSecondHaveIndexOfDispersionOne) {
  const double rate = 200, duration = 200;
  std::vector<int64_t> t =
      GenerateArrivals(ArrivalKind::kPoisson, RateSchedule::Constant(rate), duration, 7);
  std::vector<double> counts(static_cast<size_t>(duration), 0);
  for (int64_t x : t) counts[static_cast<size_t>(x / 1'000'000'000)] += 1;
  double mean = 0, var = 0;
  for (double c : counts) mean += c;
  mean /= counts.size();
  for (double c : counts) var += (c - mean) * (c - mean);
  var /= counts.size() - 1;
  // For k buckets the dispersion index D = var/mean has standard error ~ sqrt(2 / (k - 1)).
  EXPECT_NEAR(var / mean, 1.0, kSigmas * std::sqrt(2.0 / (counts.size() - 1)));
}

TEST(ArrivalTest, UniformGapsHaveTheRightMeanAndVariance) {
  const double rate = 500, duration = 40;
  std::vector<int64_t> t =
      GenerateArrivals(ArrivalKind::kUniform, RateSchedule::Constant(rate), duration, 3);
  GapStats g = ComputeGapStats(t);
  const double n = static_cast<double>(g.gaps);
  const double mean = 1 / rate;
  const double variance = 1 / (3 * rate * rate);  // uniform on [0, 2/rate]: (2/rate)^2 / 12
  EXPECT_NEAR(g.mean_s, mean, kSigmas * std::sqrt(variance / n));
  // mu4 = (2/rate)^4 / 80 = 1 / (5 rate^4); Var(s^2) ~ (1/5 - 1/9) / (n rate^4).
  EXPECT_NEAR(g.variance_s2, variance, kSigmas * std::sqrt(4.0 / 45 / n) / std::pow(rate, 2));
  for (size_t i = 1; i < t.size(); ++i) ASSERT_LE(t[i] - t[i - 1], 4'000'000 + 1);  // 2 / rate
}

TEST(ArrivalTest, ConstantIsExact) {
  std::vector<int64_t> t =
      GenerateArrivals(ArrivalKind::kConstant, RateSchedule::Constant(250), 2.0, 1);
  ASSERT_EQ(t.size(), 500u);
  for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(t[i], static_cast<int64_t>(i) * 4'000'000);
  GapStats g = ComputeGapStats(t);
  EXPECT_DOUBLE_EQ(g.mean_s, 0.004);
  EXPECT_NEAR(g.variance_s2, 0, 1e-18);
}

TEST(ArrivalTest, SameSeedSameScheduleOtherSeedOther) {
  auto a = GenerateArrivals(ArrivalKind::kPoisson, RateSchedule::Constant(100), 5, 9);
  auto b = GenerateArrivals(ArrivalKind::kPoisson, RateSchedule::Constant(100), 5, 9);
  auto c = GenerateArrivals(ArrivalKind::kPoisson, RateSchedule::Constant(100), 5, 10);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(ArrivalTest, RateScheduleStepsAreFollowed) {
  auto schedule = RateSchedule::Create({{0, 100}, {10, 0}, {20, 1000}});
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  EXPECT_DOUBLE_EQ(schedule->ExpectedCount(30), 100 * 10 + 1000 * 10);
  EXPECT_DOUBLE_EQ(schedule->RateAt(15), 0);
  auto t = GenerateArrivals(ArrivalKind::kPoisson, *schedule, 30, 5);
  int64_t first = 0, second = 0, third = 0;
  for (int64_t x : t) {
    (x < 10'000'000'000 ? first : x < 20'000'000'000 ? second : third) += 1;
  }
  EXPECT_NEAR(first, 1000, kSigmas * std::sqrt(1000.0));
  EXPECT_EQ(second, 0);
  EXPECT_NEAR(third, 10000, kSigmas * std::sqrt(10000.0));
  EXPECT_DOUBLE_EQ(schedule->Scaled(2).ExpectedCount(30), 2 * 11000);
}

TEST(ArrivalTest, BadSchedulesAreRejectedWithReasons) {
  EXPECT_FALSE(RateSchedule::Create({}).ok());
  auto late_start = RateSchedule::Create({{1, 10}});
  ASSERT_FALSE(late_start.ok());
  EXPECT_NE(late_start.status().message().find("start at 0"), absl::string_view::npos);
  EXPECT_FALSE(RateSchedule::Create({{0, 10}, {0, 20}}).ok());
  EXPECT_FALSE(RateSchedule::Create({{0, -1}}).ok());
  EXPECT_FALSE(ParseArrivalKind("gaussian").ok());
  EXPECT_EQ(ParseArrivalKind("uniform").value(), ArrivalKind::kUniform);
}

}  // namespace
}  // namespace tessera::bench
