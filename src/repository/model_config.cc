#include "tessera/repository/model_config.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <string_view>

#include "absl/strings/ascii.h"
#include "config_fields.h"
#include "ensemble_config.h"
#include "ragged_config.h"
#include "sequence_config.h"
#include "tessera/common/yaml_util.h"

namespace tessera::repository {

std::string ValidDataTypeNames() {
  std::vector<std::string_view> names;
  for (int i = static_cast<int>(DataType::kBool); i <= static_cast<int>(DataType::kBf16); ++i) {
    names.push_back(DataTypeToConfigName(static_cast<DataType>(i)));
  }
  return yaml::JoinNames(names);
}

StatusOr<Shape> ReadDims(std::string_view source, const YAML::Node& node, const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, yaml::ReadList(source, node, path));
  Shape dims;
  for (size_t d = 0; d < items.size(); ++d) {
    std::string dim_path = yaml::IndexPath(path, d);
    TESSERA_ASSIGN_OR_RETURN(int64_t dim, yaml::ReadInt(source, items[d], dim_path, -1, INT64_MAX));
    if (dim == 0) {
      return yaml::ErrorAt(source, items[d], dim_path,
                           "must be > 0, or -1 for a variable size, got 0");
    }
    dims.push_back(dim);
  }
  return dims;
}

StatusOr<DataType> ReadDataType(std::string_view source, const YAML::Node& node,
                                const std::string& path) {
  std::optional<DataType> data_type;
  if (node.IsScalar()) data_type = DataTypeFromConfigName(node.Scalar());
  if (!data_type) {
    return yaml::ErrorAt(
        source, node, path,
        absl::StrCat("expected one of ", ValidDataTypeNames(), ", got ", yaml::Describe(node)));
  }
  return *data_type;
}

Status CheckPlainFileName(std::string_view source, const YAML::Node& node, std::string_view path,
                          const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return yaml::ErrorAt(source, node, path,
                         absl::StrCat("must be a plain file name, got \"", name, "\""));
  }
  return absl::OkStatus();
}

const TensorConfig* FindTensor(const std::vector<TensorConfig>& tensors, const std::string& name) {
  auto it = std::find_if(tensors.begin(), tensors.end(),
                         [&](const TensorConfig& t) { return t.name == name; });
  return it == tensors.end() ? nullptr : &*it;
}

namespace {

using yaml::YamlMap;

constexpr std::array<std::string_view, 3> kPrecisions = {"fp32", "fp16", "bf16"};
constexpr std::array<std::string_view, 3> kInstanceKinds = {"KIND_AUTO", "KIND_GPU", "KIND_CPU"};

// clang-format off
constexpr std::array<std::string_view, 20> kModelKeys = {
    "name", "platform", "max_batch_size", "version_policy", "input", "output",
    "dynamic_batching", "instance_group", "default_model_filename", "slo_ms", "precision",
    "backend", "worker_batch_sizes", "model_warmup", "ensemble_scheduling", "response_cache",
    "sequence_batching", "metric_tags", "batch_input", "batch_output"};
// clang-format on
constexpr std::array<std::string_view, 1> kResponseCacheKeys = {"enable"};
constexpr std::array<std::string_view, 4> kWarmupKeys = {"name", "batch_size", "count", "inputs"};
constexpr std::array<std::string_view, 5> kWarmupInputKeys = {
    "data_type", "dims", "zero_data", "random_data", "input_data_file"};
constexpr std::array<std::string_view, 6> kInputKeys = {
    "name", "data_type", "dims", "reshape", "allow_ragged_batch", "optional"};
constexpr std::array<std::string_view, 5> kOutputKeys = {"name", "data_type", "dims", "reshape",
                                                         "label_filename"};
constexpr std::array<std::string_view, 1> kReshapeKeys = {"shape"};
constexpr std::array<std::string_view, 3> kPolicyKeys = {"latest", "all", "specific"};
constexpr std::array<std::string_view, 1> kLatestKeys = {"num_versions"};
constexpr std::array<std::string_view, 1> kSpecificKeys = {"versions"};
constexpr std::array<std::string_view, 6> kBatchingKeys = {
    "preferred_batch_size", "max_queue_delay_microseconds",
    "default_queue_policy", "priority_queue_policy",
    "priority_levels",      "default_priority_level"};
constexpr std::array<std::string_view, 4> kQueuePolicyKeys = {
    "max_queue_size", "timeout_action", "default_timeout_microseconds", "allow_timeout_override"};
constexpr std::array<std::string_view, 2> kTimeoutActions = {"REJECT", "DELAY"};
constexpr std::array<std::string_view, 4> kInstanceGroupKeys = {"name", "count", "kind", "gpus"};

// Reads `input` or `output`: a non-empty list of {name, data_type, dims, reshape}, or nothing.
Status ReadTensors(const YamlMap& root, std::string_view key, std::vector<TensorConfig>& tensors) {
  std::optional<YAML::Node> node = root.Get(key);
  if (!node) return absl::OkStatus();  // completed from the model file at load (model_completion.h)
  std::string_view source = root.source();
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, yaml::ReadList(source, *node, key));
  if (items.empty()) return yaml::ErrorAt(source, *node, key, "must list at least one tensor");

  std::vector<int> name_lines;  // for the duplicate-name message
  for (size_t i = 0; i < items.size(); ++i) {
    std::string path = yaml::IndexPath(key, i);
    TESSERA_ASSIGN_OR_RETURN(YamlMap m, key == "output"
                                            ? YamlMap::Create(source, items[i], path, kOutputKeys)
                                            : YamlMap::Create(source, items[i], path, kInputKeys));
    TensorConfig tensor;

    std::optional<YAML::Node> name = m.Get("name");
    if (!name) return m.Missing("name");
    TESSERA_ASSIGN_OR_RETURN(tensor.name, yaml::ReadString(source, *name, m.PathOf("name")));
    if (tensor.name.empty()) return yaml::ErrorAt(source, *name, m.PathOf("name"), "is empty");
    for (size_t j = 0; j < tensors.size(); ++j) {
      if (tensors[j].name == tensor.name) {
        return yaml::ErrorAt(
            source, *name, m.PathOf("name"),
            absl::StrCat("duplicate tensor name \"", tensor.name, "\" (also ",
                         yaml::IndexPath(key, j), " at line ", name_lines[j], ")"));
      }
    }
    name_lines.push_back(yaml::LineOf(*name));

    std::optional<YAML::Node> type = m.Get("data_type");
    if (!type) return m.Missing("data_type");
    TESSERA_ASSIGN_OR_RETURN(tensor.data_type, ReadDataType(source, *type, m.PathOf("data_type")));

    std::optional<YAML::Node> dims = m.Get("dims");
    if (!dims) return m.Missing("dims");
    TESSERA_ASSIGN_OR_RETURN(tensor.dims, ReadDims(source, *dims, m.PathOf("dims")));
    if (std::optional<YAML::Node> reshape = m.Get("reshape")) {
      const std::string reshape_path = m.PathOf("reshape");
      TESSERA_ASSIGN_OR_RETURN(YamlMap r,
                               YamlMap::Create(source, *reshape, reshape_path, kReshapeKeys));
      std::optional<YAML::Node> shape = r.Get("shape");
      // Triton's proto3 cannot tell `shape: []` from no shape: both are the empty reshape.
      tensor.reshape = Shape{};
      if (shape) {
        TESSERA_ASSIGN_OR_RETURN(*tensor.reshape, ReadDims(source, *shape, r.PathOf("shape")));
      }
      Status fits = CheckReshape(tensor.dims, *tensor.reshape);
      if (!fits.ok()) {
        return yaml::ErrorAt(source, *reshape, reshape_path, std::string(fits.message()));
      }
    }
    if (std::optional<YAML::Node> labels = m.Get("label_filename")) {
      TESSERA_ASSIGN_OR_RETURN(tensor.label_filename,
                               yaml::ReadString(source, *labels, m.PathOf("label_filename")));
      TESSERA_RETURN_IF_ERROR(
          CheckPlainFileName(source, *labels, m.PathOf("label_filename"), tensor.label_filename));
    }

    if (std::optional<YAML::Node> ragged = m.Get("allow_ragged_batch")) {
      TESSERA_RETURN_IF_ERROR(m.GetBool("allow_ragged_batch", &tensor.allow_ragged_batch));
      if (tensor.allow_ragged_batch && tensor.reshape) {
        return yaml::ErrorAt(source, *ragged, m.PathOf("allow_ragged_batch"),
                             "a ragged input cannot have a reshape: the model takes it flat");
      }
    }

    if (std::optional<YAML::Node> optional = m.Get("optional")) {
      TESSERA_RETURN_IF_ERROR(m.GetBool("optional", &tensor.optional));
      if (tensor.optional && tensor.allow_ragged_batch) {
        return yaml::ErrorAt(source, *optional, m.PathOf("optional"),
                             "a ragged input cannot be optional: its batch inputs describe it");
      }
    }

    tensors.push_back(std::move(tensor));
  }
  return absl::OkStatus();
}

// Where a request without an optional input could not be served. (An ensemble's optional input
// may feed only steps whose models take it as optional: checked per request, as in Triton.)
Status CheckOptionalInputs(const YamlMap& root, const ModelConfig& config) {
  for (size_t i = 0; i < config.inputs.size(); ++i) {
    if (!config.inputs[i].optional) continue;
    auto refuse = [&](std::string_view why) {
      return yaml::ErrorAt(root.source(), root.KeyLine("input"),
                           absl::StrCat(yaml::IndexPath("input", i), ".optional"), why);
    };
    if (config.sequence_batching.enabled) {
      return refuse("optional inputs with sequence_batching are not supported");
    }
  }
  return absl::OkStatus();
}

Status ReadVersionPolicy(const YamlMap& root, VersionPolicy& policy) {
  std::optional<YAML::Node> node = root.Get("version_policy");
  if (!node) return absl::OkStatus();
  std::string_view source = root.source();
  TESSERA_ASSIGN_OR_RETURN(YamlMap m,
                           YamlMap::Create(source, *node, "version_policy", kPolicyKeys));
  int chosen = m.Has("latest") + m.Has("all") + m.Has("specific");
  if (chosen != 1) {
    return yaml::ErrorAt(source, root.KeyLine("version_policy"), "version_policy",
                         "must hold exactly one of latest, all, specific");
  }
  if (std::optional<YAML::Node> latest = m.Get("latest")) {
    policy.kind = VersionPolicy::Kind::kLatest;
    policy.latest_num_versions = 1;
    TESSERA_ASSIGN_OR_RETURN(YamlMap l,
                             YamlMap::Create(source, *latest, m.PathOf("latest"), kLatestKeys));
    TESSERA_RETURN_IF_ERROR(l.GetInt("num_versions", 1, INT32_MAX, &policy.latest_num_versions));
  } else if (std::optional<YAML::Node> all = m.Get("all")) {
    policy.kind = VersionPolicy::Kind::kAll;
    // `all` has no keys; Create still rejects any written inside it.
    TESSERA_RETURN_IF_ERROR(YamlMap::Create(source, *all, m.PathOf("all"), {}).status());
  } else if (std::optional<YAML::Node> specific = m.Get("specific")) {
    policy.kind = VersionPolicy::Kind::kSpecific;
    TESSERA_ASSIGN_OR_RETURN(
        YamlMap s, YamlMap::Create(source, *specific, m.PathOf("specific"), kSpecificKeys));
    std::optional<YAML::Node> versions = s.Get("versions");
    if (!versions) return s.Missing("versions");
    // Version folders are positive integers (as Triton: "0" and "01" are not versions).
    TESSERA_ASSIGN_OR_RETURN(
        policy.specific_versions,
        yaml::ReadIntList(source, *versions, s.PathOf("versions"), 1, INT64_MAX));
    if (policy.specific_versions.empty()) {
      return yaml::ErrorAt(source, *versions, s.PathOf("versions"),
                           "must list at least one version");
    }
  }
  return absl::OkStatus();
}

// `completing`: inputs or outputs are left to the model file, which may also set max_batch_size,
// so a max_batch_size of 0 is not final yet (CompleteFromSignature checks the batching then).
// default_queue_policy, or one level's policy under priority_queue_policy.
StatusOr<QueuePolicy> ReadQueuePolicy(std::string_view source, const YAML::Node& node,
                                      const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(YamlMap q, YamlMap::Create(source, node, path, kQueuePolicyKeys));
  QueuePolicy policy;
  int64_t max_queue_size = 0;
  TESSERA_RETURN_IF_ERROR(q.GetInt("max_queue_size", 0, UINT32_MAX, &max_queue_size));
  policy.max_queue_size = static_cast<uint32_t>(max_queue_size);
  std::string action = "REJECT";
  TESSERA_RETURN_IF_ERROR(q.GetEnum("timeout_action", kTimeoutActions, &action));
  policy.timeout_delays = action == "DELAY";
  int64_t timeout_us = 0;
  TESSERA_RETURN_IF_ERROR(q.GetInt("default_timeout_microseconds", 0, INT64_MAX, &timeout_us));
  policy.default_timeout_microseconds = static_cast<uint64_t>(timeout_us);
  TESSERA_RETURN_IF_ERROR(q.GetBool("allow_timeout_override", &policy.allow_timeout_override));
  return policy;
}

Status ReadDynamicBatching(const YamlMap& root, int max_batch_size, bool completing,
                           DynamicBatchingConfig& batching) {
  std::optional<YAML::Node> node = root.Get("dynamic_batching");
  if (!node) return absl::OkStatus();
  std::string_view source = root.source();
  TESSERA_ASSIGN_OR_RETURN(YamlMap m,
                           YamlMap::Create(source, *node, "dynamic_batching", kBatchingKeys));
  if (max_batch_size == 0 && !completing) {
    return yaml::ErrorAt(source, root.KeyLine("dynamic_batching"), "dynamic_batching",
                         "needs max_batch_size > 0 (it is 0: no batching)");
  }
  batching.enabled = true;
  const int64_t largest = max_batch_size > 0 ? max_batch_size : INT32_MAX;

  if (std::optional<YAML::Node> preferred = m.Get("preferred_batch_size")) {
    TESSERA_ASSIGN_OR_RETURN(
        std::vector<int64_t> sizes,
        yaml::ReadIntList(source, *preferred, m.PathOf("preferred_batch_size"), 1, largest));
    batching.preferred_batch_sizes.assign(sizes.begin(), sizes.end());
  }
  int64_t delay_us = 0;
  TESSERA_RETURN_IF_ERROR(m.GetInt("max_queue_delay_microseconds", 0, INT64_MAX, &delay_us));
  batching.max_queue_delay_microseconds = static_cast<uint64_t>(delay_us);

  int64_t levels = 0, default_level = 0;
  TESSERA_RETURN_IF_ERROR(m.GetInt("priority_levels", 0, UINT32_MAX, &levels));
  TESSERA_RETURN_IF_ERROR(m.GetInt("default_priority_level", 0, UINT32_MAX, &default_level));
  if (levels > 0 && (default_level < 1 || default_level > levels)) {
    return yaml::ErrorAt(
        source,
        m.Has("default_priority_level") ? m.KeyLine("default_priority_level")
                                        : m.KeyLine("priority_levels"),
        m.PathOf("default_priority_level"),
        absl::StrCat("must be in 1..priority_levels (", levels, "), got ", default_level));
  }
  if (levels == 0 && default_level != 0) {
    return yaml::ErrorAt(source, m.KeyLine("default_priority_level"),
                         m.PathOf("default_priority_level"), "needs priority_levels > 0");
  }
  batching.priority_levels = static_cast<uint32_t>(levels);
  batching.default_priority_level = static_cast<uint32_t>(default_level);

  if (std::optional<YAML::Node> queue = m.Get("default_queue_policy")) {
    TESSERA_ASSIGN_OR_RETURN(batching.default_queue_policy,
                             ReadQueuePolicy(source, *queue, m.PathOf("default_queue_policy")));
  }
  if (std::optional<YAML::Node> by_level = m.Get("priority_queue_policy")) {
    const std::string path = m.PathOf("priority_queue_policy");
    if (!by_level->IsMap()) {
      return yaml::ErrorAt(source, *by_level, path,
                           "expected a map from priority level to queue policy");
    }
    for (const auto& item : *by_level) {
      const std::string key = item.first.as<std::string>("");
      int64_t level = 0;
      if (!absl::SimpleAtoi(key, &level) || level < 1 || level > levels) {
        return yaml::ErrorAt(
            source, item.first, path,
            absl::StrCat("'", key, "' is not a priority level (1..priority_levels, ", levels, ")"));
      }
      if (batching.priority_queue_policy.count(static_cast<uint32_t>(level))) {
        return yaml::ErrorAt(source, item.first, path, absl::StrCat("level ", level, " twice"));
      }
      TESSERA_ASSIGN_OR_RETURN(batching.priority_queue_policy[static_cast<uint32_t>(level)],
                               ReadQueuePolicy(source, item.second, absl::StrCat(path, ".", key)));
    }
  }
  return absl::OkStatus();
}

Status ReadInstanceGroups(const YamlMap& root, std::vector<InstanceGroupConfig>& groups) {
  std::optional<YAML::Node> node = root.Get("instance_group");
  if (!node) return absl::OkStatus();
  std::string_view source = root.source();
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                           yaml::ReadList(source, *node, "instance_group"));
  for (size_t i = 0; i < items.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(YamlMap m,
                             YamlMap::Create(source, items[i], yaml::IndexPath("instance_group", i),
                                             kInstanceGroupKeys));
    InstanceGroupConfig group;
    TESSERA_RETURN_IF_ERROR(m.GetString("name", &group.name));
    TESSERA_RETURN_IF_ERROR(m.GetInt("count", 1, INT32_MAX, &group.count));
    std::string kind = "KIND_AUTO";
    TESSERA_RETURN_IF_ERROR(m.GetEnum("kind", kInstanceKinds, &kind));
    group.kind = kind == "KIND_GPU"   ? InstanceKind::kGpu
                 : kind == "KIND_CPU" ? InstanceKind::kCpu
                                      : InstanceKind::kAuto;
    if (std::optional<YAML::Node> gpus = m.Get("gpus")) {
      TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> ids,
                               yaml::ReadIntList(source, *gpus, m.PathOf("gpus"), 0, INT32_MAX));
      if (group.kind == InstanceKind::kCpu && !ids.empty()) {
        return yaml::ErrorAt(source, *gpus, m.PathOf("gpus"), "not allowed with kind KIND_CPU");
      }
      group.gpus.assign(ids.begin(), ids.end());
    }
    groups.push_back(std::move(group));
  }
  return absl::OkStatus();
}

// Tessera's multi-granularity workers (E²bird): one instance per listed batch size, each a power of
// two ≤ max_batch_size, no two alike. They replace instance_group's count and the preferred sizes.
Status ReadWorkerBatchSizes(const YamlMap& root, const ModelConfig& config,
                            std::vector<int>& sizes) {
  constexpr std::string_view kKey = "worker_batch_sizes";
  std::optional<YAML::Node> node = root.Get(kKey);
  if (!node) return absl::OkStatus();
  std::string_view source = root.source();
  const int line = root.KeyLine(kKey);
  if (config.max_batch_size == 0) {
    return yaml::ErrorAt(source, line, kKey, "needs max_batch_size > 0 (it is 0: no batching)");
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, yaml::ReadList(source, *node, kKey));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> values,
                           yaml::ReadIntList(source, *node, kKey, 1, config.max_batch_size));
  if (values.empty()) {
    return yaml::ErrorAt(source, line, kKey,
                         "is empty (leave it out to use instance_group's instances)");
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t size = values[i];
    if ((size & (size - 1)) != 0) {
      return yaml::ErrorAt(source, items[i], yaml::IndexPath(std::string(kKey), i),
                           absl::StrCat("must be a power of two, got ", size));
    }
    for (size_t j = 0; j < i; ++j) {
      if (values[j] == size) {
        return yaml::ErrorAt(source, items[i], yaml::IndexPath(std::string(kKey), i),
                             absl::StrCat("duplicate size ", size, " (one worker per size)"));
      }
    }
  }
  int instances = 0;
  for (const InstanceGroupConfig& group : config.instance_groups) instances += group.count;
  if (instances > 1) {
    return yaml::ErrorAt(source, line, kKey,
                         absl::StrCat("gives one instance per size, so it cannot be combined with "
                                      "instance_group's count (",
                                      instances, " instances)"));
  }
  if (!config.dynamic_batching.preferred_batch_sizes.empty()) {
    return yaml::ErrorAt(source, line, kKey,
                         "the workers' sizes are the batch sizes: leave out "
                         "dynamic_batching.preferred_batch_size");
  }
  sizes.assign(values.begin(), values.end());
  return absl::OkStatus();
}

// Triton's model_warmup: a list of {name, batch_size, count, inputs: {<input>: {data_type, dims,
// zero_data | random_data}}}. Names, types and dims are checked against the model at load, when
// its inputs are known (they may come from the model file).
Status ReadModelWarmup(const YamlMap& root, int max_batch_size,
                       std::vector<WarmupSample>& samples) {
  constexpr std::string_view kKey = "model_warmup";
  std::optional<YAML::Node> node = root.Get(kKey);
  if (!node) return absl::OkStatus();
  std::string_view source = root.source();
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, yaml::ReadList(source, *node, kKey));
  for (size_t i = 0; i < items.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(
        YamlMap m, YamlMap::Create(source, items[i], yaml::IndexPath(kKey, i), kWarmupKeys));
    WarmupSample sample;
    TESSERA_RETURN_IF_ERROR(m.GetString("name", &sample.name));
    if (sample.name.empty()) sample.name = absl::StrCat("sample ", i);
    // Triton: at most max_batch_size, and 1 for a model without batching.
    TESSERA_RETURN_IF_ERROR(
        m.GetInt("batch_size", 1, std::max(1, max_batch_size), &sample.batch_size));
    TESSERA_RETURN_IF_ERROR(m.GetInt("count", 0, 1000, &sample.count));
    std::optional<YAML::Node> inputs = m.Get("inputs");
    if (!inputs) return m.Missing("inputs");
    const std::string inputs_path = m.PathOf("inputs");
    if (!inputs->IsMap() || inputs->size() == 0) {
      return yaml::ErrorAt(source, *inputs, inputs_path,
                           "expected a map from input name to {data_type, dims, zero_data, "
                           "random_data or input_data_file}");
    }
    for (auto it = inputs->begin(); it != inputs->end(); ++it) {
      TESSERA_ASSIGN_OR_RETURN(std::string name,
                               yaml::ReadString(source, it->first, inputs_path));
      const std::string path = yaml::JoinPath(inputs_path, name);
      TESSERA_ASSIGN_OR_RETURN(YamlMap in, YamlMap::Create(source, it->second, path,
                                                           kWarmupInputKeys));
      WarmupInput input;
      input.name = name;
      std::optional<YAML::Node> type = in.Get("data_type");
      if (!type) return in.Missing("data_type");
      std::optional<DataType> data_type;
      if (type->IsScalar()) data_type = DataTypeFromConfigName(type->Scalar());
      if (!data_type) {
        return yaml::ErrorAt(source, *type, in.PathOf("data_type"),
                             absl::StrCat("expected one of ", ValidDataTypeNames(), ", got ",
                                          yaml::Describe(*type)));
      }
      input.data_type = *data_type;
      std::optional<YAML::Node> dims = in.Get("dims");
      if (!dims) return in.Missing("dims");
      TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> values,
                               yaml::ReadIntList(source, *dims, in.PathOf("dims"), 1, INT32_MAX));
      input.dims.assign(values.begin(), values.end());
      if (std::optional<YAML::Node> file = in.Get("input_data_file")) {
        TESSERA_ASSIGN_OR_RETURN(input.input_data_file,
                                 yaml::ReadString(source, *file, in.PathOf("input_data_file")));
        TESSERA_RETURN_IF_ERROR(
            CheckPlainFileName(source, *file, in.PathOf("input_data_file"), input.input_data_file));
      }
      bool zero = false;
      TESSERA_RETURN_IF_ERROR(in.GetBool("zero_data", &zero));
      TESSERA_RETURN_IF_ERROR(in.GetBool("random_data", &input.random_data));
      if (int(zero) + int(input.random_data) + int(in.Has("input_data_file")) != 1) {
        return yaml::ErrorAt(
            source, in.line(), path,
            "needs exactly one of zero_data: true, random_data: true or input_data_file");
      }
      sample.inputs.push_back(std::move(input));
    }
    samples.push_back(std::move(sample));
  }
  return absl::OkStatus();
}

// A tag is exported as the label "_<key>" (Triton's form): the key must make that a valid,
// unreserved Prometheus label name, or every scrape of /metrics would be unreadable.
Status ReadMetricTags(const YamlMap& root, std::map<std::string, std::string>& tags) {
  std::optional<YAML::Node> node = root.Get("metric_tags");
  if (!node) return absl::OkStatus();
  std::string_view source = root.source();
  if (!node->IsMap()) {
    return yaml::ErrorAt(source, *node, "metric_tags", "expected a map from tag to value");
  }
  for (const auto& item : *node) {
    TESSERA_ASSIGN_OR_RETURN(std::string key, yaml::ReadString(source, item.first, "metric_tags"));
    const bool valid =
        !key.empty() && key.front() != '_' && std::all_of(key.begin(), key.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
        });
    if (!valid) {
      return yaml::ErrorAt(source, item.first, "metric_tags",
                           absl::StrCat("'", key, "' cannot be a tag: it becomes the label '_", key,
                                        "', so letters, digits and '_' only, not starting "
                                        "with '_'"));
    }
    const std::string path = yaml::JoinPath("metric_tags", key);
    TESSERA_ASSIGN_OR_RETURN(tags[key], yaml::ReadString(source, item.second, path));
  }
  return absl::OkStatus();
}

Status ParseInto(const YAML::Node& doc, std::string_view source, const std::string& expected_name,
                 ModelConfig& config) {
  TESSERA_ASSIGN_OR_RETURN(YamlMap root, YamlMap::Create(source, doc, "", kModelKeys));

  if (std::optional<YAML::Node> name = root.Get("name")) {
    TESSERA_ASSIGN_OR_RETURN(config.name, yaml::ReadString(source, *name, "name"));
    if (config.name.empty()) return yaml::ErrorAt(source, *name, "name", "is empty");
    if (!expected_name.empty() && config.name != expected_name) {
      return yaml::ErrorAt(source, *name, "name",
                           absl::StrCat("\"", config.name, "\" does not match the model folder \"",
                                        expected_name, "\""));
    }
  } else if (!expected_name.empty()) {
    config.name = expected_name;
  } else {
    return root.Missing("name");
  }

  if (std::optional<YAML::Node> platform = root.Get("platform")) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, yaml::ReadString(source, *platform, "platform"));
    // Triton's name for the ONNX Runtime platform, so a Triton config carries over unchanged.
    if (text == "onnxruntime_onnx") text = "onnx";
    if (text != "onnx" && text != "ensemble") {
      return yaml::ErrorAt(
          source, *platform, "platform",
          absl::StrCat("expected onnx (or onnxruntime_onnx) or ensemble, got \"", text, "\""));
    }
    config.platform = text;
  }
  // Triton configs often name the backend instead of the platform; the ONNX Runtime one is the only
  // backend whose models Tessera runs. "tessera" is what Tessera's own ModelConfig answers say, so
  // a config read back from the server loads again unchanged.
  if (std::optional<YAML::Node> backend = root.Get("backend")) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, yaml::ReadString(source, *backend, "backend"));
    if (text != "onnxruntime" && text != "tessera") {
      return yaml::ErrorAt(source, *backend, "backend",
                           absl::StrCat("expected onnxruntime or tessera, got \"", text, "\""));
    }
  }

  TESSERA_RETURN_IF_ERROR(root.GetInt("max_batch_size", 0, INT32_MAX, &config.max_batch_size));
  TESSERA_RETURN_IF_ERROR(ReadVersionPolicy(root, config.version_policy));
  TESSERA_RETURN_IF_ERROR(ReadTensors(root, "input", config.inputs));
  TESSERA_RETURN_IF_ERROR(ReadTensors(root, "output", config.outputs));
  TESSERA_RETURN_IF_ERROR(ReadDynamicBatching(root, config.max_batch_size,
                                              config.inputs.empty() || config.outputs.empty(),
                                              config.dynamic_batching));
  TESSERA_RETURN_IF_ERROR(ReadInstanceGroups(root, config.instance_groups));

  if (std::optional<YAML::Node> file = root.Get("default_model_filename")) {
    TESSERA_ASSIGN_OR_RETURN(config.default_model_filename,
                             yaml::ReadString(source, *file, "default_model_filename"));
    // The repository looks for it inside each version folder, never elsewhere.
    TESSERA_RETURN_IF_ERROR(
        CheckPlainFileName(source, *file, "default_model_filename", config.default_model_filename));
  }
  TESSERA_RETURN_IF_ERROR(root.GetDouble("slo_ms", 0, 1e9, &config.slo_ms));
  TESSERA_RETURN_IF_ERROR(root.GetEnum("precision", kPrecisions, &config.precision));
  TESSERA_RETURN_IF_ERROR(ReadWorkerBatchSizes(root, config, config.worker_batch_sizes));
  TESSERA_RETURN_IF_ERROR(ReadModelWarmup(root, config.max_batch_size, config.model_warmup));
  if (std::optional<YAML::Node> cache = root.Get("response_cache")) {
    TESSERA_ASSIGN_OR_RETURN(YamlMap m,
                             YamlMap::Create(source, *cache, "response_cache", kResponseCacheKeys));
    TESSERA_RETURN_IF_ERROR(m.GetBool("enable", &config.response_cache));
  }
  TESSERA_RETURN_IF_ERROR(ReadSequenceBatching(root, config));
  TESSERA_RETURN_IF_ERROR(ReadMetricTags(root, config.metric_tags));
  TESSERA_RETURN_IF_ERROR(ReadRaggedBatching(root, config));
  TESSERA_RETURN_IF_ERROR(ReadEnsembleScheduling(root, config));
  return CheckOptionalInputs(root, config);
}

}  // namespace

StatusOr<ModelConfig> ParseModelConfig(const std::string& yaml_text, const std::string& source,
                                       const std::string& expected_name) {
  // yaml-cpp reports misuse by throwing; this is the boundary where that becomes a Status.
  try {
    TESSERA_ASSIGN_OR_RETURN(YAML::Node doc, yaml::ParseDocument(yaml_text, source));
    ModelConfig config;
    TESSERA_RETURN_IF_ERROR(ParseInto(doc, source, expected_name, config));
    return config;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", e.what()));
  }
}

StatusOr<ModelConfig> LoadModelConfigFile(const std::string& path,
                                          const std::string& expected_name) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, yaml::ReadFileToString(path));
  return ParseModelConfig(text, path, expected_name);
}

}  // namespace tessera::repository
