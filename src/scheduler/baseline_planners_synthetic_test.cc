// The baselines on the synthetic RTX 2080 Ti profile set (profiles/synthetic-2080ti) and seed
// 001's workloads. Slow, so DISABLED: run by hand with --gtest_also_run_disabled_tests, e.g.
//   scheduler_test --gtest_filter='BaselinePlannersSyntheticTest.*' --gtest_also_run_disabled_tests
// They print the figures quoted in the baselines' report (ideal timing, gpulet vs ideal).
#include <chrono>
#include <cstdio>
#include <random>

#include "baseline_planners.h"
#include "gpulet_planner.h"
#include "gtest/gtest.h"

namespace tessera::scheduler {
namespace {

// ---- the paper's scenario space (run by hand: --gtest_also_run_disabled_tests) ---------------

// seed 001 Table 3: the nine models and their SLOs (ms).
const std::vector<std::pair<std::string, double>>& PaperModels() {
  static const std::vector<std::pair<std::string, double>> models = {
      {"googlenet", 66},      {"lenet", 5},         {"resnet50", 108},
      {"ssd_mobilenet", 202}, {"vgg16", 142},       {"mnasnet", 62},
      {"mobilenet_v2", 64},   {"densenet161", 202}, {"bert_base", 22}};
  return models;
}

// Scenario k in [1, 3⁹ − 1] of seed 001 §3.2 / §5.2: model i's rate is 100 × digit i of k in
// base 3.
std::vector<ModelDemand> Scenario(int k) {
  std::vector<ModelDemand> demands;
  for (const auto& [model, slo] : PaperModels()) {
    demands.push_back({model, "", 100.0 * (k % 3), slo});
    k /= 3;
  }
  return demands;
}

struct Synthetic {
  ProfileSet profiles;
  InterferenceModel interference;
};

Synthetic LoadSynthetic() {
  const std::string dir = std::string(TESSERA_SOURCE_DIR) + "/profiles/synthetic-2080ti";
  auto profiles = ProfileSet::LoadDirectory(dir);
  EXPECT_TRUE(profiles.ok()) << profiles.status();
  auto interference = LoadInterferenceFile(dir + "/interference.yaml");
  EXPECT_TRUE(interference.ok()) << interference.status();
  return {profiles.ok() ? *std::move(profiles) : ProfileSet(),
          interference.ok() ? *interference : InterferenceModel::None()};
}

// Times the ideal on 500 random scenarios of the 19,682 on 1–4 GPUs of the synthetic 2080 Ti
// set with its fitted interference, checking every plan and that the ideal schedules whatever
// temporal or spatial does.
TEST(BaselinePlannersSyntheticTest, DISABLED_IdealOnTheScenarioSpace) {
  const Synthetic synthetic = LoadSynthetic();
  const ProfileSet* profiles = &synthetic.profiles;
  const InterferenceModel* interference = &synthetic.interference;
  const PlannerOptions options;
  auto ideal = CreateIdealPlanner(profiles, *interference, options);
  auto temporal = CreateTemporalPlanner(profiles, *interference, options);
  auto spatial = CreateSpatialPlanner(profiles, *interference, options);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> pick(1, 19682);
  for (int gpus = 4; gpus >= 1; --gpus) {
    constexpr int kScenarios = 500;
    int ok_ideal = 0, ok_temporal = 0, ok_spatial = 0;
    double worst_ms = 0, total_ms = 0;
    for (int i = 0; i < kScenarios; ++i) {
      const std::vector<ModelDemand> demands = Scenario(pick(rng));
      const auto start = std::chrono::steady_clock::now();
      auto plan = ideal->MakePlan(demands, gpus);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      ASSERT_TRUE(plan.ok()) << plan.status();
      total_ms += ms;
      worst_ms = std::max(worst_ms, ms);
      auto t = temporal->MakePlan(demands, gpus);
      auto s = spatial->MakePlan(demands, gpus);
      for (const Plan* p : {&*plan, &*t, &*s}) {
        Status valid = CheckPlan(*p, demands, *profiles, *interference, options);
        EXPECT_TRUE(valid.ok()) << valid << "\n" << PlanToText(*p);
      }
      ok_ideal += plan->schedulable();
      ok_temporal += t->schedulable();
      ok_spatial += s->schedulable();
      if ((t->schedulable() || s->schedulable()) && !plan->schedulable()) {
        ADD_FAILURE() << "the ideal misses:\n" << PlanToText(t->schedulable() ? *t : *s);
      }
    }
    std::printf(
        "%d GPUs: schedulable of %d: ideal %d (mean %.2f ms, worst %.1f ms wall), "
        "temporal %d, spatial %d\n",
        gpus, kScenarios, ok_ideal, total_ms / kScenarios, worst_ms, ok_temporal, ok_spatial);
  }
}

// gpulet (+int) against the ideal: every scenario of the 19,682 on 4 GPUs (and on 2 and 3,
// where many are unschedulable), counting where the greedy schedules something the ideal misses.
TEST(BaselinePlannersSyntheticTest, DISABLED_GpuletAgainstIdeal) {
  const Synthetic synthetic = LoadSynthetic();
  const ProfileSet* profiles = &synthetic.profiles;
  const InterferenceModel* interference = &synthetic.interference;
  const PlannerOptions options;
  auto ideal = CreateIdealPlanner(profiles, *interference, options);
  auto gpulet = CreateGpuletPlanner(profiles, *interference, options);
  for (int gpus : {4, 3, 2}) {
    int ok_ideal = 0, ok_gpulet = 0, misses = 0;
    double ideal_ms = 0, worst_ms = 0;
    for (int k = 1; k <= 19682; ++k) {
      const std::vector<ModelDemand> demands = Scenario(k);
      const auto start = std::chrono::steady_clock::now();
      auto i = ideal->MakePlan(demands, gpus);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      ideal_ms += ms;
      worst_ms = std::max(worst_ms, ms);
      auto g = gpulet->MakePlan(demands, gpus);
      ASSERT_TRUE(i.ok() && g.ok());
      ok_ideal += i->schedulable();
      ok_gpulet += g->schedulable();
      if (g->schedulable() && !i->schedulable() && ++misses <= 3) {
        ADD_FAILURE() << "scenario " << k << ": the ideal misses\n" << PlanToText(*g);
      }
    }
    std::printf(
        "%d GPUs: schedulable of 19682: ideal %d, gpulet+int %d, ideal misses %d; "
        "ideal mean %.2f ms, worst %.1f ms wall\n",
        gpus, ok_ideal, ok_gpulet, misses, ideal_ms / 19682, worst_ms);
  }
}

// Max schedulable rate (10 rps steps) of seed 001's apps and scenarios on 4 GPUs per planner,
// with the ideal's time per call: the planner-only side of Fig. 13 / Fig. 17. Workloads as in
// digest §5.3 (the artifact's per-model SLOs; scen1 runs googlenet and bert at twice the rate).
TEST(BaselinePlannersSyntheticTest, DISABLED_MaxSchedulableRates) {
  const Synthetic synthetic = LoadSynthetic();
  const ProfileSet* profiles = &synthetic.profiles;
  const InterferenceModel* interference = &synthetic.interference;
  const PlannerOptions options;
  struct Member {
    std::string model, profile;
    double slo_ms, rate_scale;
  };
  const std::vector<std::pair<std::string, std::vector<Member>>> mixes = {
      {"game",
       {{"le1", "lenet", 108, 1},
        {"le2", "lenet", 108, 1},
        {"le3", "lenet", 108, 1},
        {"le4", "lenet", 108, 1},
        {"le5", "lenet", 108, 1},
        {"le6", "lenet", 108, 1},
        {"resnet50", "", 108, 1}}},
      {"traffic", {{"ssd_mobilenet", "", 90, 1}, {"googlenet", "", 112, 1}, {"vgg16", "", 112, 1}}},
      {"scen1",
       {{"mobilenet_v2", "", 64, 1},
        {"bert_base", "", 22, 2},
        {"mnasnet", "", 62, 1},
        {"googlenet", "", 66, 2}}},
      {"scen2", {{"densenet161", "", 202, 1}, {"vgg16", "", 142, 1}}},
      {"scen3", {{"mobilenet_v2", "", 64, 1}, {"resnet50", "", 108, 1}, {"vgg16", "", 142, 1}}},
      {"scen4",
       {{"ssd_mobilenet", "", 202, 1}, {"mnasnet", "", 62, 1}, {"densenet161", "", 202, 1}}},
      {"scen5",
       {{"lenet", "", 5, 1},
        {"ssd_mobilenet", "", 202, 1},
        {"mnasnet", "", 62, 1},
        {"vgg16", "", 142, 1}}},
  };
  std::vector<std::unique_ptr<Planner>> planners;
  planners.push_back(CreateIdealPlanner(profiles, *interference, options));
  planners.push_back(CreateGpuletPlanner(profiles, *interference, options));
  planners.push_back(CreateTemporalPlanner(profiles, *interference, options));
  planners.push_back(CreateSpatialPlanner(profiles, *interference, options));
  for (const auto& [name, members] : mixes) {
    std::printf("%-8s", name.c_str());
    for (const auto& planner : planners) {
      double max_rate = 0, total_ms = 0, worst_ms = 0;
      int calls = 0;
      for (double rate = 10; rate <= 6000; rate += 10) {
        std::vector<ModelDemand> demands;
        for (const Member& m : members) {
          demands.push_back({m.model, m.profile, rate * m.rate_scale, m.slo_ms});
        }
        const auto start = std::chrono::steady_clock::now();
        auto plan = planner->MakePlan(demands, 4);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        ASSERT_TRUE(plan.ok()) << plan.status();
        ++calls;
        total_ms += ms;
        worst_ms = std::max(worst_ms, ms);
        Status valid = CheckPlan(*plan, demands, *profiles, *interference, options);
        EXPECT_TRUE(valid.ok()) << valid << "\n" << PlanToText(*plan);
        if (!plan->schedulable()) break;
        max_rate = rate;
      }
      std::printf("  %s %5.0f", planner->name().c_str(), max_rate);
      if (planner->name() == "ideal") std::printf(" (%.1f / %.0f ms)", total_ms / calls, worst_ms);
    }
    std::printf("\n");
  }
}

}  // namespace
}  // namespace tessera::scheduler
