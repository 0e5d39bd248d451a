#include "schedulability.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tessera::sim {
namespace {

// Two stand-in planners: "sum" schedules when the rates add up to ≤ 200, "max" when no model
// exceeds 100. With levels {0, 100, 200} and two models there are 8 scenarios:
// (0,100) (0,200) (100,0) (100,100) (100,200) (200,0) (200,100) (200,200).
// sum: (0,100) (0,200) (100,0) (100,100) (200,0) → 5; max: (0,100) (100,0) (100,100) → 3.
TEST(SchedulabilityTest, CountsEveryCombinationOnce) {
  const Workload workload{"two", 2, {{"a", "", 50, 1}, {"b", "", 50, 1}}};
  auto planner = [](bool by_sum) {
    return [by_sum](const std::vector<scheduler::ModelDemand>& demands, int gpus) {
      EXPECT_EQ(gpus, 3);
      double sum = 0, max = 0;
      for (const auto& d : demands) {
        EXPECT_GT(d.rate_rps, 0);  // rate-0 models are left out
        sum += d.rate_rps;
        max = std::max(max, d.rate_rps);
      }
      scheduler::Plan plan;
      if (by_sum ? sum > 200 : max > 100) plan.unschedulable = {demands[0].model};
      return StatusOr<scheduler::Plan>(plan);
    };
  };
  SchedulabilityOptions options;
  options.num_gpus = 3;
  StatusOr<SchedulabilityResult> result =
      CountSchedulable(workload, {planner(true), planner(false)}, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->scenarios, 8);
  EXPECT_EQ(result->schedulable[0], 5);
  EXPECT_EQ(result->schedulable[1], 3);
  EXPECT_EQ(result->both, 3);
  EXPECT_EQ(result->only_first, 2);
  EXPECT_EQ(result->only_second, 0);
  EXPECT_EQ(result->neither, 3);
  EXPECT_GE(result->planning[0].max_ms, result->planning[0].p99_ms);
  EXPECT_TRUE(absl::StrContains(SchedulabilityToText(*result, {"sum", "max"}),
                                "both 3, only sum 2, only max 0, neither 3"));

  // Levels without 0: every combination counts, the first one (all at the lowest level) too.
  options.rates_rps = {100, 200};
  EXPECT_EQ(CountSchedulable(workload, {planner(true), planner(false)}, options)->scenarios, 4);
  options.rates_rps = {200};
  EXPECT_EQ(CountSchedulable(workload, {planner(true), planner(false)}, options)->schedulable[0],
            0);

  options.rates_rps = {0, 100, 200};
  options.limit = 2;
  EXPECT_EQ(CountSchedulable(workload, {planner(true), planner(false)}, options)->scenarios, 2);

  const PlanFn broken = [](const std::vector<scheduler::ModelDemand>&, int) {
    return StatusOr<scheduler::Plan>(absl::NotFoundError("no profile"));
  };
  EXPECT_TRUE(
      absl::StrContains(CountSchedulable(workload, {broken, broken}, options).status().message(),
                        "scenario 1: no profile"));
}

}  // namespace
}  // namespace tessera::sim
