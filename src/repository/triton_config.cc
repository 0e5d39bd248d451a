// Triton's config.pbtxt, read into Tessera's ModelConfig.
//
// The text is parsed by protobuf's own text-format parser into inference.ModelConfig. The fields
// Tessera acts on are then written out again as config.yaml text and parsed by ParseModelConfig, so
// the two formats share one set of checks and messages. Each written line remembers the
// config.pbtxt line it came from, which puts the right line into every error.
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "inference/model_config.pb.h"
#include "nlohmann/json.hpp"
#include "tessera/repository/model_config.h"
#include "triton_config_writer.h"

namespace tessera::repository {
namespace {

using google::protobuf::TextFormat;
using namespace pbtxt;  // NOLINT: the writer's pieces are this file's vocabulary

// Tessera's own keys, carried in Triton's free-form `parameters` map.
constexpr const char* kTesseraParameters[] = {"slo_ms", "precision", "worker_batch_sizes"};

// The parser's first error, with its 1-based line and column.
class FirstParseError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (text.empty()) text = absl::StrCat(line + 1, ":", column + 1, ": ", message);
  }
  std::string text;
};

// The Triton blocks Tessera refuses or ignores as a whole. model_config.proto declares them as
// empty messages; their insides are blanked before parsing (protobuf's own skipping of unknown
// fields cannot step over `name [ {...} ]` lists).
constexpr const char* kWholeBlocks[] = {"optimization", "model_operations",
                                        "model_repository_agents", "model_metrics"};
constexpr const char* kWholeBlocksInInstanceGroup = "secondary_devices";

// Index just past a string literal or comment starting at `i`, or `i` when there is none.
size_t SkipStringOrComment(const std::string& text, size_t i) {
  if (text[i] == '#') {
    size_t end = text.find('\n', i);
    return end == std::string::npos ? text.size() : end;
  }
  if (text[i] != '"' && text[i] != '\'') return i;
  const char quote = text[i];
  for (size_t j = i + 1; j < text.size(); ++j) {
    if (text[j] == '\\') {
      ++j;
    } else if (text[j] == quote || text[j] == '\n') {
      return j + 1;
    }
  }
  return text.size();
}

bool IsOpen(char c) { return c == '{' || c == '[' || c == '<'; }
bool IsClose(char c) { return c == '}' || c == ']' || c == '>'; }
bool IsIdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The bracket that closes the one at `open`, or npos when the text is unbalanced.
size_t MatchingClose(const std::string& text, size_t open) {
  int depth = 0;
  for (size_t i = open; i < text.size();) {
    size_t past = SkipStringOrComment(text, i);
    if (past != i) {
      i = past;
      continue;
    }
    if (IsOpen(text[i])) ++depth;
    if (IsClose(text[i]) && --depth == 0) return i;
    ++i;
  }
  return std::string::npos;
}

// `name <anything balanced>` becomes `name {   }`: the brackets become braces and what is between
// them spaces, newlines kept, so every line and column stays where it was for the parser's
// messages. An empty list is left alone.
std::string BlankWholeBlocks(const std::string& text) {
  std::string out = text;
  std::vector<std::string> open_fields;  // the field each open bracket belongs to
  std::string last_name;
  for (size_t i = 0; i < text.size();) {
    size_t past = SkipStringOrComment(text, i);
    if (past != i) {
      i = past;
      last_name.clear();
      continue;
    }
    const char c = text[i];
    if (IsIdentifierChar(c)) {
      size_t end = i;
      while (end < text.size() && IsIdentifierChar(text[end])) ++end;
      last_name = text.substr(i, end - i);
      i = end;
      continue;
    }
    if (IsOpen(c)) {
      bool in_group =
          std::find(open_fields.begin(), open_fields.end(), "instance_group") != open_fields.end();
      bool whole =
          (open_fields.empty() && std::find(std::begin(kWholeBlocks), std::end(kWholeBlocks),
                                            last_name) != std::end(kWholeBlocks)) ||
          (in_group && last_name == kWholeBlocksInInstanceGroup);
      size_t close = whole ? MatchingClose(text, i) : std::string::npos;
      bool empty_list = c == '[' && close != std::string::npos &&
                        text.find_first_not_of(" \t\r\n", i + 1) == close;
      if (close != std::string::npos && !empty_list) {
        out[i] = '{';
        for (size_t k = i + 1; k < close; ++k) {
          if (out[k] != '\n') out[k] = ' ';
        }
        out[close] = '}';
        i = close + 1;
        last_name.clear();
        continue;
      }
      open_fields.push_back(last_name);
      last_name.clear();
    } else if (IsClose(c)) {
      if (!open_fields.empty()) open_fields.pop_back();
      last_name.clear();
    } else if (c != ':' && !std::isspace(static_cast<unsigned char>(c))) {
      last_name.clear();
    }
    ++i;
  }
  return out;
}

// One `input` or `output` entry (ModelInput or ModelOutput: the fields both have share one code
// path; the input-only and output-only ones are under `if constexpr`).
template <typename TensorProto>
Status WriteTensor(const TensorProto& tensor, const std::string& key, int index,
                   const Locator& parent, YamlWriter& yaml, Reading& reading) {
  constexpr bool kInput = std::is_same_v<TensorProto, inference::ModelInput>;
  const std::string path = absl::StrCat(key, "[", index, "]");
  Locator at = parent.Nested(key, tensor.GetDescriptor(), index);
  const int line = LineOr(parent.At(key, index), 1);
  auto refuse = [&](const std::string& field, const std::string& reason) {
    return RefuseAt(reading.source, LineOr(at.At(field), line), absl::StrCat(path, ".", field),
                    reason);
  };

  if (tensor.is_shape_tensor()) return refuse("is_shape_tensor", "shape tensors are not supported");
  if (tensor.is_non_linear_format_io()) {
    return refuse("is_non_linear_format_io", "non-linear tensor formats are not supported");
  }
  if constexpr (kInput) {
    if (tensor.format() != inference::ModelInput::FORMAT_NONE) {
      reading.Ignore(LineOr(at.At("format"), line), absl::StrCat(path, ".format"),
                     "the layout is the model's own");
    }
  }
  // A name or data type left out is left out of the YAML too, so the check reports it missing (at
  // the line of the tensor's first field). `dims` is always written: proto3 cannot tell `dims: []`
  // from no dims.
  std::vector<std::pair<std::string, int>> keys;
  if (!tensor.name().empty()) {
    keys.emplace_back(absl::StrCat("name: ", Quoted(tensor.name())), at.At("name"));
  }
  if (tensor.data_type() != inference::TYPE_INVALID) {
    keys.emplace_back(absl::StrCat("data_type: ", inference::DataType_Name(tensor.data_type())),
                      at.At("data_type"));
  }
  keys.emplace_back(absl::StrCat("dims: ", FlowList(tensor.dims())), at.At("dims", 0));
  if (tensor.has_reshape()) {
    keys.emplace_back(absl::StrCat("reshape: {shape: ", FlowList(tensor.reshape().shape()), "}"),
                      at.At("reshape"));
  }
  if constexpr (kInput) {
    if (tensor.allow_ragged_batch()) {
      keys.emplace_back("allow_ragged_batch: true", at.At("allow_ragged_batch"));
    }
    if (tensor.optional()) keys.emplace_back("optional: true", at.At("optional"));
  } else {
    if (!tensor.label_filename().empty()) {
      keys.emplace_back(absl::StrCat("label_filename: ", Quoted(tensor.label_filename())),
                        at.At("label_filename"));
    }
  }
  for (size_t k = 0; k < keys.size(); ++k) {
    yaml.Add(k == 0 ? 2 : 4, absl::StrCat(k == 0 ? "- " : "", keys[k].first),
             LineOr(keys[k].second, line));
  }
  return absl::OkStatus();
}

// The `input` or `output` list.
template <typename TensorProto>
Status WriteTensors(const google::protobuf::RepeatedPtrField<TensorProto>& tensors,
                    const std::string& key, const Locator& root, YamlWriter& yaml,
                    Reading& reading) {
  if (tensors.empty()) return absl::OkStatus();  // the checks report the missing key
  yaml.Add(0, absl::StrCat(key, ":"), LineOr(root.At(key, 0), 1));
  for (int i = 0; i < tensors.size(); ++i) {
    TESSERA_RETURN_IF_ERROR(WriteTensor(tensors.Get(i), key, i, root, yaml, reading));
  }
  return absl::OkStatus();
}

void WriteVersionPolicy(const inference::ModelConfig& config, const Locator& root,
                        YamlWriter& yaml) {
  if (!config.has_version_policy()) return;
  const inference::ModelVersionPolicy& policy = config.version_policy();
  const int line = LineOr(root.At("version_policy"), 1);
  Locator at = root.Nested("version_policy", policy.GetDescriptor());
  yaml.Add(0, "version_policy:", line);
  if (policy.has_latest()) {
    yaml.Add(2, "latest:", LineOr(at.At("latest"), line));
    // `latest {}` leaves num_versions at its default (1), as in Triton.
    if (policy.latest().num_versions() != 0) {
      yaml.Add(4, absl::StrCat("num_versions: ", policy.latest().num_versions()),
               LineOr(at.At("latest"), line));
    }
  } else if (policy.has_all()) {
    yaml.Add(2, "all: {}", LineOr(at.At("all"), line));
  } else if (policy.has_specific()) {
    const int specific_line = LineOr(at.At("specific"), line);
    yaml.Add(2, "specific:", specific_line);
    yaml.Add(4, absl::StrCat("versions: ", FlowList(policy.specific().versions())), specific_line);
  } else {
    yaml.Add(2, "{}", line);  // `version_policy {}`: the checks say what is missing
  }
}

// A ModelQueuePolicy's fields as YAML keys at `indent`.
void WriteQueuePolicy(const inference::ModelQueuePolicy& queue, int indent, int line,
                      YamlWriter& yaml) {
  yaml.Add(indent, absl::StrCat("max_queue_size: ", queue.max_queue_size()), line);
  yaml.Add(indent,
           absl::StrCat(
               "timeout_action: ",
               queue.timeout_action() == inference::ModelQueuePolicy::DELAY ? "DELAY" : "REJECT"),
           line);
  yaml.Add(indent,
           absl::StrCat("default_timeout_microseconds: ", queue.default_timeout_microseconds()),
           line);
  yaml.Add(
      indent,
      absl::StrCat("allow_timeout_override: ", queue.allow_timeout_override() ? "true" : "false"),
      line);
}

void WriteDynamicBatching(const inference::ModelConfig& config, const Locator& root,
                          YamlWriter& yaml, Reading& reading) {
  if (!config.has_dynamic_batching()) return;
  const inference::ModelDynamicBatching& batching = config.dynamic_batching();
  const int line = LineOr(root.At("dynamic_batching"), 1);
  Locator at = root.Nested("dynamic_batching", batching.GetDescriptor());
  yaml.Add(0, "dynamic_batching:", line);
  bool empty = true;
  if (!batching.preferred_batch_size().empty()) {
    yaml.Add(2, absl::StrCat("preferred_batch_size: ", FlowList(batching.preferred_batch_size())),
             LineOr(at.At("preferred_batch_size", 0), line));
    empty = false;
  }
  if (batching.max_queue_delay_microseconds() != 0) {
    yaml.Add(
        2, absl::StrCat("max_queue_delay_microseconds: ", batching.max_queue_delay_microseconds()),
        LineOr(at.At("max_queue_delay_microseconds"), line));
    empty = false;
  }
  if (batching.has_default_queue_policy()) {
    const int queue_line = LineOr(at.At("default_queue_policy"), line);
    yaml.Add(2, "default_queue_policy:", queue_line);
    WriteQueuePolicy(batching.default_queue_policy(), 4, queue_line, yaml);
    empty = false;
  }
  if (!batching.priority_queue_policy().empty()) {
    // The text's own order of the entries is lost in the map: each gets the first one's line,
    // and errors name the level in the key path.
    const int policy_line = LineOr(at.At("priority_queue_policy", 0), line);
    yaml.Add(2, "priority_queue_policy:", policy_line);
    const std::map<uint64_t, inference::ModelQueuePolicy> by_level(
        batching.priority_queue_policy().begin(), batching.priority_queue_policy().end());
    for (const auto& [level, queue] : by_level) {
      yaml.Add(4, absl::StrCat(level, ":"), policy_line);
      WriteQueuePolicy(queue, 6, policy_line, yaml);
    }
    empty = false;
  }
  if (batching.preserve_ordering()) {
    reading.Ignore(LineOr(at.At("preserve_ordering"), line), "dynamic_batching.preserve_ordering",
                   "each request has its own answer");
  }
  if (batching.priority_levels() != 0 || batching.default_priority_level() != 0) {
    yaml.Add(2, absl::StrCat("priority_levels: ", batching.priority_levels()),
             LineOr(at.At("priority_levels"), line));
    yaml.Add(2, absl::StrCat("default_priority_level: ", batching.default_priority_level()),
             LineOr(at.At("default_priority_level"), LineOr(at.At("priority_levels"), line)));
    empty = false;
  }
  if (empty) yaml.Add(2, "{}", line);
}

// model_warmup, as the same keys in YAML.
void WriteModelWarmup(const inference::ModelConfig& config, const Locator& root,
                      YamlWriter& yaml) {
  if (config.model_warmup().empty()) return;
  yaml.Add(0, "model_warmup:", LineOr(root.At("model_warmup", 0), 1));
  for (int i = 0; i < config.model_warmup_size(); ++i) {
    const inference::ModelWarmup& sample = config.model_warmup(i);
    const int line = LineOr(root.At("model_warmup", i), 1);
    Locator at = root.Nested("model_warmup", sample.GetDescriptor(), i);
    yaml.Add(2, absl::StrCat("- batch_size: ", sample.batch_size()),
             LineOr(at.At("batch_size"), line));
    if (!sample.name().empty()) {
      yaml.Add(4, absl::StrCat("name: ", Quoted(sample.name())), LineOr(at.At("name"), line));
    }
    if (sample.count() != 0) {
      yaml.Add(4, absl::StrCat("count: ", sample.count()), LineOr(at.At("count"), line));
    }
    const int inputs_line = LineOr(at.At("inputs", 0), line);
    yaml.Add(4, sample.inputs().empty() ? "inputs: {}" : "inputs:", inputs_line);
    // Sorted, so the YAML (and its errors) do not depend on the map's iteration order.
    std::vector<std::string> names;
    for (const auto& [name, input] : sample.inputs()) names.push_back(name);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const inference::ModelWarmup::Input& input = sample.inputs().at(name);
      yaml.Add(6, absl::StrCat(Quoted(name), ":"), inputs_line);
      yaml.Add(8, absl::StrCat("data_type: ", inference::DataType_Name(input.data_type())),
               inputs_line);
      yaml.Add(8, absl::StrCat("dims: ", FlowList(input.dims())), inputs_line);
      if (input.has_zero_data()) {
        yaml.Add(8, absl::StrCat("zero_data: ", input.zero_data() ? "true" : "false"),
                 inputs_line);
      }
      if (input.has_random_data()) {
        yaml.Add(8, absl::StrCat("random_data: ", input.random_data() ? "true" : "false"),
                 inputs_line);
      }
      if (input.has_input_data_file()) {
        yaml.Add(8, absl::StrCat("input_data_file: ", Quoted(input.input_data_file())),
                 inputs_line);
      }
    }
  }
}

void WriteInstanceGroups(const inference::ModelConfig& config, const Locator& root,
                         YamlWriter& yaml, Reading& reading) {
  if (config.instance_group().empty()) return;
  yaml.Add(0, "instance_group:", LineOr(root.At("instance_group", 0), 1));
  for (int i = 0; i < config.instance_group_size(); ++i) {
    const inference::ModelInstanceGroup& group = config.instance_group(i);
    const std::string path = absl::StrCat("instance_group[", i, "]");
    const int line = LineOr(root.At("instance_group", i), 1);
    Locator at = root.Nested("instance_group", group.GetDescriptor(), i);
    yaml.Add(2, absl::StrCat("- kind: ", inference::ModelInstanceGroup::Kind_Name(group.kind())),
             LineOr(at.At("kind"), line));
    if (!group.name().empty()) {
      yaml.Add(4, absl::StrCat("name: ", Quoted(group.name())), LineOr(at.At("name"), line));
    }
    // Triton's default count is 1; proto3 reads an absent count as 0.
    if (group.count() != 0) {
      yaml.Add(4, absl::StrCat("count: ", group.count()), LineOr(at.At("count"), line));
    }
    if (!group.gpus().empty()) {
      yaml.Add(4, absl::StrCat("gpus: ", FlowList(group.gpus())), LineOr(at.At("gpus", 0), line));
    }
    if (!group.profile().empty() || group.has_rate_limiter() || group.passive() ||
        !group.host_policy().empty() || !group.secondary_devices().empty()) {
      reading.Ignore(line, path,
                     "profile, rate_limiter, passive, host_policy and secondary_devices: "
                     "Tessera places instances by its plan");
    }
  }
}

// Tessera's keys from `parameters`; any other parameter is a backend setting Tessera has no use
// for.
void WriteParameters(const inference::ModelConfig& config, const std::string& pbtxt,
                     const Locator& root, YamlWriter& yaml, Reading& reading) {
  const int parameters_line = LineOr(root.At("parameters", 0), 1);
  // Map entries come out of the parsed message in no set order: find each key's line in the text.
  auto line_of_key = [&](const std::string& key) {
    size_t at = pbtxt.find(Quoted(key));
    if (at == std::string::npos) return parameters_line;
    return 1 + static_cast<int>(std::count(pbtxt.begin(), pbtxt.begin() + at, '\n'));
  };
  std::vector<std::string> keys;
  for (const auto& [key, value] : config.parameters()) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  for (const std::string& key : keys) {
    const std::string& value = config.parameters().at(key).string_value();
    const int line = line_of_key(key);
    if (std::find_if(std::begin(kTesseraParameters), std::end(kTesseraParameters),
                     [&](const char* known) { return key == known; }) ==
        std::end(kTesseraParameters)) {
      reading.Ignore(line, absl::StrCat("parameters[\"", key, "\"]"),
                     absl::StrCat("not a Tessera parameter; Tessera's are ",
                                  absl::StrJoin(kTesseraParameters, ", ")));
      continue;
    }
    if (key == "worker_batch_sizes") {
      std::vector<std::string> sizes;
      for (absl::string_view size :
           absl::StrSplit(value, absl::ByAnyChar(", "), absl::SkipEmpty())) {
        sizes.push_back(Quoted(std::string_view(size.data(), size.size())));
      }
      yaml.Add(0, absl::StrCat(key, ": ", FlowList(sizes)), line);
    } else {
      yaml.Add(0, absl::StrCat(key, ": ", Quoted(value)), line);
    }
  }
}

// The top-level Triton fields Tessera refuses or skips as a whole.
Status CheckWholeFields(const inference::ModelConfig& config, const Locator& root,
                        Reading& reading) {
  auto refuse = [&](const std::string& field, const std::string& reason) {
    return RefuseAt(reading.source, LineOr(root.At(field), 1), field, reason);
  };
  if (config.model_transaction_policy().decoupled()) {
    return refuse("model_transaction_policy",
                  "decoupled models (zero or many responses per request) are not supported");
  }

  struct Hint {
    const char* field;
    bool present;
    const char* why;
  };
  const Hint hints[] = {
      {"optimization", config.has_optimization(),
       "Tessera chooses its own kernels, precision (parameters[\"precision\"]) and CUDA graphs"},
      {"cc_model_filenames", !config.cc_model_filenames().empty(),
       "one model file serves every device"},
      {"runtime", !config.runtime().empty(), "Tessera runs models with its own engine"},
      {"model_operations", config.has_model_operations(), "Tessera loads models its own way"},
      {"model_repository_agents", config.has_model_repository_agents(),
       "repository agents are not run"},
      {"model_metrics", config.has_model_metrics(), "metrics are fixed"},
  };
  for (const Hint& hint : hints) {
    if (!hint.present) continue;
    reading.Ignore(LineOr(root.At(hint.field), 1), hint.field, hint.why);
  }
  return absl::OkStatus();
}

// Puts the config.pbtxt line into an error from the written YAML: "<source>:<yaml line>: ..." and
// any "at line <yaml line>" inside the reason.
Status MapLines(const Status& status, const std::string& source, const YamlWriter& yaml) {
  std::string message(status.message());
  const std::string prefix = absl::StrCat(source, ":");
  auto remap_number_at = [&](size_t pos) {
    size_t end = pos;
    while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
    int yaml_line = 0;
    if (end == pos || !absl::SimpleAtoi(message.substr(pos, end - pos), &yaml_line)) return end;
    std::string mapped = absl::StrCat(yaml.PbtxtLine(yaml_line));
    message.replace(pos, end - pos, mapped);
    return pos + mapped.size();
  };
  if (message.starts_with(prefix)) remap_number_at(prefix.size());
  constexpr std::string_view kAtLine = "at line ";
  for (size_t at = message.find(kAtLine, prefix.size()); at != std::string::npos;
       at = message.find(kAtLine, at)) {
    at = remap_number_at(at + kAtLine.size());
  }
  return Status(status.code(), message);
}

// The JSON form of BlankWholeBlocks: the same blocks, by either of protobuf's JSON names, are
// emptied (kept present, so they are refused or noted as in config.pbtxt).
void BlankWholeBlocksInJson(nlohmann::json& config) {
  auto blank = [](nlohmann::json& object, const char* field, const char* json_name) {
    for (const char* key : {field, json_name}) {
      auto it = object.find(key);
      if (it == object.end()) continue;
      if (it->is_array()) {
        for (nlohmann::json& element : *it) element = nlohmann::json::object();
      } else if (it->is_object()) {
        *it = nlohmann::json::object();
      }  // anything else is left for protobuf's parser to refuse
    }
  };
  blank(config, "optimization", "optimization");
  blank(config, "model_operations", "modelOperations");
  blank(config, "model_repository_agents", "modelRepositoryAgents");
  blank(config, "model_metrics", "modelMetrics");
  for (const char* groups : {"instance_group", "instanceGroup"}) {
    auto it = config.find(groups);
    if (it == config.end() || !it->is_array()) continue;
    for (nlohmann::json& group : *it) {
      if (group.is_object()) blank(group, "secondary_devices", "secondaryDevices");
    }
  }
}

// "<source>:<line>: ..." -> "<source>: ...": the lines of text printed from JSON mean nothing to
// whoever wrote the JSON; the field path in the message says where.
std::string DropLine(std::string message, const std::string& source) {
  const std::string prefix = absl::StrCat(source, ":");
  if (!message.starts_with(prefix)) return message;
  size_t end = prefix.size();
  while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
  if (end > prefix.size() && end < message.size() && message[end] == ':') {
    message.erase(prefix.size() - 1, end - prefix.size() + 1);
  }
  return message;
}

}  // namespace

StatusOr<ModelConfig> ParseTritonModelConfig(const std::string& pbtxt, const std::string& source,
                                             const std::string& expected_name) {
  inference::ModelConfig config;
  ParseInfoTree tree;
  FirstParseError error;
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&error);
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(BlankWholeBlocks(pbtxt), &config)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", error.text.empty() ? "1: not a valid config.pbtxt" : error.text));
  }

  Reading reading{source, {}};
  Locator root(&tree, config.GetDescriptor());
  TESSERA_RETURN_IF_ERROR(CheckWholeFields(config, root, reading));
  YamlWriter yaml;
  WriteVersionPolicy(config, root, yaml);
  WriteDynamicBatching(config, root, yaml, reading);
  WriteInstanceGroups(config, root, yaml, reading);
  WriteModelWarmup(config, root, yaml);
  WriteEnsembleScheduling(config, root, yaml);
  WriteSequenceBatching(config, root, yaml);
  WriteBatchInputs(config, root, yaml);
  WriteBatchOutputs(config, root, yaml);
  if (config.has_response_cache()) {
    yaml.Add(0,
             absl::StrCat("response_cache: {enable: ",
                          config.response_cache().enable() ? "true" : "false", "}"),
             LineOr(root.At("response_cache"), 1));
  }

  if (!config.metric_tags().empty()) {
    // Sorted, so the text (and the line of an error in it) does not follow the map's hash order.
    const std::map<std::string, std::string> tags(config.metric_tags().begin(),
                                                  config.metric_tags().end());
    std::vector<std::string> pairs;
    for (const auto& [key, value] : tags) {
      pairs.push_back(absl::StrCat(Quoted(key), ": ", Quoted(value)));
    }
    yaml.Add(0, absl::StrCat("metric_tags: {", absl::StrJoin(pairs, ", "), "}"),
             LineOr(root.At("metric_tags"), 1));
  }
  if (!config.name().empty()) {
    yaml.Add(0, absl::StrCat("name: ", Quoted(config.name())), LineOr(root.At("name"), 1));
  }
  if (!config.platform().empty()) {
    yaml.Add(0, absl::StrCat("platform: ", Quoted(config.platform())),
             LineOr(root.At("platform"), 1));
  }
  if (!config.backend().empty()) {
    yaml.Add(0, absl::StrCat("backend: ", Quoted(config.backend())), LineOr(root.At("backend"), 1));
  }
  if (config.max_batch_size() != 0) {
    yaml.Add(0, absl::StrCat("max_batch_size: ", config.max_batch_size()),
             LineOr(root.At("max_batch_size"), 1));
  }
  TESSERA_RETURN_IF_ERROR(WriteTensors(config.input(), "input", root, yaml, reading));
  TESSERA_RETURN_IF_ERROR(WriteTensors(config.output(), "output", root, yaml, reading));
  if (!config.default_model_filename().empty()) {
    yaml.Add(0, absl::StrCat("default_model_filename: ", Quoted(config.default_model_filename())),
             LineOr(root.At("default_model_filename"), 1));
  }
  WriteParameters(config, pbtxt, root, yaml, reading);

  StatusOr<ModelConfig> parsed = ParseModelConfig(yaml.text(), source, expected_name);
  if (!parsed.ok()) return MapLines(parsed.status(), source, yaml);
  parsed->notes = std::move(reading.notes);
  return parsed;
}

StatusOr<ModelConfig> ParseTritonJsonModelConfig(const std::string& json, const std::string& source,
                                                 const std::string& expected_name) {
  nlohmann::json tree = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (tree.is_discarded() || !tree.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source,
        ": not a JSON object (Triton's ModelConfig as JSON, e.g. {\"max_batch_size\": 8})"));
  }
  BlankWholeBlocksInJson(tree);
  inference::ModelConfig config;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;  // a misspelt field is an error, as in config.pbtxt
  const auto parsed = google::protobuf::util::JsonStringToMessage(tree.dump(), &config, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source,
        ": not a ModelConfig: ", std::string(parsed.message().data(), parsed.message().size())));
  }
  std::string text;
  if (!TextFormat::PrintToString(config, &text)) {
    return absl::InternalError(absl::StrCat(source, ": cannot print the config as text"));
  }
  StatusOr<ModelConfig> result = ParseTritonModelConfig(text, source, expected_name);
  if (!result.ok()) {
    return Status(result.status().code(), DropLine(std::string(result.status().message()), source));
  }
  for (std::string& note : result->notes) note = DropLine(std::move(note), source);
  return result;
}

}  // namespace tessera::repository
