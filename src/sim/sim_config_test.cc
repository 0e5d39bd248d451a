#include "sim_config.h"

#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tessera::sim {
namespace {

StatusOr<Scenario> Parse(const std::string& text) {
  return ParseScenarioYaml(text, "s.yaml", std::filesystem::temp_directory_path());
}

std::string ErrorOf(const std::string& text) {
  StatusOr<Scenario> s = Parse(text);
  return s.ok() ? "ok" : std::string(s.status().message());
}

TEST(SimConfigTest, ReadsAFullScenario) {
  StatusOr<Scenario> s = Parse(R"(name: game
gpus: 4
policy: gpulet+int
models:
  - {name: lenet_1, profile: lenet, slo_ms: 108, rate_rps: 200}
  - name: resnet50
    slo_ms: 108
    weight: 2
    arrival: constant
    schedule:
      - {start_s: 0, rate_rps: 100}
      - {start_s: 30, rate_rps: 300}
simulation:
  duration_s: 40
  warmup_s: 2
  seed: 7
  jitter_sigma: 0
  slo_drop: true
  wait_for_duty: true
  true_interference: "1.2"
epoch: {epoch_s: 10, prepare_s: 5, headroom: none, autoscale: false, initial_gpus: 2}
)");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "game");
  EXPECT_EQ(s->gpus, 4);
  EXPECT_EQ(s->policy, "gpulet+int");
  ASSERT_EQ(s->models.size(), 2u);
  EXPECT_EQ(s->models[0].workload.profile, "lenet");
  EXPECT_EQ(s->models[0].rate_rps, 200);
  EXPECT_EQ(s->models[0].workload.weight, 200);  // weight defaults to the rate
  EXPECT_EQ(s->models[1].workload.weight, 2);
  EXPECT_EQ(s->models[1].arrivals.kind, ArrivalKind::kConstant);
  ASSERT_EQ(s->models[1].arrivals.schedule.size(), 2u);
  EXPECT_EQ(s->models[1].arrivals.schedule[1].rate_rps, 300);
  EXPECT_EQ(s->sim.duration_s, 40);
  EXPECT_EQ(s->sim.seed, 7u);
  EXPECT_TRUE(s->sim.slo_drop);
  EXPECT_TRUE(s->sim.wait_for_duty);
  EXPECT_EQ(s->true_interference, "1.2");
  ASSERT_TRUE(s->epoch.has_value());
  EXPECT_EQ(s->epoch->epoch_s, 10);
  EXPECT_EQ(s->epoch->prepare_s, 5);
  EXPECT_EQ(s->epoch->headroom, Headroom::kNone);
  EXPECT_FALSE(s->epoch->autoscale);
  EXPECT_EQ(s->epoch->initial_gpus, 2);
  const Workload w = s->ToWorkload();
  EXPECT_EQ(w.num_gpus, 4);
  EXPECT_EQ(w.models[1].model, "resnet50");
}

TEST(SimConfigTest, ErrorsNameFileLineAndKey) {
  EXPECT_EQ(ErrorOf("models: [{name: a, slo_ms: 5}]\n"), "s.yaml:1: gpus: required key is missing");
}

TEST(SimConfigTest, ErrorsArePrecise) {
  const std::string head = "gpus: 1\nmodels:\n";
  EXPECT_TRUE(absl::StrContains(ErrorOf(head + "  - {name: a, slo_ms: 5, rate: 3}\n"),
                                "s.yaml:3: models[0].rate"));
  EXPECT_TRUE(absl::StrContains(ErrorOf(head + "  - {name: a}\n"), "slo_ms"));
  EXPECT_TRUE(
      absl::StrContains(ErrorOf(head + "  - {name: a, slo_ms: 5}\n  - {name: a, slo_ms: 6}\n"),
                        "s.yaml:4: models[1].name: duplicate model \"a\""));
  EXPECT_TRUE(absl::StrContains(ErrorOf(head + "  - {name: a, slo_ms: 5, arrival: burst}\n"),
                                "models[0].arrival"));
  EXPECT_TRUE(absl::StrContains(ErrorOf(head + "  - {name: a, slo_ms: 5, arrival: trace}\n"),
                                "needs a `trace` file"));
  EXPECT_TRUE(absl::StrContains(
      ErrorOf(head + "  - name: a\n    slo_ms: 5\n    schedule:\n      - {start_s: 5, "
                     "rate_rps: 1}\n      - {start_s: 5, rate_rps: 2}\n"),
      "strictly ascending"));
  EXPECT_TRUE(absl::StrContains(
      ErrorOf(head + "  - {name: a, slo_ms: 5}\nsimulation: {true_interference: lots}\n"),
      "s.yaml:4: simulation.true_interference"));
  EXPECT_TRUE(absl::StrContains(
      ErrorOf(head + "  - {name: a, slo_ms: 5}\nsimulation: {duration_s: 5, warmup_s: 5}\n"),
      "warmup_s: must be less than duration_s"));
  EXPECT_TRUE(
      absl::StrContains(ErrorOf(head + "  - {name: a, slo_ms: 5, weight: 0}\n"), "add up to 0"));
  EXPECT_TRUE(
      absl::StrContains(ErrorOf("gpus: 0\nmodels: [{name: a, slo_ms: 5}]\n"), "s.yaml:1: gpus"));
  EXPECT_TRUE(absl::StrContains(ErrorOf("gpus: 1\nmodels: []\n"), "at least one model"));
}

TEST(SimConfigTest, ReadsTraceFilesRelativeToTheScenario) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "sim_config_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a.txt") << "# arrivals of a\n0.5\n\n1.25  # second\n";
  StatusOr<Scenario> s = ParseScenarioYaml(
      "gpus: 1\nmodels: [{name: a, slo_ms: 5, arrival: trace, trace: a.txt}]\n", "s.yaml", dir);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->models[0].arrivals.trace_s, (std::vector<double>{0.5, 1.25}));

  StatusOr<Scenario> missing = ParseScenarioYaml(
      "gpus: 1\nmodels: [{name: a, slo_ms: 5, arrival: trace, trace: nope.txt}]\n", "s.yaml", dir);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "nope.txt"));

  StatusOr<std::vector<double>> bad = ParseTraceText("1\n0.5\n", "t.txt");
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "t.txt:2"));
  bad = ParseTraceText("x\n", "t.txt");
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "t.txt:1"));
}

}  // namespace
}  // namespace tessera::sim
