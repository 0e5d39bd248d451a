#include "tessera/repository/model_config.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::repository {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

constexpr char kSource[] = "configs/models/mlp/config.yaml";

// Line numbers in the tests below count from this text's first line.
constexpr char kFullConfig[] = R"(name: mlp
platform: onnx
max_batch_size: 8
version_policy: { specific: { versions: [1, 3] } }
input:
  - name: input
    data_type: TYPE_FP32
    dims: [64]
  - name: mask
    data_type: TYPE_INT64
    dims: [-1, 4]
output:
  - name: output
    data_type: TYPE_FP16
    dims: [10]
dynamic_batching:
  preferred_batch_size: [4, 8]
  max_queue_delay_microseconds: 2000
  default_queue_policy: { max_queue_size: 100 }
instance_group:
  - count: 2
    kind: KIND_GPU
    gpus: [0, 1]
  - name: cpu
    kind: KIND_CPU
default_model_filename: mlp.onnx
slo_ms: 12.5
precision: bf16
)";

// Minimal valid config followed by `extra` lines (starting at line 9).
std::string Minimal(const std::string& extra) {
  return std::string(R"(name: mlp
max_batch_size: 8
input:
  - name: input
    data_type: TYPE_FP32
    dims: [64]
output:
  - { name: output, data_type: TYPE_FP32, dims: [10] }
)") + extra;
}

void ExpectError(const std::string& yaml, int line, const std::string& key,
                 const std::string& reason, const std::string& expected_name = "mlp") {
  StatusOr<ModelConfig> config = ParseModelConfig(yaml, kSource, expected_name);
  ASSERT_FALSE(config.ok()) << "parsed:\n" << yaml;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  std::string prefix = std::string(kSource) + ":" + std::to_string(line) + ": ";
  EXPECT_THAT(std::string(config.status().message()),
              AllOf(HasSubstr(prefix), HasSubstr(key), HasSubstr(reason)))
      << "yaml:\n"
      << yaml;
}

TEST(ModelConfigTest, FullConfigParses) {
  StatusOr<ModelConfig> parsed = ParseModelConfig(kFullConfig, kSource, "mlp");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const ModelConfig& c = *parsed;
  EXPECT_EQ(c.name, "mlp");
  EXPECT_EQ(c.platform, "onnx");
  EXPECT_EQ(c.max_batch_size, 8);
  EXPECT_EQ(c.version_policy.kind, VersionPolicy::Kind::kSpecific);
  EXPECT_EQ(c.version_policy.specific_versions, (std::vector<int64_t>{1, 3}));
  ASSERT_EQ(c.inputs.size(), 2u);
  EXPECT_EQ(c.inputs[0].name, "input");
  EXPECT_EQ(c.inputs[0].data_type, DataType::kFp32);
  EXPECT_EQ(c.inputs[0].dims, (Shape{64}));
  EXPECT_EQ(c.inputs[1].name, "mask");
  EXPECT_EQ(c.inputs[1].data_type, DataType::kInt64);
  EXPECT_EQ(c.inputs[1].dims, (Shape{-1, 4}));
  ASSERT_EQ(c.outputs.size(), 1u);
  EXPECT_EQ(c.outputs[0].data_type, DataType::kFp16);
  EXPECT_EQ(c.outputs[0].dims, (Shape{10}));
  EXPECT_TRUE(c.dynamic_batching.enabled);
  EXPECT_EQ(c.dynamic_batching.preferred_batch_sizes, (std::vector<int>{4, 8}));
  EXPECT_EQ(c.dynamic_batching.max_queue_delay_microseconds, 2000u);
  EXPECT_EQ(c.dynamic_batching.default_queue_policy.max_queue_size, 100u);
  ASSERT_EQ(c.instance_groups.size(), 2u);
  EXPECT_EQ(c.instance_groups[0].count, 2);
  EXPECT_EQ(c.instance_groups[0].kind, InstanceKind::kGpu);
  EXPECT_EQ(c.instance_groups[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(c.instance_groups[1].name, "cpu");
  EXPECT_EQ(c.instance_groups[1].count, 1);
  EXPECT_EQ(c.instance_groups[1].kind, InstanceKind::kCpu);
  EXPECT_EQ(c.default_model_filename, "mlp.onnx");
  EXPECT_DOUBLE_EQ(c.slo_ms, 12.5);
  EXPECT_EQ(c.precision, "bf16");
}

TEST(ModelConfigTest, DefaultsWhenKeysAbsent) {
  StatusOr<ModelConfig> parsed =
      ParseModelConfig(R"(input: [{name: x, data_type: TYPE_FP32, dims: [1]}]
output: [{name: y, data_type: TYPE_FP32, dims: [1]}]
)",
                       kSource, "mlp");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->name, "mlp");  // filled from the folder name
  EXPECT_EQ(parsed->platform, "onnx");
  EXPECT_EQ(parsed->max_batch_size, 0);
  EXPECT_EQ(parsed->version_policy.kind, VersionPolicy::Kind::kLatest);
  EXPECT_EQ(parsed->version_policy.latest_num_versions, 1);
  EXPECT_FALSE(parsed->dynamic_batching.enabled);
  EXPECT_TRUE(parsed->instance_groups.empty());
  EXPECT_EQ(parsed->default_model_filename, "model.onnx");
  EXPECT_EQ(parsed->slo_ms, 0);
  EXPECT_EQ(parsed->precision, "fp32");
}

TEST(ModelConfigTest, TritonAliasesAndPolicies) {
  StatusOr<ModelConfig> c = ParseModelConfig(
      Minimal("platform: onnxruntime_onnx\nbackend: onnxruntime\nversion_policy: { all: {} }\n"),
      kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->platform, "onnx");
  EXPECT_EQ(c->version_policy.kind, VersionPolicy::Kind::kAll);

  c = ParseModelConfig(Minimal("version_policy:\n  all:\n"), kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->version_policy.kind, VersionPolicy::Kind::kAll);

  c = ParseModelConfig(Minimal("version_policy: { latest: { num_versions: 3 } }\n"), kSource,
                       "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->version_policy.kind, VersionPolicy::Kind::kLatest);
  EXPECT_EQ(c->version_policy.latest_num_versions, 3);

  // dynamic_batching with no body: batching on, every setting at its default.
  c = ParseModelConfig(Minimal("dynamic_batching: {}\n"), kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->dynamic_batching.enabled);
  EXPECT_TRUE(c->dynamic_batching.preferred_batch_sizes.empty());
}

TEST(ModelConfigTest, ExampleMessagesFromTheDocs) {
  std::string yaml = R"(name: mlp
max_batch_size: 8
input:
  - name: input
    data_type: TYPE_FP32
    dims: [64]
    dimz: [64]
output: [{name: y, data_type: TYPE_FP32, dims: [1]}]
)";
  StatusOr<ModelConfig> c = ParseModelConfig(yaml, kSource, "mlp");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("configs/models/mlp/config.yaml:7: input[0].dimz: unknown key"));

  c = ParseModelConfig("name: mlp\nmax_batch_size: eight\n", kSource, "mlp");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "configs/models/mlp/config.yaml:2: max_batch_size: expected an integer, got \"eight\"");
}

TEST(ModelConfigTest, UnknownKeysAtEveryLevel) {
  ExpectError(Minimal("slo: 5\n"), 9, "slo", "unknown key");
  ExpectError(Minimal("version_policy: { lastest: {} }\n"), 9, "version_policy.lastest",
              "unknown key");
  ExpectError(Minimal("version_policy:\n  latest:\n    num_version: 2\n"), 11,
              "version_policy.latest.num_version", "unknown key");
  ExpectError(Minimal("version_policy:\n  all: { x: 1 }\n"), 10, "version_policy.all.x",
              "unknown key");
  ExpectError(Minimal("dynamic_batching:\n  preserve_ordering: true\n"), 10,
              "dynamic_batching.preserve_ordering", "unknown key");
  ExpectError(Minimal("dynamic_batching:\n  default_queue_policy:\n    timeout: 5\n"), 11,
              "dynamic_batching.default_queue_policy.timeout", "unknown key");
  ExpectError(Minimal("instance_group:\n  - count: 1\n    kinds: KIND_CPU\n"), 11,
              "instance_group[0].kinds", "unknown key");
  ExpectError(Minimal("output:\n  - { name: z, data_type: TYPE_FP32, dims: [1] }\n"), 9, "output",
              "duplicate key (first at line 7)");
}

TEST(ModelConfigTest, WrongTypes) {
  ExpectError(Minimal("slo_ms: fast\n"), 9, "slo_ms", "expected a number, got \"fast\"");
  ExpectError(Minimal("slo_ms: -1\n"), 9, "slo_ms", "must be in [0");
  ExpectError("name: mlp\nmax_batch_size: -1\n", 2, "max_batch_size", "must be >= 0, got -1");
  ExpectError("name: mlp\nmax_batch_size: [8]\n", 2, "max_batch_size",
              "expected an integer, got a list");
  ExpectError("name: mlp\nmax_batch_size: 8.5\n", 2, "max_batch_size", "expected an integer");
  ExpectError("name: [mlp]\n", 1, "name", "expected a string, got a list");
  ExpectError("name: mlp\ninput: { name: x }\n", 2, "input", "expected a list, got a map");
  ExpectError("name: mlp\ninput:\n  - just-a-name\n", 3, "input[0]",
              "expected a map, got \"just-a-name\"");
  ExpectError(Minimal("instance_group: { count: 1 }\n"), 9, "instance_group", "expected a list");
  ExpectError(Minimal("instance_group:\n  - count: 0\n"), 10, "instance_group[0].count",
              "must be >= 1, got 0");
  ExpectError(Minimal("instance_group:\n  - kind: KIND_MODEL\n"), 10, "instance_group[0].kind",
              "expected one of KIND_AUTO, KIND_GPU, KIND_CPU, got \"KIND_MODEL\"");
  ExpectError(Minimal("instance_group:\n  - kind: KIND_CPU\n    gpus: [0]\n"), 11,
              "instance_group[0].gpus", "not allowed with kind KIND_CPU");
  ExpectError(Minimal("instance_group:\n  - gpus: [-1]\n"), 10, "instance_group[0].gpus[0]",
              "must be >= 0, got -1");
  ExpectError(Minimal("dynamic_batching:\n  max_queue_delay_microseconds: -5\n"), 10,
              "dynamic_batching.max_queue_delay_microseconds", "must be >= 0");
  ExpectError(Minimal("precision: int8\n"), 9, "precision",
              "expected one of fp32, fp16, bf16, got \"int8\"");
  ExpectError(Minimal("platform: tensorrt_plan\n"), 9, "platform", "expected onnx");
  ExpectError(Minimal("backend: python\n"), 9, "backend", "expected onnxruntime");
  ExpectError(Minimal("default_model_filename: ../x.onnx\n"), 9, "default_model_filename",
              "plain file name");
}

TEST(ModelConfigTest, InputsAndOutputsMayBeLeftToTheModelFile) {
  StatusOr<ModelConfig> c =
      ParseModelConfig("name: mlp\noutput: [{name: y, data_type: TYPE_FP32, dims: [1]}]\n",
                       kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->inputs.empty());
  // max_batch_size may come from the model file too, so batching settings wait for it.
  c = ParseModelConfig("name: mlp\ndynamic_batching: { preferred_batch_size: [2, 4] }\n", kSource,
                       "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->dynamic_batching.enabled);
  // With both lists given, max_batch_size is final (the no_batching case below).
}

TEST(ModelConfigTest, MissingRequiredKeys) {
  ExpectError("name: mlp\ninput: []\n", 2, "input", "at least one tensor");
  // The line of a missing key inside a list item is the item's first line.
  ExpectError("name: mlp\ninput:\n  - data_type: TYPE_FP32\n    dims: [1]\n", 3, "input[0].name",
              "required key is missing");
  ExpectError("name: mlp\ninput:\n  - name: x\n    dims: [1]\n", 3, "input[0].data_type",
              "required key is missing");
  ExpectError("name: mlp\ninput:\n  - name: x\n    data_type: TYPE_FP32\n", 3, "input[0].dims",
              "required key is missing");
  ExpectError(Minimal("version_policy: { specific: {} }\n"), 9, "version_policy.specific.versions",
              "required key is missing");
  ExpectError(Minimal("version_policy: {}\n"), 9, "version_policy", "exactly one of");
  ExpectError(Minimal("version_policy: { all: {}, latest: {} }\n"), 9, "version_policy",
              "exactly one of");
  // Without a folder to name it, `name` is required.
  ExpectError("input: []\n", 1, "name", "required key is missing", "");
}

TEST(ModelConfigTest, OutputLabelFilename) {
  StatusOr<ModelConfig> c = ParseModelConfig(
      "name: mlp\noutput: [{name: y, data_type: TYPE_FP32, dims: [3], label_filename: l.txt}]\n",
      kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->outputs[0].label_filename, "l.txt");
  ExpectError("name: mlp\noutput: [{name: y, data_type: TYPE_FP32, dims: [3], "
              "label_filename: ../l.txt}]\n",
              2, "output[0].label_filename", "must be a plain file name");
  ExpectError("name: mlp\ninput: [{name: x, data_type: TYPE_FP32, dims: [3], "
              "label_filename: l.txt}]\n",
              2, "input[0].label_filename", "unknown key");
}

TEST(ModelConfigTest, DataTypesAndDims) {
  StatusOr<ModelConfig> c = ParseModelConfig(
      "name: mlp\ninput:\n  - name: x\n    data_type: FP32\n    dims: [1]\n", kSource, "mlp");
  ASSERT_FALSE(c.ok());
  std::string message(c.status().message());
  EXPECT_THAT(message, HasSubstr("config.yaml:4: input[0].data_type: expected one of TYPE_BOOL"));
  EXPECT_THAT(message, HasSubstr("TYPE_FP32"));
  EXPECT_THAT(message, HasSubstr("TYPE_BF16"));
  EXPECT_THAT(message, HasSubstr("got \"FP32\""));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("TYPE_INVALID,")));

  ExpectError("name: mlp\ninput:\n  - name: x\n    data_type: TYPE_INVALID\n    dims: [1]\n", 4,
              "input[0].data_type", "expected one of");
  ExpectError("name: mlp\ninput:\n  - name: x\n    data_type: TYPE_FP32\n    dims: [3, 0]\n", 5,
              "input[0].dims[1]", "must be > 0, or -1");
  ExpectError("name: mlp\ninput:\n  - name: x\n    data_type: TYPE_FP32\n    dims: [-2]\n", 5,
              "input[0].dims[0]", "must be >= -1, got -2");
  ExpectError(
      "name: mlp\ninput:\n  - name: x\n    data_type: TYPE_FP32\n    dims:\n      - 4\n"
      "      - big\n",
      7, "input[0].dims[1]", "expected an integer, got \"big\"");
  ExpectError("name: mlp\ninput:\n  - name: x\n    data_type: TYPE_FP32\n    dims: 4\n", 5,
              "input[0].dims", "expected a list");
}

TEST(ModelConfigTest, Reshape) {
  StatusOr<ModelConfig> c = ParseModelConfig(
      Minimal("  - name: scores\n    data_type: TYPE_FP32\n    dims: [4, -1]\n"
              "    reshape: {shape: [2, 2, -1]}\n"
              "  - name: scalar\n    data_type: TYPE_FP32\n    dims: [1]\n    reshape: {}\n"),
      kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->outputs.size(), 3u);
  EXPECT_FALSE(c->outputs[0].reshape.has_value());
  EXPECT_EQ(ModelDims(c->outputs[0]), (Shape{10}));
  EXPECT_EQ(c->outputs[1].reshape, (Shape{2, 2, -1}));
  EXPECT_EQ(ModelDims(c->outputs[1]), (Shape{2, 2, -1}));
  EXPECT_EQ(c->outputs[2].reshape, Shape{});

  const std::string tensor = "  - name: y\n    data_type: TYPE_FP32\n";
  ExpectError(Minimal(tensor + "    dims: [4]\n    reshape: {shape: [3]}\n"), 12,
              "output[1].reshape", "[3] has 3 elements, dims [4] has 4");
  ExpectError(Minimal(tensor + "    dims: [2]\n    reshape: {}\n"), 12, "output[1].reshape",
              "[] has 1 elements, dims [2] has 2");
  ExpectError(Minimal(tensor + "    dims: [4, -1]\n    reshape: {shape: [4, 2]}\n"), 12,
              "output[1].reshape", "[4, 2] has 0 variable dims (-1), dims [4, -1] has 1");
  ExpectError(Minimal(tensor + "    dims: [2, -1, 3]\n    reshape: {shape: [3, -1, 2]}\n"), 12,
              "output[1].reshape", "the fixed dims before, between and after the variable ones");
  ExpectError(Minimal(tensor + "    dims: [4]\n    reshape: {shape: [2, 0]}\n"), 12,
              "output[1].reshape.shape[1]", "must be > 0, or -1");
  ExpectError(Minimal(tensor + "    dims: [4]\n    reshape: {dims: [2, 2]}\n"), 12,
              "output[1].reshape.dims", "unknown key");
  ExpectError(Minimal(tensor + "    dims: [4]\n    reshape: [2, 2]\n"), 12, "output[1].reshape",
              "expected a map");
}

TEST(ModelConfigTest, QueuePolicyTimeouts) {
  StatusOr<ModelConfig> c = ParseModelConfig(
      Minimal("dynamic_batching:\n  default_queue_policy:\n    timeout_action: REJECT\n"
              "    default_timeout_microseconds: 5000\n    allow_timeout_override: true\n"),
      kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  const QueuePolicy& b = c->dynamic_batching.default_queue_policy;
  EXPECT_EQ(b.default_timeout_microseconds, 5000u);
  EXPECT_TRUE(b.allow_timeout_override);
  EXPECT_EQ(b.QueueTimeoutMicroseconds(0), 5000u);     // the default
  EXPECT_EQ(b.QueueTimeoutMicroseconds(2000), 2000u);  // a request may shorten it...
  EXPECT_EQ(b.QueueTimeoutMicroseconds(9000), 5000u);  // ...never lengthen it
  EXPECT_EQ(c->dynamic_batching.QueueTimeoutMicroseconds(2000, 0), 2000u);

  QueuePolicy no_override = b;
  no_override.allow_timeout_override = false;
  EXPECT_EQ(no_override.QueueTimeoutMicroseconds(2000), 5000u);
  QueuePolicy no_default = b;
  no_default.default_timeout_microseconds = 0;
  EXPECT_EQ(no_default.QueueTimeoutMicroseconds(0), 0u);
  EXPECT_EQ(no_default.QueueTimeoutMicroseconds(2000), 2000u);
  QueuePolicy delays = b;
  delays.timeout_delays = true;  // DELAY: timed-out requests still run
  EXPECT_EQ(delays.QueueTimeoutMicroseconds(2000), 0u);
  DynamicBatchingConfig off = c->dynamic_batching;
  off.enabled = false;  // no dynamic batching: no queue timeouts
  EXPECT_EQ(off.QueueTimeoutMicroseconds(2000, 0), 0u);

  ExpectError(Minimal("dynamic_batching:\n  default_queue_policy: {timeout_action: DROP}\n"), 10,
              "dynamic_batching.default_queue_policy.timeout_action",
              "expected one of REJECT, DELAY");
}

TEST(ModelConfigTest, PriorityLevels) {
  StatusOr<ModelConfig> c = ParseModelConfig(
      Minimal("dynamic_batching: {priority_levels: 3, default_priority_level: 2}\n"), kSource,
      "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  const DynamicBatchingConfig& b = c->dynamic_batching;
  EXPECT_EQ(b.PriorityLevel(0), 2u);  // none asked: the default
  EXPECT_EQ(b.PriorityLevel(1), 1u);
  EXPECT_EQ(b.PriorityLevel(3), 3u);
  EXPECT_EQ(b.PriorityLevel(4), 2u);  // above the levels: the default, as in Triton
  EXPECT_EQ(DynamicBatchingConfig{}.PriorityLevel(1), 0u);
  ExpectError(Minimal("dynamic_batching: {priority_levels: 3}\n"), 9,
              "dynamic_batching.default_priority_level",
              "must be in 1..priority_levels (3), got 0");
  ExpectError(Minimal("dynamic_batching: {priority_levels: 3, default_priority_level: 4}\n"), 9,
              "dynamic_batching.default_priority_level",
              "must be in 1..priority_levels (3), got 4");
  ExpectError(Minimal("dynamic_batching: {default_priority_level: 1}\n"), 9,
              "dynamic_batching.default_priority_level", "needs priority_levels > 0");
}

TEST(ModelConfigTest, PriorityQueuePolicyGivesLevelsTheirOwnPolicy) {
  StatusOr<ModelConfig> c = ParseModelConfig(Minimal(R"(dynamic_batching:
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy: {max_queue_size: 10, default_timeout_microseconds: 5000}
  priority_queue_policy:
    1: {max_queue_size: 2, allow_timeout_override: true}
    3: {timeout_action: DELAY, default_timeout_microseconds: 100}
)"),
                                             kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  const DynamicBatchingConfig& b = c->dynamic_batching;
  EXPECT_EQ(b.PolicyFor(1).max_queue_size, 2u);
  EXPECT_EQ(b.PolicyFor(2).max_queue_size, 10u);        // no policy of its own: the default
  EXPECT_EQ(b.QueueTimeoutMicroseconds(0, 1), 0u);      // level 1 has no timeout...
  EXPECT_EQ(b.QueueTimeoutMicroseconds(700, 1), 700u);  // ...but takes a request's
  EXPECT_EQ(b.QueueTimeoutMicroseconds(0, 2), 5000u);
  EXPECT_EQ(b.QueueTimeoutMicroseconds(0, 3), 0u);  // DELAY never rejects

  ExpectError(Minimal("dynamic_batching:\n  priority_levels: 2\n  default_priority_level: 1\n"
                      "  priority_queue_policy: {3: {max_queue_size: 1}}\n"),
              12, "dynamic_batching.priority_queue_policy",
              "'3' is not a priority level (1..priority_levels, 2)");
  ExpectError(Minimal("dynamic_batching:\n  priority_queue_policy: {1: {max_queue_size: 1}}\n"), 10,
              "dynamic_batching.priority_queue_policy",
              "'1' is not a priority level (1..priority_levels, 0)");
  ExpectError(Minimal("dynamic_batching:\n  priority_levels: 2\n  default_priority_level: 1\n"
                      "  priority_queue_policy: {1: {max_queue_sise: 1}}\n"),
              12, "dynamic_batching.priority_queue_policy.1.max_queue_sise", "unknown key");
  ExpectError(Minimal("dynamic_batching:\n  priority_levels: 2\n  default_priority_level: 1\n"
                      "  priority_queue_policy: [1, 2]\n"),
              12, "dynamic_batching.priority_queue_policy", "expected a map");
}

TEST(ModelConfigTest, ResponseCache) {
  StatusOr<ModelConfig> c = ParseModelConfig(Minimal(""), kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->response_cache);
  c = ParseModelConfig(Minimal("response_cache: {enable: true}\n"), kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->response_cache);
  ExpectError(Minimal("response_cache: {enabled: true}\n"), 9, "response_cache.enabled",
              "unknown key");
  ExpectError(Minimal("response_cache: {enable: 3}\n"), 9, "response_cache.enable",
              "expected true or false");
}

TEST(ModelConfigTest, MetricTags) {
  StatusOr<ModelConfig> c = ParseModelConfig(
      Minimal("metric_tags: {team: vision, tier_2: \"gold \\\"plus\\\"\"}\n"), kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->metric_tags, ElementsAre(Pair("team", "vision"), Pair("tier_2", "gold \"plus\"")));
  // Each key becomes the label "_<key>": one that would make an invalid or reserved label is
  // refused, as it would spoil every scrape.
  for (const char* key : {"my-team", "_hidden", "\"a b\"", "\"\""}) {
    ExpectError(Minimal(std::string("metric_tags: {") + key + ": x}\n"), 9, "metric_tags",
                "cannot be a tag");
  }
  ExpectError(Minimal("metric_tags: [team]\n"), 9, "metric_tags", "expected a map");
  ExpectError(Minimal("metric_tags: {team: [a]}\n"), 9, "metric_tags.team", "expected");
}

TEST(ModelConfigTest, ReshapeMapsShapesBothWays) {
  TensorConfig t{"x", DataType::kFp32, {2, 4, -1, 6}};
  EXPECT_EQ(ToModelShape(t, {3, 2, 4, 5, 6}, true), (Shape{3, 2, 4, 5, 6}));  // no reshape
  EXPECT_TRUE(CheckReshape(t.dims, {8, -1, 1, 6}).ok());
  t.reshape = Shape{8, -1, 1, 6};
  EXPECT_EQ(ToModelShape(t, {3, 2, 4, 5, 6}, true), (Shape{3, 8, 5, 1, 6}));
  EXPECT_EQ(ToClientShape(t, {3, 8, 5, 1, 6}, true), (Shape{3, 2, 4, 5, 6}));
  EXPECT_EQ(ToModelShape(t, {2, 4, 7, 6}, false), (Shape{8, 7, 1, 6}));
  EXPECT_EQ(ToClientShape(t, {3, 8, 5, 2, 6}, true), std::nullopt);  // a fixed dim differs
  EXPECT_EQ(ToClientShape(t, {8, 5, 1, 6}, true), std::nullopt);     // the rank differs

  TensorConfig scalar{"s", DataType::kFp32, {1}};
  scalar.reshape = Shape{};
  EXPECT_EQ(ToModelShape(scalar, {5, 1}, true), (Shape{5}));
  EXPECT_EQ(ToClientShape(scalar, {5}, true), (Shape{5, 1}));
  EXPECT_EQ(ToModelShape(scalar, {1}, false), Shape{});

  TensorConfig two{"v", DataType::kFp32, {-1, 3, -1}};
  two.reshape = Shape{-1, 3, -1, 1};
  EXPECT_TRUE(CheckReshape(two.dims, *two.reshape).ok());
  EXPECT_EQ(ToModelShape(two, {2, 7, 3, 9}, true), (Shape{2, 7, 3, 9, 1}));
  EXPECT_EQ(ToClientShape(two, {2, 7, 3, 9, 1}, true), (Shape{2, 7, 3, 9}));
}

// An ensemble of two steps, a -> b, written the other way round; `extra` from line 14 on.
std::string Ensemble(const std::string& extra = "") {
  return std::string(R"(name: mlp
platform: ensemble
max_batch_size: 4
input: [{name: IN, data_type: TYPE_FP32, dims: [4]}]
output: [{name: OUT, data_type: TYPE_FP32, dims: [4]}]
ensemble_scheduling:
  step:
    - model_name: b
      input_map: {x: MID}
      output_map: {y: OUT}
    - model_name: a
      input_map: {x: IN}
      output_map: {y: MID}
)") + extra;
}

TEST(ModelConfigTest, Ensemble) {
  StatusOr<ModelConfig> c = ParseModelConfig(Ensemble(), kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->is_ensemble());
  ASSERT_EQ(c->ensemble_steps.size(), 2u);
  EXPECT_EQ(c->ensemble_steps[1].model_name, "a");
  EXPECT_EQ(c->ensemble_steps[1].model_version, -1);

  auto replaced = [](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  ExpectError(Ensemble("dynamic_batching: {}\n"), 14, "dynamic_batching",
              "an ensemble has no instances or batches of its own");
  ExpectError(replaced(Ensemble(), "model_name: b", "model_name: mlp"), 8,
              "ensemble_scheduling.step[0].model_name", "cannot be a step of itself");
  ExpectError(replaced(Ensemble(), "{x: MID}", "{}"), 9, "ensemble_scheduling.step[0].input_map",
              "expected a non-empty map of the model's tensor names to ensemble tensor names, got "
              "an empty map");
  ExpectError(replaced(Ensemble(), "{y: MID}", "{y: OUT}"), 6, "ensemble_scheduling",
              "tensor 'OUT' is made by step[1] (a output 'y') and by step[0] (b output 'y')");
  ExpectError(replaced(Ensemble(), "{x: IN}", "{x: OUT}"), 6, "ensemble_scheduling",
              "step[0] (b), step[1] (a) wait on each other's outputs (a cycle)");
  ExpectError(replaced(Ensemble(), "{y: OUT}", "{y: LAST}"), 6, "ensemble_scheduling",
              "ensemble output 'OUT' is not the output of any step");
  ExpectError(replaced(Ensemble(), "{x: IN}", "{x: IN, w: IN2}"), 6, "ensemble_scheduling",
              "reads tensor 'IN2' into its input 'w'");
  ExpectError(replaced(Ensemble(), "input: [{name: IN, data_type: TYPE_FP32, dims: [4]}]",
                       "input: [{name: IN, data_type: TYPE_FP32, dims: [4]}, "
                       "{name: UNUSED, data_type: TYPE_FP32, dims: [1]}]"),
              6, "ensemble_scheduling", "ensemble input 'UNUSED' is not read by any step");
  ExpectError(replaced(Ensemble(), "platform: ensemble", "platform: onnx"), 6,
              "ensemble_scheduling", "needs platform: ensemble");
  ExpectError(replaced(Ensemble(), "model_name: a\n", "model_name: a\n      model_namespace: x\n"),
              12, "model_namespace", "reserved");
}

TEST(ModelConfigTest, DuplicateTensorNames) {
  ExpectError(R"(name: mlp
input:
  - { name: x, data_type: TYPE_FP32, dims: [1] }
  - { name: x, data_type: TYPE_FP32, dims: [2] }
)",
              4, "input[1].name", "duplicate tensor name \"x\" (also input[0] at line 3)");
  ExpectError(R"(name: mlp
input: [{ name: x, data_type: TYPE_FP32, dims: [1] }]
output:
  - { name: y, data_type: TYPE_FP32, dims: [1] }
  - { name: z, data_type: TYPE_FP32, dims: [1] }
  - { name: y, data_type: TYPE_FP32, dims: [1] }
)",
              6, "output[2].name", "duplicate tensor name \"y\"");
}

TEST(ModelConfigTest, NameMustMatchFolder) {
  ExpectError(Minimal("").replace(0, 9, "name: mpl"), 1, "name",
              "\"mpl\" does not match the model folder \"mlp\"");
  // With no folder to check against, any name is accepted.
  StatusOr<ModelConfig> c = ParseModelConfig(Minimal("").replace(0, 9, "name: mpl"), kSource, "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "mpl");
}

TEST(ModelConfigTest, BatchingRules) {
  ExpectError(Minimal("dynamic_batching:\n  preferred_batch_size: [4, 16]\n"), 10,
              "dynamic_batching.preferred_batch_size[1]", "must be 1..8, got 16");
  ExpectError(Minimal("dynamic_batching:\n  preferred_batch_size: [0]\n"), 10,
              "dynamic_batching.preferred_batch_size[0]", "must be 1..8, got 0");
  std::string no_batching = Minimal("dynamic_batching:\n  max_queue_delay_microseconds: 100\n");
  no_batching.replace(no_batching.find("max_batch_size: 8"), 17, "max_batch_size: 0");
  ExpectError(no_batching, 9, "dynamic_batching", "needs max_batch_size > 0");
}

TEST(ModelConfigTest, WorkerBatchSizes) {
  StatusOr<ModelConfig> c = ParseModelConfig(Minimal("worker_batch_sizes: [8, 4, 2, 1]\n"),
                                             kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->worker_batch_sizes, (std::vector<int>{8, 4, 2, 1}));
  StatusOr<ModelConfig> plain = ParseModelConfig(Minimal(""), kSource, "mlp");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->worker_batch_sizes.empty());
  // One instance_group entry of count 1 (say, to pick the kind) is fine.
  EXPECT_TRUE(ParseModelConfig(Minimal("worker_batch_sizes: [2]\ninstance_group: [{kind: KIND_CPU}]\n"),
                               kSource, "mlp")
                  .ok());

  ExpectError(Minimal("worker_batch_sizes: [8, 6]\n"), 9, "worker_batch_sizes[1]",
              "must be a power of two, got 6");
  ExpectError(Minimal("worker_batch_sizes: [16]\n"), 9, "worker_batch_sizes[0]",
              "must be 1..8, got 16");
  ExpectError(Minimal("worker_batch_sizes: [0]\n"), 9, "worker_batch_sizes[0]",
              "must be 1..8, got 0");
  ExpectError(Minimal("worker_batch_sizes: [4, 2, 4]\n"), 9, "worker_batch_sizes[2]",
              "duplicate size 4 (one worker per size)");
  ExpectError(Minimal("worker_batch_sizes: []\n"), 9, "worker_batch_sizes", "is empty");
  ExpectError(Minimal("worker_batch_sizes: 4\n"), 9, "worker_batch_sizes", "expected a list");
  ExpectError(Minimal("worker_batch_sizes: [4, 2]\ninstance_group: [{count: 2}]\n"), 9,
              "worker_batch_sizes", "cannot be combined with instance_group's count (2 instances)");
  ExpectError(Minimal("worker_batch_sizes: [4, 2]\n"
                      "dynamic_batching: {preferred_batch_size: [4]}\n"),
              9, "worker_batch_sizes", "leave out dynamic_batching.preferred_batch_size");
  std::string no_batching = Minimal("worker_batch_sizes: [1]\n");
  no_batching.replace(no_batching.find("max_batch_size: 8"), 17, "max_batch_size: 0");
  ExpectError(no_batching, 9, "worker_batch_sizes", "needs max_batch_size > 0");
}

TEST(ModelConfigTest, ModelWarmup) {
  StatusOr<ModelConfig> c = ParseModelConfig(
      Minimal("model_warmup:\n"
              "  - name: long\n"
              "    batch_size: 4\n"
              "    count: 3\n"
              "    inputs:\n"
              "      input: {data_type: TYPE_FP32, dims: [64], random_data: true}\n"
              "  - batch_size: 1\n"
              "    inputs: {input: {data_type: TYPE_INT64, dims: [2, 3], zero_data: true}}\n"),
      kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->model_warmup.size(), 2u);
  const WarmupSample& first = c->model_warmup[0];
  EXPECT_EQ(first.name, "long");
  EXPECT_EQ(first.batch_size, 4);
  EXPECT_EQ(first.count, 3);
  ASSERT_EQ(first.inputs.size(), 1u);
  EXPECT_EQ(first.inputs[0].name, "input");
  EXPECT_EQ(first.inputs[0].data_type, DataType::kFp32);
  EXPECT_EQ(first.inputs[0].dims, (Shape{64}));
  EXPECT_TRUE(first.inputs[0].random_data);
  EXPECT_EQ(c->model_warmup[1].name, "sample 1");
  EXPECT_EQ(c->model_warmup[1].count, 0);
  EXPECT_EQ(c->model_warmup[1].inputs[0].dims, (Shape{2, 3}));
  EXPECT_FALSE(c->model_warmup[1].inputs[0].random_data);

  const std::string input = "      input: {data_type: TYPE_FP32, dims: [64], zero_data: true}\n";
  ExpectError(Minimal("model_warmup:\n  - batch_size: 9\n    inputs:\n" + input), 10,
              "model_warmup[0].batch_size", "must be 1..8, got 9");
  ExpectError(Minimal("model_warmup:\n  - batch_size: 1\n"), 10, "model_warmup[0].inputs",
              "missing");
  ExpectError(Minimal("model_warmup:\n  - batch_size: 1\n    inputs:\n"
                      "      input: {data_type: TYPE_FP32, dims: [64]}\n"),
              12, "model_warmup[0].inputs.input",
              "needs exactly one of zero_data: true, random_data: true or input_data_file");
  ExpectError(Minimal("model_warmup:\n  - batch_size: 1\n    inputs:\n"
                      "      input: {data_type: TYPE_FP32, dims: [64], input_data_file: x,\n"
                      "              zero_data: true}\n"),
              12, "model_warmup[0].inputs.input", "needs exactly one of");
  ExpectError(Minimal("model_warmup:\n  - batch_size: 1\n    inputs:\n"
                      "      input: {data_type: TYPE_FP32, dims: [64], input_data_file: ../x}\n"),
              12, "model_warmup[0].inputs.input.input_data_file",
              "must be a plain file name, got \"../x\"");
  StatusOr<ModelConfig> from_file =
      ParseModelConfig(Minimal("model_warmup:\n  - batch_size: 2\n    inputs:\n"
                               "      input: {data_type: TYPE_FP32, dims: [64], "
                               "input_data_file: row.bin}\n"),
                       kSource, "mlp");
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->model_warmup[0].inputs[0].input_data_file, "row.bin");
  EXPECT_EQ(from_file->model_warmup[0].inputs[0].data, nullptr);  // the repository scan reads it
  ExpectError(Minimal("model_warmup:\n  - batch_size: 1\n    inputs:\n"
                      "      input: {data_type: TYPE_FP32, dims: [-1], zero_data: true}\n"),
              12, "model_warmup[0].inputs.input.dims[0]", "got -1");
}

TEST(ModelConfigTest, SyntaxErrorsNeverThrow) {
  StatusOr<ModelConfig> c =
      ParseModelConfig("name: mlp\ninput: [a, b\noutput: x\n", kSource, "mlp");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()),
              AllOf(HasSubstr(kSource), HasSubstr("YAML syntax error")));

  c = ParseModelConfig("name: mlp\n  bad: indent\n", kSource, "mlp");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              AllOf(HasSubstr(std::string(kSource) + ":2: YAML syntax error")));

  c = ParseModelConfig("name: mlp\n- item\n", kSource, "mlp");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr(std::string(kSource) + ":2: YAML syntax error"));

  // An empty file is a config with every key left out: completed from the model file at load.
  c = ParseModelConfig("", kSource, "mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "mlp");

  // Not a map at all, a bare scalar, tabs, anchors and aliases: errors, no throw.
  for (const char* text : {"- a\n- b\n", "just text", "\t\tname: x", "a: &x [1]\nb: *x\n",
                           "? [complex, key]\n: value\n", "name: !!binary AAAA\n"}) {
    c = ParseModelConfig(text, kSource, "mlp");
    EXPECT_FALSE(c.ok()) << text;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(kSource)) << text;
  }
}

TEST(ModelConfigTest, LoadFileMissingIsNotFound) {
  StatusOr<ModelConfig> c = LoadModelConfigFile("/nonexistent/tessera/config.yaml", "mlp");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("/nonexistent/tessera/config.yaml"));
}

TEST(ModelConfigTest, LoadFileNamesThePathInErrors) {
  std::string path = ::testing::TempDir() + "/tessera_model_config_test.yaml";
  {
    std::ofstream out(path);
    out << "name: mlp\nmax_batch_size: eight\n";
  }
  StatusOr<ModelConfig> c = LoadModelConfigFile(path, "mlp");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(path + ":2: max_batch_size"));
}

}  // namespace
}  // namespace tessera::repository
