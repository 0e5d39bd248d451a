// Triton's config.pbtxt: the same config as config.yaml, the same checks, lines of the .pbtxt in
// every message, Triton fields refused or noted.
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tessera/repository/model_config.h"

namespace tessera::repository {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::SizeIs;
using ::testing::StartsWith;

constexpr char kSource[] = "models/mlp/config.pbtxt";

// What model_config_test's kFullConfig says, written the way Triton's documentation writes it.
// Line numbers in the tests below count from this text's first line.
constexpr char kFullPbtxt[] = R"(name: "mlp"
platform: "onnxruntime_onnx"
max_batch_size: 8
version_policy: { specific: { versions: [1, 3] } }
input [
  {
    name: "input"
    data_type: TYPE_FP32
    dims: [ 64 ]
  },
  {
    name: "mask"
    data_type: TYPE_INT64
    dims: [ -1, 4 ]
  }
]
output [
  {
    name: "output"
    data_type: TYPE_FP16
    dims: [ 10 ]
  }
]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 2000
  default_queue_policy { max_queue_size: 100 default_timeout_microseconds: 7000 allow_timeout_override: true }
  priority_levels: 2
  default_priority_level: 1
}
instance_group [
  { count: 2, kind: KIND_GPU, gpus: [ 0, 1 ] },
  { name: "cpu", kind: KIND_CPU }
]
default_model_filename: "mlp.onnx"
parameters { key: "slo_ms" value { string_value: "12.5" } }
parameters: { key: "precision", value: { string_value: "bf16" } }
)";

// A minimal valid config, then `extra` (from line 5 on).
std::string Minimal(const std::string& extra) {
  return R"(name: "mlp"
max_batch_size: 8
input { name: "input" data_type: TYPE_FP32 dims: [ 64 ] }
output { name: "output" data_type: TYPE_FP32 dims: [ 10 ] }
)" + extra;
}

std::string ErrorOf(const std::string& pbtxt) {
  StatusOr<ModelConfig> c = ParseTritonModelConfig(pbtxt, kSource, "mlp");
  EXPECT_FALSE(c.ok()) << "parsed:\n" << pbtxt;
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(TritonConfigTest, ReadsEveryFieldTesseraActsOn) {
  StatusOr<ModelConfig> c = ParseTritonModelConfig(kFullPbtxt, kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "mlp");
  EXPECT_EQ(c->platform, "onnx");
  EXPECT_EQ(c->max_batch_size, 8);
  EXPECT_EQ(c->version_policy.kind, VersionPolicy::Kind::kSpecific);
  EXPECT_THAT(c->version_policy.specific_versions, ElementsAre(1, 3));
  ASSERT_THAT(c->inputs, SizeIs(2));
  EXPECT_EQ(c->inputs[0].name, "input");
  EXPECT_EQ(c->inputs[0].data_type, DataType::kFp32);
  EXPECT_THAT(c->inputs[0].dims, ElementsAre(64));
  EXPECT_EQ(c->inputs[1].data_type, DataType::kInt64);
  EXPECT_THAT(c->inputs[1].dims, ElementsAre(-1, 4));
  ASSERT_THAT(c->outputs, SizeIs(1));
  EXPECT_EQ(c->outputs[0].data_type, DataType::kFp16);
  EXPECT_TRUE(c->dynamic_batching.enabled);
  EXPECT_THAT(c->dynamic_batching.preferred_batch_sizes, ElementsAre(4, 8));
  EXPECT_EQ(c->dynamic_batching.max_queue_delay_microseconds, 2000u);
  EXPECT_EQ(c->dynamic_batching.default_queue_policy.max_queue_size, 100u);
  EXPECT_EQ(c->dynamic_batching.default_queue_policy.default_timeout_microseconds, 7000u);
  EXPECT_TRUE(c->dynamic_batching.default_queue_policy.allow_timeout_override);
  EXPECT_FALSE(c->dynamic_batching.default_queue_policy.timeout_delays);
  EXPECT_EQ(c->dynamic_batching.priority_levels, 2u);
  EXPECT_EQ(c->dynamic_batching.default_priority_level, 1u);
  ASSERT_THAT(c->instance_groups, SizeIs(2));
  EXPECT_EQ(c->instance_groups[0].count, 2);
  EXPECT_EQ(c->instance_groups[0].kind, InstanceKind::kGpu);
  EXPECT_THAT(c->instance_groups[0].gpus, ElementsAre(0, 1));
  EXPECT_EQ(c->instance_groups[1].name, "cpu");
  EXPECT_EQ(c->instance_groups[1].count, 1);  // Triton's default when count is left out
  EXPECT_EQ(c->instance_groups[1].kind, InstanceKind::kCpu);
  EXPECT_EQ(c->default_model_filename, "mlp.onnx");
  EXPECT_DOUBLE_EQ(c->slo_ms, 12.5);
  EXPECT_EQ(c->precision, "bf16");
  EXPECT_THAT(c->notes, IsEmpty());
}

TEST(TritonConfigTest, DefaultsMatchTheYamlReader) {
  StatusOr<ModelConfig> c = ParseTritonModelConfig(Minimal(""), kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->platform, "onnx");
  EXPECT_FALSE(c->dynamic_batching.enabled);
  EXPECT_EQ(c->version_policy.kind, VersionPolicy::Kind::kLatest);
  EXPECT_EQ(c->version_policy.latest_num_versions, 1);
  EXPECT_EQ(c->default_model_filename, "model.onnx");

  // `dynamic_batching {}` turns batching on with no delay, as in Triton.
  c = ParseTritonModelConfig(Minimal("dynamic_batching {}\nversion_policy { latest {} }\n"),
                             kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->dynamic_batching.enabled);
  EXPECT_EQ(c->dynamic_batching.max_queue_delay_microseconds, 0u);
  EXPECT_EQ(c->version_policy.latest_num_versions, 1);

  // Inputs and outputs left out are completed from the model file at load (model_completion.h).
  c = ParseTritonModelConfig("max_batch_size: 8\ndynamic_batching {}\n", kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->inputs.empty());
  EXPECT_TRUE(c->outputs.empty());
  EXPECT_EQ(c->max_batch_size, 8);

  // An output's label_filename is kept (the classification extension uses it).
  c = ParseTritonModelConfig(
      "input { name: \"x\" data_type: TYPE_FP32 dims: 4 }\n"
      "output { name: \"y\" data_type: TYPE_FP32 dims: 4 label_filename: \"labels.txt\" }\n",
      kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->outputs[0].label_filename, "labels.txt");
  EXPECT_THAT(c->notes, IsEmpty());

  // The name comes from the folder when the file leaves it out.
  c = ParseTritonModelConfig(
      "input { name: \"x\" data_type: TYPE_FP32 dims: 4 }\n"
      "output { name: \"y\" data_type: TYPE_FP32 dims: 4 }\n",
      kSource, "folder_name");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "folder_name");
}

TEST(TritonConfigTest, TesseraKeysComeFromParameters) {
  StatusOr<ModelConfig> c = ParseTritonModelConfig(
      Minimal("dynamic_batching {}\n"
              "parameters { key: \"worker_batch_sizes\" value { string_value: \"1, 2,4\" } }\n"),
      kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->worker_batch_sizes, ElementsAre(1, 2, 4));

  EXPECT_EQ(ErrorOf(Minimal("dynamic_batching {}\n"
                            "parameters { key: \"worker_batch_sizes\" value { string_value: "
                            "\"1, 3\" } }\n")),
            "models/mlp/config.pbtxt:6: worker_batch_sizes[1]: must be a power of two, got 3");
  EXPECT_EQ(
      ErrorOf(Minimal("\n\nparameters { key: \"slo_ms\" value { string_value: \"soon\" } }\n")),
      "models/mlp/config.pbtxt:7: slo_ms: expected a number, got \"soon\"");
  // A value is text, never YAML: it cannot add keys.
  EXPECT_THAT(ErrorOf(Minimal("parameters { key: \"precision\" value { string_value: "
                              "\"fp16\\nname: other\" } }\n")),
              HasSubstr("models/mlp/config.pbtxt:5: precision: expected one of fp32, fp16, bf16"));
}

TEST(TritonConfigTest, ChecksAreTheYamlReadersWithPbtxtLines) {
  // dims: 0 on line 6.
  EXPECT_EQ(ErrorOf(Minimal("input {\n  name: \"mask\"\n  data_type: TYPE_INT64\n  dims: [ 4, 0 ]\n"
                            "}\n")),
            "models/mlp/config.pbtxt:8: input[1].dims[1]: must be > 0, or -1 for a variable "
            "size, got 0");
  EXPECT_EQ(ErrorOf(Minimal("input { name: \"input\" data_type: TYPE_FP32 dims: 2 }\n")),
            "models/mlp/config.pbtxt:5: input[1].name: duplicate tensor name \"input\" (also "
            "input[0] at line 3)");
  EXPECT_THAT(ErrorOf(Minimal("output {\n  name: \"y\"\n  dims: 3\n}\n")),
              HasSubstr("models/mlp/config.pbtxt:6: output[1].data_type: required key is missing"));
  EXPECT_EQ(ErrorOf("name: \"other\"\n"),
            "models/mlp/config.pbtxt:1: name: \"other\" does not match the model folder \"mlp\"");
  EXPECT_EQ(ErrorOf(Minimal("\nbackend: \"pytorch\"\n")),
            "models/mlp/config.pbtxt:6: backend: expected onnxruntime or tessera, got \"pytorch\"");
  EXPECT_THAT(ErrorOf(Minimal("instance_group { kind: KIND_MODEL }\n")),
              HasSubstr("models/mlp/config.pbtxt:5: instance_group[0].kind: expected one of "
                        "KIND_AUTO, KIND_GPU, KIND_CPU, got \"KIND_MODEL\""));
  EXPECT_EQ(ErrorOf("name: \"mlp\"\nmax_batch_size: -2\n"),
            "models/mlp/config.pbtxt:2: max_batch_size: must be >= 0, got -2");
}

TEST(TritonConfigTest, SyntaxErrorsAndMisspeltFieldsNameLineAndColumn) {
  EXPECT_THAT(ErrorOf(Minimal("dynamic_batching { max_queue_delay_microseconds: soon }\n")),
              HasSubstr("models/mlp/config.pbtxt:5:50: Expected integer"));
  EXPECT_THAT(ErrorOf(Minimal("input { name: \"x\" dimz: [ 2 ] }\n")),
              HasSubstr("models/mlp/config.pbtxt:5:"));
  EXPECT_THAT(ErrorOf(Minimal("input { name: \"x\" dimz: [ 2 ] }\n")),
              HasSubstr("has no field named \"dimz\""));
  EXPECT_THAT(ErrorOf(Minimal("\ninstance_group { kind: KIND_TPU }\n")),
              HasSubstr("models/mlp/config.pbtxt:6:"));
  EXPECT_THAT(ErrorOf("name: \"mlp\"\ninput {\n"), HasSubstr("models/mlp/config.pbtxt:3:"));
}

TEST(TritonConfigTest, ReshapeIsReadWithTheSameChecks) {
  StatusOr<ModelConfig> c = ParseTritonModelConfig(
      Minimal("input {\n  name: \"img\"\n  data_type: TYPE_FP32\n  dims: [ 4 ]\n"
              "  reshape { shape: [ 2, 2 ] }\n}\n"
              "output { name: \"s\" data_type: TYPE_FP32 dims: [ 1 ] reshape: { shape: [ ] } }\n"),
      kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->inputs.size(), 2u);
  EXPECT_EQ(c->inputs[1].reshape, (Shape{2, 2}));
  EXPECT_FALSE(c->inputs[0].reshape.has_value());
  ASSERT_EQ(c->outputs.size(), 2u);
  EXPECT_EQ(c->outputs[1].reshape, Shape{});
  EXPECT_EQ(ErrorOf(Minimal("input {\n  name: \"img\"\n  data_type: TYPE_FP32\n  dims: [ 4 ]\n"
                            "  reshape { shape: [ 2, 3 ] }\n}\n")),
            "models/mlp/config.pbtxt:9: input[1].reshape: [2, 3] has 6 elements, dims [4] has 4");
}

TEST(TritonConfigTest, EnsembleSchedulingIsReadWithTheSameChecks) {
  const std::string ensemble = R"(name: "mlp"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "b"
      input_map { key: "x" value: "MID" }
      output_map { key: "y" value: "OUT" }
    },
    {
      model_name: "a"
      model_version: 2
      input_map [ { key: "x" value: "IN" }, { key: "w" value: "IN" } ]
      output_map { key: "y" value: "MID" }
    }
  ]
}
)";
  StatusOr<ModelConfig> c = ParseTritonModelConfig(ensemble, kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->is_ensemble());
  ASSERT_EQ(c->ensemble_steps.size(), 2u);
  EXPECT_EQ(c->ensemble_steps[0].model_name, "b");
  EXPECT_EQ(c->ensemble_steps[0].model_version, -1);  // left out: the latest
  EXPECT_EQ(c->ensemble_steps[1].model_version, 2);
  using Map = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(c->ensemble_steps[1].input_map, (Map{{"w", "IN"}, {"x", "IN"}}));  // sorted
  EXPECT_EQ(c->ensemble_steps[1].output_map, (Map{{"y", "MID"}}));

  std::string dangling = ensemble;
  dangling.replace(dangling.find("value: \"MID\" }\n      output_map { key: \"y\" value: \"OUT"),
                   12, "value: \"NOPE\"");
  EXPECT_EQ(ErrorOf(dangling),
            "models/mlp/config.pbtxt:6: ensemble_scheduling: step[0] (b) reads tensor 'NOPE' into "
            "its input 'x', but no ensemble input or step output is called that");
  EXPECT_EQ(ErrorOf("name: \"mlp\"\nplatform: \"ensemble\"\nensemble_scheduling { step [ { "
                    "model_name: \"a\" } ] }\n"),
            "models/mlp/config.pbtxt:2: input: an ensemble has no model file to complete it from: "
            "list its inputs and outputs");
  EXPECT_THAT(ErrorOf(Minimal("ensemble_scheduling { step [ { model_name: \"a\" } ] }\n")),
              HasSubstr("config.pbtxt:5: ensemble_scheduling: needs platform: ensemble"));
}

TEST(TritonConfigTest, RefusesWhatWouldChangeTheAnswers) {
  EXPECT_EQ(ErrorOf(Minimal("\nsequence_batching { direct { } iterative_sequence: true }\n")),
            "models/mlp/config.pbtxt:6: sequence_batching.iterative_sequence: iterative sequences "
            "are not supported");
  // Optional inputs are read (optional_input_config_test.cc).
  EXPECT_THAT(ErrorOf(Minimal("model_transaction_policy { decoupled: true }\n")),
              HasSubstr("models/mlp/config.pbtxt:5: model_transaction_policy: decoupled models"));
  // Ragged batching is read (ragged_config_test.cc), with the same checks as config.yaml.
  EXPECT_THAT(ErrorOf(Minimal("batch_input [ { kind: BATCH_ELEMENT_COUNT } ]\n")),
              HasSubstr("models/mlp/config.pbtxt:5: batch_input[0].target_name: required key"));
}

TEST(TritonConfigTest, ModelWarmupIsRead) {
  StatusOr<ModelConfig> c = ParseTritonModelConfig(
      Minimal("model_warmup [ { name: \"w\" batch_size: 2 count: 3 inputs { key: \"input\" "
              "value { data_type: TYPE_FP32 dims: [ 64 ] random_data: true } } } ]\n"),
      kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->notes.empty());
  ASSERT_EQ(c->model_warmup.size(), 1u);
  EXPECT_EQ(c->model_warmup[0].name, "w");
  EXPECT_EQ(c->model_warmup[0].batch_size, 2);
  EXPECT_EQ(c->model_warmup[0].count, 3);
  ASSERT_EQ(c->model_warmup[0].inputs.size(), 1u);
  EXPECT_EQ(c->model_warmup[0].inputs[0].dims, (Shape{64}));
  EXPECT_TRUE(c->model_warmup[0].inputs[0].random_data);
  // Warm-up data from a file, as Triton reads it (from the model's warmup/ folder).
  StatusOr<ModelConfig> from_file = ParseTritonModelConfig(
      Minimal("model_warmup [ { batch_size: 1 inputs { key: \"input\" value { "
              "data_type: TYPE_FP32 dims: [ 64 ] input_data_file: \"raw\" } } } ]\n"),
      kSource, "mlp");
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->model_warmup[0].inputs[0].input_data_file, "raw");
  EXPECT_THAT(
      ErrorOf(Minimal("model_warmup [ { batch_size: 1 inputs { key: \"input\" value { "
                      "data_type: TYPE_FP32 dims: [ 64 ] input_data_file: \"a/raw\" } } } ]\n")),
      AllOf(HasSubstr("models/mlp/config.pbtxt:5:"), HasSubstr("input_data_file"),
            HasSubstr("must be a plain file name")));
}

TEST(TritonConfigTest, MetricTagsAreRead) {
  StatusOr<ModelConfig> c = ParseTritonModelConfig(
      Minimal("metric_tags { key: \"team\" value: \"vision\" }\n"
              "metric_tags { key: \"app\" value: \"a \\\"quoted\\\" name\" }\n"),
      kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->metric_tags,
              ElementsAre(Pair("app", "a \"quoted\" name"), Pair("team", "vision")));
  EXPECT_THAT(c->notes, IsEmpty());  // read, no longer a hint
  EXPECT_THAT(
      ErrorOf(Minimal("metric_tags { key: \"my-team\" value: \"x\" }\n")),
      AllOf(HasSubstr("models/mlp/config.pbtxt:5:"), HasSubstr("'my-team' cannot be a tag")));
}

TEST(TritonConfigTest, IgnoredHintsAreNotedWithTheirLines) {
  StatusOr<ModelConfig> c = ParseTritonModelConfig(
      Minimal("optimization { execution_accelerators { gpu_execution_accelerator [ { name: "
              "\"tensorrt\" } ] } cuda { graphs: true } }\n"
              "model_operations { op_library_filename: [ \"a.so\" ] }\n"
              "response_cache { enable: true }\n"
              "parameters { key: \"intra_op_thread_count\" value { string_value: \"2\" } }\n"
              "instance_group { kind: KIND_GPU secondary_devices [ { kind: KIND_NVDLA } ] }\n"),
      kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_THAT(c->notes, SizeIs(4));
  EXPECT_THAT(c->notes[0], HasSubstr("models/mlp/config.pbtxt:5: optimization: ignored ("));
  EXPECT_THAT(c->notes[1], HasSubstr("models/mlp/config.pbtxt:6: model_operations: ignored ("));
  EXPECT_THAT(c->notes[2], HasSubstr("models/mlp/config.pbtxt:9: instance_group[0]: ignored ("));
  EXPECT_THAT(c->notes[3],
              HasSubstr("models/mlp/config.pbtxt:8: parameters[\"intra_op_thread_count\"]: "
                        "ignored (not a Tessera parameter"));
  EXPECT_TRUE(c->response_cache);  // read, not a hint
  // A skipped block keeps the lines after it: the misspelt field is reported on line 10. Brackets
  // in strings and comments do not end a block early.
  EXPECT_THAT(ErrorOf(Minimal("optimization {\n  # a } in a comment\n  graph { level: 1 }\n}\n"
                              "batch_input [ { target_name: \"a]b}\" } ]\n"
                              "output { name: \"y\" dimz: 1 }\n")),
              HasSubstr("models/mlp/config.pbtxt:10:"));
  // A block whose bracket opens on the next line, in any bracket style, with or without a colon.
  EXPECT_THAT(ErrorOf(Minimal("optimization\n<\n graph { level: 1 }\n>\nbatch_output:\n[\n]\n"
                              "batch_output:\n[ { kind: 1 } ]\noutput { dimz: 1 }\n")),
              HasSubstr("models/mlp/config.pbtxt:14:"));
  // Inside a skipped block anything goes; outside it a misspelt field is still an error.
  EXPECT_THAT(ErrorOf(Minimal("optimization { cuda { graphs: true } }\ninstance_group { "
                              "kind: KIND_GPU secondary_device [ ] }\n")),
              HasSubstr("models/mlp/config.pbtxt:6:"));
}

// Mangled configs (characters dropped, swapped or repeated) never crash or hang the reader: each is
// a config or an error naming the file.
TEST(TritonConfigTest, MangledTextNeverCrashes) {
  const std::string text = std::string(kFullPbtxt) +
                           "optimization { cuda { graphs: true } }  # a { comment\n"
                           "model_warmup [ { name: \"w}\" batch_size: 1 inputs { key: \"x\" "
                           "value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]\n";
  std::mt19937 rng(11);
  const std::string alphabet = "{}[]<>:\"'#\n ,x9";
  int errors = 0;
  for (int round = 0; round < 500; ++round) {
    std::string mangled = text;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % mangled.size();
      switch (rng() % 3) {
        case 0:
          mangled.erase(at, 1 + rng() % 8);
          break;
        case 1:
          mangled[at] = alphabet[rng() % alphabet.size()];
          break;
        default:
          mangled.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
      }
    }
    StatusOr<ModelConfig> c = ParseTritonModelConfig(mangled, kSource, "mlp");
    if (!c.ok()) {
      ++errors;
      EXPECT_THAT(std::string(c.status().message()), HasSubstr(kSource)) << mangled;
    }
  }
  EXPECT_GT(errors, 100);
}

TEST(TritonConfigTest, PriorityQueuePolicyIsRead) {
  StatusOr<ModelConfig> c = ParseTritonModelConfig(Minimal(R"(dynamic_batching {
  priority_levels: 2
  default_priority_level: 2
  priority_queue_policy { key: 1 value { max_queue_size: 3 default_timeout_microseconds: 90 } }
  priority_queue_policy { key: 2 value { timeout_action: DELAY } }
}
)"),
                                                   kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->notes, IsEmpty());
  EXPECT_EQ(c->dynamic_batching.PolicyFor(1).max_queue_size, 3u);
  EXPECT_EQ(c->dynamic_batching.PolicyFor(1).default_timeout_microseconds, 90u);
  EXPECT_TRUE(c->dynamic_batching.PolicyFor(2).timeout_delays);
  EXPECT_THAT(ErrorOf(Minimal("dynamic_batching {\n  priority_levels: 1\n"
                              "  default_priority_level: 1\n"
                              "  priority_queue_policy { key: 5 value { } }\n}\n")),
              HasSubstr("models/mlp/config.pbtxt:8: dynamic_batching.priority_queue_policy: '5' "
                        "is not a priority level"));
}

// A load request's "config": Triton's ModelConfig as JSON, through the same checks.
constexpr char kJsonSource[] = "the load request's 'config'";

TEST(TritonJsonConfigTest, ReadsWhatTheTextFormReads) {
  // Field names as protobuf prints them (int64 as strings) and as people write them.
  StatusOr<ModelConfig> c = ParseTritonJsonModelConfig(R"({
    "name": "mlp", "platform": "onnxruntime_onnx", "maxBatchSize": 8,
    "input": [{"name": "input", "data_type": "TYPE_FP32", "dims": ["64"]}],
    "output": [{"name": "output", "data_type": "TYPE_FP32", "dims": [10]}],
    "dynamic_batching": {"max_queue_delay_microseconds": "500", "preferred_batch_size": [4]},
    "instance_group": [{"count": 2, "kind": "KIND_CPU"}],
    "parameters": {"slo_ms": {"string_value": "20"}}})",
                                                       kJsonSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_batch_size, 8);
  ASSERT_THAT(c->inputs, SizeIs(1));
  EXPECT_EQ(c->inputs[0].dims, Shape({64}));
  EXPECT_EQ(c->outputs[0].dims, Shape({10}));
  EXPECT_TRUE(c->dynamic_batching.enabled);
  EXPECT_EQ(c->dynamic_batching.max_queue_delay_microseconds, 500u);
  EXPECT_THAT(c->dynamic_batching.preferred_batch_sizes, ElementsAre(4));
  ASSERT_THAT(c->instance_groups, SizeIs(1));
  EXPECT_EQ(c->instance_groups[0].count, 2);
  EXPECT_EQ(c->instance_groups[0].kind, InstanceKind::kCpu);
  EXPECT_DOUBLE_EQ(c->slo_ms, 20.0);
}

TEST(TritonJsonConfigTest, EmptyObjectIsAConfigToComplete) {
  StatusOr<ModelConfig> c = ParseTritonJsonModelConfig("{}", kJsonSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "mlp");
  EXPECT_THAT(c->inputs, IsEmpty());
}

TEST(TritonJsonConfigTest, ErrorsNameTheSourceAndFieldWithoutALine) {
  auto error = [](const std::string& json) {
    StatusOr<ModelConfig> c = ParseTritonJsonModelConfig(json, kJsonSource, "mlp");
    EXPECT_FALSE(c.ok()) << json;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << json;
    return std::string(c.status().message());
  };
  EXPECT_THAT(error("not json"), HasSubstr("the load request's 'config': not a JSON object"));
  EXPECT_THAT(error("[1, 2]"), HasSubstr("not a JSON object"));
  EXPECT_THAT(error(R"({"max_batch_sise": 8})"),
              AllOf(HasSubstr("the load request's 'config': not a ModelConfig"),
                    HasSubstr("max_batch_sise")));
  EXPECT_THAT(error(R"({"max_batch_size": "eight"})"), HasSubstr("not a ModelConfig"));
  EXPECT_EQ(error(R"({"input": [{"name": "input", "data_type": "TYPE_FP32", "dims": [0]}]})"),
            "the load request's 'config': input[0].dims[0]: must be > 0, or -1 for a variable "
            "size, got 0");
  EXPECT_THAT(error(R"({"name": "other"})"),
              AllOf(HasSubstr("the load request's 'config': name"), HasSubstr("other")));
}

TEST(TritonJsonConfigTest, WholeBlocksAreRefusedOrNotedAsInTheTextForm) {
  // Blocks whose insides Tessera's proto does not declare: still refused or noted, whatever
  // they hold.
  // batch_input is declared now: read, and checked as in the text form.
  StatusOr<ModelConfig> ragged = ParseTritonJsonModelConfig(
      R"({"batch_input": [{"kind": "BATCH_ACCUMULATED_ELEMENT_COUNT", "target_name": ["x"]}]})",
      kJsonSource, "mlp");
  ASSERT_FALSE(ragged.ok());
  EXPECT_THAT(std::string(ragged.status().message()),
              HasSubstr("the load request's 'config': batch_input: batch inputs and outputs "
                        "describe a batch"));
  StatusOr<ModelConfig> hinted = ParseTritonJsonModelConfig(
      R"({"optimization": {"execution_accelerators": {"gpu_execution_accelerator":
           [{"name": "tensorrt"}]}},
          "instanceGroup": [{"kind": "KIND_CPU", "secondaryDevices": [{"kind": "KIND_NVDLA"}]}]})",
      kJsonSource, "mlp");
  ASSERT_TRUE(hinted.ok()) << hinted.status();
  EXPECT_THAT(hinted->notes, Contains(StartsWith("the load request's 'config': optimization: "
                                                 "ignored")));
}

}  // namespace
}  // namespace tessera::repository
