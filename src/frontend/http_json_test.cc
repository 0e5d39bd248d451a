#include "http_json.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "http_settings.h"
#include "inference/model_config.pb.h"

namespace tessera::frontend {
namespace {

using nlohmann::json;

template <typename T>
std::vector<T> Values(const std::string& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

template <typename T>
std::string Bytes(std::vector<T> values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

TEST(HttpJsonTest, JsonDataBecomesRawBytesInRowMajorOrder) {
  auto parsed = ParseHttpInferRequest(R"({
    "id": "r1",
    "parameters": {"priority": 2, "timeout": 5000, "binary_data_output": true},
    "inputs": [
      {"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [[1, 2.5], [3, -4]]},
      {"name": "m", "shape": [3], "datatype": "BOOL", "data": [true, false, true]},
      {"name": "k", "shape": [2], "datatype": "INT64", "data": [-9000000000, 7]}
    ],
    "outputs": [{"name": "y", "parameters": {"binary_data": false, "classification": 2}}]
  })",
                                      std::nullopt);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& wire = parsed->wire;
  EXPECT_EQ(wire.id(), "r1");
  EXPECT_EQ(wire.parameters().at("priority").int64_param(), 2);
  EXPECT_EQ(wire.parameters().at("timeout").int64_param(), 5000);
  EXPECT_FALSE(wire.parameters().contains("binary_data_output"));  // the HTTP layer's own
  ASSERT_EQ(wire.inputs_size(), 3);
  EXPECT_EQ(wire.inputs(0).shape_size(), 2);
  EXPECT_EQ(Values<float>(wire.raw_input_contents(0)), (std::vector<float>{1, 2.5, 3, -4}));
  EXPECT_EQ(wire.raw_input_contents(1), std::string("\1\0\1", 3));
  EXPECT_EQ(Values<int64_t>(wire.raw_input_contents(2)), (std::vector<int64_t>{-9000000000, 7}));
  ASSERT_EQ(wire.outputs_size(), 1);
  EXPECT_EQ(wire.outputs(0).parameters().at("classification").int64_param(), 2);
  EXPECT_FALSE(wire.outputs(0).parameters().contains("binary_data"));
  EXPECT_FALSE(parsed->format.Binary("y"));  // asked for in JSON
  EXPECT_TRUE(parsed->format.Binary("z"));   // binary_data_output for the rest
}

TEST(HttpJsonTest, BinaryInputsAreCutFromTheBytesAfterTheJson) {
  const std::string header = R"({"inputs": [
    {"name": "a", "shape": [2], "datatype": "INT32", "parameters": {"binary_data_size": 8}},
    {"name": "b", "shape": [1], "datatype": "FP32", "data": [0.5]},
    {"name": "c", "shape": [1], "datatype": "UINT8", "parameters": {"binary_data_size": 1}}]})";
  const std::string body = header + Bytes<int32_t>({7, -1}) + "\x05";
  auto parsed = ParseHttpInferRequest(body, header.size());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(Values<int32_t>(parsed->wire.raw_input_contents(0)), (std::vector<int32_t>{7, -1}));
  EXPECT_EQ(Values<float>(parsed->wire.raw_input_contents(1)), (std::vector<float>{0.5}));
  EXPECT_EQ(parsed->wire.raw_input_contents(2), "\x05");
  EXPECT_FALSE(parsed->wire.inputs(0).parameters().contains("binary_data_size"));

  auto extra = ParseHttpInferRequest(body + "zz", header.size());
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("11 bytes of binary data follow the JSON"),
            std::string::npos)
      << extra.status();
  auto short_body = ParseHttpInferRequest(header + "abc", header.size());
  ASSERT_FALSE(short_body.ok());
  EXPECT_NE(short_body.status().message().find("input 'a': binary_data_size is 8 but only 3"),
            std::string::npos)
      << short_body.status();
  auto past_end = ParseHttpInferRequest(header, header.size() + 1);
  EXPECT_FALSE(past_end.ok());
}

TEST(HttpJsonTest, SharedMemoryInputsCarryNoData) {
  auto parsed = ParseHttpInferRequest(R"({"inputs": [{"name": "x", "shape": [4], "datatype": "FP32",
      "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": 16}}]})",
                                      std::nullopt);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->wire.raw_input_contents_size(), 0);
  EXPECT_EQ(parsed->wire.inputs(0).parameters().at("shared_memory_region").string_param(), "r");
}

TEST(HttpJsonTest, BadRequestsAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"inputs": [)", "not valid JSON"},
      {R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1e999]}]})",
       "not valid JSON"},
      {R"([1, 2])", "the request body must be a JSON object"},
      {R"({"id": 5, "inputs": []})", "the request 'id' must be a string, not an integer"},
      {R"({})", "the request has no 'inputs'"},
      {R"({"inputs": [{"shape": [1], "datatype": "FP32", "data": [1]}]})", "input 0 has no 'name'"},
      {R"({"inputs": [{"name": "x", "datatype": "FP32", "data": [1]}]})",
       "input 'x' has no 'shape'"},
      {R"({"inputs": [{"name": "x", "shape": [-1], "datatype": "FP32", "data": [1]}]})",
       "'shape' must hold non-negative integers"},
      {R"({"inputs": [{"name": "x", "shape": [18446744073709551615], "datatype": "FP32",
           "data": [1]}]})",
       "'shape' must hold non-negative integers, not 18446744073709551615"},
      {R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32",
           "parameters": {"binary_data_size": 18446744073709551615}}]})",
       "'binary_data_size' must be a byte count, not 18446744073709551615"},
      {R"({"inputs": [{"name": "x", "shape": [3], "datatype": "FP32", "data": [1, 2]}]})",
       "input 'x': 'data' has 2 elements but its shape [3] needs 3"},
      {R"({"inputs": [{"name": "x", "shape": [1], "datatype": "INT8", "data": [300]}]})",
       "input 'x': element 0 (300) is not a valid INT8 value"},
      {R"({"inputs": [{"name": "x", "shape": [1], "datatype": "UINT32", "data": [-1]}]})",
       "is not a valid UINT32 value"},
      {R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": ["1"]}]})",
       "is not a valid FP32 value"},
      {R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FLOAT", "data": [1]}]})",
       "unknown datatype 'FLOAT'"},
      {R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32"}]})", "input 'x' has no data"},
      {R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1],
           "parameters": {"binary_data_size": 4}}]})",
       "gives its data more than one way"},
      {R"({"inputs": [], "parameters": {"binary_data_output": 1}})",
       "parameter 'binary_data_output' must be a boolean"},
      {R"({"inputs": [], "parameters": {"p": [1]}})", "parameter 'p' must be a boolean, a number"},
      {R"({"inputs": [], "outputs": [{"parameters": {}}]})", "requested output 0 has no 'name'"},
  };
  for (const auto& [body, expected] : cases) {
    auto parsed = ParseHttpInferRequest(body, std::nullopt);
    ASSERT_FALSE(parsed.ok()) << body;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_NE(parsed.status().message().find(expected), std::string::npos)
        << body << " -> " << parsed.status();
  }
}

TEST(HttpJsonTest, DeeplyNestedValuesAreRefusedWithoutExhaustingTheStack) {
  const int depth = 200000;  // far more frames than a handler thread's stack holds
  const std::string arrays = std::string(depth, '[') + "1" + std::string(depth, ']');
  std::string objects;
  for (int i = 0; i < depth; ++i) objects += R"({"a":)";
  objects += "1" + std::string(depth, '}');
  const std::pair<std::string, const char*> cases[] = {
      {R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": )" + arrays + "}]}",
       "'data' nests arrays deeper than 64 levels"},
      {R"({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [)" + objects +
           "]}]}",
       "element 0 (an object) is not a valid FP32 value"},
      {R"({"inputs": [{"name": "x", "shape": [)" + arrays + R"(], "datatype": "FP32"}]})",
       "'shape' must hold non-negative integers, not an array"},
  };
  for (const auto& [body, expected] : cases) {
    auto parsed = ParseHttpInferRequest(body, std::nullopt);
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.status().message().find(expected), std::string::npos) << parsed.status();
  }
}

inference::ModelInferResponse TwoOutputs() {
  inference::ModelInferResponse wire;
  wire.set_model_name("m");
  wire.set_model_version("3");
  wire.set_id("r7");
  auto* y = wire.add_outputs();
  y->set_name("y");
  y->set_datatype("FP32");
  y->add_shape(1);
  y->add_shape(2);
  wire.add_raw_output_contents(Bytes<float>({1.5f, -2}));
  auto* c = wire.add_outputs();
  c->set_name("classes");
  c->set_datatype("BYTES");
  c->add_shape(1);
  std::string s = "0.9:3";
  uint32_t n = s.size();
  wire.add_raw_output_contents(std::string(reinterpret_cast<char*>(&n), 4) + s);
  return wire;
}

TEST(HttpJsonTest, AnswersInJson) {
  auto body = RenderHttpInferResponse(TwoOutputs(), HttpOutputFormat{});
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_FALSE(body->json_length);
  const json answer = json::parse(body->bytes);
  EXPECT_EQ(answer["model_name"], "m");
  EXPECT_EQ(answer["model_version"], "3");
  EXPECT_EQ(answer["id"], "r7");
  EXPECT_EQ(answer["outputs"][0]["shape"], json::array({1, 2}));
  EXPECT_EQ(answer["outputs"][0]["data"], json::array({1.5, -2.0}));
  EXPECT_EQ(answer["outputs"][1]["data"], json::array({"0.9:3"}));
}

TEST(HttpJsonTest, AnswersBinaryOutputsAfterTheJson) {
  HttpOutputFormat format;
  format.binary["y"] = true;
  auto body = RenderHttpInferResponse(TwoOutputs(), format);
  ASSERT_TRUE(body.ok()) << body.status();
  ASSERT_TRUE(body->json_length);
  const json answer = json::parse(body->bytes.substr(0, *body->json_length));
  EXPECT_EQ(answer["outputs"][0]["parameters"]["binary_data_size"], 8);
  EXPECT_FALSE(answer["outputs"][0].contains("data"));
  EXPECT_EQ(answer["outputs"][1]["data"], json::array({"0.9:3"}));
  EXPECT_EQ(Values<float>(body->bytes.substr(*body->json_length)), (std::vector<float>{1.5f, -2}));
}

TEST(HttpJsonTest, SharedMemoryOutputsCarryNoDataAndNoParameters) {
  inference::ModelInferResponse wire = TwoOutputs();
  (*wire.mutable_outputs(0)->mutable_parameters())["shared_memory_region"].set_string_param("o");
  wire.set_raw_output_contents(0, "");
  HttpOutputFormat format;
  format.binary_by_default = true;
  auto body = RenderHttpInferResponse(wire, format);
  ASSERT_TRUE(body.ok()) << body.status();
  const json answer = json::parse(body->bytes.substr(0, *body->json_length));
  EXPECT_EQ(answer["outputs"][0], json({{"name", "y"}, {"datatype", "FP32"}, {"shape", {1, 2}}}));
  EXPECT_EQ(answer["outputs"][1]["parameters"]["binary_data_size"], 9);
}

TEST(HttpJsonTest, ProtoToJsonWritesIntegersAsNumbersAndEnumsByName) {
  inference::ModelConfig config;
  config.set_name("m");
  config.set_max_batch_size(8);
  auto* input = config.add_input();
  input->set_name("x");
  input->set_data_type(inference::TYPE_FP32);
  input->add_dims(-1);
  input->add_dims(3);
  config.mutable_dynamic_batching()->set_max_queue_delay_microseconds(100);
  (*config.mutable_parameters())["slo_ms"].set_string_value("50");
  const json out = ProtoToJson(config);
  EXPECT_EQ(out["name"], "m");
  EXPECT_EQ(out["max_batch_size"], 8);
  EXPECT_EQ(out["input"][0]["dims"], json::array({-1, 3}));
  EXPECT_EQ(out["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(out["dynamic_batching"]["max_queue_delay_microseconds"], 100);
  EXPECT_EQ(out["parameters"]["slo_ms"]["string_value"], "50");
  EXPECT_EQ(out["output"], json::array());          // repeated fields are always written
  EXPECT_FALSE(out.contains("sequence_batching"));  // unset messages are not
}

}  // namespace
}  // namespace tessera::frontend

namespace tessera::frontend {
namespace {

TEST(HttpSettingsJsonTest, LogSettingsTakeBooleansIntegersAndStrings) {
  auto request = LogSettingsFromJson(
      json{{"log_info", false}, {"log_verbose_level", 2}, {"log_format", "ISO8601"}});
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_FALSE(request->settings().at("log_info").bool_param());
  EXPECT_EQ(request->settings().at("log_verbose_level").uint32_param(), 2u);
  EXPECT_EQ(request->settings().at("log_format").string_param(), "ISO8601");
  for (const json& bad : {json{{"log_verbose_level", -1}}, json{{"log_verbose_level", 1ll << 33}},
                          json{{"log_info", nullptr}}, json{{"log_file", {"a"}}}}) {
    auto refused = LogSettingsFromJson(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("log setting '"), std::string::npos);
  }
  EXPECT_FALSE(LogSettingsFromJson(json::array()).ok());
}

TEST(HttpSettingsJsonTest, TraceSettingsTakeStringsNumbersListsAndNull) {
  auto request = TraceSettingFromJson(json{{"trace_level", {"TIMESTAMPS"}},
                                           {"trace_rate", 5},
                                           {"trace_file", "/t"},
                                           {"trace_count", nullptr}});
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->settings().at("trace_level").value(0), "TIMESTAMPS");
  EXPECT_EQ(request->settings().at("trace_rate").value(0), "5");
  EXPECT_EQ(request->settings().at("trace_file").value(0), "/t");
  EXPECT_EQ(request->settings().at("trace_count").value_size(), 0);  // cleared
  EXPECT_FALSE(TraceSettingFromJson(json{{"trace_rate", 1.5}}).ok());
  EXPECT_FALSE(TraceSettingFromJson(json{{"trace_level", {{"a", 1}}}}).ok());

  inference::TraceSettingResponse response;
  (*response.mutable_settings())["trace_level"].add_value("TIMESTAMPS");
  (*response.mutable_settings())["trace_rate"].add_value("1000");
  EXPECT_EQ(TraceSettingToJson(response),
            (json{{"trace_level", {"TIMESTAMPS"}}, {"trace_rate", "1000"}}));
}

}  // namespace
}  // namespace tessera::frontend
