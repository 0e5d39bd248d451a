#include "arrivals.h"

#include <cmath>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "random.h"
#include "router.h"

namespace tessera::sim {
namespace {

std::vector<double> Drain(ArrivalStream stream) {
  std::vector<double> times;
  while (std::optional<double> t = stream.Next()) times.push_back(*t);
  return times;
}

TEST(RngTest, UniformAndNormalMoments) {
  Rng rng(7, 0);
  const int n = 200000;
  double sum = 0, sum_sq = 0, normal_sum = 0, normal_sq = 0;
  for (int i = 0; i < n; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_sq += u * u;
    const double z = rng.Normal();
    normal_sum += z;
    normal_sq += z * z;
  }
  // Standard errors: uniform mean 0.00065, normal mean 0.0022, normal variance 0.0032.
  EXPECT_NEAR(sum / n, 0.5, 0.004);
  EXPECT_NEAR(sum_sq / n - 0.25, 1.0 / 12, 0.004);
  EXPECT_NEAR(normal_sum / n, 0.0, 0.012);
  EXPECT_NEAR(normal_sq / n, 1.0, 0.02);
}

TEST(RngTest, SameSeedSameStreamDifferentStreamsDiffer) {
  Rng a(5, 1), b(5, 1), c(5, 2), d(6, 1);
  const double first = a.Uniform();
  EXPECT_EQ(first, b.Uniform());
  EXPECT_NE(first, c.Uniform());
  EXPECT_NE(first, d.Uniform());
}

TEST(ArrivalStreamTest, PoissonMeanRateAndCountDispersion) {
  Arrivals arrivals;  // Poisson at the default rate
  const double rate = 1000, duration_ms = 100000;
  const std::vector<double> times = Drain(ArrivalStream(arrivals, rate, Rng(42, 1), duration_ms));
  // 100,000 expected, standard deviation 316: 5σ.
  EXPECT_NEAR(static_cast<double>(times.size()), 100000, 1600);

  // Counts per 100 ms window are Poisson(100): variance / mean = 1. Over 1000 windows the ratio's
  // standard error is √(2/999) ≈ 0.045, so ±0.2 is > 4σ.
  std::vector<int> counts(1000, 0);
  for (double t : times) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, duration_ms);
    ++counts[static_cast<size_t>(t / 100)];
  }
  double mean = 0, var = 0;
  for (int c : counts) mean += c;
  mean /= counts.size();
  for (int c : counts) var += (c - mean) * (c - mean);
  var /= counts.size() - 1;
  EXPECT_NEAR(mean, 100, 1.6);
  EXPECT_NEAR(var / mean, 1.0, 0.2);

  // Gaps are exponential: coefficient of variation 1.
  double gap_sum = 0, gap_sq = 0;
  for (size_t i = 1; i < times.size(); ++i) {
    const double gap = times[i] - times[i - 1];
    ASSERT_GE(gap, 0);
    gap_sum += gap;
    gap_sq += gap * gap;
  }
  const double n = times.size() - 1;
  const double gap_mean = gap_sum / n;
  EXPECT_NEAR(gap_mean, 1.0, 0.016);
  EXPECT_NEAR(std::sqrt(gap_sq / n - gap_mean * gap_mean) / gap_mean, 1.0, 0.02);
}

TEST(ArrivalStreamTest, PoissonIsReproducibleForASeed) {
  Arrivals arrivals;
  EXPECT_EQ(Drain(ArrivalStream(arrivals, 50, Rng(3, 1), 10000)),
            Drain(ArrivalStream(arrivals, 50, Rng(3, 1), 10000)));
  EXPECT_NE(Drain(ArrivalStream(arrivals, 50, Rng(3, 1), 10000)),
            Drain(ArrivalStream(arrivals, 50, Rng(4, 1), 10000)));
}

TEST(ArrivalStreamTest, ConstantSpacingIsExact) {
  Arrivals arrivals;
  arrivals.kind = ArrivalKind::kConstant;
  const std::vector<double> times = Drain(ArrivalStream(arrivals, 80, Rng(1, 1), 1000));
  // One every 12.5 ms, the first 12.5 ms in; 1000 ms itself is past the end.
  ASSERT_EQ(times.size(), 79u);
  for (size_t i = 0; i < times.size(); ++i) EXPECT_DOUBLE_EQ(times[i], 12.5 * (i + 1));
}

TEST(ArrivalStreamTest, RateScheduleChangesTheRate) {
  Arrivals arrivals;
  arrivals.kind = ArrivalKind::kConstant;
  arrivals.schedule = {{1.0, 10}, {2.0, 0}, {3.0, 100}};
  const std::vector<double> times = Drain(ArrivalStream(arrivals, 999, Rng(1, 1), 3100));
  // Nothing before 1 s, 10/s in [1, 2) (1100..1900, 2000 is the next segment), nothing in [2, 3),
  // then 100/s: 3010 .. 3090.
  std::vector<double> expected;
  for (int k = 1; k <= 9; ++k) expected.push_back(1000 + 100.0 * k);
  for (int k = 1; k <= 9; ++k) expected.push_back(3000 + 10.0 * k);
  ASSERT_EQ(times.size(), expected.size());
  for (size_t i = 0; i < times.size(); ++i) EXPECT_NEAR(times[i], expected[i], 1e-9);

  Arrivals poisson;
  poisson.schedule = {{0, 100}, {50, 1000}};
  const std::vector<double> p = Drain(ArrivalStream(poisson, 0, Rng(9, 1), 100000));
  int64_t early = 0, late = 0;
  for (double t : p) ++(t < 50000 ? early : late);
  EXPECT_NEAR(early, 5000, 5 * std::sqrt(5000.0));
  EXPECT_NEAR(late, 50000, 5 * std::sqrt(50000.0));
}

TEST(ArrivalStreamTest, TraceIsReplayedFaithfully) {
  Arrivals arrivals;
  arrivals.kind = ArrivalKind::kTrace;
  arrivals.trace_s = {0.0, 0.001, 0.001, 0.5, 1.25, 2.0};
  const std::vector<double> times = Drain(ArrivalStream(arrivals, 0, Rng(1, 1), 2000));
  EXPECT_EQ(times, (std::vector<double>{0, 1, 1, 500, 1250}));
}

TEST(ArrivalStreamTest, ValidationNamesTheProblem) {
  Arrivals trace;
  trace.kind = ArrivalKind::kTrace;
  trace.trace_s = {1, 0.5};
  EXPECT_TRUE(absl::StrContains(ValidateArrivals(trace, 0, "res").message(), "ascending"));
  EXPECT_TRUE(absl::StrContains(ValidateArrivals(Arrivals{}, -1, "res").message(), "'res'"));
  Arrivals schedule;
  schedule.schedule = {{0, 10}, {0, 20}};
  EXPECT_FALSE(ValidateArrivals(schedule, 0, "res").ok());
  schedule.schedule = {{0, 10}, {1, -20}};
  EXPECT_FALSE(ValidateArrivals(schedule, 0, "res").ok());
  schedule.schedule = {{0, 10}, {1, 20}};
  EXPECT_TRUE(ValidateArrivals(schedule, 0, "res").ok());
}

TEST(WeightedRoundRobinTest, SmoothAndProportional) {
  WeightedRoundRobin wrr({200, 100});
  std::vector<size_t> picks;
  for (int i = 0; i < 6; ++i) picks.push_back(wrr.Pick());
  EXPECT_EQ(picks, (std::vector<size_t>{0, 1, 0, 0, 1, 0}));

  WeightedRoundRobin thirds({1, 1, 1});
  std::vector<int> counts(3, 0);
  for (int i = 0; i < 300; ++i) ++counts[thirds.Pick()];
  EXPECT_EQ(counts, (std::vector<int>{100, 100, 100}));

  WeightedRoundRobin zeros({0, 0});  // all zero: equal shares
  EXPECT_EQ(zeros.Pick(), 0u);
  EXPECT_EQ(zeros.Pick(), 1u);
}

}  // namespace
}  // namespace tessera::sim
