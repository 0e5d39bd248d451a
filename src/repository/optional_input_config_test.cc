// Optional inputs (Triton's `optional: true`) in config.yaml and config.pbtxt alike: what is read,
// and the configs where a request without the input could not be served, refused with the line.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tessera/repository/model_config.h"

namespace tessera::repository {
namespace {

using ::testing::HasSubstr;

TEST(OptionalInputConfigTest, YamlAndPbtxtReadTheFlag) {
  StatusOr<ModelConfig> yaml = ParseModelConfig(R"(name: m
max_batch_size: 4
input:
  - {name: X, data_type: TYPE_FP32, dims: [2]}
  - {name: SCALE, data_type: TYPE_FP32, dims: [2], optional: true}
output: [{name: Y, data_type: TYPE_FP32, dims: [2]}]
)",
                                                "m/config.yaml", "m");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  StatusOr<ModelConfig> pbtxt = ParseTritonModelConfig(R"(name: "m"
max_batch_size: 4
input [
  { name: "X" data_type: TYPE_FP32 dims: [ 2 ] },
  { name: "SCALE" data_type: TYPE_FP32 dims: [ 2 ] optional: true }
]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]
)",
                                                       "m/config.pbtxt", "m");
  ASSERT_TRUE(pbtxt.ok()) << pbtxt.status();
  EXPECT_TRUE(pbtxt->notes.empty());
  for (const ModelConfig* c : {&*yaml, &*pbtxt}) {
    ASSERT_EQ(c->inputs.size(), 2u);
    EXPECT_FALSE(c->inputs[0].optional);
    EXPECT_TRUE(c->inputs[1].optional);
  }
}

std::string YamlError(const std::string& yaml) {
  StatusOr<ModelConfig> c = ParseModelConfig(yaml, "m/config.yaml", "m");
  EXPECT_FALSE(c.ok()) << "accepted:\n" << yaml;
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(OptionalInputConfigTest, ARaggedInputOrABatchInputSourceCannotBeOptional) {
  EXPECT_EQ(YamlError(R"(name: m
max_batch_size: 4
input:
  - {name: X, data_type: TYPE_FP32, dims: [-1], allow_ragged_batch: true, optional: true}
output: [{name: Y, data_type: TYPE_FP32, dims: [1]}]
)"),
            "m/config.yaml:4: input[0].optional: a ragged input cannot be optional: its batch "
            "inputs describe it");
  EXPECT_THAT(YamlError(R"(name: m
max_batch_size: 4
input:
  - {name: X, data_type: TYPE_FP32, dims: [2], optional: true}
  - {name: Z, data_type: TYPE_FP32, dims: [2]}
output: [{name: Y, data_type: TYPE_FP32, dims: [1]}]
batch_input:
  - {kind: BATCH_ELEMENT_COUNT, target_name: N, data_type: TYPE_INT32, source_input: X}
)"),
              HasSubstr("m/config.yaml:8: batch_input[0].source_input: 'X' is optional"));
}

TEST(OptionalInputConfigTest, SequenceModelsCannotHaveOptionalInputsButEnsemblesCan) {
  EXPECT_EQ(YamlError(R"(name: m
max_batch_size: 4
input:
  - {name: X, data_type: TYPE_FP32, dims: [1]}
  - {name: B, data_type: TYPE_FP32, dims: [1], optional: true}
output: [{name: Y, data_type: TYPE_FP32, dims: [1]}]
sequence_batching: {}
)"),
            "m/config.yaml:3: input[1].optional: optional inputs with sequence_batching are not "
            "supported");
  // An ensemble's may be optional: the steps that take it are checked per request.
  StatusOr<ModelConfig> ensemble = ParseModelConfig(R"(name: m
platform: ensemble
input: [{name: IN, data_type: TYPE_FP32, dims: [4], optional: true}]
output: [{name: OUT, data_type: TYPE_FP32, dims: [4]}]
ensemble_scheduling:
  step:
    - {model_name: a, input_map: {x: IN}, output_map: {y: OUT}}
)",
                                                    "m/config.yaml", "m");
  ASSERT_TRUE(ensemble.ok()) << ensemble.status();
  EXPECT_TRUE(ensemble->inputs[0].optional);
  // A pbtxt's field is refused at its own line, as the YAML's key.
  StatusOr<ModelConfig> c = ParseTritonModelConfig(R"(name: "m"
max_batch_size: 4
input [
  { name: "X" data_type: TYPE_FP32 dims: [ 1 ] },
  { name: "B" data_type: TYPE_FP32 dims: [ 1 ] optional: true }
]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
sequence_batching { }
)",
                                                   "m/config.pbtxt", "m");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              HasSubstr("input[1].optional: optional inputs with sequence_batching"));
}

TEST(OptionalInputConfigTest, TheFlagMustBeABool) {
  EXPECT_THAT(YamlError(R"(name: m
input: [{name: X, data_type: TYPE_FP32, dims: [1], optional: maybe}]
output: [{name: Y, data_type: TYPE_FP32, dims: [1]}]
)"),
              HasSubstr("m/config.yaml:2: input[0].optional"));
}

}  // namespace
}  // namespace tessera::repository
