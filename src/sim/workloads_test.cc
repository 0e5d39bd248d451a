// The committed seed 001 workloads and the synthetic profile set work together in the simulator.
#include <filesystem>
#include <map>

#include "gtest/gtest.h"
#include "sim_config.h"
#include "sim_fixtures_for_test.h"
#include "tessera/scheduler/interference.h"
#include "tessera/sim/simulator.h"

namespace tessera::sim {
namespace {

namespace fs = std::filesystem;

const fs::path kSource(TESSERA_SOURCE_DIR);

TEST(WorkloadsTest, EveryWorkloadParsesAndHasProfiles) {
  StatusOr<scheduler::ProfileSet> profiles =
      scheduler::ProfileSet::LoadDirectory(kSource / "profiles" / "synthetic-2080ti");
  ASSERT_TRUE(profiles.ok()) << profiles.status();
  const std::map<std::string, size_t> expected = {{"game", 7},  {"traffic", 3}, {"scen1", 4},
                                                  {"scen2", 2}, {"scen3", 3},   {"scen4", 3},
                                                  {"scen5", 4}, {"all9", 9}};
  for (const auto& [name, count] : expected) {
    StatusOr<Scenario> s =
        LoadScenarioFile(kSource / "bench" / "sim" / "workloads" / (name + ".yaml"));
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->name, name);
    EXPECT_EQ(s->gpus, 4);
    ASSERT_EQ(s->models.size(), count) << name;
    for (const ScenarioModel& m : s->models) {
      const std::string& profile =
          m.workload.profile.empty() ? m.workload.model : m.workload.profile;
      EXPECT_NE(profiles->Find(profile), nullptr) << name << ": " << profile;
    }
  }
}

// ResNet-50 and VGG-16 on the two 50 % halves of one GPU, one request each, 1 ms apart: VGG's
// batch starts while ResNet's runs and takes L_vgg(1,50) × the truth model's factor; ResNet's
// started alone and takes L_res(1,50).
TEST(WorkloadsTest, TruthInterferenceSlowsTheLaterBatchByItsFactor) {
  const fs::path dir = kSource / "profiles" / "synthetic-2080ti";
  StatusOr<scheduler::ProfileSet> profiles = scheduler::ProfileSet::LoadDirectory(dir);
  ASSERT_TRUE(profiles.ok()) << profiles.status();
  StatusOr<scheduler::InterferenceModel> truth =
      scheduler::LoadInterferenceFile(dir / "interference_truth.yaml");
  ASSERT_TRUE(truth.ok()) << truth.status();
  const scheduler::ModelProfile& res = *profiles->Find("resnet50");
  const scheduler::ModelProfile& vgg = *profiles->Find("vgg16");
  const double factor = truth->Factor(vgg, 1, 50, res, 1, 50);
  EXPECT_GT(factor, 1.0);
  ASSERT_GT(res.LatencyMs(1, 50), 1.0);  // still running when VGG starts at 1 ms

  const scheduler::Plan plan =
      testing::PlanForTest(1, {testing::GpuletForTest(0, 50, 50, {{"resnet50", 4, 10, 0}}),
                               testing::GpuletForTest(0, 50, 50, {{"vgg16", 4, 10, 0}})});
  StatusOr<SimReport> report = Simulate(*profiles, plan,
                                        {testing::TraceModelForTest("resnet50", {0}, 108),
                                         testing::TraceModelForTest("vgg16", {0.001}, 142)},
                                        SlowdownOf(*truth), testing::ExactOptionsForTest(1));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_DOUBLE_EQ(report->models[0].max_ms, res.LatencyMs(1, 50));
  EXPECT_NEAR(report->models[1].max_ms, vgg.LatencyMs(1, 50) * factor, 1e-9);
}

}  // namespace
}  // namespace tessera::sim
