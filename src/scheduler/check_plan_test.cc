#include "gtest/gtest.h"
#include "profile_fixtures_for_test.h"
#include "tessera/scheduler/planner.h"

namespace tessera::scheduler {
namespace {

using testing::LinearProfileForTest;

// a: L(b,100) = 2 + b ms, 100 MB; b: L(b,100) = 4 + 0.5·b ms, 3000 MB. Both scale as 100/p.
class CheckPlanTest : public ::testing::Test {
 protected:
  CheckPlanTest() : profiles_(DeviceInfo{"test-gpu", 10000, true}) {
    EXPECT_TRUE(profiles_.Add(LinearProfileForTest("a", 2, 1, 100)).ok());
    EXPECT_TRUE(profiles_.Add(LinearProfileForTest("b", 4, 0.5, 3000)).ok());
    options_.latency_margin = 1;
    demands_ = {{"a", "", 50, 50}, {"b", "", 200, 60}};
  }

  // gpu 0: a alone on 40 % in 20 ms rounds (batch 2, L = 2·(2+2)... see Valid).
  // gpu 1: b alone on 100 % in 20 ms rounds (batch 4, L = 4 + 2 = 6).
  Plan Valid() const {
    Plan plan;
    plan.policy = "test";
    plan.num_gpus = 2;
    // L(2, 40 %) = (2 + 2)·100/40 = 10 ms ≤ 20; 10 + 20 = 30 ≤ 50; m = 50·20/1000 = 1 arrival per
    // round: RoundBatch adds a spare slot for m ≤ 2, batch 2 = ⌈1⌉ + 1.
    plan.gpulets.push_back({0, 40, 20, {{"a", 2, 50, 10}}});
    // L(4, 100 %) = 4 + 2 = 6 ≤ 20; 6 + 20 ≤ 60; m = 200·20/1000 = 4 > 2: batch ⌈4⌉ = 4.
    plan.gpulets.push_back({1, 100, 20, {{"b", 4, 200, 6}}});
    return plan;
  }

  Status Check(const Plan& plan,
               const InterferenceModel& interference = InterferenceModel::None()) const {
    return CheckPlan(plan, demands_, profiles_, interference, options_);
  }

  static void ExpectViolation(const Status& status, const std::string& text) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_NE(std::string(status.message()).find(text), std::string::npos) << status;
  }

  ProfileSet profiles_;
  PlannerOptions options_;
  std::vector<ModelDemand> demands_;
};

TEST_F(CheckPlanTest, ValidPlanPasses) { EXPECT_TRUE(Check(Valid()).ok()) << Check(Valid()); }

TEST_F(CheckPlanTest, GpuOutOfRange) {
  Plan plan = Valid();
  plan.gpulets[1].gpu = 2;
  ExpectViolation(Check(plan), "gpu 2 is outside [0, 2)");
}

TEST_F(CheckPlanTest, PartitionNotAllowed) {
  Plan plan = Valid();
  plan.gpulets[0].partition_pct = 30;
  ExpectViolation(Check(plan), "partition 30% is not an allowed size");
}

TEST_F(CheckPlanTest, PartitionsAddUpPast100) {
  Plan plan = Valid();
  plan.gpulets[1].gpu = 0;  // 40 + 100 on gpu 0
  ExpectViolation(Check(plan), "gpu 0: partitions add up to 140% > 100%");
  // The Triton-like baseline shares whole GPUs and is exempt.
  plan.partitions_exclusive = false;
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
}

TEST_F(CheckPlanTest, TooManyGpuletsPerGpu) {
  Plan plan = Valid();
  plan.gpulets[1] = {0, 20, 0, {}};
  plan.gpulets.push_back({0, 20, 0, {}});  // 40 + 20 + 20 = 80 %, but three gpulets
  ExpectViolation(Check(plan), "gpu 0: 3 gpulets, more than the 2 allowed");
  options_.max_gpulets_per_gpu = 3;
  demands_.pop_back();
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
  options_.max_gpulets_per_gpu = 2;
  plan.partitions_exclusive = false;
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
}

TEST_F(CheckPlanTest, TooManyModelsPerGpulet) {
  Plan plan = Valid();
  options_.max_models_per_gpulet = 1;
  plan.gpulets[1].models.push_back({"a", 1, 0, 0});
  ExpectViolation(Check(plan), "2 models, more than the 1 allowed per gpulet");
}

TEST_F(CheckPlanTest, BatchOutOfRange) {
  Plan plan = Valid();
  plan.gpulets[1].models[0].batch = 33;
  ExpectViolation(Check(plan), "batch 33 is outside [1, 32]");
  plan.gpulets[1].models[0].batch = 0;
  ExpectViolation(Check(plan), "batch 0 is outside [1, 32]");
}

TEST_F(CheckPlanTest, UnknownAndDuplicateModels) {
  Plan plan = Valid();
  plan.gpulets[0].models[0].model = "zzz";
  ExpectViolation(Check(plan), "model 'zzz' is not in the demands");
  plan = Valid();
  plan.gpulets[1].models.push_back(plan.gpulets[1].models[0]);
  ExpectViolation(Check(plan), "model 'b' appears twice");
  plan = Valid();
  plan.unschedulable = {"nope"};
  ExpectViolation(Check(plan), "unschedulable model 'nope'");
  demands_.push_back({"c", "", 1, 10});
  EXPECT_EQ(Check(Valid()).code(), absl::StatusCode::kNotFound);
}

TEST_F(CheckPlanTest, MemoryAdmission) {
  // gpu 0 holds a (100 MB) and b (3000 MB) in two gpulets: 3100 + 2·1230 = 5560 MB.
  Plan plan = Valid();
  plan.gpulets[1].gpu = 0;
  plan.gpulets[1].partition_pct = 60;
  plan.gpulets[1].models[0].batch = 8;  // L(8, 60 %) = 8·100/60 = 13.3 ≤ 40
  plan.gpulets[1].duty_ms = 40;
  options_.gpu_memory_mb = 5560 / 0.9;  // exactly enough
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
  options_.gpu_memory_mb = 5559 / 0.9;
  ExpectViolation(Check(plan), "gpu 0: memory 5560 MB");
  // Idle gpulets hold no process: only one overhead is charged for a lone model.
  plan.gpulets[1].models.clear();
  demands_.pop_back();
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
  // Device memory from the profile set when options do not say: 10000·0.9 = 9000 MB.
  options_.gpu_memory_mb = 0;
  options_.per_gpulet_overhead_mb = 8901;  // 100 + 8901 > 9000
  ExpectViolation(Check(plan), "exceeds 9000 MB");
}

TEST_F(CheckPlanTest, SumOfLatenciesWithinDuty) {
  Plan plan = Valid();
  // a at 20 %: L(2, 20 %) = 4·5 = 20 ≤ 20 passes; L(3) = 25 > duty 20.
  plan.gpulets[0].partition_pct = 20;
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
  plan.gpulets[0].models[0].batch = 3;
  ExpectViolation(Check(plan), "Σ latency 25.000 ms exceeds the duty cycle 20.000 ms");
}

TEST_F(CheckPlanTest, LatencyPlusDutyWithinSlo) {
  Plan plan = Valid();
  // Both on gpu 1 (100 %), rounds of 40 ms: a batch 4 (L 6), b batch 8 (L 8): Σ 14 ≤ 40;
  // 14 + 40 = 54 > a's SLO 50 but ≤ b's 60.
  plan.gpulets[0] = {1, 100, 40, {{"a", 4, 100, 6}, {"b", 8, 200, 8}}};
  plan.gpulets.pop_back();
  ExpectViolation(Check(plan), "model 'a': Σ latency 14.000 ms + duty 40.000 ms exceeds its SLO");
  demands_[0].slo_ms = 54;
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
}

TEST_F(CheckPlanTest, BatchMustHoldOneRound) {
  Plan plan = Valid();
  plan.gpulets[1].models[0].batch = 3;  // 200 rps · 20 ms = 4 requests per round
  ExpectViolation(Check(plan), "batch 3 is below the 4 the round rule asks for 4.000 requests");
  // A lone model needs only ⌈m⌉: a at 75 rps is m = 1.5 per 20 ms round, batch 2 holds it.
  plan = Valid();
  plan.gpulets[0].models[0].rate_rps = 75;
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
  // Time-shared, the burst slot (RoundBatch): a and b in one 20 ms round on gpu 1 (100 %),
  // a at m = 1.5 needs ⌈1.5⌉ + 1 = 3; b at m = 4 > 2 needs 4. With a at batch 3:
  // L = 5 + 6 = 11 ≤ 20, 11 + 20 = 31 ≤ 50.
  plan.gpulets.erase(plan.gpulets.begin());
  plan.gpulets[0].models.insert(plan.gpulets[0].models.begin(), {"a", 2, 75, 4});
  ExpectViolation(Check(plan), "batch 2 is below the 3 the round rule asks for 1.500 requests");
  plan.gpulets[0].models[0].batch = 3;
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
  // At m = 5·20/1000 = 0.1 ≤ 0.1486, P(N ≤ 1) = e^−0.1·1.1 = 0.9953 ≥ 0.99: batch 1 suffices.
  plan.gpulets[0].models[0] = {"a", 1, 5, 3};
  demands_[0].rate_rps = 5;
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
  // At m = 8·20/1000 = 0.16 it does not (P(N ≤ 1) = 0.9885): batch 2.
  plan.gpulets[0].models[0].rate_rps = 8;
  ExpectViolation(Check(plan), "batch 1 is below the 2 the round rule asks for 0.160 requests");
}

TEST_F(CheckPlanTest, LatencyMarginApplies) {
  Plan plan = Valid();
  options_.latency_margin = 2.1;  // a: 10·2.1 = 21 > duty 20
  ExpectViolation(Check(plan), "Σ latency 21.000 ms exceeds the duty cycle");
}

TEST_F(CheckPlanTest, InterferenceFromTheOtherGpuletOnTheGpu) {
  Plan plan = Valid();
  // b moves next to a on gpu 0 with 60 %: L(4, 60 %) = 6·100/60 = 10.
  plan.gpulets[1].gpu = 0;
  plan.gpulets[1].partition_pct = 60;
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
  // Constant 1.18 slowdown: b's 10 → 11.8 still fits, a's 10 → 11.8 still fits.
  EXPECT_TRUE(Check(plan, InterferenceModel::Constant(1.18)).ok());
  // Slowdown 2.1: a's 10 → 21 > duty 20.
  ExpectViolation(Check(plan, InterferenceModel::Constant(2.1)),
                  "gpulet #0 (gpu 0, 40%): Σ latency 21.000 ms exceeds");
  // Linear: factor = 1 + 1·L2_other; b's L2 = 0.3 at 100 %, 0.18 at 60 % → a slowed by 1.18,
  // and a's L2 at 40 % = 0.12 → b slowed by 1.12. Both fit.
  InterferenceCoefficients c;
  c.l2_other = 1;
  EXPECT_TRUE(Check(plan, InterferenceModel::Linear(c)).ok());
  c.l2_other = 10;  // a slowed by 2.8: 28 ms > 20
  ExpectViolation(Check(plan, InterferenceModel::Linear(c)), "Σ latency 28.000 ms");
  // On different GPUs there is no interference.
  EXPECT_TRUE(Check(Valid(), InterferenceModel::Constant(1.9)).ok());
}

TEST_F(CheckPlanTest, NoRoundMeansNoRoundRules) {
  Plan plan = Valid();
  plan.gpulets[1].duty_ms = 0;
  plan.gpulets[1].models[0].batch = 32;  // L = 20 ms; no duty to compare against
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
}

TEST_F(CheckPlanTest, RateCoverage) {
  Plan plan = Valid();
  plan.gpulets[1].models[0].rate_rps = 150;
  ExpectViolation(Check(plan), "model 'b': 150.000 rps routed to gpulets, less than its rate");
  options_.rate_slack_rps = 50;
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
  options_.rate_slack_rps = 0;
  plan.unschedulable = {"b"};
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
  // A model can be split over gpulets.
  plan = Valid();
  plan.gpulets[1].models[0].rate_rps = 120;
  plan.gpulets.push_back({0, 60, 20, {{"b", 3, 80, 0}}});  // L(3,60) = 5.5·100/60 = 9.2
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
}

TEST_F(CheckPlanTest, ZeroRateNeedsNoGpulet) {
  demands_[0].rate_rps = 0;
  Plan plan = Valid();
  plan.gpulets.erase(plan.gpulets.begin());
  EXPECT_TRUE(Check(plan).ok()) << Check(plan);
}

}  // namespace
}  // namespace tessera::scheduler
