#include "baseline_planners.h"

#include <cstdio>
#include <random>

#include "baseline_common.h"
#include "gpulet_planner.h"
#include "gtest/gtest.h"
#include "profile_fixtures_for_test.h"
#include "slo_rules.h"

namespace tessera::scheduler {
namespace {

using testing::KneeProfileForTest;
using testing::LinearProfileForTest;

// Profiles with round numbers. "lin": L(b,p) = (2 + b)·100/p, no knee. "knee": L(b,p) = 2 + b at
// p ≥ 50 %, (2 + b)·50/p below. Device memory 10000 MB (9000 usable), models 100 MB.
class BaselinePlannersTest : public ::testing::Test {
 protected:
  BaselinePlannersTest() : profiles_(DeviceInfo{"test-gpu", 10000, true}) {
    EXPECT_TRUE(profiles_.Add(LinearProfileForTest("lin", 2, 1)).ok());
    EXPECT_TRUE(profiles_.Add(KneeProfileForTest("knee", 2, 1, 50)).ok());
    options_.latency_margin = 1;
  }

  std::unique_ptr<Planner> Make(Policy policy,
                                InterferenceModel interference = InterferenceModel::None()) {
    switch (policy) {
      case Policy::kTemporal:
        return CreateTemporalPlanner(&profiles_, interference, options_);
      case Policy::kSpatial:
        return CreateSpatialPlanner(&profiles_, interference, options_);
      case Policy::kTriton:
        return CreateTritonPlanner(&profiles_, interference, options_);
      default:
        return CreateIdealPlanner(&profiles_, interference, options_);
    }
  }

  // Plans and checks the plan against CheckPlan.
  Plan PlanFor(Policy policy, const std::vector<ModelDemand>& demands, int num_gpus,
               InterferenceModel interference = InterferenceModel::None()) {
    auto plan = Make(policy, interference)->MakePlan(demands, num_gpus);
    EXPECT_TRUE(plan.ok()) << plan.status();
    if (!plan.ok()) return {};
    Status valid = CheckPlan(*plan, demands, profiles_, interference, options_);
    EXPECT_TRUE(valid.ok()) << valid << "\n" << PlanToText(*plan);
    return *std::move(plan);
  }

  ProfileSet profiles_;
  PlannerOptions options_;
};

const GpuletModel* FindModel(const Gpulet& g, const std::string& model) {
  for (const GpuletModel& m : g.models) {
    if (m.model == model) return &m;
  }
  return nullptr;
}

// ---- temporal (SBP) -------------------------------------------------------------------------

TEST_F(BaselinePlannersTest, TemporalMergesTwoLightModelsOnOneGpu) {
  // Two models at 100 rps, SLO 50, L = 2 + b on the whole GPU. Merged round: at d = 30 the
  // batches are 3 + 3, Σ L = 10, occupancy 1/3; at d = 40 (batches 4) 12 + 40 > 50, but the
  // SLO allows d = 50 − 12 = 38 with the same batches: occupancy 12/38, the lowest.
  const std::vector<ModelDemand> demands = {{"a", "lin", 100, 50}, {"b", "lin", 100, 50}};
  const Plan plan = PlanFor(Policy::kTemporal, demands, 2);
  EXPECT_EQ(plan.policy, "temporal");
  ASSERT_TRUE(plan.schedulable());
  ASSERT_EQ(plan.gpulets.size(), 1u);
  const Gpulet& g = plan.gpulets[0];
  EXPECT_EQ(g.partition_pct, 100);
  EXPECT_DOUBLE_EQ(g.duty_ms, 38);
  ASSERT_EQ(g.models.size(), 2u);
  EXPECT_EQ(g.models[0].batch, 4);
  EXPECT_EQ(g.models[1].batch, 4);
  EXPECT_DOUBLE_EQ(g.models[0].latency_ms, 6);
  EXPECT_EQ(plan.GpusUsed(), 1);
}

TEST_F(BaselinePlannersTest, TemporalRefusesToMergeWhenSloForbids) {
  // SLO 11 at 100 rps: alone, batch 1 in rounds of 11 − 3 = 8 ms works. Together the shortest
  // round holding both (Σ L = 6) needs 6 + 6 > 11: no merge, so one GPU serves one model.
  const std::vector<ModelDemand> demands = {{"a", "lin", 100, 11}, {"b", "lin", 100, 11}};
  Plan plan = PlanFor(Policy::kTemporal, demands, 1);
  EXPECT_EQ(plan.unschedulable, std::vector<std::string>{"b"});
  ASSERT_EQ(plan.gpulets.size(), 1u);
  EXPECT_EQ(plan.gpulets[0].models[0].model, "a");
  EXPECT_DOUBLE_EQ(plan.gpulets[0].duty_ms, 8);
  plan = PlanFor(Policy::kTemporal, demands, 2);
  EXPECT_TRUE(plan.schedulable());
  EXPECT_EQ(plan.GpusUsed(), 2);
}

TEST_F(BaselinePlannersTest, TemporalFillsSaturatedGpusThenAResidue) {
  // SLO 30: saturated batch 13 (2·15 ≤ 30), 13000/15 = 866.7 rps per GPU. 2000 rps = 2 GPUs +
  // 266.7 rps; that residue runs batch 6 in rounds of 30 − 8 = 22 ms (occupancy 8/22).
  const std::vector<ModelDemand> demands = {{"c", "lin", 2000, 30}};
  Plan plan = PlanFor(Policy::kTemporal, demands, 3);
  ASSERT_TRUE(plan.schedulable());
  ASSERT_EQ(plan.gpulets.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(plan.gpulets[i].models[0].batch, 13);
    EXPECT_DOUBLE_EQ(plan.gpulets[i].duty_ms, 15);
    EXPECT_NEAR(plan.gpulets[i].models[0].rate_rps, 13000.0 / 15, 1e-9);
  }
  EXPECT_EQ(plan.gpulets[2].models[0].batch, 6);
  EXPECT_DOUBLE_EQ(plan.gpulets[2].duty_ms, 22);
  EXPECT_NEAR(plan.gpulets[2].models[0].rate_rps, 2000 - 2 * 13000.0 / 15, 1e-9);
  plan = PlanFor(Policy::kTemporal, demands, 2);
  EXPECT_EQ(plan.unschedulable, std::vector<std::string>{"c"});
  EXPECT_TRUE(plan.gpulets.empty());
}

// ---- spatial (greedy best fit) --------------------------------------------------------------

TEST_F(BaselinePlannersTest, SpatialSizesThePartitionToTheRate) {
  // 200 rps, SLO 40, L = (2 + b)·100/p. At 20 %: L = 10 + 5b never fits a 5b ms round. At 40 %:
  // L = 5 + 2.5b; b = 4 in 20 ms rounds (15 + 20 ≤ 40, occupancy 0.75) is the best round.
  const std::vector<ModelDemand> demands = {{"b", "lin", 200, 40}};
  const Plan plan = PlanFor(Policy::kSpatial, demands, 1);
  EXPECT_EQ(plan.policy, "spatial");
  ASSERT_EQ(plan.gpulets.size(), 1u);
  EXPECT_EQ(plan.gpulets[0].partition_pct, 40);
  EXPECT_EQ(plan.gpulets[0].models[0].batch, 4);
  EXPECT_DOUBLE_EQ(plan.gpulets[0].duty_ms, 20);
  EXPECT_DOUBLE_EQ(plan.gpulets[0].models[0].latency_ms, 15);
}

// a needs 60 % (450 rps, SLO 40: at 50 % L = 4 + 2b never fits; at 60 % b = 9 in 20 ms rounds,
// L = 18.3), b needs 40 % (above).
const std::vector<ModelDemand>& SixtyAndForty() {
  static const std::vector<ModelDemand> demands = {{"a", "lin", 450, 40}, {"b", "lin", 200, 40}};
  return demands;
}

TEST_F(BaselinePlannersTest, SpatialPacksComplementaryPartitionsByBestFit) {
  const Plan plan = PlanFor(Policy::kSpatial, SixtyAndForty(), 2);
  ASSERT_TRUE(plan.schedulable());
  ASSERT_EQ(plan.gpulets.size(), 2u);
  // Largest need first: a opens GPU 0 at 60 %; b's best fit is the 40 % left there.
  EXPECT_EQ(plan.gpulets[0].gpu, 0);
  EXPECT_EQ(plan.gpulets[0].partition_pct, 60);
  EXPECT_EQ(plan.gpulets[0].models[0].batch, 9);
  EXPECT_DOUBLE_EQ(plan.gpulets[0].duty_ms, 20);
  EXPECT_EQ(plan.gpulets[1].gpu, 0);
  EXPECT_EQ(plan.gpulets[1].partition_pct, 40);
  EXPECT_EQ(plan.GpusUsed(), 1);
}

TEST_F(BaselinePlannersTest, SpatialChecksInterferenceOnBothGpulets) {
  // With every co-located pair slowed 1.5×, b at 40 % next to a no longer meets its SLO (nor
  // would a), so b moves to an empty GPU; with one GPU it is unschedulable.
  const InterferenceModel slow = InterferenceModel::Constant(1.5);
  Plan plan = PlanFor(Policy::kSpatial, SixtyAndForty(), 2, slow);
  ASSERT_TRUE(plan.schedulable());
  ASSERT_EQ(plan.gpulets.size(), 2u);
  EXPECT_EQ(plan.gpulets[1].gpu, 1);
  EXPECT_EQ(plan.gpulets[1].partition_pct, 40);
  plan = PlanFor(Policy::kSpatial, SixtyAndForty(), 1, slow);
  EXPECT_EQ(plan.unschedulable, std::vector<std::string>{"b"});
}

TEST_F(BaselinePlannersTest, SpatialNeverTimeShares) {
  // Three models each fitting 20 % (100 rps, SLO 40: b = 2 in 20 ms rounds, L = 20). One GPU
  // holds two gpulets, so the third is unschedulable; temporal puts all three in one round.
  const std::vector<ModelDemand> demands = {
      {"x", "lin", 100, 40}, {"y", "lin", 100, 40}, {"z", "lin", 100, 40}};
  Plan plan = PlanFor(Policy::kSpatial, demands, 1);
  EXPECT_EQ(plan.unschedulable, std::vector<std::string>{"z"});
  ASSERT_EQ(plan.gpulets.size(), 2u);
  EXPECT_EQ(plan.gpulets[0].partition_pct, 20);
  EXPECT_EQ(plan.gpulets[1].partition_pct, 80);  // the last gpulet takes what is left
  for (const Gpulet& g : plan.gpulets) EXPECT_EQ(g.models.size(), 1u);
  plan = PlanFor(Policy::kTemporal, demands, 1);
  EXPECT_TRUE(plan.schedulable());
  ASSERT_EQ(plan.gpulets.size(), 1u);
  EXPECT_EQ(plan.gpulets[0].models.size(), 3u);
}

TEST_F(BaselinePlannersTest, SpatialSplitsARateAboveOneGpu) {
  // 1990 rps, SLO 31: two saturated whole GPUs (b = 13, 866.7 rps each), then 256.7 rps on the
  // smallest partition that serves it: 40 % (L = 5 + 2.5b, b = 4 in 15.6 ms rounds, 15 + 15.6 ≤
  // 31; at 20 %, L = 10 + 5b never fits a 3.9b ms round).
  const Plan plan = PlanFor(Policy::kSpatial, {{"c", "lin", 1990, 31}}, 3);
  ASSERT_TRUE(plan.schedulable());
  ASSERT_EQ(plan.gpulets.size(), 3u);
  EXPECT_EQ(plan.gpulets[0].partition_pct, 100);
  EXPECT_EQ(plan.gpulets[1].partition_pct, 100);
  EXPECT_EQ(plan.gpulets[2].partition_pct, 40) << PlanToText(plan);
  EXPECT_EQ(plan.gpulets[2].models[0].batch, 4);
}

// ---- triton ---------------------------------------------------------------------------------

TEST_F(BaselinePlannersTest, TritonPutsEveryModelOnEveryGpuAndSplitsTheRate) {
  const std::vector<ModelDemand> demands = {
      {"a", "lin", 300, 30}, {"b", "lin", 100, 30}, {"idle", "lin", 0, 30}};
  const Plan plan = PlanFor(Policy::kTriton, demands, 2);
  EXPECT_EQ(plan.policy, "triton");
  EXPECT_FALSE(plan.partitions_exclusive);
  ASSERT_TRUE(plan.schedulable());
  ASSERT_EQ(plan.gpulets.size(), 4u);
  for (const Gpulet& g : plan.gpulets) {
    EXPECT_EQ(g.partition_pct, 100);
    EXPECT_EQ(g.duty_ms, 0);
    ASSERT_EQ(g.models.size(), 1u);
    // Max batch: 2·(2 + b) ≤ 30 → 13.
    EXPECT_EQ(g.models[0].batch, 13);
    EXPECT_DOUBLE_EQ(g.models[0].rate_rps, g.models[0].model == "a" ? 150 : 50);
  }
  EXPECT_EQ(plan.gpulets[0].gpu, 0);
  EXPECT_EQ(plan.gpulets[3].gpu, 1);
}

TEST_F(BaselinePlannersTest, TritonRefusesOnlyOnMemory) {
  // SLO 1 ms is unreachable (batch 1 takes 3 ms) and 10⁶ rps is far beyond the GPU: Triton
  // serves them anyway. Memory: 200 MB process + 300 MB per model in 1000 MB fits two models.
  ProfileSet profiles(DeviceInfo{"test-gpu", 1000, true});
  for (const char* name : {"m1", "m2", "m3"}) {
    ASSERT_TRUE(profiles.Add(LinearProfileForTest(name, 2, 1, 300)).ok());
  }
  options_.memory_room = 1;
  options_.per_gpulet_overhead_mb = 200;
  const std::vector<ModelDemand> demands = {
      {"m1", "", 1e6, 1}, {"m2", "", 10, 1}, {"m3", "", 10, 1}};
  auto planner = CreateTritonPlanner(&profiles, InterferenceModel::None(), options_);
  auto plan = planner->MakePlan(demands, 3);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->unschedulable, std::vector<std::string>{"m3"});
  EXPECT_EQ(plan->gpulets.size(), 6u);
  for (const Gpulet& g : plan->gpulets) EXPECT_EQ(g.models[0].batch, 1);
  // The process overhead is charged once per GPU (2 models × 300 + 200 = 800 ≤ 1000).
  EXPECT_TRUE(CheckPlan(*plan, demands, profiles, InterferenceModel::None(), options_).ok());
}

// ---- ideal ----------------------------------------------------------------------------------

// One GPU; "knee" runs as fast on 50 % as on 100 %. a at 600 rps alone occupies 16/23.3 = 0.69
// of any gpulet ≥ 50 % (b = 14); c1, c2 at 200 rps take 8/30 = 0.27 each, and 14/25 = 0.56 when
// they share one (b = 5 + 5). Σ 0.69 + 2·0.27 > 1: no single round holds all three (temporal
// fails), and two gpulets cannot hold three models without time sharing (spatial fails); the
// ideal splits the GPU, a alone and c1 + c2 sharing.
const std::vector<ModelDemand>& GreedyFails() {
  static const std::vector<ModelDemand> demands = {
      {"a", "knee", 600, 40}, {"c1", "knee", 200, 40}, {"c2", "knee", 200, 40}};
  return demands;
}

TEST_F(BaselinePlannersTest, IdealFindsAScheduleTheGreedyBaselinesMiss) {
  EXPECT_FALSE(PlanFor(Policy::kTemporal, GreedyFails(), 1).schedulable());
  EXPECT_FALSE(PlanFor(Policy::kSpatial, GreedyFails(), 1).schedulable());
  const Plan plan = PlanFor(Policy::kIdeal, GreedyFails(), 1);
  EXPECT_EQ(plan.policy, "ideal");
  ASSERT_TRUE(plan.schedulable()) << PlanToText(plan);
  // The first layout found is (40, 60): a alone on 40 % (b = 12 in 20 ms rounds, L = 1.25·14 =
  // 17.5), c1 + c2 sharing 60 % (as fast as 50 %: b = 5 + 5 in 25 ms rounds).
  ASSERT_EQ(plan.gpulets.size(), 2u);
  for (const Gpulet& g : plan.gpulets) {
    if (FindModel(g, "a") != nullptr) {
      EXPECT_EQ(g.partition_pct, 40);
      EXPECT_EQ(g.models.size(), 1u);
      EXPECT_EQ(g.models[0].batch, 12);
    } else {
      EXPECT_EQ(g.partition_pct, 60);
      EXPECT_EQ(g.models.size(), 2u);
      EXPECT_DOUBLE_EQ(g.duty_ms, 25);
    }
  }
}

TEST_F(BaselinePlannersTest, IdealAccountsForInterference) {
  // Slowed 1.5× by its neighbour, a fits no partition < 100 % (at 50 %: L = 3 + 1.5b never fits
  // a 1000b/600 ms round), and whole GPU rounds of all three fail as above: unschedulable on one
  // GPU, schedulable on two (a alone; c1 + c2 on the other GPU).
  const InterferenceModel slow = InterferenceModel::Constant(1.5);
  Plan plan = PlanFor(Policy::kIdeal, GreedyFails(), 1, slow);
  EXPECT_FALSE(plan.schedulable());
  EXPECT_TRUE(plan.gpulets.empty());
  EXPECT_EQ(plan.unschedulable, (std::vector<std::string>{"a", "c1", "c2"}));
  plan = PlanFor(Policy::kIdeal, GreedyFails(), 2, slow);
  EXPECT_TRUE(plan.schedulable());
}

TEST_F(BaselinePlannersTest, IdealReportsUnschedulableBeyondCapacity) {
  // SLO 30: at most 866.7 rps per GPU (saturated, whole GPU; two halves serve 2·357). 4000 rps
  // needs more than 4 GPUs. A 1 ms SLO cannot be met at all.
  Plan plan = PlanFor(Policy::kIdeal, {{"c", "lin", 4000, 30}}, 4);
  EXPECT_EQ(plan.unschedulable, std::vector<std::string>{"c"});
  EXPECT_TRUE(plan.gpulets.empty());
  plan = PlanFor(Policy::kIdeal, {{"c", "lin", 3400, 30}}, 4);
  EXPECT_TRUE(plan.schedulable());
  plan = PlanFor(Policy::kIdeal, {{"c", "lin", 10, 1}, {"d", "lin", 0, 1}}, 1);
  EXPECT_EQ(plan.unschedulable, std::vector<std::string>{"c"});
}

TEST_F(BaselinePlannersTest, IdealIsLimitedToFourGpus) {
  auto plan = Make(Policy::kIdeal)->MakePlan({{"c", "lin", 10, 30}}, 5);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument) << plan.status();
}

// ---- inputs ---------------------------------------------------------------------------------

TEST_F(BaselinePlannersTest, BadInputsAreErrorsNamingTheProblem) {
  for (Policy policy : {Policy::kTemporal, Policy::kSpatial, Policy::kTriton, Policy::kIdeal}) {
    auto planner = Make(policy);
    auto expect = [&](const std::vector<ModelDemand>& demands, int gpus, absl::StatusCode code,
                      const std::string& text) {
      auto plan = planner->MakePlan(demands, gpus);
      EXPECT_EQ(plan.status().code(), code) << planner->name() << ": " << plan.status();
      EXPECT_NE(std::string(plan.status().message()).find(text), std::string::npos)
          << planner->name() << ": " << plan.status();
    };
    expect({{"nope", "", 10, 30}}, 1, absl::StatusCode::kNotFound, "nope");
    expect({{"a", "lin", 10, 30}, {"a", "lin", 10, 30}}, 1, absl::StatusCode::kInvalidArgument,
           "'a' is listed twice");
    expect({{"a", "lin", -1, 30}}, 1, absl::StatusCode::kInvalidArgument, "rate -1");
    expect({{"a", "lin", 10, 0}}, 1, absl::StatusCode::kInvalidArgument, "SLO 0");
    expect({{"a", "lin", 10, 30}}, 0, absl::StatusCode::kInvalidArgument, "num_gpus");
    // No demand at all is a valid, empty plan.
    auto empty = planner->MakePlan({{"a", "lin", 0, 30}}, 1);
    ASSERT_TRUE(empty.ok());
    EXPECT_TRUE(empty->schedulable());
    EXPECT_TRUE(empty->gpulets.empty());
  }
  options_.partitions_pct = {20, 140};
  auto plan = Make(Policy::kSpatial)->MakePlan({{"a", "lin", 10, 30}}, 1);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(plan.status().message()).find("140"), std::string::npos);
}

// ---- properties -----------------------------------------------------------------------------

TEST(FastFitRoundTest, MatchesFitRound) {
  const ModelProfile p = LinearProfileForTest("p", 2, 1);
  const ModelProfile q = KneeProfileForTest("q", 4, 0.5, 60);
  baseline::ProfileCache cache(32);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> rate(1, 900), slo(3, 120), factor(1, 1.4);
  std::uniform_int_distribution<int> count(1, 3), part(0, 5);
  const int parts[] = {20, 40, 50, 60, 80, 100};
  int found = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int pct = parts[part(rng)];
    std::vector<RoundMember> members;
    std::vector<baseline::FastMember> fast;
    for (int i = count(rng); i > 0; --i) {
      const ModelProfile* profile = i % 2 ? &p : &q;
      members.push_back({profile, rate(rng), slo(rng), factor(rng)});
      fast.push_back({&cache.Get(profile, pct), members.back().rate_rps, members.back().slo_ms,
                      members.back().interference_factor});
    }
    const std::optional<Round> expected = FitRound(members, pct, 1.1, 32);
    const std::optional<Round> got = baseline::FastFitRound(fast, 1.1);
    ASSERT_EQ(expected.has_value(), got.has_value()) << "trial " << trial;
    if (!expected) continue;
    ++found;
    EXPECT_EQ(expected->duty_ms, got->duty_ms) << "trial " << trial;
    EXPECT_EQ(expected->batches, got->batches) << "trial " << trial;
    EXPECT_EQ(expected->occupancy, got->occupancy) << "trial " << trial;
  }
  EXPECT_GT(found, 200);
}

// Random demand sets on the fixture profiles plus a few more shapes, under every interference
// kind and several option sets: every plan passes CheckPlan, and the ideal schedules whatever
// temporal, spatial or gpulet does.
TEST_F(BaselinePlannersTest, PropertyPlansAreValidAndIdealDominates) {
  ASSERT_TRUE(profiles_.Add(LinearProfileForTest("heavy", 8, 3, 2500, 0.5, 0.6)).ok());
  ASSERT_TRUE(profiles_.Add(KneeProfileForTest("small-knee", 1, 0.2, 30, 400)).ok());
  ASSERT_TRUE(profiles_.Add(KneeProfileForTest("late-knee", 3, 1.5, 80, 1500)).ok());
  const std::vector<std::string> shapes = {"lin", "knee", "heavy", "small-knee", "late-knee"};
  const std::vector<InterferenceModel> interference = {
      InterferenceModel::None(), InterferenceModel::Constant(1.18),
      InterferenceModel::Linear({0.11, 0.72, 0.35, 0.09, 0.9})};
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> models(1, 6), gpus(1, 4), shape(0, 4), kind(0, 2);
  std::uniform_real_distribution<double> slo(8, 150), unit(0, 1);
  int schedulable[4] = {0, 0, 0, 0};
  int gpulet_schedulable = 0;
  constexpr int kTrials = 240;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<ModelDemand> demands;
    for (int i = models(rng); i > 0; --i) {
      const double rate = unit(rng) < 0.1 ? 0 : std::round(10 + 790 * unit(rng) * unit(rng));
      demands.push_back({"m" + std::to_string(i), shapes[shape(rng)], rate, std::round(slo(rng))});
    }
    const int n = gpus(rng);
    const InterferenceModel& intf = interference[kind(rng)];
    // Options vary too: the artifact's other size set, fewer models per gpulet, the artifact's
    // 15 rps slack, its 1.1 latency margin, memory that binds.
    options_ = PlannerOptions();
    options_.latency_margin = unit(rng) < 0.5 ? 1 : 1.1;
    if (unit(rng) < 0.3) options_.partitions_pct = {20, 40, 60, 80, 100};
    options_.max_models_per_gpulet = unit(rng) < 0.3 ? 2 : 3;
    if (unit(rng) < 0.3) options_.rate_slack_rps = 15;
    if (unit(rng) < 0.3) options_.per_gpulet_overhead_mb = 3000;
    ::testing::Message trace;
    trace << "trial " << trial << ", " << n << " GPUs, interference kind "
          << static_cast<int>(intf.kind()) << ", margin " << options_.latency_margin << ", "
          << options_.partitions_pct.size() << " sizes, max models "
          << options_.max_models_per_gpulet << ", slack " << options_.rate_slack_rps
          << ", overhead " << options_.per_gpulet_overhead_mb << ", demands:";
    for (const ModelDemand& d : demands) {
      trace << " " << d.model << "/" << d.profile << "/" << d.rate_rps << "/" << d.slo_ms;
    }
    SCOPED_TRACE(trace);
    const Plan temporal = PlanFor(Policy::kTemporal, demands, n, intf);
    const Plan spatial = PlanFor(Policy::kSpatial, demands, n, intf);
    const Plan triton = PlanFor(Policy::kTriton, demands, n, intf);
    const Plan ideal = PlanFor(Policy::kIdeal, demands, n, intf);
    auto gpulet = CreateGpuletPlanner(&profiles_, intf, options_)->MakePlan(demands, n);
    ASSERT_TRUE(gpulet.ok()) << gpulet.status();
    gpulet_schedulable += gpulet->schedulable();
    if (gpulet->schedulable()) {
      EXPECT_TRUE(ideal.schedulable()) << "gpulet found:\n" << PlanToText(*gpulet);
    }
    schedulable[0] += temporal.schedulable();
    schedulable[1] += spatial.schedulable();
    schedulable[2] += triton.schedulable();
    schedulable[3] += ideal.schedulable();
    if (temporal.schedulable()) {
      EXPECT_TRUE(ideal.schedulable()) << "temporal found:\n" << PlanToText(temporal);
    }
    if (spatial.schedulable()) {
      EXPECT_TRUE(ideal.schedulable()) << "spatial found:\n" << PlanToText(spatial);
    }
  }
  // The sets are neither all trivial nor all hopeless.
  EXPECT_GT(schedulable[0], kTrials / 10);
  EXPECT_LT(schedulable[3], kTrials);
  std::printf("schedulable of %d: temporal %d, spatial %d, triton %d, gpulet %d, ideal %d\n",
              kTrials, schedulable[0], schedulable[1], schedulable[2], gpulet_schedulable,
              schedulable[3]);
}

}  // namespace
}  // namespace tessera::scheduler
