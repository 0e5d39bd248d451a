#include "request_tracer.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "nlohmann/json.hpp"
#include "tessera/common/bytes_tensor.h"
#include "tessera/common/yaml_util.h"

namespace tessera::frontend {
namespace {

std::string ReadFile(const std::string& path) {
  return yaml::ReadFileToString(path).value_or("");
}

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string TempPath(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tessera-trace-" + std::to_string(::getpid()) + "-" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TraceSettingsUpdate Set(std::initializer_list<std::pair<std::string, std::string>> values) {
  TraceSettingsUpdate update;
  for (const auto& [k, v] : values) update.values[k] = v;
  return update;
}

TraceRecord Trace(const std::string& model, const std::string& id) {
  dispatch::RequestTiming timing{100, 20, 300, 40};
  return MakeTrace(model, 1, id, 1000, 1100, &timing, absl::OkStatus());
}

TEST(RequestTracerTest, CreateRefusesBadSettings) {
  TraceSettings settings;
  settings.level = "TIMESTAMPS";
  auto no_file = RequestTracer::Create(settings);
  ASSERT_FALSE(no_file.ok());
  EXPECT_EQ(no_file.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(no_file.status().message().find("--trace-file"), std::string::npos);

  settings.level = "VERBOSE";
  settings.file = TempPath("t.json");
  auto bad_level = RequestTracer::Create(settings);
  ASSERT_FALSE(bad_level.ok());
  EXPECT_NE(bad_level.status().message().find("VERBOSE"), std::string::npos);

  settings.level = "TIMESTAMPS";
  settings.rate = -1;
  EXPECT_FALSE(RequestTracer::Create(settings).ok());
  settings.rate = 0;  // none by rate
  auto none = RequestTracer::Create(settings);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE((*none)->Sample("m"));
  EXPECT_FALSE((*none)->Sample("m", /*has_trace_context=*/true));  // mode triton: no exception
}

TEST(RequestTracerTest, OffByDefaultTracesNothing) {
  auto tracer = RequestTracer::Create({}).value();
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(tracer->Sample("m"));
}

TEST(RequestTracerTest, RateTracesOneInNAndCountStopsTracing) {
  TraceSettings settings;
  settings.level = "TIMESTAMPS";
  settings.rate = 3;
  settings.file = TempPath("t.json");
  auto tracer = RequestTracer::Create(settings).value();
  std::vector<int> traced;
  for (int i = 0; i < 9; ++i) {
    if (tracer->Sample("m")) traced.push_back(i);
  }
  EXPECT_EQ(traced, (std::vector<int>{0, 3, 6}));

  ASSERT_TRUE(tracer->Update("", Set({{"trace_rate", "1"}, {"trace_count", "2"}})).ok());
  int n = 0;
  for (int i = 0; i < 10; ++i) n += tracer->Sample("m") ? 1 : 0;
  EXPECT_EQ(n, 2);
  EXPECT_EQ(tracer->Get("").count, 0);  // the response shows that tracing has stopped
}

TEST(RequestTracerTest, ModelSettingsOverrideAndClearBackToGlobal) {
  TraceSettings settings;
  settings.file = TempPath("t.json");
  auto tracer = RequestTracer::Create(settings).value();
  ASSERT_TRUE(tracer->Update("a", Set({{"trace_level", "TIMESTAMPS"}, {"trace_rate", "1"}})).ok());
  EXPECT_TRUE(tracer->Sample("a"));
  EXPECT_FALSE(tracer->Sample("b"));
  EXPECT_EQ(tracer->Get("a").level, "TIMESTAMPS");
  EXPECT_EQ(tracer->Get("b").level, "OFF");

  TraceSettingsUpdate clear;
  clear.values["trace_level"] = std::nullopt;
  ASSERT_TRUE(tracer->Update("a", clear).ok());
  EXPECT_EQ(tracer->Get("a").level, "OFF");
  EXPECT_EQ(tracer->Get("a").rate, 1);  // not cleared: still the model's own
  EXPECT_FALSE(tracer->Sample("a"));
}

TEST(RequestTracerTest, BadUpdatesNameTheKeyAndChangeNothing) {
  TraceSettings settings;
  settings.file = TempPath("t.json");
  auto tracer = RequestTracer::Create(settings).value();
  struct Case {
    std::string model;
    TraceSettingsUpdate update;
    std::string message;
  } cases[] = {
      {"", Set({{"trace_rate", "5"}, {"trace_levle", "OFF"}}),
       "unknown trace setting 'trace_levle'"},
      {"", Set({{"trace_rate", "often"}}), "'trace_rate' must be an integer >= 0"},
      {"", Set({{"trace_count", "-2"}}), "'trace_count' must be an integer >= -1"},
      {"", Set({{"trace_level", "TENSOR"}}), "must be OFF, TIMESTAMPS or TENSORS"},
      {"", Set({{"trace_level", "OFF,TENSORS"}}), "OFF cannot be named beside another level"},
      {"", Set({{"trace_file", "/etc/passwd"}}), "'trace_file' cannot be changed"},
      {"m", Set({{"log_frequency", "10"}}), "'log_frequency' is global"},
  };
  for (const Case& c : cases) {
    Status s = tracer->Update(c.model, c.update);
    ASSERT_FALSE(s.ok()) << c.message;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
  }
  EXPECT_EQ(tracer->Get("").rate, 1000);
  EXPECT_EQ(tracer->Get("").file, settings.file);

  TraceSettings no_file;
  auto fileless = RequestTracer::Create(no_file).value();
  Status s = fileless->Update("", Set({{"trace_level", "TIMESTAMPS"}}));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fileless->Get("").level, "OFF");
}

TEST(RequestTracerTest, LogFrequencyWritesNumberedFiles) {
  TraceSettings settings;
  settings.level = "TIMESTAMPS";
  settings.rate = 1;
  settings.log_frequency = 2;
  settings.file = TempPath("trace.json");
  auto tracer = RequestTracer::Create(settings).value();
  for (int i = 0; i < 5; ++i) tracer->Record(Trace("m", "req-" + std::to_string(i)));
  EXPECT_EQ(CountOf(ReadFile(settings.file + ".0"), "\"REQUEST_START\""), 2);
  EXPECT_EQ(CountOf(ReadFile(settings.file + ".1"), "\"REQUEST_START\""), 2);
  EXPECT_FALSE(std::filesystem::exists(settings.file + ".2"));
  tracer.reset();  // the fifth trace is written when the tracer goes
  const std::string last = ReadFile(settings.file + ".2");
  EXPECT_EQ(CountOf(last, "\"REQUEST_START\""), 1);
  EXPECT_NE(last.find("\"request_id\":\"req-4\""), std::string::npos);
}

TEST(RequestTracerTest, LogFrequencyZeroRewritesOneFileWithEveryTrace) {
  TraceSettings settings;
  settings.level = "TIMESTAMPS";
  settings.file = TempPath("trace.json");
  auto tracer = RequestTracer::Create(settings).value();
  tracer->Record(Trace("m", "a\"b"));
  ASSERT_TRUE(tracer->Flush().ok());
  tracer->Record(Trace("m", "c"));
  ASSERT_TRUE(tracer->Flush().ok());
  const std::string text = ReadFile(settings.file);
  EXPECT_EQ(text.front(), '[');
  EXPECT_EQ(CountOf(text, "\"model_name\":\"m\""), 2);
  EXPECT_NE(text.find("\"request_id\":\"a\\\"b\""), std::string::npos);  // escaped quote
  EXPECT_NE(text.find("\"id\":2"), std::string::npos);
}

TEST(RequestTracerTest, UnwritableFileIsAnError) {
  TraceSettings settings;
  settings.level = "TIMESTAMPS";
  settings.file = "/nonexistent-dir/trace.json";
  auto tracer = RequestTracer::Create(settings).value();
  tracer->Record(Trace("m", "x"));
  Status s = tracer->Flush();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent-dir/trace.json"), std::string::npos);
}

TEST(RequestTracerTest, TraceTimestampsAreInOrderAndEndAtTheAnswer) {
  TraceRecord record = Trace("m", "x");
  std::vector<std::string> names;
  for (size_t i = 0; i < record.timestamps.size(); ++i) {
    names.push_back(record.timestamps[i].first);
    if (i > 0) {
      EXPECT_LE(record.timestamps[i - 1].second, record.timestamps[i].second);
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"REQUEST_START", "QUEUE_START", "COMPUTE_START",
                                             "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START",
                                             "COMPUTE_END", "REQUEST_END"}));
  EXPECT_EQ(record.timestamps[2].second, 1200u);  // queue start + 100 ns queued
  EXPECT_EQ(record.timestamps[5].second, 1560u);

  TraceRecord failed = MakeTrace("m", 1, "y", 1000, 1100, nullptr, absl::InternalError("boom"));
  EXPECT_EQ(failed.timestamps.size(), 3u);
  EXPECT_EQ(failed.error, "boom");
}

TEST(RequestTracerTest, ProtoUpdateTakesOneValueOrNoneToClear) {
  inference::TraceSettingRequest request;
  (*request.mutable_settings())["trace_rate"].add_value("10");
  (*request.mutable_settings())["trace_count"];
  auto update = TraceSettingsUpdateFromProto(request).value();
  EXPECT_EQ(update.values.at("trace_rate"), "10");
  EXPECT_FALSE(update.values.at("trace_count").has_value());

  (*request.mutable_settings())["trace_rate"].add_value("20");
  auto two = TraceSettingsUpdateFromProto(request);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("'trace_rate' takes one value"), std::string::npos);

  // Levels are the one setting that takes several values: each adds a kind of detail.
  inference::TraceSettingRequest levels;
  (*levels.mutable_settings())["trace_level"].add_value("TENSORS");
  (*levels.mutable_settings())["trace_level"].add_value("TIMESTAMPS");
  EXPECT_EQ(TraceSettingsUpdateFromProto(levels)->values.at("trace_level"), "TENSORS,TIMESTAMPS");

  inference::TraceSettingResponse response;
  TraceSettingsToProto(TraceSettings{}, &response);
  EXPECT_EQ(response.settings().at("trace_rate").value(0), "1000");
  EXPECT_EQ(response.settings().at("trace_level").value(0), "OFF");
  EXPECT_EQ(response.settings().size(), 5);
  TraceSettings both;
  both.level = "TIMESTAMPS,TENSORS";
  inference::TraceSettingResponse both_response;
  TraceSettingsToProto(both, &both_response);
  ASSERT_EQ(both_response.settings().at("trace_level").value_size(), 2);
  EXPECT_EQ(both_response.settings().at("trace_level").value(1), "TENSORS");
}

TEST(RequestTracerTest, LevelsSayWhatASampledRequestRecords) {
  TraceSettings settings;
  settings.level = "TENSORS";
  settings.rate = 1;
  settings.file = TempPath("t.json");
  auto tracer = RequestTracer::Create(settings).value();
  TraceLevels levels = tracer->Sample("m");
  EXPECT_TRUE(levels.tensors);
  EXPECT_FALSE(levels.timestamps);
  // Given in any order, both levels are kept in one canonical order.
  ASSERT_TRUE(tracer->Update("m", Set({{"trace_level", "TENSORS,TIMESTAMPS"}})).ok());
  EXPECT_EQ(tracer->Get("m").level, "TIMESTAMPS,TENSORS");
  levels = tracer->Sample("m");
  EXPECT_TRUE(levels.tensors && levels.timestamps);
  EXPECT_FALSE(tracer->Sample("other").timestamps);

  settings.level = "TENSORS,TENSORS";  // a repeat is the same level
  EXPECT_EQ(RequestTracer::Create(settings).value()->Get("").level, "TENSORS");
}

TEST(RequestTracerTest, TensorsAreWrittenUnderTheTracesId) {
  TraceSettings settings;
  settings.level = "TENSORS";
  settings.file = TempPath("trace.json");
  auto tracer = RequestTracer::Create(settings).value();
  const float values[] = {0.5f, -2.0f, 1e-3f};
  std::string text_bytes;
  AppendBytesElement("a,\"b\"", &text_bytes);
  AppendBytesElement("", &text_bytes);
  const bool flags[] = {true, false};
  TraceRecord record;
  record.model_name = "m";
  record.model_version = 3;
  record.request_id = "r1";
  record.tensors.push_back(
      TraceTensor("TENSOR_QUEUE_INPUT", "x", DataType::kFp32, {1, 3},
                  std::string_view(reinterpret_cast<const char*>(values), sizeof values)));
  record.tensors.push_back(
      TraceTensor("TENSOR_QUEUE_INPUT", "text", DataType::kString, {2}, text_bytes));
  record.tensors.push_back(
      TraceTensor("TENSOR_BACKEND_OUTPUT", "flags", DataType::kBool, {2},
                  std::string_view(reinterpret_cast<const char*>(flags), sizeof flags)));
  EXPECT_EQ(record.tensors[0].data, "0.5,-2,0.001");
  EXPECT_EQ(record.tensors[0].shape, "1,3");
  EXPECT_EQ(record.tensors[0].dtype, "FP32");
  EXPECT_EQ(record.tensors[1].data, "a,\"b\",");
  EXPECT_EQ(record.tensors[2].data, "1,0");
  tracer->Record(std::move(record));
  ASSERT_TRUE(tracer->Flush().ok());
  const std::string text = ReadFile(settings.file);
  EXPECT_EQ(text.find("\"timestamps\""), std::string::npos);  // level TENSORS only
  EXPECT_NE(text.find("{\"id\":1,\"activity\":\"TENSOR_QUEUE_INPUT\",\"tensor\":{\"name\":\"x\","
                      "\"data\":\"0.5,-2,0.001\",\"shape\":\"1,3\","
                      "\"dtype\":\"FP32\"}}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"data\":\"a,\\\"b\\\",\""), std::string::npos) << text;  // escaped
  EXPECT_EQ(CountOf(text, "\"id\":1,"), 4);
  // Bytes that are not whole elements say so instead of data.
  EXPECT_EQ(TraceTensor("TENSOR_QUEUE_INPUT", "bad", DataType::kString, {1}, "\x09").data.front(),
            '<');
}

TEST(RequestTracerTest, AnEnsemblesStepsAreWrittenAsChildrenOfTheirRequest) {
  TraceSettings settings;
  settings.level = "TIMESTAMPS";
  settings.rate = 1;
  settings.file = TempPath("steps.json");
  std::shared_ptr<RequestTracer> tracer = RequestTracer::Create(settings).value();
  const uint64_t parent = tracer->NewTraceId();
  TracedSteps steps(tracer, TraceLevels{true, false}, "req-1", parent, std::nullopt);
  const uint64_t child = steps.NewStepId();
  EXPECT_NE(child, parent);
  dispatch::Request step;
  step.arrival_ns = 2000;
  dispatch::Response answered;
  answered.timing = {10, 1, 2, 3};
  steps.StepDone(child, parent, "relu", 2, step, answered);
  TraceRecord request = Trace("pipeline", "req-1");
  request.id = parent;
  tracer->Record(std::move(request));
  ASSERT_TRUE(tracer->Flush().ok());

  const nlohmann::json traces = nlohmann::json::parse(ReadFile(settings.file));
  ASSERT_EQ(traces.size(), 2u);
  const nlohmann::json& step_trace = traces[0];
  EXPECT_EQ(step_trace["id"], child);
  EXPECT_EQ(step_trace["parent_id"], parent);
  EXPECT_EQ(step_trace["model_name"], "relu");
  EXPECT_EQ(step_trace["model_version"], 2);
  EXPECT_EQ(step_trace["request_id"], "req-1");
  EXPECT_EQ(step_trace["timestamps"][0]["ns"], 2000);  // REQUEST_START: the step's arrival
  EXPECT_EQ(step_trace["timestamps"][2]["ns"], 2010);  // COMPUTE_START: after its queue time
  EXPECT_EQ(traces[1]["id"], parent);
  EXPECT_FALSE(traces[1].contains("parent_id"));
}

}  // namespace
}  // namespace tessera::frontend
