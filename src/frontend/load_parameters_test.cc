// Load and unload parameters: each endpoint's types, and the refusals that name the parameter.
#include "load_parameters.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::frontend {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

std::string MessageOf(const Status& status) { return std::string(status.message()); }

TEST(LoadParametersTest, GrpcTakesAStringConfigAndBytesFiles) {
  inference::RepositoryModelLoadRequest request;
  (*request.mutable_parameters())["config"].set_string_param(R"({"max_batch_size": 2})");
  (*request.mutable_parameters())["file:1/model.onnx"].set_bytes_param(std::string("\0\1", 2));
  StatusOr<LoadOverrides> overrides = LoadOverridesFromGrpc(request.parameters());
  ASSERT_TRUE(overrides.ok()) << overrides.status();
  EXPECT_EQ(overrides->config_json, R"({"max_batch_size": 2})");
  EXPECT_THAT(overrides->files, ElementsAre(Pair("1/model.onnx", std::string("\0\1", 2))));
  EXPECT_TRUE(LoadOverridesFromGrpc({}).value().empty());
}

TEST(LoadParametersTest, GrpcRefusalsNameTheParameter) {
  auto refusal = [](const std::string& key, inference::ModelRepositoryParameter value) {
    inference::RepositoryModelLoadRequest request;
    (*request.mutable_parameters())[key] = value;
    StatusOr<LoadOverrides> overrides = LoadOverridesFromGrpc(request.parameters());
    EXPECT_EQ(overrides.status().code(), absl::StatusCode::kInvalidArgument) << key;
    return MessageOf(overrides.status());
  };
  inference::ModelRepositoryParameter as_bytes, as_string, as_bool;
  as_bytes.set_bytes_param("{}");
  as_string.set_string_param("x");
  as_bool.set_bool_param(true);
  EXPECT_THAT(refusal("config", as_bytes), HasSubstr("parameter 'config' must be a string_param"));
  EXPECT_THAT(refusal("file:1/model.onnx", as_string),
              HasSubstr("parameter 'file:1/model.onnx' must be a bytes_param"));
  EXPECT_THAT(refusal("file:1/model.onnx", as_bytes),
              HasSubstr("load parameter 'file:1/model.onnx' needs a 'config' parameter too"));
  EXPECT_THAT(refusal("conifg", as_string), HasSubstr("unknown load parameter 'conifg'"));

  inference::RepositoryModelUnloadRequest unload;
  EXPECT_FALSE(UnloadDependentsFromGrpc(unload.parameters()).value());
  (*unload.mutable_parameters())["unload_dependents"] = as_bool;
  EXPECT_TRUE(UnloadDependentsFromGrpc(unload.parameters()).value());
  (*unload.mutable_parameters())["unload_dependents"] = as_string;
  EXPECT_THAT(MessageOf(UnloadDependentsFromGrpc(unload.parameters()).status()),
              HasSubstr("'unload_dependents' must be a bool_param"));
  (*unload.mutable_parameters()).clear();
  (*unload.mutable_parameters())["force"] = as_bool;
  EXPECT_THAT(MessageOf(UnloadDependentsFromGrpc(unload.parameters()).status()),
              HasSubstr("unknown unload parameter 'force'"));
}

TEST(LoadParametersTest, JsonTakesBase64Files) {
  StatusOr<LoadOverrides> overrides = LoadOverridesFromJson(nlohmann::json::parse(
      R"({"config": "{}", "file:1/model.onnx": "AAFvbm54", "file:labels.txt": ""})"));
  ASSERT_TRUE(overrides.ok()) << overrides.status();
  EXPECT_EQ(overrides->config_json, "{}");
  EXPECT_THAT(overrides->files, ElementsAre(Pair("1/model.onnx", std::string("\0\1onnx", 6)),
                                            Pair("labels.txt", "")));

  auto refusal = [](const char* text) {
    StatusOr<LoadOverrides> refused = LoadOverridesFromJson(nlohmann::json::parse(text));
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << text;
    return MessageOf(refused.status());
  };
  EXPECT_THAT(refusal(R"({"config": {"max_batch_size": 2}})"),
              HasSubstr("parameter 'config' must be a string"));
  EXPECT_THAT(refusal(R"({"config": "{}", "file:1/model.onnx": "not base64!"})"),
              HasSubstr("'file:1/model.onnx' must be a string holding the file's content in "
                        "base64"));
  EXPECT_THAT(refusal(R"({"config": "{}", "file:1/model.onnx": [1, 2]})"), HasSubstr("base64"));
  EXPECT_THAT(refusal(R"({"file:1/model.onnx": "AA=="})"), HasSubstr("needs a 'config'"));
  EXPECT_THAT(refusal(R"([1])"), HasSubstr("'parameters' must be a JSON object"));

  EXPECT_TRUE(
      UnloadDependentsFromJson(nlohmann::json::parse(R"({"unload_dependents": true})")).value());
  EXPECT_THAT(
      MessageOf(UnloadDependentsFromJson(nlohmann::json::parse(R"({"unload_dependents": "yes"})"))
                    .status()),
      HasSubstr("'unload_dependents' must be a boolean"));
}

}  // namespace
}  // namespace tessera::frontend
