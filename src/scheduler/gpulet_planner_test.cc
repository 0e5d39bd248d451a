#include "gpulet_planner.h"

#include "absl/strings/str_cat.h"
#include "gpulet_builder.h"
#include "gpulet_state.h"
#include "gtest/gtest.h"
#include "profile_fixtures_for_test.h"

namespace tessera::scheduler {
namespace {

using gpulet::Context;
using gpulet::ModelInfo;
using testing::LinearProfileForTest;

// The rules of seed 001 Alg. 1 on hand-computable profiles. Unless a test says otherwise the
// latency margin is 1 and memory is ample, so the numbers below are L(b,p) as written.
class GpuletPlannerTest : public ::testing::Test {
 protected:
  GpuletPlannerTest() : profiles_(DeviceInfo{"test-gpu", 100000, true}) {
    options_.latency_margin = 1;
    // L(b,p) = (2 + b)·100/p ms. Saturated (2·L ≤ 100) throughput by size:
    //   20 %: b 8, 160 rps; 40 %: b 18, 360; 50 %: b 23, 460; 60 %: b 28, 560;
    //   80 %: b 32, 752.9; 100 %: b 32, 941.2.
    Add(LinearProfileForTest("a", 2, 1));
    Add(LinearProfileForTest("c", 2, 1));
    // Tight-SLO model: with SLO 8 it meets 2·L ≤ 8 only from 80 % up.
    Add(LinearProfileForTest("tight", 2, 1));
    Add(LinearProfileForTest("big_a", 2, 1, /*memory_mb=*/5000));
    Add(LinearProfileForTest("big_b", 2, 1, /*memory_mb=*/5000));
  }

  void Add(ModelProfile profile) { ASSERT_TRUE(profiles_.Add(std::move(profile)).ok()); }

  StatusOr<Plan> MakePlan(const std::vector<ModelDemand>& demands, int gpus,
                          InterferenceModel interference = InterferenceModel::None()) {
    auto planner = CreateGpuletPlanner(&profiles_, interference, options_);
    auto plan = planner->MakePlan(demands, gpus);
    if (plan.ok()) {
      EXPECT_TRUE(CheckPlan(*plan, demands, profiles_, interference, options_).ok());
    }
    return plan;
  }

  static std::vector<const Gpulet*> GpuletsOf(const Plan& plan, const std::string& model) {
    std::vector<const Gpulet*> out;
    for (const Gpulet& g : plan.gpulets) {
      for (const GpuletModel& m : g.models) {
        if (m.model == model) out.push_back(&g);
      }
    }
    return out;
  }

  static const GpuletModel& Entry(const Gpulet& g, const std::string& model) {
    for (const GpuletModel& m : g.models) {
      if (m.model == model) return m;
    }
    ADD_FAILURE() << model << " not on this gpulet";
    return g.models.front();
  }

  ProfileSet profiles_;
  PlannerOptions options_;
};

// ---- knee (p_eff) and p_req, on hand-set throughput tables ----------------------------------

Context SizesOnly() {
  Context c;
  c.partitions = {20, 40, 50, 60, 80, 100};
  return c;
}

ModelInfo WithThroughput(std::vector<double> sat_rps) {
  ModelInfo info;
  info.sat_rps = std::move(sat_rps);
  return info;
}

TEST(KneeTest, SteepestGainPerPercentWins) {
  const Context c = SizesOnly();
  // Gains per %: (20,40) 200/20 = 10; (40,50) 8; (50,60) 2; (60,80) 5; (80,100) 15.
  const ModelInfo info = WithThroughput({100, 300, 380, 400, 500, 800});
  EXPECT_EQ(c.partitions[gpulet::KneeIndex(c, info, /*include_last_pair=*/false)], 40);
  // With the (80,100) pair considered, the whole GPU is steeper.
  EXPECT_EQ(c.partitions[gpulet::KneeIndex(c, info, /*include_last_pair=*/true)], 100);
}

TEST(KneeTest, FlatPairsAreSkippedAndInfeasibleSizesDefaultUp) {
  const Context c = SizesOnly();
  // Every step gains < 5 %: the knee is the smallest size.
  EXPECT_EQ(gpulet::KneeIndex(c, WithThroughput({100, 101, 102, 103, 104, 105}), false), 0);
  // 20 % and 40 % miss the SLO: (40,50) gains 200/10 = 20 per %, later pairs are flat.
  EXPECT_EQ(c.partitions[gpulet::KneeIndex(c, WithThroughput({0, 0, 200, 205, 208, 210}), false)],
            50);
  EXPECT_EQ(gpulet::KneeIndex(c, WithThroughput({0, 0, 0, 0, 0, 0}), false), -1);
}

TEST(KneeTest, GpuPairKneeMaximisesWhatASplitGpuServes) {
  Context c = SizesOnly();
  c.options.max_gpulets_per_gpu = 2;
  // 20+80: 100 + 500 = 600; 40+60: 700; 50+50: 760; 100: 800 → the whole GPU.
  EXPECT_EQ(c.partitions[gpulet::PairKneeIndex(c, WithThroughput({100, 300, 380, 400, 500, 800}))],
            100);
  // With 100 % at 700, 50/50 (760) wins.
  EXPECT_EQ(c.partitions[gpulet::PairKneeIndex(c, WithThroughput({100, 300, 380, 400, 500, 700}))],
            50);
}

TEST(KneeTest, MinRequiredPartitionIsSmallestCoveringTheRate) {
  const Context c = SizesOnly();
  const ModelInfo info = WithThroughput({100, 300, 380, 400, 500, 800});
  const int knee = 1;  // 40 %
  EXPECT_EQ(c.partitions[gpulet::MinRequiredIndex(c, info, knee, 90)], 20);
  EXPECT_EQ(c.partitions[gpulet::MinRequiredIndex(c, info, knee, 100)], 20);
  EXPECT_EQ(c.partitions[gpulet::MinRequiredIndex(c, info, knee, 150)], 40);
  // Never above the knee: a rate past it gets the knee (a saturated gpulet).
  EXPECT_EQ(c.partitions[gpulet::MinRequiredIndex(c, info, knee, 350)], 40);
}

TEST_F(GpuletPlannerTest, DerivedSaturatedThroughputMatchesHandComputation) {
  auto context = gpulet::BuildContext(profiles_, nullptr, options_, {{"a", "", 100, 100}});
  ASSERT_TRUE(context.ok()) << context.status();
  const ModelInfo& a = context->models[0];
  EXPECT_EQ(a.sat_batch, (std::vector<int>{8, 18, 23, 28, 32, 32}));
  EXPECT_NEAR(a.sat_rps[0], 160, 1e-9);
  EXPECT_NEAR(a.sat_rps[3], 560, 1e-9);
  EXPECT_NEAR(a.sat_rps[5], 32000.0 / 34, 1e-9);
  // Gains (20,40) = (40,50) = (50,60) = 10 per %, (60,80) 9.6: the first steepest, 40 %.
  EXPECT_EQ(context->partitions[a.knee], 40);
}

// ---- placement rules through the planner ------------------------------------------------------

TEST_F(GpuletPlannerTest, ResidueSplitsAWholeGpuAtTheRequiredSize) {
  // 300 rps: 20 % serves 160, 40 % serves 360 → p_req = 40 %; the GPU is split 40 / 60 and the
  // 60 % stays free.
  auto plan = MakePlan({{"a", "", 300, 100}}, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->gpulets.size(), 1u);
  EXPECT_EQ(plan->gpulets[0].gpu, 0);
  EXPECT_EQ(plan->gpulets[0].partition_pct, 40);
  // Round by hand at 40 %, L = 2.5·(2 + b), d = 1000·b/300: b = 16 is the largest with
  // L ≤ d and L + d ≤ 100 (45 + 53.3 = 98.3).
  EXPECT_EQ(plan->gpulets[0].models[0].batch, 16);
  EXPECT_NEAR(plan->gpulets[0].duty_ms, 1000.0 * 16 / 300, 1e-9);
  EXPECT_DOUBLE_EQ(plan->gpulets[0].models[0].rate_rps, 300);
  EXPECT_EQ(plan->policy, "gpulet");
}

TEST_F(GpuletPlannerTest, SaturatedGpuletsAtTheKneeThenAResidue) {
  // 1000 rps with the knee at 40 % (360 rps saturated) → 40 % + 60 % on GPU 0 (the 60 % is the
  // last gpulet of the GPU and takes it whole: 560 rps) and the remaining 80 rps on a 20 %.
  options_.max_models_per_gpulet = 1;
  auto plan = MakePlan({{"a", "", 1000, 100}}, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->schedulable());
  EXPECT_NEAR(plan->AssignedRate("a"), 1000, 1e-6);
  std::map<int, int> pct_by_gpu;
  for (const Gpulet& g : plan->gpulets) pct_by_gpu[g.gpu] += g.partition_pct;
  EXPECT_EQ(plan->GpusUsed(), 2);
  EXPECT_EQ(pct_by_gpu[0], 100);
}

TEST_F(GpuletPlannerTest, BestFitTakesTheSmallestFreeCapacity) {
  // GPU 0 has 40 % free, GPU 1 80 %, GPU 2 is whole. No time sharing (one model per gpulet).
  options_.max_models_per_gpulet = 1;
  auto context =
      gpulet::BuildContext(profiles_, nullptr, options_, {{"a", "", 300, 100}, {"c", "", 0, 100}});
  ASSERT_TRUE(context.ok());
  const InterferenceModel none = InterferenceModel::None();
  context->interference = &none;
  std::vector<gpulet::Gpu> gpus(3);
  gpus[0].slots.push_back({60, 0, {{/*model=*/1, 1}}});
  gpus[1].slots.push_back({20, 0, {{/*model=*/1, 1}}});
  for (auto& g : gpus) ASSERT_TRUE(gpulet::SolveGpu(*context, g));
  gpulet::Builder builder(&*context, gpus, {300, 0}, gpulet::Variant{});
  ASSERT_TRUE(builder.PlaceModel(0));
  // p_req 40 %: GPU 0's 40 % free is the smallest that fits.
  ASSERT_EQ(builder.gpus()[0].slots.size(), 2u);
  EXPECT_EQ(builder.gpus()[0].slots[1].pct, 40);
  EXPECT_EQ(builder.gpus()[1].slots.size(), 1u);
  EXPECT_TRUE(builder.gpus()[2].slots.empty());
}

TEST_F(GpuletPlannerTest, LastGpuletOfAGpuTakesAllThatIsLeft) {
  options_.max_models_per_gpulet = 1;
  auto context =
      gpulet::BuildContext(profiles_, nullptr, options_, {{"a", "", 100, 100}, {"c", "", 0, 100}});
  ASSERT_TRUE(context.ok());
  const InterferenceModel none = InterferenceModel::None();
  context->interference = &none;
  std::vector<gpulet::Gpu> gpus(2);
  gpus[0].slots.push_back({20, 0, {{/*model=*/1, 1}}});
  ASSERT_TRUE(gpulet::SolveGpu(*context, gpus[0]));
  gpulet::Builder builder(&*context, gpus, {100, 0}, gpulet::Variant{});
  ASSERT_TRUE(builder.PlaceModel(0));
  // p_req is 20 %, but GPU 0 (80 % free) may hold one more gpulet only: it gets the 80 %.
  ASSERT_EQ(builder.gpus()[0].slots.size(), 2u);
  EXPECT_EQ(builder.gpus()[0].slots[1].pct, 80);
}

TEST_F(GpuletPlannerTest, TimeSharesWhenTheRoundFits) {
  // a and c at 50 rps each fit one 20 % gpulet: at d = 40 ms, b = 2 each, L = 5·4 = 20 each,
  // Σ 40 ≤ 40 and 40 + 40 ≤ 100.
  auto plan = MakePlan({{"a", "", 50, 100}, {"c", "", 50, 100}}, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->gpulets.size(), 1u);
  EXPECT_EQ(plan->gpulets[0].partition_pct, 20);
  EXPECT_EQ(plan->gpulets[0].models.size(), 2u);
  EXPECT_EQ(plan->PartitionSum(), 20);
}

TEST_F(GpuletPlannerTest, DoesNotTimeShareWhenTheSloForbids) {
  // tight (SLO 8) needs 80 %: alone L(1,80) = 3.75, 2·3.75 ≤ 8. Sharing with a at 80 % or 100 %
  // leaves no room (Σ L ≥ 6 plus the round > 8), so it gets its own gpulet next to a's.
  auto plan = MakePlan({{"a", "", 50, 100}, {"tight", "", 50, 8}}, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->schedulable());
  ASSERT_EQ(plan->gpulets.size(), 2u);
  for (const Gpulet& g : plan->gpulets) EXPECT_EQ(g.models.size(), 1u);
  EXPECT_EQ(GpuletsOf(*plan, "tight")[0]->partition_pct, 80);
  EXPECT_EQ(GpuletsOf(*plan, "a")[0]->partition_pct, 20);
}

TEST_F(GpuletPlannerTest, GrowsAGpuletRatherThanOpeningAnother) {
  // With c's SLO at 60, a + c at 20 % miss (d = 40: 40 + 40 > 60); at 40 %, d = 20: b = 1 each,
  // L = 7.5 each, 15 + 20 ≤ 60. The 20 % gpulet grows to 40 % instead of a second gpulet.
  auto plan = MakePlan({{"a", "", 50, 100}, {"c", "", 50, 60}}, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->gpulets.size(), 1u);
  EXPECT_EQ(plan->gpulets[0].partition_pct, 40);
  EXPECT_EQ(plan->gpulets[0].models.size(), 2u);
}

TEST_F(GpuletPlannerTest, MemoryAdmissionRefuses) {
  // big_a and big_b take 5000 MB each: together with one 1230 MB overhead (time-shared) or two
  // (two gpulets) they exceed 0.9 × 11000 = 9900 MB, so they cannot share a GPU.
  options_.gpu_memory_mb = 11000;
  const std::vector<ModelDemand> demands = {{"big_a", "", 50, 100}, {"big_b", "", 50, 100}};
  auto plan = MakePlan(demands, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->schedulable());
  ASSERT_EQ(plan->gpulets.size(), 2u);
  EXPECT_NE(plan->gpulets[0].gpu, plan->gpulets[1].gpu);
  plan = MakePlan(demands, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->unschedulable.size(), 1u);
  // With room for both (15000·0.9 = 13500 ≥ 10000 + 1230) they share.
  options_.gpu_memory_mb = 15000;
  plan = MakePlan(demands, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->schedulable());
}

TEST_F(GpuletPlannerTest, MaxGpuletsPerGpuRespected) {
  options_.max_models_per_gpulet = 1;
  const std::vector<ModelDemand> demands = {
      {"a", "", 50, 100}, {"c", "", 50, 100}, {"big_a", "", 50, 100}};
  auto plan = MakePlan(demands, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->schedulable());
  std::map<int, int> count;
  for (const Gpulet& g : plan->gpulets) ++count[g.gpu];
  for (const auto& [gpu, n] : count) EXPECT_LE(n, 2) << "gpu " << gpu;
  // One gpulet per GPU: it takes the whole GPU, and three models need three GPUs.
  options_.max_gpulets_per_gpu = 1;
  plan = MakePlan(demands, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->unschedulable.size(), 1u);
  for (const Gpulet& g : plan->gpulets) EXPECT_EQ(g.partition_pct, 100);
  plan = MakePlan(demands, 3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->schedulable());
}

TEST_F(GpuletPlannerTest, UnschedulableListsTheModelsThatDoNotFit) {
  // tight with SLO 5: L(1,100) = 3, 2·3 > 5 at every size. a at 5000 rps needs > 5 GPUs.
  auto plan = MakePlan({{"a", "", 100, 100}, {"tight", "", 10, 5}}, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->unschedulable, (std::vector<std::string>{"tight"}));
  EXPECT_NEAR(plan->AssignedRate("a"), 100, 1e-9);
  plan = MakePlan({{"a", "", 5000, 100}, {"c", "", 100, 100}}, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->unschedulable, (std::vector<std::string>{"a"}));
  EXPECT_EQ(plan->AssignedRate("a"), 0);  // rolled back, not half-placed
  EXPECT_NEAR(plan->AssignedRate("c"), 100, 1e-9);
}

TEST_F(GpuletPlannerTest, InterferenceShrinksBatchesAndLostRateIsPlacedAgain) {
  // One model per gpulet. a (300 rps) gets 40 %, c (300 rps) the other 60 % of GPU 0.
  options_.max_models_per_gpulet = 1;
  const std::vector<ModelDemand> demands = {{"a", "", 300, 100}, {"c", "", 300, 100}};
  auto blind = MakePlan(demands, 2);
  ASSERT_TRUE(blind.ok()) << blind.status();
  // Without interference: a at 40 % b = 16 (above); c at 60 %, L = (2 + b)/0.6, d = 10·b/3:
  // b = 19 (L 35, d 63.3, 98.3 ≤ 100).
  ASSERT_EQ(GpuletsOf(*blind, "a").size(), 1u);
  EXPECT_EQ(Entry(*GpuletsOf(*blind, "a")[0], "a").batch, 16);
  EXPECT_EQ(Entry(*GpuletsOf(*blind, "c")[0], "c").batch, 19);
  EXPECT_EQ(blind->GpusUsed(), 1);
  // With a 1.5× slowdown, a's round at 40 % no longer fits (3.75·(2 + b) > 10·b/3 for all b):
  // a falls back to its saturated batch, 2·3.75·(2 + b) ≤ 100 → b = 11, serving
  // 11000/48.75 = 225.6 rps; c at 60 % runs like a did alone (b = 16). The 74.4 rps a lost go
  // to a 20 % gpulet on GPU 1.
  auto aware = MakePlan(demands, 2, InterferenceModel::Constant(1.5));
  ASSERT_TRUE(aware.ok()) << aware.status();
  EXPECT_TRUE(aware->schedulable());
  EXPECT_EQ(aware->policy, "gpulet+int");
  const auto a_gpulets = GpuletsOf(*aware, "a");
  ASSERT_EQ(a_gpulets.size(), 2u);
  EXPECT_EQ(a_gpulets[0]->partition_pct, 40);
  EXPECT_EQ(Entry(*a_gpulets[0], "a").batch, 11);
  EXPECT_NEAR(Entry(*a_gpulets[0], "a").rate_rps, 11000 / 48.75, 1e-6);
  EXPECT_NEAR(Entry(*a_gpulets[0], "a").latency_ms, 48.75, 1e-9);
  EXPECT_EQ(a_gpulets[1]->gpu, 1);
  EXPECT_EQ(a_gpulets[1]->partition_pct, 20);
  EXPECT_NEAR(Entry(*a_gpulets[1], "a").rate_rps, 300 - 11000 / 48.75, 1e-6);
  EXPECT_EQ(Entry(*GpuletsOf(*aware, "c")[0], "c").batch, 16);
}

// ---- Replan ------------------------------------------------------------------------------------

std::string Layout(const Plan& plan, const std::string& model) {
  std::string out;
  for (const Gpulet& g : plan.gpulets) {
    for (const GpuletModel& m : g.models) {
      if (m.model == model) out += absl::StrCat(g.gpu, ":", g.partition_pct, " ");
    }
  }
  return out;
}

TEST_F(GpuletPlannerTest, ReplanKeepsUnchangedModelsInPlace) {
  options_.max_models_per_gpulet = 1;
  auto planner = CreateGpuletPlanner(&profiles_, InterferenceModel::None(), options_);
  std::vector<ModelDemand> demands = {{"a", "", 300, 100}, {"c", "", 100, 100}};
  auto plan = planner->MakePlan(demands, 3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Same demands: the same plan.
  auto same = planner->Replan(*plan, demands, 3);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(PlanToText(*same), PlanToText(*plan));
  // c rises from 100 to 500 rps (> 5 %): a stays where it was, c is re-placed.
  demands[1].rate_rps = 500;
  auto replan = planner->Replan(*plan, demands, 3);
  ASSERT_TRUE(replan.ok()) << replan.status();
  EXPECT_TRUE(CheckPlan(*replan, demands, profiles_, InterferenceModel::None(), options_).ok());
  EXPECT_EQ(Layout(*replan, "a"), Layout(*plan, "a"));
  EXPECT_NEAR(replan->AssignedRate("c"), 500, 1e-6);
  // A fall keeps the gpulets and routes less to them.
  demands[0].rate_rps = 150;
  auto lower = planner->Replan(*replan, demands, 3);
  ASSERT_TRUE(lower.ok());
  EXPECT_EQ(Layout(*lower, "a"), Layout(*replan, "a"));
  EXPECT_EQ(Layout(*lower, "c"), Layout(*replan, "c"));
  EXPECT_NEAR(lower->AssignedRate("a"), 150, 1e-6);
}

TEST_F(GpuletPlannerTest, ReplanAbsorbsASmallRiseInPlace) {
  auto planner = CreateGpuletPlanner(&profiles_, InterferenceModel::None(), options_);
  std::vector<ModelDemand> demands = {{"a", "", 300, 100}};
  auto plan = planner->MakePlan(demands, 1);
  ASSERT_TRUE(plan.ok());
  // +4 %: the 40 % gpulet (360 rps saturated) still holds 312 rps.
  demands[0].rate_rps = 312;
  auto replan = planner->Replan(*plan, demands, 1);
  ASSERT_TRUE(replan.ok());
  EXPECT_EQ(Layout(*replan, "a"), "0:40 ");
  EXPECT_NEAR(replan->AssignedRate("a"), 312, 1e-6);
}

TEST_F(GpuletPlannerTest, ReplanFallsBackToAFullPlan) {
  options_.max_models_per_gpulet = 1;
  auto planner = CreateGpuletPlanner(&profiles_, InterferenceModel::None(), options_);
  // a and c at 300 rps share GPU 0 as 40 % + 60 %. Then a drops to 100 and c rises to 1500.
  // Keeping a's 40 % leaves c GPU 0's 60 % and GPU 1 split at its knee, 40 / 60:
  // 560 + 360 + 560 = 1480 < 1500 rps. The full re-plan fits both (c gets a whole GPU).
  std::vector<ModelDemand> demands = {{"a", "", 300, 100}, {"c", "", 300, 100}};
  auto plan = planner->MakePlan(demands, 2);
  ASSERT_TRUE(plan.ok());
  demands = {{"a", "", 100, 100}, {"c", "", 1500, 100}};
  auto replan = planner->Replan(*plan, demands, 2);
  ASSERT_TRUE(replan.ok()) << replan.status();
  EXPECT_TRUE(replan->schedulable()) << PlanToText(*replan);
  auto full = planner->MakePlan(demands, 2);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(PlanToText(*replan), PlanToText(*full));
  // A plan made by another policy is always re-planned in full.
  Plan foreign = *plan;
  foreign.policy = "temporal";
  auto from_foreign = planner->Replan(foreign, demands, 2);
  ASSERT_TRUE(from_foreign.ok());
  EXPECT_EQ(PlanToText(*from_foreign), PlanToText(*full));
}

TEST_F(GpuletPlannerTest, BadInputIsAnError) {
  auto planner = CreateGpuletPlanner(&profiles_, InterferenceModel::None(), options_);
  EXPECT_EQ(planner->MakePlan({{"nope", "", 1, 10}}, 1).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(planner->MakePlan({{"a", "", 1, 10}, {"a", "", 2, 10}}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(planner->MakePlan({{"a", "", -1, 10}}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(planner->MakePlan({{"a", "", 1, 0}}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(planner->MakePlan({{"a", "", 1, 10}}, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  options_.partitions_pct = {0, 50};
  planner = CreateGpuletPlanner(&profiles_, InterferenceModel::None(), options_);
  EXPECT_EQ(planner->MakePlan({{"a", "", 1, 10}}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(GpuletPlannerTest, ZeroRateAndZeroGpus) {
  auto plan = MakePlan({{"a", "", 0, 100}}, 1);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->gpulets.empty());
  EXPECT_TRUE(plan->schedulable());
  plan = MakePlan({{"a", "", 10, 100}}, 0);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->unschedulable, (std::vector<std::string>{"a"}));
}

}  // namespace
}  // namespace tessera::scheduler
