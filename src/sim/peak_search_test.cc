#include "peak_search.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sim_fixtures_for_test.h"

namespace tessera::sim {
namespace {

using scheduler::testing::LinearProfileForTest;
using testing::GpuletForTest;
using testing::PlanForTest;
using testing::ProfileSetForTest;

TEST(PeakSearchTest, Poisson99IsTheArtifactsHeadroom) {
  EXPECT_EQ(Poisson99Rps(0), 0);
  EXPECT_EQ(Poisson99Rps(1), 4);      // P(N ≤ 3) = 0.981, P(N ≤ 4) = 0.996
  EXPECT_EQ(Poisson99Rps(100), 124);  // 100 + 2.33·√100 ≈ 123.3, rounded up by the discrete CDF
  EXPECT_DOUBLE_EQ(Poisson99Rps(600), 660);
}

TEST(PeakSearchTest, DemandsSplitTheTotalByWeight) {
  Workload w{"w", 2, {{"a", "", 50, 1}, {"b", "lenet", 20, 3}}};
  const auto demands = DemandsAt(w, 400, Headroom::kNone);
  ASSERT_EQ(demands.size(), 2u);
  EXPECT_DOUBLE_EQ(demands[0].rate_rps, 100);
  EXPECT_DOUBLE_EQ(demands[1].rate_rps, 300);
  EXPECT_EQ(demands[1].profile_name(), "lenet");
  EXPECT_DOUBLE_EQ(DemandsAt(w, 400, Headroom::kPoisson99)[0].rate_rps, 124);

  w.models[1].model = "a";
  EXPECT_TRUE(absl::StrContains(ValidateWorkload(w).message(), "listed twice"));
  w.models = {{"a", "", 50, 0}};
  EXPECT_TRUE(absl::StrContains(ValidateWorkload(w).message(), "add up to 0"));
}

TEST(PeakSearchTest, SearchBracketsAThresholdWithinTheResolution) {
  int calls = 0;
  auto below = [&](double threshold) {
    return [&calls, threshold](double rate) -> StatusOr<Probe> {
      ++calls;
      Probe p;
      p.pass = rate <= threshold;
      return p;
    };
  };
  SearchOptions options;  // start 100, resolution 2 %
  StatusOr<SearchResult> up = SearchMaxRate(below(1234), options);
  ASSERT_TRUE(up.ok());
  EXPECT_LE(up->max_rps, 1234);
  EXPECT_GE(up->max_rps, 1234 / 1.02);
  EXPECT_EQ(up->probes[0].total_rps, 100);
  EXPECT_EQ(up->probes[4].total_rps, 1600);  // 100 → 1600 by doubling, then bisection
  EXPECT_LT(calls, 15);

  StatusOr<SearchResult> down = SearchMaxRate(below(30), options);
  ASSERT_TRUE(down.ok());
  EXPECT_LE(down->max_rps, 30);
  EXPECT_GE(down->max_rps, 30 / 1.02);

  StatusOr<SearchResult> none = SearchMaxRate(below(0.5), options);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->max_rps, 0);

  options.max_rps = 500;
  EXPECT_EQ(SearchMaxRate(below(1e9), options)->max_rps, 500);
  options.resolution = 0;
  EXPECT_FALSE(SearchMaxRate(below(1), options).ok());
}

// One model, L(b) = 2 + b ms, SLO 40 ms, always planned as batch 16 on a whole GPU: its true
// capacity is 16 / L(16) = 16/18 ms = 888.9 rps. With evenly spaced arrivals every rate below
// meets the SLO and every rate above builds a queue, so the peak is 888.9 within the resolution.
TEST(PeakSearchTest, FindsTheKnownCapacityOfASingleModel) {
  const scheduler::ProfileSet profiles = ProfileSetForTest({LinearProfileForTest("a", 2, 1)});
  const Workload workload{"one", 1, {{"a", "", 40, 1}}};
  int plans = 0;
  const PlanFn fixed = [&](const std::vector<scheduler::ModelDemand>& demands, int gpus) {
    ++plans;
    EXPECT_EQ(gpus, 1);
    return StatusOr<scheduler::Plan>(
        PlanForTest(1, {GpuletForTest(0, 100, 19.8, {{"a", 16, demands[0].rate_rps, 19.8}})}));
  };
  PeakOptions options;
  options.runs = 1;
  options.headroom = Headroom::kNone;
  options.arrival = ArrivalKind::kConstant;
  options.sim.duration_s = 12;
  options.sim.warmup_s = 2;
  options.sim.jitter_sigma = 0;
  StatusOr<PeakResult> peak = FindPeak(workload, profiles, fixed, NoSlowdown(), options);
  ASSERT_TRUE(peak.ok()) << peak.status();
  EXPECT_LE(peak->peak_rps, 888.9);
  EXPECT_GE(peak->peak_rps, 888.9 / 1.02);
  EXPECT_EQ(peak->plans, plans);
  EXPECT_EQ(peak->simulations, static_cast<int>(peak->runs[0].probes.size()));

  // Poisson, three seeds: the reported peak is the median of the three searches, and is lower.
  options.runs = 3;
  options.arrival = ArrivalKind::kPoisson;
  options.sim.jitter_sigma = 0.03;
  peak = FindPeak(workload, profiles, fixed, NoSlowdown(), options);
  ASSERT_TRUE(peak.ok()) << peak.status();
  ASSERT_EQ(peak->runs.size(), 3u);
  std::vector<double> peaks = {peak->runs[0].max_rps, peak->runs[1].max_rps, peak->runs[2].max_rps};
  std::sort(peaks.begin(), peaks.end());
  EXPECT_EQ(peak->peak_rps, peaks[1]);
  EXPECT_LT(peak->peak_rps, 888.9);
  EXPECT_GT(peak->peak_rps, 600);
}

// A planner that refuses rates above 500 rps: those fail without a simulation, and the
// planner-only search finds the same bound.
TEST(PeakSearchTest, UnschedulableRatesFailWithoutSimulating) {
  const scheduler::ProfileSet profiles = ProfileSetForTest({LinearProfileForTest("a", 2, 1)});
  const Workload workload{"one", 1, {{"a", "", 40, 1}}};
  const PlanFn capped = [](const std::vector<scheduler::ModelDemand>& demands, int) {
    scheduler::Plan plan =
        PlanForTest(1, {GpuletForTest(0, 100, 19.8, {{"a", 16, demands[0].rate_rps, 19.8}})});
    if (demands[0].rate_rps > 500) plan.unschedulable = {"a"};
    return StatusOr<scheduler::Plan>(plan);
  };
  PeakOptions options;
  options.runs = 1;
  options.headroom = Headroom::kNone;
  options.sim.duration_s = 5;
  options.sim.warmup_s = 1;
  StatusOr<PeakResult> peak = FindPeak(workload, profiles, capped, NoSlowdown(), options);
  ASSERT_TRUE(peak.ok()) << peak.status();
  EXPECT_LE(peak->peak_rps, 500);
  EXPECT_GE(peak->peak_rps, 490);
  int simulated = 0;
  for (const Probe& p : peak->runs[0].probes) {
    EXPECT_EQ(p.schedulable, p.total_rps <= 500);
    EXPECT_EQ(p.violation_pct >= 0, p.schedulable);
    simulated += p.schedulable;
  }
  EXPECT_EQ(peak->simulations, simulated);

  StatusOr<SearchResult> schedulable =
      MaxSchedulableRate(workload, capped, SearchOptions{}, Headroom::kNone);
  ASSERT_TRUE(schedulable.ok());
  EXPECT_EQ(schedulable->max_rps, peak->peak_rps);
}

}  // namespace
}  // namespace tessera::sim
