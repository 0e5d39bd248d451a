// A stateful model's sequence_batching, in config.yaml and config.pbtxt alike: what it reads, what
// it refuses (with the line and the key), and what config completion leaves to the server.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tessera/repository/model_completion.h"
#include "tessera/repository/model_config.h"

namespace tessera::repository {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kYaml[] = R"(name: acc
max_batch_size: 8
input: [{name: INPUT, data_type: TYPE_FP32, dims: [1]}]
output: [{name: OUTPUT, data_type: TYPE_FP32, dims: [1]}]
sequence_batching:
  max_sequence_idle_microseconds: 250000
  oldest: {max_candidate_sequences: 4, preferred_batch_size: [4], max_queue_delay_microseconds: 100}
  control_input:
    - name: START
      control: [{kind: CONTROL_SEQUENCE_START, int32_false_true: [0, 1]}]
    - name: READY
      control: [{kind: CONTROL_SEQUENCE_READY, fp32_false_true: [-1, 2.5]}]
    - name: END
      control: [{kind: CONTROL_SEQUENCE_END, bool_false_true: [false, true]}]
    - name: CORRID
      control: [{kind: CONTROL_SEQUENCE_CORRID, data_type: TYPE_UINT64}]
  state:
    - input_name: STATE_IN
      output_name: STATE_OUT
      data_type: TYPE_FP32
      dims: [2, 3]
      initial_state: [{data_type: TYPE_FP32, dims: [2, 3], zero_data: true}]
)";

// The same, as Triton's documentation writes it.
constexpr char kPbtxt[] = R"(name: "acc"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 250000
  oldest { max_candidate_sequences: 4 preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 100 }
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY fp32_false_true: [ -1, 2.5 ] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END bool_false_true: [ false, true ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
  state [ {
    input_name: "STATE_IN"
    output_name: "STATE_OUT"
    data_type: TYPE_FP32
    dims: [ 2, 3 ]
    initial_state [ { data_type: TYPE_FP32 dims: [ 2, 3 ] zero_data: true name: "zeros" } ]
  } ]
}
)";

void ExpectTheAccumulator(const ModelConfig& c) {
  const SequenceBatchingConfig& s = c.sequence_batching;
  EXPECT_TRUE(s.enabled);
  EXPECT_TRUE(s.oldest);
  EXPECT_FALSE(c.dynamic_batching.enabled);
  EXPECT_EQ(s.max_sequence_idle_microseconds, 250000u);
  EXPECT_EQ(s.max_queue_delay_microseconds, 100u);
  EXPECT_THAT(s.preferred_batch_sizes, ElementsAre(4));
  EXPECT_EQ(s.max_candidate_sequences, 4);
  ASSERT_EQ(s.controls.size(), 4u);
  EXPECT_EQ(s.controls[0].kind, SequenceControl::Kind::kStart);
  EXPECT_EQ(s.controls[0].data_type, DataType::kInt32);
  EXPECT_EQ(s.controls[1].kind, SequenceControl::Kind::kReady);
  EXPECT_EQ(s.controls[1].data_type, DataType::kFp32);
  EXPECT_EQ(s.controls[1].false_value, -1);
  EXPECT_EQ(s.controls[1].true_value, 2.5);
  EXPECT_EQ(s.controls[2].kind, SequenceControl::Kind::kEnd);
  EXPECT_EQ(s.controls[2].data_type, DataType::kBool);
  EXPECT_EQ(s.controls[3].kind, SequenceControl::Kind::kCorrelationId);
  EXPECT_EQ(s.controls[3].data_type, DataType::kUint64);
  ASSERT_EQ(s.states.size(), 1u);
  EXPECT_EQ(s.states[0].input_name, "STATE_IN");
  EXPECT_EQ(s.states[0].output_name, "STATE_OUT");
  EXPECT_THAT(s.states[0].dims, ElementsAre(2, 3));

  // The model file takes the client's input, the controls and the state; gives the state back.
  std::vector<std::string> inputs, outputs;
  for (const TensorConfig& t : ModelFileInputs(c)) inputs.push_back(t.name);
  for (const TensorConfig& t : ModelFileOutputs(c)) outputs.push_back(t.name);
  EXPECT_THAT(inputs, ElementsAre("INPUT", "START", "READY", "END", "CORRID", "STATE_IN"));
  EXPECT_THAT(outputs, ElementsAre("OUTPUT", "STATE_OUT"));
  EXPECT_EQ(ModelFileInputCount(c), 6u);
  EXPECT_EQ(ModelFileInputs(c)[1].dims, Shape{1});
}

TEST(SequenceConfigTest, YamlAndPbtxtReadTheSame) {
  StatusOr<ModelConfig> yaml = ParseModelConfig(kYaml, "acc/config.yaml", "acc");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  ExpectTheAccumulator(*yaml);
  StatusOr<ModelConfig> pbtxt = ParseTritonModelConfig(kPbtxt, "acc/config.pbtxt", "acc");
  ASSERT_TRUE(pbtxt.ok()) << pbtxt.status();
  ExpectTheAccumulator(*pbtxt);
}

TEST(SequenceConfigTest, StringCorrelationIdsAreBytesControls) {
  std::string text = kYaml;
  text.replace(text.find("TYPE_UINT64"), 11, "TYPE_STRING");
  StatusOr<ModelConfig> c = ParseModelConfig(text, "acc/config.yaml", "acc");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sequence_batching.controls[3].data_type, DataType::kString);
  EXPECT_EQ(ModelFileInputs(*c)[4].data_type, DataType::kString);  // what the model file declares
}

TEST(SequenceConfigTest, DefaultsAreTritons) {
  StatusOr<ModelConfig> c = ParseTritonModelConfig(
      "name: \"s\"\nmax_batch_size: 2\nsequence_batching { }\n", "s/config.pbtxt", "s");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->sequence_batching.enabled);
  EXPECT_FALSE(c->sequence_batching.oldest);  // direct
  EXPECT_EQ(c->sequence_batching.max_sequence_idle_microseconds, 1'000'000u);
  EXPECT_TRUE(c->sequence_batching.controls.empty());
}

// The YAML with `from` replaced by `to` must fail naming `needle`.
void ExpectYamlError(const std::string& from, const std::string& to, const std::string& needle) {
  std::string text = kYaml;
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  StatusOr<ModelConfig> c = ParseModelConfig(text, "acc/config.yaml", "acc");
  ASSERT_FALSE(c.ok()) << "accepted: " << to;
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(needle)) << to;
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("acc/config.yaml:"));
}

TEST(SequenceConfigTest, AnInitialStateMayComeFromAFile) {
  std::string text = kYaml;
  const std::string from = "zero_data: true";
  text.replace(text.find(from), from.size(), "data_file: init.bin");
  StatusOr<ModelConfig> c = ParseModelConfig(text, "acc/config.yaml", "acc");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sequence_batching.states[0].initial_data_file, "init.bin");
  EXPECT_EQ(c->sequence_batching.states[0].initial_data, nullptr);  // the repository scan reads it
}

TEST(SequenceConfigTest, RefusesWhatItCannotServe) {
  ExpectYamlError("sequence_batching:\n", "dynamic_batching: {}\nsequence_batching:\n",
                  "either dynamic_batching or sequence_batching");
  ExpectYamlError("sequence_batching:\n", "response_cache: {enable: true}\nsequence_batching:\n",
                  "response cache");
  ExpectYamlError("  oldest:", "  direct: {}\n  oldest:", "both direct and oldest");
  ExpectYamlError("max_sequence_idle_microseconds: 250000", "iterative_sequence: true",
                  "iterative sequences are not supported");
  ExpectYamlError("max_sequence_idle_microseconds: 250000", "max_sequence_idle_microseconds: 0",
                  "sequence_batching.max_sequence_idle_microseconds");
  ExpectYamlError("preferred_batch_size: [4]", "preferred_batch_size: [9]",
                  "oldest.preferred_batch_size");
  ExpectYamlError("int32_false_true: [0, 1]", "int32_false_true: [0, 1, 2]", "must hold 2 values");
  ExpectYamlError("{kind: CONTROL_SEQUENCE_START, int32_false_true: [0, 1]}",
                  "{kind: CONTROL_SEQUENCE_START}", "exactly one of int32_false_true");
  ExpectYamlError("{kind: CONTROL_SEQUENCE_START, int32_false_true: [0, 1]}",
                  "{kind: CONTROL_SEQUENCE_START, int32_false_true: [0, 1]}, {kind: "
                  "CONTROL_SEQUENCE_END, int32_false_true: [0, 1]}",
                  "exactly one control");
  ExpectYamlError("CONTROL_SEQUENCE_READY", "CONTROL_SEQUENCE_START", "a second control");
  ExpectYamlError("CONTROL_SEQUENCE_READY", "CONTROL_SEQUENCE_BEGIN", "CONTROL_SEQUENCE_START");
  ExpectYamlError("data_type: TYPE_UINT64", "data_type: TYPE_FP32",
                  "expected TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 or TYPE_STRING");
  ExpectYamlError("- name: READY", "- name: INPUT", "is also a config input");
  ExpectYamlError("- name: READY", "- name: START", "is also sequence_batching.control_input[0]");
  ExpectYamlError("output_name: STATE_OUT", "output_name: OUTPUT", "is also a config output");
  // A variable state's initial state gives every dim, and the state's fixed ones.
  ExpectYamlError("initial_state: [{data_type: TYPE_FP32, dims: [2, 3]",
                  "initial_state: [{data_type: TYPE_FP32, dims: [2, -1]",
                  "(an initial state has every dim > 0)");
  ExpectYamlError("zero_data: true", "zero_data: true, data_file: init.bin",
                  "needs exactly one of zero_data: true or data_file");
  ExpectYamlError("zero_data: true", "data_file: ../init.bin", "must be a plain file name");
  ExpectYamlError("initial_state: [{data_type: TYPE_FP32, dims: [2, 3]",
                  "initial_state: [{data_type: TYPE_FP32, dims: [3, 2]", "the state is TYPE_FP32");
  ExpectYamlError("name: acc\n", "name: acc\nplatform: ensemble\n", "an ensemble");
}

TEST(SequenceConfigTest, AVariableStateStartsAtItsInitialStateOrWithOnes) {
  auto state_of = [](const std::string& from, const std::string& to) {
    std::string text = kYaml;
    text.replace(text.find(from), from.size(), to);
    StatusOr<ModelConfig> c = ParseModelConfig(text, "acc/config.yaml", "acc");
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? c->sequence_batching.states.at(0) : SequenceState{};
  };
  // Growable memory is a hint about where the state lives: read, nothing to act on.
  SequenceState given = state_of("      dims: [2, 3]\n      initial",
                                 "      dims: [2, -1]\n      use_growable_memory: true\n"
                                 "      use_same_buffer_for_input_output: true\n      initial");
  EXPECT_EQ(given.dims, (Shape{2, -1}));
  EXPECT_EQ(StartShape(given), (Shape{2, 3}));  // the initial_state's dims
  SequenceState ones = state_of(
      "      dims: [2, 3]\n      initial_state: [{data_type: TYPE_FP32, "
      "dims: [2, 3], zero_data: true}]",
      "      dims: [-1, 3]");
  EXPECT_EQ(StartShape(ones), (Shape{1, 3}));  // Triton's rule: each -1 starts as 1
}

TEST(SequenceConfigTest, PbtxtErrorsNameThePbtxtLine) {
  std::string text = kPbtxt;
  text.replace(text.find("TYPE_UINT64"), 11, "TYPE_FP32");
  StatusOr<ModelConfig> c = ParseTritonModelConfig(text, "acc/config.pbtxt", "acc");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("acc/config.pbtxt:12: sequence_batching.control_input[3].control[0]"
                        ".data_type: expected TYPE_UINT64"));
}

TEST(SequenceConfigTest, CompletionLeavesTheServersTensorsOut) {
  StatusOr<ModelConfig> parsed = ParseModelConfig(
      "name: acc\nsequence_batching:\n  control_input: [{name: START, control: [{kind: "
      "CONTROL_SEQUENCE_START, int32_false_true: [0, 1]}]}]\n  state: [{input_name: S_IN, "
      "output_name: S_OUT, data_type: TYPE_FP32, dims: [1]}]\n",
      "acc/config.yaml", "acc");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  OnnxSignature signature;
  signature.inputs = {{"x", DataType::kFp32, {-1, 1}},
                      {"START", DataType::kInt32, {-1, 1}},
                      {"S_IN", DataType::kFp32, {-1, 1}}};
  signature.outputs = {{"y", DataType::kFp32, {-1, 1}}, {"S_OUT", DataType::kFp32, {-1, 1}}};
  StatusOr<ModelConfig> c = CompleteFromSignature(*parsed, signature, "acc.onnx");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->inputs.size(), 1u);
  EXPECT_EQ(c->inputs[0].name, "x");
  ASSERT_EQ(c->outputs.size(), 1u);
  EXPECT_EQ(c->outputs[0].name, "y");
  EXPECT_GT(c->max_batch_size, 0);
  EXPECT_FALSE(c->dynamic_batching.enabled);  // the sequence batcher batches it
}

}  // namespace
}  // namespace tessera::repository
