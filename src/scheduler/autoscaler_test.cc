#include "tessera/scheduler/autoscaler.h"

#include "gpulet_planner.h"
#include "gtest/gtest.h"
#include "profile_fixtures_for_test.h"

namespace tessera::scheduler {
namespace {

using testing::LinearProfileForTest;

// Model a: L(b,p) = (2 + b)·100/p ms, SLO 100 ms, margin 1. One GPU serves at most 941 rps (a
// whole GPU, batch 32: 32000/34), so 800 rps needs 1 GPU and 2400 rps needs 3 (2 give 1882).
class AutoscalerTest : public ::testing::Test {
 protected:
  AutoscalerTest() : profiles_(DeviceInfo{"test-gpu", 100000, true}) {
    EXPECT_TRUE(profiles_.Add(LinearProfileForTest("a", 2, 1)).ok());
    EXPECT_TRUE(profiles_.Add(LinearProfileForTest("c", 2, 1)).ok());
    PlannerOptions planner_options;
    planner_options.latency_margin = 1;
    planner_ = CreateGpuletPlanner(&profiles_, InterferenceModel::None(), planner_options);
  }

  Autoscaler Make(int gpu_limit, std::vector<ModelDemand> models = {{"a", "", 0, 100}}) {
    AutoscalerOptions options;
    options.gpu_limit = gpu_limit;
    options.poisson_headroom = false;  // rates as given, for hand computation
    auto scaler = Autoscaler::Create(planner_.get(), std::move(models), options);
    EXPECT_TRUE(scaler.ok()) << scaler.status();
    return *std::move(scaler);
  }

  ProfileSet profiles_;
  std::unique_ptr<Planner> planner_;
};

TEST_F(AutoscalerTest, ScalesUpAsRatesTriple) {
  Autoscaler scaler = Make(4);
  auto d = scaler.Step(0, {{"a", 800}});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_gpus, 1);
  EXPECT_TRUE(d->plan.schedulable());
  EXPECT_TRUE(d->replanned);
  d = scaler.Step(20000, {{"a", 2400}});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_gpus, 3);
  EXPECT_EQ(d->scaled, 1);
  EXPECT_TRUE(d->repartitioned);
  EXPECT_NEAR(d->plan.AssignedRate("a"), 2400, 1e-6);
  EXPECT_FALSE(d->event.has_value());
  // The same rate again: no change.
  d = scaler.Step(40000, {{"a", 2400}});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->num_gpus, 3);
  EXPECT_FALSE(d->replanned);
  EXPECT_EQ(d->scaled, 0);
}

TEST_F(AutoscalerTest, UnschedulableEventNamesTheModelAndKeepsTheLastGoodPlan) {
  Autoscaler scaler = Make(2, {{"a", "", 0, 100}, {"c", "", 0, 100}});
  auto good = scaler.Step(0, {{"a", 800}, {"c", 800}});
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->num_gpus, 2);
  EXPECT_FALSE(good->event.has_value());
  auto bad = scaler.Step(20000, {{"a", 800}, {"c", 3000}});
  ASSERT_TRUE(bad.ok()) << bad.status();
  ASSERT_TRUE(bad->event.has_value());
  ASSERT_EQ(bad->event->models.size(), 1u);
  EXPECT_EQ(bad->event->models[0].model, "c");
  EXPECT_DOUBLE_EQ(bad->event->models[0].rate_rps, 3000);
  EXPECT_EQ(bad->event->gpu_limit, 2);
  EXPECT_EQ(bad->event->ToString(), "unschedulable on 2 GPUs: c (3000.0 rps, SLO 100 ms)");
  EXPECT_FALSE(bad->replanned);
  EXPECT_EQ(PlanToText(bad->plan), PlanToText(good->plan));
  EXPECT_EQ(bad->num_gpus, 2);
}

TEST_F(AutoscalerTest, FirstEpochBeyondTheLimitServesWhatFits) {
  Autoscaler scaler = Make(1, {{"a", "", 0, 100}, {"c", "", 0, 100}});
  auto d = scaler.Step(0, {{"a", 100}, {"c", 5000}});
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d->event.has_value());
  EXPECT_EQ(d->plan.unschedulable, (std::vector<std::string>{"c"}));
  EXPECT_NEAR(d->plan.AssignedRate("a"), 100, 1e-9);
}

TEST_F(AutoscalerTest, BriefDipDoesNotScaleDownSustainedOneDoes) {
  Autoscaler scaler = Make(4);
  ASSERT_EQ(scaler.Step(0, {{"a", 2400}})->num_gpus, 3);
  // One quiet epoch, then the load is back: still 3 GPUs throughout.
  EXPECT_EQ(scaler.Step(20000, {{"a", 800}})->num_gpus, 3);
  EXPECT_EQ(scaler.Step(40000, {{"a", 2400}})->num_gpus, 3);
  // 800 rps (880 with the 10 % margin fits one GPU) for three epochs: one GPU back at the third.
  EXPECT_EQ(scaler.Step(60000, {{"a", 800}})->num_gpus, 3);
  EXPECT_EQ(scaler.Step(80000, {{"a", 800}})->num_gpus, 3);
  auto d = scaler.Step(100000, {{"a", 800}});
  EXPECT_EQ(d->num_gpus, 2);
  EXPECT_EQ(d->scaled, -1);
  EXPECT_TRUE(d->repartitioned);
  // And the next after three more.
  EXPECT_EQ(scaler.Step(120000, {{"a", 800}})->num_gpus, 2);
  EXPECT_EQ(scaler.Step(140000, {{"a", 800}})->num_gpus, 2);
  EXPECT_EQ(scaler.Step(160000, {{"a", 800}})->num_gpus, 1);
  EXPECT_EQ(scaler.Step(180000, {{"a", 800}})->num_gpus, 1);
}

TEST_F(AutoscalerTest, NoScaleDownInsideTheMargin) {
  // 900 rps fits one GPU (941), but 990 does not: stay on 2.
  Autoscaler scaler = Make(4);
  ASSERT_EQ(scaler.Step(0, {{"a", 1500}})->num_gpus, 2);
  for (int epoch = 1; epoch <= 6; ++epoch) {
    EXPECT_EQ(scaler.Step(epoch * 20000, {{"a", 900}})->num_gpus, 2) << epoch;
  }
}

TEST_F(AutoscalerTest, HeadroomIsAddedToMeasuredRates) {
  AutoscalerOptions options;
  options.gpu_limit = 2;
  auto scaler = Autoscaler::Create(planner_.get(), {{"a", "", 0, 100}}, options);
  ASSERT_TRUE(scaler.ok());
  auto d = scaler->Step(0, {{"a", 100}});
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(d->targets[0].rate_rps, 124);
  EXPECT_NEAR(d->plan.AssignedRate("a"), 124, 1e-9);
}

TEST_F(AutoscalerTest, BadInput) {
  AutoscalerOptions options;
  options.gpu_limit = 2;
  options.initial_gpus = 3;
  EXPECT_FALSE(Autoscaler::Create(planner_.get(), {{"a", "", 0, 100}}, options).ok());
  options.initial_gpus = 1;
  EXPECT_FALSE(
      Autoscaler::Create(planner_.get(), {{"a", "", 0, 100}, {"a", "", 0, 100}}, options).ok());
  auto scaler = Autoscaler::Create(planner_.get(), {{"a", "", 0, 100}}, options);
  ASSERT_TRUE(scaler.ok());
  EXPECT_EQ(scaler->Step(0, {{"zzz", 1}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scaler->Step(0, {{"a", -1}}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::scheduler
