// Ragged batching in config.yaml and config.pbtxt alike (allow_ragged_batch, batch_input,
// batch_output): what it reads, and what it refuses, with the line and the key.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tessera/repository/model_config.h"

namespace tessera::repository {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kYaml[] = R"(name: tokens
max_batch_size: 16
input:
  - {name: TOKENS, data_type: TYPE_INT64, dims: [-1], allow_ragged_batch: true}
  - {name: SCALE, data_type: TYPE_FP32, dims: [1]}
output:
  - {name: POOLED, data_type: TYPE_FP32, dims: [4]}
  - {name: PER_TOKEN, data_type: TYPE_FP32, dims: [-1, 4]}
batch_input:
  - {kind: BATCH_ACCUMULATED_ELEMENT_COUNT, target_name: [ENDS, ENDS_AGAIN], data_type: TYPE_INT32,
     source_input: [TOKENS]}
  - {kind: BATCH_ITEM_SHAPE_FLATTEN, target_name: LENGTHS, data_type: TYPE_FP32,
     source_input: TOKENS}
batch_output:
  - {target_name: [PER_TOKEN], source_input: [TOKENS]}
dynamic_batching: {}
)";

constexpr char kPbtxt[] = R"(name: "tokens"
max_batch_size: 16
input [
  { name: "TOKENS" data_type: TYPE_INT64 dims: [ -1 ] allow_ragged_batch: true },
  { name: "SCALE" data_type: TYPE_FP32 dims: [ 1 ] }
]
output [
  { name: "POOLED" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "PER_TOKEN" data_type: TYPE_FP32 dims: [ -1, 4 ] }
]
batch_input [
  {
    kind: BATCH_ACCUMULATED_ELEMENT_COUNT
    target_name: "ENDS"
    target_name: "ENDS_AGAIN"
    data_type: TYPE_INT32
    source_input: "TOKENS"
  },
  { kind: BATCH_ITEM_SHAPE_FLATTEN target_name: "LENGTHS" data_type: TYPE_FP32
    source_input: "TOKENS" }
]
batch_output [ { target_name: "PER_TOKEN" kind: BATCH_SCATTER_WITH_INPUT_SHAPE
                 source_input: "TOKENS" } ]
dynamic_batching { }
)";

void ExpectTheTokenModel(const ModelConfig& c) {
  EXPECT_TRUE(c.ragged_batching());
  ASSERT_EQ(c.inputs.size(), 2u);
  EXPECT_TRUE(c.inputs[0].allow_ragged_batch);
  EXPECT_FALSE(c.inputs[1].allow_ragged_batch);
  ASSERT_EQ(c.batch_inputs.size(), 2u);
  EXPECT_EQ(c.batch_inputs[0].kind, BatchInputConfig::Kind::kAccumulatedElementCount);
  EXPECT_THAT(c.batch_inputs[0].target_names, ElementsAre("ENDS", "ENDS_AGAIN"));
  EXPECT_EQ(c.batch_inputs[0].data_type, DataType::kInt32);
  EXPECT_EQ(c.batch_inputs[0].source_input, "TOKENS");
  EXPECT_EQ(c.batch_inputs[1].kind, BatchInputConfig::Kind::kItemShapeFlatten);
  EXPECT_THAT(c.batch_inputs[1].target_names, ElementsAre("LENGTHS"));
  EXPECT_EQ(c.batch_inputs[1].data_type, DataType::kFp32);
  ASSERT_EQ(c.batch_outputs.size(), 1u);
  EXPECT_THAT(c.batch_outputs[0].target_names, ElementsAre("PER_TOKEN"));
  EXPECT_EQ(c.batch_outputs[0].source_input, "TOKENS");
  EXPECT_TRUE(IsBatchOutput(c, "PER_TOKEN"));
  EXPECT_FALSE(IsBatchOutput(c, "POOLED"));
  EXPECT_EQ(BatchInputKindName(c.batch_inputs[1].kind), "BATCH_ITEM_SHAPE_FLATTEN");
}

TEST(RaggedConfigTest, YamlAndPbtxtReadTheSame) {
  StatusOr<ModelConfig> yaml = ParseModelConfig(kYaml, "tokens/config.yaml", "tokens");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  ExpectTheTokenModel(*yaml);
  StatusOr<ModelConfig> pbtxt = ParseTritonModelConfig(kPbtxt, "tokens/config.pbtxt", "tokens");
  ASSERT_TRUE(pbtxt.ok()) << pbtxt.status();
  ExpectTheTokenModel(*pbtxt);
  EXPECT_TRUE(pbtxt->notes.empty());
}

TEST(RaggedConfigTest, ARaggedInputAloneNeedsNoBatchInputs) {
  StatusOr<ModelConfig> c = ParseModelConfig(R"(name: m
input: [{name: X, data_type: TYPE_FP32, dims: [-1], allow_ragged_batch: true}]
output: [{name: Y, data_type: TYPE_FP32, dims: [1]}]
)",
                                             "m/config.yaml", "m");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->ragged_batching());
  EXPECT_TRUE(c->batch_inputs.empty());
}

TEST(RaggedConfigTest, APlainConfigHasNoRaggedBatching) {
  StatusOr<ModelConfig> c = ParseModelConfig(R"(name: m
max_batch_size: 4
input: [{name: X, data_type: TYPE_FP32, dims: [3]}]
output: [{name: Y, data_type: TYPE_FP32, dims: [1]}]
)",
                                             "m/config.yaml", "m");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->ragged_batching());
}

// The YAML with `from` replaced by `to` must fail naming `needle`.
void ExpectYamlError(const std::string& from, const std::string& to, const std::string& needle) {
  std::string text = kYaml;
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  StatusOr<ModelConfig> c = ParseModelConfig(text, "tokens/config.yaml", "tokens");
  ASSERT_FALSE(c.ok()) << "accepted: " << to;
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(needle)) << to;
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("tokens/config.yaml:"));
}

TEST(RaggedConfigTest, BadBatchInputsAreRefusedByName) {
  ExpectYamlError("kind: BATCH_ACCUMULATED_ELEMENT_COUNT, ", "",
                  "batch_input[0].kind: required key is missing");
  ExpectYamlError("BATCH_ACCUMULATED_ELEMENT_COUNT", "BATCH_TOKEN_COUNT",
                  "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO");
  ExpectYamlError("[ENDS, ENDS_AGAIN]", "[ENDS, ENDS]", "'ENDS' is listed twice");
  ExpectYamlError("[ENDS, ENDS_AGAIN]", "[ENDS, SCALE]", "'SCALE' is a config input");
  ExpectYamlError("target_name: LENGTHS", "target_name: ENDS",
                  "'ENDS' is the target of an earlier batch_input");
  ExpectYamlError("[ENDS, ENDS_AGAIN]", "[]", "batch_input[0].target_name: must name at least");
  ExpectYamlError("data_type: TYPE_INT32", "data_type: TYPE_UINT8",
                  "batch_input[0].data_type: a batch input is TYPE_INT32, TYPE_INT64 or TYPE_FP32");
  ExpectYamlError("source_input: [TOKENS]}", "source_input: [TOKENS, SCALE]}",
                  "batch_input[0].source_input: takes exactly one input, got 2");
  ExpectYamlError("source_input: TOKENS", "source_input: WORDS",
                  "batch_input[1].source_input: 'WORDS' is not an input of the config");
}

TEST(RaggedConfigTest, BadBatchOutputsAreRefusedByName) {
  ExpectYamlError("target_name: [PER_TOKEN]", "target_name: [PER_WORD]",
                  "batch_output[0].target_name: 'PER_WORD' is not an output of the config");
  ExpectYamlError("target_name: [PER_TOKEN]", "kind: BATCH_GATHER, target_name: [PER_TOKEN]",
                  "BATCH_SCATTER_WITH_INPUT_SHAPE");
  // TOKENS is [batch, n]: a -1 at PER_TOKEN's second dim has no dim of TOKENS to come from.
  ExpectYamlError("dims: [-1, 4]", "dims: [4, -1]", "past the rank of its source input 'TOKENS'");
  ExpectYamlError("{name: PER_TOKEN, data_type: TYPE_FP32",
                  "{name: PER_TOKEN, data_type: TYPE_STRING", "'PER_TOKEN' is TYPE_STRING");
  ExpectYamlError("dims: [-1, 4]}", "dims: [-1, 4], reshape: {shape: [-1, 2, 2]}}",
                  "'PER_TOKEN' has a reshape");
  ExpectYamlError("batch_output:\n  - {target_name: [PER_TOKEN], source_input: [TOKENS]}",
                  "batch_output:\n  - {target_name: [PER_TOKEN], source_input: [TOKENS]}\n"
                  "  - {target_name: [PER_TOKEN], source_input: [TOKENS]}",
                  "'PER_TOKEN' is the target of an earlier batch_output");
}

TEST(RaggedConfigTest, RaggedBatchingNeedsBatchesAndListedTensors) {
  std::string unbatched = kYaml;
  unbatched.replace(unbatched.find("dynamic_batching: {}"), 20, "");
  unbatched.replace(unbatched.find("max_batch_size: 16"), 18, "max_batch_size: 0");
  StatusOr<ModelConfig> c = ParseModelConfig(unbatched, "tokens/config.yaml", "tokens");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("tokens/config.yaml:9: batch_input: batch inputs and outputs describe a "
                        "batch: they need max_batch_size > 0"));
  ExpectYamlError("dims: [-1], allow_ragged_batch: true}",
                  "dims: [-1], allow_ragged_batch: true, reshape: {shape: [-1]}}",
                  "input[0].allow_ragged_batch: a ragged input cannot have a reshape");
  ExpectYamlError("dynamic_batching: {}", "sequence_batching: {}",
                  "ragged batching with sequence_batching");
  StatusOr<ModelConfig> completed = ParseModelConfig(R"(name: m
max_batch_size: 4
batch_input: [{kind: BATCH_ELEMENT_COUNT, target_name: N, data_type: TYPE_INT32, source_input: X}]
)",
                                                     "m/config.yaml", "m");
  ASSERT_FALSE(completed.ok());
  EXPECT_THAT(std::string(completed.status().message()),
              HasSubstr("the config must list its inputs and outputs"));
  StatusOr<ModelConfig> ensemble = ParseModelConfig(R"(name: e
platform: ensemble
max_batch_size: 4
input: [{name: X, data_type: TYPE_FP32, dims: [-1], allow_ragged_batch: true}]
output: [{name: Y, data_type: TYPE_FP32, dims: [1]}]
ensemble_scheduling: {step: [{model_name: m, input_map: {X: X}, output_map: {Y: Y}}]}
)",
                                                    "e/config.yaml", "e");
  ASSERT_FALSE(ensemble.ok());
  EXPECT_THAT(std::string(ensemble.status().message()), HasSubstr("an ensemble has none"));
}

TEST(RaggedConfigTest, PbtxtErrorsNameThePbtxtLine) {
  std::string text = kPbtxt;
  text.replace(text.find("source_input: \"TOKENS\" }"), 24, "source_input: \"WORDS\" }");
  StatusOr<ModelConfig> c = ParseTritonModelConfig(text, "tokens/config.pbtxt", "tokens");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("tokens/config.pbtxt:20: batch_input[1].source_input: 'WORDS' is not"));
}

}  // namespace
}  // namespace tessera::repository
