#include "tessera/sim/simulator.h"

#include <optional>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "sim_fixtures_for_test.h"
#include "slo_rules.h"

namespace tessera::sim {
namespace {

using scheduler::testing::LinearProfileForTest;
using testing::ExactOptionsForTest;
using testing::GpuletForTest;
using testing::PlanForTest;
using testing::PoissonModelForTest;
using testing::ProfileSetForTest;
using testing::TraceModelForTest;

// L_a(b,p) = (2 + b)·100/p ms, L_b(b,p) = (4 + b)·100/p ms.
scheduler::ProfileSet TwoProfiles() {
  return ProfileSetForTest({LinearProfileForTest("a", 2, 1), LinearProfileForTest("b", 4, 1)});
}

SimReport MustSimulate(const scheduler::ProfileSet& profiles, const scheduler::Plan& plan,
                       const std::vector<SimModel>& models, const SlowdownFn& slowdown,
                       const SimOptions& options) {
  StatusOr<SimReport> report = Simulate(profiles, plan, models, slowdown, options);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? *std::move(report) : SimReport{};
}

int64_t Accounted(const ModelReport& m) {
  return m.completed + m.dropped + m.unserved + m.excluded;
}

// The saturated rule (seed 001 §2.4): b = 16 is the largest with 2·1.1·(2 + b) ≤ 40, so the
// planned latency is 19.8 ms, the duty 19.8 ms and the planned rate 16/19.8 ms = 808 rps (the true
// L(16) is 18 ms).
TEST(SimulatorTest, SaturatedPlanHoldsItsSloAtThePlannedRateAndNotAbove) {
  const scheduler::ProfileSet profiles = TwoProfiles();
  const scheduler::ModelProfile& a = *profiles.Find("a");
  const int batch = scheduler::MaxSaturatedBatch(a, 100, 40, 1.0, 1.1, 32);
  ASSERT_EQ(batch, 16);
  const double latency = scheduler::ScheduledLatencyMs(a, batch, 100, 1.0, 1.1);
  const double rate = scheduler::SaturatedThroughputRps(a, batch, 100, 1.0, 1.1);
  const scheduler::Plan plan =
      PlanForTest(1, {GpuletForTest(0, 100, latency, {{"a", batch, rate, latency}})});
  SimOptions options = ExactOptionsForTest(40);
  options.warmup_s = 2;

  // Evenly spaced arrivals at the planned rate: the SLO rule's guarantee, no request later than
  // d + L(b) = 37.8 ms.
  SimModel constant = PoissonModelForTest("a", rate, 40);
  constant.arrivals.kind = ArrivalKind::kConstant;
  const SimReport exact = MustSimulate(profiles, plan, {constant}, NoSlowdown(), options);
  EXPECT_EQ(exact.total.violation_pct, 0.0);
  EXPECT_LE(exact.total.max_ms, 37.8);
  EXPECT_NEAR(exact.total.throughput_rps, rate, 1.0);

  // Poisson at the planned rate over-runs a batch of 16 now and then (a few % late); with the
  // planner given the artifact's ×1.1 headroom, i.e. offered 808/1.1 rps, ≥ 99 % are on time.
  const SimReport poisson = MustSimulate(profiles, plan, {PoissonModelForTest("a", rate / 1.1, 40)},
                                         NoSlowdown(), options);
  EXPECT_NEAR(poisson.total.offered_rps, rate / 1.1, 0.03 * rate);
  EXPECT_LE(poisson.total.violation_pct, 1.0);
  EXPECT_EQ(Accounted(poisson.total), poisson.total.arrived);

  const SimReport over = MustSimulate(profiles, plan, {PoissonModelForTest("a", 1.3 * rate, 40)},
                                      NoSlowdown(), options);
  // 1.3 × 808 = 1050 rps against a true capacity of 16/18 ms = 889 rps: the queue grows without
  // bound, so nearly every request after the first seconds is late.
  EXPECT_GT(over.total.violation_pct, 50.0);
  EXPECT_GT(over.total.p99_ms, 1000.0);
  EXPECT_LT(over.total.throughput_rps, 900.0);
}

// Rounds of a gpulet with d = 10 ms, model a with batch 4. Work-conserving (default): a@0 runs
// alone (3 ms), a@5 finds the gpulet idle and starts at once. wait_for_duty: a@5 waits for the
// round due at 10 ms (latency 8); and a full batch starts a round early (a@4.0..4.3 ms with one
// still queued → full at 4.3 ms, L(4) = 6 ms → done at 10.3 ms).
TEST(SimulatorTest, RoundsStartWhenWorkIsQueuedOrAfterTheDutyWhenAskedTo) {
  const scheduler::ProfileSet profiles = TwoProfiles();
  const scheduler::Plan plan = PlanForTest(1, {GpuletForTest(0, 100, 10, {{"a", 4, 100, 0}})});
  const std::vector<SimModel> two = {TraceModelForTest("a", {0, 0.005}, 100)};
  SimOptions options = ExactOptionsForTest(1);
  EXPECT_DOUBLE_EQ(MustSimulate(profiles, plan, two, NoSlowdown(), options).total.max_ms, 3.0);
  options.wait_for_duty = true;
  EXPECT_DOUBLE_EQ(MustSimulate(profiles, plan, two, NoSlowdown(), options).total.max_ms, 8.0);
  const SimReport full = MustSimulate(
      profiles, plan, {TraceModelForTest("a", {0, 0.001, 0.0041, 0.0042, 0.0043}, 100)},
      NoSlowdown(), options);
  // The round at 0 takes a@0 (done at 3); a@1 waits; at 4.3 ms four are queued → start.
  EXPECT_EQ(full.batches, 2);
  EXPECT_DOUBLE_EQ(full.total.max_ms, 9.3);  // a@1: 10.3 − 1
}

// Two models time-share one gpulet in rounds fitted by the shared SLO rules.
TEST(SimulatorTest, TimeSharedRoundMeetsTheSlo) {
  const scheduler::ProfileSet profiles = TwoProfiles();
  const std::vector<scheduler::RoundMember> members = {{profiles.Find("a"), 300, 60, 1.0},
                                                       {profiles.Find("b"), 150, 60, 1.0}};
  const std::optional<scheduler::Round> round = scheduler::FitRound(members, 100, 1.1, 32);
  ASSERT_TRUE(round.has_value());
  const scheduler::Plan plan =
      PlanForTest(1, {GpuletForTest(0, 100, round->duty_ms,
                                    {{"a", round->batches[0], 300, round->latencies_ms[0]},
                                     {"b", round->batches[1], 150, round->latencies_ms[1]}})});

  // Constant arrivals: every request within d + Σ L.
  SimOptions options = ExactOptionsForTest(20);
  std::vector<SimModel> models = {PoissonModelForTest("a", 300, 60),
                                  PoissonModelForTest("b", 150, 60)};
  for (SimModel& m : models) m.arrivals.kind = ArrivalKind::kConstant;
  const SimReport constant = MustSimulate(profiles, plan, models, NoSlowdown(), options);
  EXPECT_EQ(constant.total.violation_pct, 0.0);
  const double bound = round->duty_ms + (round->latencies_ms[0] + round->latencies_ms[1]) / 1.1;
  EXPECT_LE(constant.total.max_ms, bound + 1e-9);

  for (SimModel& m : models) m.arrivals.kind = ArrivalKind::kPoisson;
  options.jitter_sigma = 0.03;
  const SimReport poisson = MustSimulate(profiles, plan, models, NoSlowdown(), options);
  for (const ModelReport& m : poisson.models) {
    EXPECT_LE(m.violation_pct, 1.0) << m.model;
    EXPECT_NEAR(m.throughput_rps, m.model == "a" ? 300 : 150, 0.05 * 300);
  }
}

// a at 0 and 10 ms, b at 1 ms, on two 50 % gpulets of GPU 0, true slowdown 1.5 for any pair.
// a@0 runs alone: L_a(1,50) = 6 ms. b@1 starts while a runs: 10·1.5 = 15 ms. a@10 starts while b
// runs (1..16): 6·1.5 = 9 ms.
TEST(SimulatorTest, InterferenceSlowsCoLocatedBatchesByTheTrueFactor) {
  const scheduler::ProfileSet profiles = TwoProfiles();
  const std::vector<SimModel> models = {TraceModelForTest("a", {0, 0.010}, 100),
                                        TraceModelForTest("b", {0.001}, 100)};
  const scheduler::Plan same_gpu = PlanForTest(1, {GpuletForTest(0, 50, 10, {{"a", 4, 100, 0}}),
                                                   GpuletForTest(0, 50, 10, {{"b", 4, 100, 0}})});
  const SimReport report =
      MustSimulate(profiles, same_gpu, models, ConstantSlowdown(1.5), ExactOptionsForTest(1));
  EXPECT_DOUBLE_EQ(report.models[0].p50_ms, 6.0);
  EXPECT_DOUBLE_EQ(report.models[0].max_ms, 9.0);
  EXPECT_DOUBLE_EQ(report.models[1].max_ms, 15.0);

  // The factor comes from the true function with the actual batches and partitions.
  const SlowdownFn by_batch = [](const scheduler::ModelProfile& self, int self_batch, int self_pct,
                                 const scheduler::ModelProfile& other, int other_batch,
                                 int other_pct) {
    EXPECT_EQ(self_pct, 50);
    EXPECT_EQ(other_pct, 50);
    EXPECT_NE(self.model(), other.model());
    return 1.0 + 0.25 * other_batch + 0.5 * self_batch;  // 1.75 for two batches of one
  };
  const SimReport by_batch_report =
      MustSimulate(profiles, same_gpu, models, by_batch, ExactOptionsForTest(1));
  EXPECT_DOUBLE_EQ(by_batch_report.models[1].max_ms, 17.5);

  // On different GPUs nothing interferes.
  const scheduler::Plan two_gpus = PlanForTest(2, {GpuletForTest(0, 50, 10, {{"a", 4, 100, 0}}),
                                                   GpuletForTest(1, 50, 10, {{"b", 4, 100, 0}})});
  const SimReport apart =
      MustSimulate(profiles, two_gpus, models, ConstantSlowdown(1.5), ExactOptionsForTest(1));
  EXPECT_DOUBLE_EQ(apart.models[0].max_ms, 6.0);
  EXPECT_DOUBLE_EQ(apart.models[1].max_ms, 10.0);
}

// duty 0: a request starts as soon as its model's instance is free. a@0..2 ms every 0.5 ms with
// batch 4: the first runs alone (L_a(1) = 3 ms), the other four as one batch at 3 ms
// (L_a(4) = 6 ms) → done at 9.
TEST(SimulatorTest, EagerModeBatchesWhatQueuedWhileBusy) {
  const scheduler::ProfileSet profiles = TwoProfiles();
  const scheduler::Plan plan = PlanForTest(1, {GpuletForTest(0, 100, 0, {{"a", 4, 100, 0}})});
  const SimReport report =
      MustSimulate(profiles, plan, {TraceModelForTest("a", {0, 0.0005, 0.001, 0.0015, 0.002}, 100)},
                   NoSlowdown(), ExactOptionsForTest(1));
  EXPECT_EQ(report.batches, 2);
  EXPECT_EQ(report.total.completed, 5);
  EXPECT_DOUBLE_EQ(report.total.p50_ms, 7.5);  // latencies 3, 7, 7.5, 8, 8.5
  EXPECT_DOUBLE_EQ(report.total.max_ms, 8.5);
}

// Triton-like (partitions not exclusive): a@0 (3 ms of work) and b@1 ms (5 ms) on whole-GPU
// instances of GPU 0 share it: a runs alone for 1 ms, both at half speed until a's 2 ms left are
// done at 5 ms, then b's remaining 3 ms alone → 8 ms.
TEST(SimulatorTest, SharedGpuIsProcessorShared) {
  const scheduler::ProfileSet profiles = TwoProfiles();
  const scheduler::Plan plan = PlanForTest(
      1,
      {GpuletForTest(0, 100, 0, {{"a", 4, 100, 0}}), GpuletForTest(0, 100, 0, {{"b", 4, 100, 0}})},
      /*exclusive=*/false);
  const SimReport report = MustSimulate(
      profiles, plan, {TraceModelForTest("a", {0}, 100), TraceModelForTest("b", {0.001}, 100)},
      NoSlowdown(), ExactOptionsForTest(1));
  EXPECT_DOUBLE_EQ(report.models[0].max_ms, 5.0);
  EXPECT_DOUBLE_EQ(report.models[1].max_ms, 7.0);
}

TEST(SimulatorTest, SameSeedSameReportOtherSeedOtherReport) {
  const scheduler::ProfileSet profiles = TwoProfiles();
  const scheduler::Plan plan = PlanForTest(1, {GpuletForTest(0, 60, 20, {{"a", 8, 300, 0}}),
                                               GpuletForTest(0, 40, 0, {{"b", 8, 200, 0}})});
  const std::vector<SimModel> models = {PoissonModelForTest("a", 300, 60),
                                        PoissonModelForTest("b", 200, 60)};
  SimOptions options;
  options.duration_s = 10;
  options.warmup_s = 1;
  const std::string first =
      ReportToJson(MustSimulate(profiles, plan, models, ConstantSlowdown(1.2), options));
  const std::string second =
      ReportToJson(MustSimulate(profiles, plan, models, ConstantSlowdown(1.2), options));
  EXPECT_EQ(first, second);
  options.seed = 2;
  EXPECT_NE(first,
            ReportToJson(MustSimulate(profiles, plan, models, ConstantSlowdown(1.2), options)));
}

// The model starts without a gpulet. Epoch 1 gives it one on GPU 0 (serving from 1.5 s), epoch 2
// moves it to GPU 1 (from 2.5 s), then the plan is kept. Every request is accounted for.
TEST(SimulatorTest, EpochLoopReplansWithoutLosingRequests) {
  const scheduler::ProfileSet profiles = TwoProfiles();
  std::vector<double> observed_rates;
  int calls = 0;
  SimOptions options = ExactOptionsForTest(5);
  options.epoch.epoch_s = 1;
  options.epoch.prepare_delay_s = 0.5;
  options.epoch.replan = [&](const scheduler::Plan& current,
                             const std::vector<scheduler::ModelDemand>& observed,
                             double now_s) -> StatusOr<std::optional<scheduler::Plan>> {
    observed_rates.push_back(observed[0].rate_rps);
    ++calls;
    if (calls > 2) return std::optional<scheduler::Plan>();
    EXPECT_EQ(current.gpulets.size(), calls == 1 ? 0u : 1u);
    return std::optional<scheduler::Plan>(
        PlanForTest(2, {GpuletForTest(calls - 1, 100, 0, {{"a", 32, 200, 0}})}));
  };
  const SimReport report = MustSimulate(
      profiles, PlanForTest(2, {}), {PoissonModelForTest("a", 200, 100)}, NoSlowdown(), options);
  EXPECT_EQ(report.replans, 2);
  ASSERT_EQ(report.epochs.size(), 4u);  // at 1, 2, 3, 4 s
  EXPECT_EQ(report.epochs[0].action, "replanned");
  EXPECT_DOUBLE_EQ(report.epochs[0].switch_s, 1.5);
  EXPECT_EQ(report.epochs[1].action, "replanned");
  EXPECT_EQ(report.epochs[2].action, "kept");
  EXPECT_NEAR(observed_rates[0], 200, 60);
  // Nothing lost: what arrived was served, or is still pending at the end.
  const ModelReport& a = report.total;
  EXPECT_EQ(a.completed + a.unserved + a.excluded, a.arrived);
  EXPECT_EQ(a.unserved, 0);
  EXPECT_GT(a.completed, 900);
  // The first 1.4 s waited for a gpulet: late. After the switch the backlog clears.
  EXPECT_GT(report.epochs[0].violations, 150);
  EXPECT_EQ(report.epochs[3].violations, 0);
}

TEST(SimulatorTest, SloAwareDroppingCountsDropsAsViolations) {
  const scheduler::ProfileSet profiles = TwoProfiles();
  const scheduler::Plan plan = PlanForTest(1, {GpuletForTest(0, 100, 0, {{"a", 16, 800, 0}})});
  SimOptions options = ExactOptionsForTest(5);
  options.slo_drop = true;
  const SimReport report =
      MustSimulate(profiles, plan, {PoissonModelForTest("a", 2000, 40)}, NoSlowdown(), options);
  const ModelReport& a = report.total;
  EXPECT_GT(a.dropped, a.arrived / 3);
  EXPECT_EQ(Accounted(a), a.arrived);
  // Dropping keeps the queue short, and what would be late anyway is dropped: with no
  // interference and no jitter nothing served is late.
  EXPECT_EQ(a.late, 0);
  EXPECT_GT(a.good, 0);
  EXPECT_NEAR(a.violation_pct, 100.0 * (a.late + a.dropped + a.unserved) / (a.arrived - a.excluded),
              1e-9);
}

TEST(SimulatorTest, RequestsPendingAtTheEndArePastTheSloOrExcluded) {
  const scheduler::ProfileSet profiles = TwoProfiles();
  const SimReport report =
      MustSimulate(profiles, PlanForTest(1, {}), {TraceModelForTest("a", {0.1, 0.95}, 100)},
                   NoSlowdown(), ExactOptionsForTest(1));
  EXPECT_EQ(report.total.unserved, 1);
  EXPECT_EQ(report.total.excluded, 1);
  EXPECT_DOUBLE_EQ(report.total.violation_pct, 100.0);
}

TEST(SimulatorTest, BadInputIsNamed) {
  const scheduler::ProfileSet profiles = TwoProfiles();
  const std::vector<SimModel> models = {PoissonModelForTest("a", 10, 50)};
  const SimOptions options = ExactOptionsForTest(1);
  auto error = [&](const scheduler::Plan& plan, const std::vector<SimModel>& m,
                   const SimOptions& o) {
    return std::string(Simulate(profiles, plan, m, NoSlowdown(), o).status().message());
  };
  EXPECT_TRUE(absl::StrContains(
      error(PlanForTest(1, {GpuletForTest(0, 100, 0, {{"zz", 1, 10, 0}})}), models, options),
      "'zz' is not one of the simulated models"));
  EXPECT_TRUE(absl::StrContains(
      error(PlanForTest(1, {GpuletForTest(0, 100, 0, {{"a", 33, 10, 0}})}), models, options),
      "batch 33 is outside [1, 32]"));
  EXPECT_TRUE(absl::StrContains(
      error(PlanForTest(1, {GpuletForTest(1, 100, 0, {{"a", 1, 10, 0}})}), models, options),
      "GPU outside"));
  EXPECT_TRUE(absl::StrContains(
      error(PlanForTest(1, {}), {PoissonModelForTest("nope", 1, 10)}, options), "nope"));
  EXPECT_TRUE(absl::StrContains(error(PlanForTest(1, {}), {models[0], models[0]}, options),
                                "listed twice"));
  SimOptions bad = options;
  bad.warmup_s = 1;
  EXPECT_TRUE(absl::StrContains(error(PlanForTest(1, {}), models, bad), "warmup_s"));
  bad = options;
  bad.epoch.epoch_s = 1;
  EXPECT_TRUE(absl::StrContains(error(PlanForTest(1, {}), models, bad), "replan callback"));
}

}  // namespace
}  // namespace tessera::sim
