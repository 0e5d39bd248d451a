#include "scenario.h"

#include "gtest/gtest.h"

namespace tessera::bench {
namespace {

TEST(ScenarioTest, ParsesEveryKey) {
  auto s = ParseScenario(R"(
server: host:9001
mode: open
seed: 7
warmup_s: 1.5
duration_s: 20
drain_s: 3
request_timeout_s: 2
max_in_flight: 500
channels: 2
models:
  - name: mlp
    slo_ms: 50
    batch_size: 2
    arrival: uniform
    rate: 100
    input: zeros
  - name: small_cnn
    version: "1"
    slo_ms: 100
    rate_schedule:
      - {at_s: 0, rate: 10}
      - {at_s: 5, rate: 40}
  - name: replayed
    arrival: trace
    trace: traces/t.csv
    trace_speedup: 2
    input: files
    input_files: {input: data/x.bin}
    inputs:
      - {name: input, datatype: FP32, shape: [1, 64]}
)",
                         "s.yaml", "/base");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->server, "host:9001");
  EXPECT_EQ(s->seed, 7u);
  EXPECT_DOUBLE_EQ(s->warmup_s, 1.5);
  EXPECT_EQ(s->max_in_flight, 500);
  EXPECT_EQ(s->channels, 2);
  ASSERT_EQ(s->models.size(), 3u);
  EXPECT_EQ(s->models[0].arrival, ArrivalKind::kUniform);
  EXPECT_EQ(s->models[0].batch_size, 2);
  EXPECT_EQ(s->models[0].fill, InputFill::kZeros);
  EXPECT_DOUBLE_EQ(s->models[0].rate.RateAt(3), 100);
  EXPECT_EQ(s->models[1].arrival, ArrivalKind::kPoisson);
  EXPECT_EQ(s->models[1].version, "1");
  EXPECT_DOUBLE_EQ(s->models[1].rate.RateAt(6), 40);
  EXPECT_EQ(s->models[2].trace_path, "/base/traces/t.csv");
  EXPECT_EQ(s->models[2].input_files.at("input"), "/base/data/x.bin");
  ASSERT_EQ(s->models[2].inputs.size(), 1u);
  EXPECT_EQ(s->models[2].inputs[0].shape, (std::vector<int64_t>{1, 64}));
}

std::string ErrorOf(const std::string& yaml) {
  auto s = ParseScenario(yaml, "bad.yaml", "");
  return s.ok() ? "ok" : std::string(s.status().message());
}

TEST(ScenarioTest, ErrorsNameFileLineAndKey) {
  EXPECT_EQ(ErrorOf("models:\n  - name: a\n    rate: 10\n    slo: 5\n"),
            "bad.yaml:4: models[0].slo: unknown key (known: name, version, slo_ms, "
            "batch_size, arrival, rate, rate_schedule, trace, trace_speedup, concurrency, input, "
            "input_files, inputs, comment)");
  EXPECT_EQ(ErrorOf("models:\n  - name: a\n"),
            "bad.yaml:2: models[0]: open-loop load needs rate or rate_schedule (or arrival: "
            "trace)");
  EXPECT_NE(ErrorOf("models:\n  - name: a\n    rate: fast\n").find("bad.yaml:3: models[0].rate"),
            std::string::npos);
  EXPECT_NE(ErrorOf("models:\n  - name: a\n    arrival: gamma\n    rate: 1\n")
                .find("bad.yaml:3: models[0].arrival"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf("models:\n  - {name: a, rate: 1}\n  - {name: a, rate: 2}\n").find("listed twice"),
      std::string::npos);
  EXPECT_NE(ErrorOf("models:\n  - {name: a, arrival: trace}\n").find("needs a trace file"),
            std::string::npos);
  EXPECT_NE(ErrorOf("duration_s: 10\n").find("models"), std::string::npos);
  EXPECT_NE(ErrorOf("models: [\n").find("bad.yaml"), std::string::npos);
  EXPECT_NE(
      ErrorOf("models:\n  - name: a\n    rate_schedule: [{at_s: 1, rate: 5}]\n").find("start at 0"),
      std::string::npos);
  EXPECT_NE(ErrorOf("models:\n  - {name: a, rate: 1, input: files}\n").find("input_files"),
            std::string::npos);
  EXPECT_EQ(LoadScenario("/nonexistent.yaml").status().code(), absl::StatusCode::kNotFound);
}

TEST(ScenarioTest, ClosedLoopNeedsNoRate) {
  auto s = ParseScenario("mode: closed\nmodels:\n  - {name: a, concurrency: 4}\n", "c.yaml", "");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->mode, LoadMode::kClosed);
  EXPECT_EQ(s->models[0].concurrency, 4);
}

}  // namespace
}  // namespace tessera::bench
