#include "ragged_config.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "config_fields.h"

namespace tessera::repository {
namespace {

using yaml::YamlMap;

constexpr std::array<std::string_view, 4> kBatchInputKeys = {"kind", "target_name", "data_type",
                                                             "source_input"};
constexpr std::array<std::string_view, 3> kBatchOutputKeys = {"target_name", "kind",
                                                              "source_input"};
// In BatchInputConfig::Kind order (model_config.proto's numbering).
constexpr std::array<std::string_view, 6> kBatchInputKinds = {
    "BATCH_ELEMENT_COUNT",
    "BATCH_ACCUMULATED_ELEMENT_COUNT",
    "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO",
    "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE",
    "BATCH_ITEM_SHAPE",
    "BATCH_ITEM_SHAPE_FLATTEN"};
constexpr std::array<std::string_view, 1> kBatchOutputKinds = {"BATCH_SCATTER_WITH_INPUT_SHAPE"};

// `target_name` or `source_input`: a list of names, or one name (Triton's text form repeats the
// field; a list is how the config.pbtxt reader writes it).
StatusOr<std::vector<std::string>> ReadNames(const YamlMap& m, std::string_view key) {
  std::optional<YAML::Node> node = m.Get(key);
  if (!node) return m.Missing(key);
  const std::string path = m.PathOf(key);
  std::vector<std::string> names;
  if (node->IsScalar()) {
    TESSERA_ASSIGN_OR_RETURN(names.emplace_back(), yaml::ReadString(m.source(), *node, path));
  } else {
    TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                             yaml::ReadList(m.source(), *node, path));
    for (size_t i = 0; i < items.size(); ++i) {
      TESSERA_ASSIGN_OR_RETURN(names.emplace_back(),
                               yaml::ReadString(m.source(), items[i], yaml::IndexPath(path, i)));
    }
  }
  if (names.empty()) return yaml::ErrorAt(m.source(), *node, path, "must name at least one tensor");
  for (const std::string& name : names) {
    if (name.empty()) return yaml::ErrorAt(m.source(), *node, path, "holds an empty name");
  }
  return names;
}

// The one source input every kind takes, a config input.
StatusOr<std::string> ReadSource(const YamlMap& m, const ModelConfig& config) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> sources, ReadNames(m, "source_input"));
  const int line = m.KeyLine("source_input");
  if (sources.size() != 1) {
    return yaml::ErrorAt(m.source(), line, m.PathOf("source_input"),
                         absl::StrCat("takes exactly one input, got ", sources.size()));
  }
  const TensorConfig* input = FindTensor(config.inputs, sources[0]);
  if (input == nullptr) {
    return yaml::ErrorAt(m.source(), line, m.PathOf("source_input"),
                         absl::StrCat("'", sources[0], "' is not an input of the config"));
  }
  if (input->optional) {
    return yaml::ErrorAt(m.source(), line, m.PathOf("source_input"),
                         absl::StrCat("'", sources[0], "' is optional: a request could leave out ",
                                      "what this describes"));
  }
  return sources[0];
}

Status ReadBatchInputs(const YamlMap& root, ModelConfig& config) {
  std::optional<YAML::Node> node = root.Get("batch_input");
  if (!node) return absl::OkStatus();
  std::string_view source = root.source();
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                           yaml::ReadList(source, *node, "batch_input"));
  for (size_t i = 0; i < items.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(
        YamlMap m,
        YamlMap::Create(source, items[i], yaml::IndexPath("batch_input", i), kBatchInputKeys));
    BatchInputConfig batch_input;
    if (!m.Has("kind")) return m.Missing("kind");
    std::string kind;
    TESSERA_RETURN_IF_ERROR(m.GetEnum("kind", kBatchInputKinds, &kind));
    batch_input.kind = static_cast<BatchInputConfig::Kind>(
        std::find(kBatchInputKinds.begin(), kBatchInputKinds.end(), kind) -
        kBatchInputKinds.begin());

    TESSERA_ASSIGN_OR_RETURN(batch_input.target_names, ReadNames(m, "target_name"));
    const int target_line = m.KeyLine("target_name");
    for (const std::string& target : batch_input.target_names) {
      std::string taken;
      if (FindTensor(config.inputs, target) != nullptr)
        taken = "a config input (clients send those)";
      for (const BatchInputConfig& other : config.batch_inputs) {
        if (std::count(other.target_names.begin(), other.target_names.end(), target) > 0) {
          taken = "the target of an earlier batch_input";
        }
      }
      if (std::count(batch_input.target_names.begin(), batch_input.target_names.end(), target) >
          1) {
        taken = "listed twice";
      }
      if (!taken.empty()) {
        return yaml::ErrorAt(source, target_line, m.PathOf("target_name"),
                             absl::StrCat("'", target, "' is ", taken));
      }
    }

    std::optional<YAML::Node> type = m.Get("data_type");
    if (!type) return m.Missing("data_type");
    TESSERA_ASSIGN_OR_RETURN(batch_input.data_type,
                             ReadDataType(source, *type, m.PathOf("data_type")));
    if (batch_input.data_type != DataType::kInt32 && batch_input.data_type != DataType::kInt64 &&
        batch_input.data_type != DataType::kFp32) {
      return yaml::ErrorAt(
          source, *type, m.PathOf("data_type"),
          absl::StrCat("a batch input is TYPE_INT32, TYPE_INT64 or TYPE_FP32, got ",
                       yaml::AsAbsl(DataTypeToConfigName(batch_input.data_type))));
    }
    TESSERA_ASSIGN_OR_RETURN(batch_input.source_input, ReadSource(m, config));
    config.batch_inputs.push_back(std::move(batch_input));
  }
  return absl::OkStatus();
}

Status ReadBatchOutputs(const YamlMap& root, ModelConfig& config) {
  std::optional<YAML::Node> node = root.Get("batch_output");
  if (!node) return absl::OkStatus();
  std::string_view source = root.source();
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                           yaml::ReadList(source, *node, "batch_output"));
  for (size_t i = 0; i < items.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(
        YamlMap m,
        YamlMap::Create(source, items[i], yaml::IndexPath("batch_output", i), kBatchOutputKeys));
    BatchOutputConfig batch_output;
    std::string kind;
    TESSERA_RETURN_IF_ERROR(m.GetEnum("kind", kBatchOutputKinds, &kind));
    TESSERA_ASSIGN_OR_RETURN(batch_output.target_names, ReadNames(m, "target_name"));
    TESSERA_ASSIGN_OR_RETURN(batch_output.source_input, ReadSource(m, config));
    const TensorConfig* source_input = FindTensor(config.inputs, batch_output.source_input);
    // The request's part of the output: the output's dims, batch dim first, each -1 taken from
    // the same dim of the source input's shape (which has the batch dim first too).
    const size_t source_rank = source_input->dims.size() + 1;
    const int target_line = m.KeyLine("target_name");
    auto refuse = [&](const std::string& target, const std::string& why) {
      return yaml::ErrorAt(source, target_line, m.PathOf("target_name"),
                           absl::StrCat("'", target, "' ", why));
    };
    for (const std::string& target : batch_output.target_names) {
      const TensorConfig* output = FindTensor(config.outputs, target);
      if (output == nullptr) return refuse(target, "is not an output of the config");
      for (const BatchOutputConfig& other : config.batch_outputs) {
        if (std::count(other.target_names.begin(), other.target_names.end(), target) > 0) {
          return refuse(target, "is the target of an earlier batch_output");
        }
      }
      if (output->data_type == DataType::kString) {
        return refuse(target, "is TYPE_STRING: a batch output is split by element counts");
      }
      if (output->reshape) return refuse(target, "has a reshape: the model gives it flat");
      for (size_t d = 0; d < output->dims.size(); ++d) {
        if (output->dims[d] < 0 && d + 1 >= source_rank) {
          return refuse(target, absl::StrCat("has -1 at dim ", d, " (", d + 1,
                                             " with the batch dim), past the rank of its source "
                                             "input '",
                                             batch_output.source_input,
                                             "', which gives the size of each -1"));
        }
      }
    }
    config.batch_outputs.push_back(std::move(batch_output));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsBatchOutput(const ModelConfig& config, const std::string& name) {
  return std::any_of(config.batch_outputs.begin(), config.batch_outputs.end(),
                     [&](const BatchOutputConfig& b) {
                       return std::count(b.target_names.begin(), b.target_names.end(), name) > 0;
                     });
}

std::string_view BatchInputKindName(BatchInputConfig::Kind kind) {
  return kBatchInputKinds[static_cast<size_t>(kind)];
}

Status ReadRaggedBatching(const YamlMap& root, ModelConfig& config) {
  const bool batch_io = root.Has("batch_input") || root.Has("batch_output");
  if (!batch_io && !config.ragged_batching()) return absl::OkStatus();
  std::string_view source = root.source();
  const std::string_view key = root.Has("batch_input")    ? "batch_input"
                               : root.Has("batch_output") ? "batch_output"
                                                          : "input";
  const int line = root.KeyLine(key);
  auto refuse = [&](const std::string& why) { return yaml::ErrorAt(source, line, key, why); };
  if (config.is_ensemble()) {
    return refuse("ragged batching is for a model's own batches; an ensemble has none");
  }
  if (config.sequence_batching.enabled) {
    return refuse("ragged batching with sequence_batching is not supported");
  }
  if (batch_io) {
    if (config.max_batch_size <= 0) {
      return refuse("batch inputs and outputs describe a batch: they need max_batch_size > 0");
    }
    if (config.inputs.empty() || config.outputs.empty()) {
      return refuse("with batch inputs or outputs the config must list its inputs and outputs");
    }
  }
  TESSERA_RETURN_IF_ERROR(ReadBatchInputs(root, config));
  return ReadBatchOutputs(root, config);
}

}  // namespace tessera::repository
