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

// The same properties over the committed synthetic RTX 2080 Ti set with its fitted interference
// model, and the scenario space of seed 001 Fig. 16 (rates {0, 100, 200} rps for the nine models
// on 4 GPUs, every 61st of the 3⁹ − 1 scenarios): all of them fit.
class SyntheticSetTest : public ::testing::Test {
 protected:
  static constexpr char kDir[] = TESSERA_SOURCE_DIR "/profiles/synthetic-2080ti";
  void SetUp() override {
    auto profiles = ProfileSet::LoadDirectory(kDir);
    ASSERT_TRUE(profiles.ok()) << profiles.status();
    profiles_ = *std::move(profiles);
    auto interference = LoadInterferenceFile(std::string(kDir) + "/interference.yaml");
    ASSERT_TRUE(interference.ok()) << interference.status();
    interference_ = *interference;
  }
  static std::vector<ModelDemand> Demands(const std::vector<double>& rates) {
    static const std::vector<std::pair<std::string, double>> kModels = {
        {"googlenet", 66},      {"lenet", 5},         {"resnet50", 108},
        {"ssd_mobilenet", 202}, {"vgg16", 142},       {"mnasnet", 62},
        {"mobilenet_v2", 64},   {"densenet161", 202}, {"bert_base", 22}};
    std::vector<ModelDemand> demands;
    for (size_t i = 0; i < kModels.size(); ++i) {
      demands.push_back({kModels[i].first, "", rates[i], kModels[i].second});
    }
    return demands;
  }
  ProfileSet profiles_;
  InterferenceModel interference_;
  PlannerOptions options_;
};

TEST_F(SyntheticSetTest, RandomDemandsKeepEveryRule) {
  auto planner = CreateGpuletPlanner(&profiles_, interference_, options_);
  EXPECT_EQ(planner->name(), "gpulet+int");
  std::mt19937 rng(2022);
  std::uniform_real_distribution<double> unit(0, 1);
  std::uniform_int_distribution<int> gpus(1, 8);
  int schedulable = 0;
  for (int i = 0; i < kDemandSets; ++i) {
    const int n = gpus(rng);
    std::vector<double> rates;
    for (int m = 0; m < 9; ++m) rates.push_back(unit(rng) < 0.3 ? 0 : 250.0 * n * unit(rng));
    const std::vector<ModelDemand> demands = Demands(rates);
    auto plan = planner->MakePlan(demands, n);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(CheckPlan(*plan, demands, profiles_, interference_, options_).ok());
    schedulable += plan->schedulable() ? 1 : 0;
  }
  EXPECT_GT(schedulable, kDemandSets / 5);
  EXPECT_LT(schedulable, kDemandSets);
}

TEST_F(SyntheticSetTest, ScenarioSpaceOfFig16Fits) {
  auto planner = CreateGpuletPlanner(&profiles_, interference_, options_);
  int tried = 0;
  for (int code = 1; code < 19683; code += 61) {
    std::vector<double> rates;
    for (int m = 0, c = code; m < 9; ++m, c /= 3) rates.push_back(100.0 * (c % 3));
    auto plan = planner->MakePlan(Demands(rates), 4);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(plan->schedulable()) << "scenario " << code << "\n" << PlanToText(*plan);
    ++tried;
  }
  EXPECT_EQ(tried, 323);
}

}  // namespace
}  // namespace tessera::scheduler
