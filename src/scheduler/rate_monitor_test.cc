#include "tessera/scheduler/rate_monitor.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tessera::scheduler {
namespace {

TEST(RateMonitorTest, AlphaFollowsTheEpoch) {
  // seed 001 §1.5: 20 s epoch / 500 ms windows → N = 40, α = 2/41.
  EXPECT_DOUBLE_EQ(RateMonitor().alpha(), 2.0 / 41);
  EXPECT_DOUBLE_EQ(RateMonitor({500, 2000}).alpha(), 0.4);
}

TEST(RateMonitorTest, EwmaOverWindowsByHand) {
  RateMonitor monitor({500, 2000});  // α = 0.4
  monitor.Advance(0);                // windows start at t = 0
  monitor.Record("m", 10, 50);       // window [0, 500): 50 → 100 rps
  EXPECT_EQ(monitor.Rate("m"), 0);   // nothing closed yet
  monitor.Record("m", 600, 100);     // closes window 1: average = 100 (first sample)
  EXPECT_DOUBLE_EQ(monitor.Rate("m"), 100);
  monitor.Advance(1000);  // window [500, 1000): 200 rps → 0.4·200 + 0.6·100 = 140
  EXPECT_DOUBLE_EQ(monitor.Rate("m"), 140);
  monitor.Advance(1500);  // an empty window: 0.6·140 = 84
  EXPECT_DOUBLE_EQ(monitor.Rate("m"), 84);
  monitor.Advance(2600);  // two more empty windows at once: 84·0.6² = 30.24
  EXPECT_NEAR(monitor.Rate("m"), 30.24, 1e-12);
  EXPECT_EQ(monitor.Rate("other"), 0);
}

TEST(RateMonitorTest, ModelsAreIndependent) {
  RateMonitor monitor({500, 2000});
  monitor.Advance(0);
  for (int i = 0; i < 25; ++i) monitor.Record("a", i * 20);  // 25 in [0, 500) → 50 rps
  monitor.Record("b", 499, 5);                               // 10 rps
  monitor.Advance(500);
  const auto rates = monitor.Rates();
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_DOUBLE_EQ(rates.at("a"), 50);
  EXPECT_DOUBLE_EQ(rates.at("b"), 10);
}

TEST(RateMonitorTest, SteadyPoissonLikeLoadConverges) {
  // 100 rps as one arrival every 10 ms for 40 s: the average sits at 100.
  RateMonitor monitor;
  for (int i = 0; i < 4000; ++i) monitor.Record("m", i * 10.0);
  monitor.Advance(40000);
  EXPECT_NEAR(monitor.Rate("m"), 100, 1e-9);
}

TEST(PoissonHeadroomTest, QuantileForKnownMeans) {
  // Smallest k with P(Poisson(λ) ≤ k) ≥ 0.99, computed independently (summing the pmf):
  // λ = 1 → 4, 10 → 18, 100 → 124, 550 → 605.
  EXPECT_EQ(PoissonHeadroomRps(1), 4);
  EXPECT_EQ(PoissonHeadroomRps(10), 18);
  EXPECT_EQ(PoissonHeadroomRps(100), 124);
  EXPECT_EQ(PoissonHeadroomRps(550), 605);
  // Above 550 rps: flat 10 %.
  EXPECT_DOUBLE_EQ(PoissonHeadroomRps(600), 660);
  EXPECT_EQ(PoissonHeadroomRps(0), 0);
  EXPECT_EQ(PoissonHeadroomRps(-3), 0);
}

}  // namespace
}  // namespace tessera::scheduler
