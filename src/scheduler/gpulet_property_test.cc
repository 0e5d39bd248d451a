// Property tests of the gpulet planner over random demand sets drawn from the nine models of
// seed 001 Table 3 (test stand-ins, paper_models_for_test.h): every plan keeps every rule
// (CheckPlan: no GPU past 100 %, every placed model within its SLO under the planner's own
// interference model, every schedulable model's rate routed), re-plans keep them too, and the
// same input always gives the same plan.
#include <random>

#include "gpulet_planner.h"
#include "gtest/gtest.h"
#include "paper_models_for_test.h"

namespace tessera::scheduler {
namespace {

constexpr int kDemandSets = 320;

// The gpulet artifact's RTX 2080 Ti fit (seed 001 §3 [R] INT_MODEL_CONSTANT.CSV).
InterferenceModel ArtifactLinear() {
  InterferenceCoefficients c;
  c.l2_self = 0.11291;
  c.l2_other = 0.71596;
  c.dram_self = 0.35487;
  c.dram_other = 0.08820;
  c.constant = 0.89537;
  return InterferenceModel::Linear(c);
}

struct Case {
  std::vector<ModelDemand> demands;
  int gpus = 1;
};

std::vector<Case> RandomCases(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::uniform_int_distribution<int> gpus(1, 8);
  std::vector<Case> cases;
  for (int i = 0; i < kDemandSets; ++i) {
    Case c;
    c.gpus = gpus(rng);
    // Load per GPU from light to well past what fits, so both outcomes are exercised.
    const double scale = 50 + 600 * unit(rng) * c.gpus / 4.0;
    std::vector<double> rates;
    for (size_t m = 0; m < testing::PaperModelsForTest().size(); ++m) {
      rates.push_back(unit(rng) < 0.3 ? 0 : scale * unit(rng));
    }
    c.demands = testing::PaperDemandsForTest(rates);
    cases.push_back(std::move(c));
  }
  return cases;
}

class GpuletPropertyTest : public ::testing::TestWithParam<int> {
 protected:
  InterferenceModel Interference() const {
    switch (GetParam()) {
      case 0:
        return InterferenceModel::None();
      case 1:
        return InterferenceModel::Constant(1.18);
      default:
        return ArtifactLinear();
    }
  }
  ProfileSet profiles_ = testing::PaperProfileSetForTest();
  PlannerOptions options_;
};

TEST_P(GpuletPropertyTest, EveryPlanKeepsEveryRule) {
  const InterferenceModel interference = Interference();
  auto planner = CreateGpuletPlanner(&profiles_, interference, options_);
  int schedulable = 0;
  for (const Case& c : RandomCases(20240611 + GetParam())) {
    auto plan = planner->MakePlan(c.demands, c.gpus);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(CheckPlan(*plan, c.demands, profiles_, interference, options_).ok())
        << CheckPlan(*plan, c.demands, profiles_, interference, options_) << "\n"
        << PlanToText(*plan);
    std::map<int, int> pct;
    for (const Gpulet& g : plan->gpulets) pct[g.gpu] += g.partition_pct;
    for (const auto& [gpu, sum] : pct) ASSERT_LE(sum, 100);
    EXPECT_LE(plan->GpusUsed(), c.gpus);
    schedulable += plan->schedulable() ? 1 : 0;
  }
  // Both outcomes occur, so the property covers full and partial plans.
  EXPECT_GT(schedulable, kDemandSets / 5);
  EXPECT_LT(schedulable, kDemandSets);
}

TEST_P(GpuletPropertyTest, ReplansKeepEveryRule) {
  const InterferenceModel interference = Interference();
  auto planner = CreateGpuletPlanner(&profiles_, interference, options_);
  std::mt19937 rng(7 + GetParam());
  std::uniform_real_distribution<double> change(0.5, 1.6);
  const std::vector<Case> cases = RandomCases(99 + GetParam());
  for (size_t i = 0; i < cases.size(); i += 4) {
    const Case& c = cases[i];
    auto plan = planner->MakePlan(c.demands, c.gpus);
    ASSERT_TRUE(plan.ok()) << plan.status();
    std::vector<ModelDemand> next = c.demands;
    for (ModelDemand& d : next) d.rate_rps *= change(rng);
    auto replan = planner->Replan(*plan, next, c.gpus);
    ASSERT_TRUE(replan.ok()) << replan.status();
    ASSERT_TRUE(CheckPlan(*replan, next, profiles_, interference, options_).ok())
        << CheckPlan(*replan, next, profiles_, interference, options_);
  }
}

TEST_P(GpuletPropertyTest, SameInputSamePlan) {
  const InterferenceModel interference = Interference();
  auto first = CreateGpuletPlanner(&profiles_, interference, options_);
  auto second = CreateGpuletPlanner(&profiles_, interference, options_);
  const std::vector<Case> cases = RandomCases(5);
  for (size_t i = 0; i < cases.size(); i += 8) {
    auto a = first->MakePlan(cases[i].demands, cases[i].gpus);
    auto b = second->MakePlan(cases[i].demands, cases[i].gpus);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(PlanToText(*a), PlanToText(*b));
  }
}

INSTANTIATE_TEST_SUITE_P(Interference, GpuletPropertyTest, ::testing::Values(0, 1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == 0   ? "None"
                                              : info.param == 1 ? "Constant"
                                                                : "Linear");
                         });

}  // namespace
}  // namespace tessera::scheduler
