#include "sequence_config.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "config_fields.h"

namespace tessera::repository {
namespace {

using yaml::YamlMap;

constexpr std::array<std::string_view, 6> kSequenceKeys = {
    "direct",        "oldest", "max_sequence_idle_microseconds",
    "control_input", "state",  "iterative_sequence"};
constexpr std::array<std::string_view, 2> kDirectKeys = {"max_queue_delay_microseconds",
                                                         "minimum_slot_utilization"};
constexpr std::array<std::string_view, 4> kOldestKeys = {
    "max_candidate_sequences", "preferred_batch_size", "max_queue_delay_microseconds",
    "preserve_ordering"};
constexpr std::array<std::string_view, 2> kControlInputKeys = {"name", "control"};
constexpr std::array<std::string_view, 5> kControlKeys = {
    "kind", "int32_false_true", "fp32_false_true", "bool_false_true", "data_type"};
constexpr std::array<std::string_view, 4> kControlKinds = {
    "CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_READY", "CONTROL_SEQUENCE_END",
    "CONTROL_SEQUENCE_CORRID"};
constexpr std::array<std::string_view, 7> kStateKeys = {
    "input_name",         "output_name",
    "data_type",          "dims",
    "initial_state",      "use_same_buffer_for_input_output",
    "use_growable_memory"};
constexpr std::array<std::string_view, 5> kInitialStateKeys = {"name", "data_type", "dims",
                                                               "zero_data", "data_file"};
constexpr std::array<DataType, 5> kCorrelationIdTypes = {
    DataType::kUint64, DataType::kInt64, DataType::kUint32, DataType::kInt32, DataType::kString};

bool Named(const std::vector<TensorConfig>& tensors, const std::string& name) {
  return std::any_of(tensors.begin(), tensors.end(),
                     [&](const TensorConfig& t) { return t.name == name; });
}

Status ReadStrategy(const YamlMap& m, int max_batch_size, SequenceBatchingConfig& sequence) {
  std::string_view source = m.source();
  if (m.Has("direct") && m.Has("oldest")) {
    return yaml::ErrorAt(source, m.KeyLine("oldest"), m.PathOf("oldest"),
                         "sequence_batching holds both direct and oldest: choose one strategy");
  }
  int64_t delay_us = 0;
  if (std::optional<YAML::Node> node = m.Get("direct")) {
    TESSERA_ASSIGN_OR_RETURN(YamlMap d,
                             YamlMap::Create(source, *node, m.PathOf("direct"), kDirectKeys));
    TESSERA_RETURN_IF_ERROR(d.GetInt("max_queue_delay_microseconds", 0, INT64_MAX, &delay_us));
    double utilization = 0;  // a slot-filling hint: every batch row here holds a request
    TESSERA_RETURN_IF_ERROR(d.GetDouble("minimum_slot_utilization", 0, 1, &utilization));
  }
  if (std::optional<YAML::Node> node = m.Get("oldest")) {
    sequence.oldest = true;
    TESSERA_ASSIGN_OR_RETURN(YamlMap o,
                             YamlMap::Create(source, *node, m.PathOf("oldest"), kOldestKeys));
    TESSERA_RETURN_IF_ERROR(o.GetInt("max_queue_delay_microseconds", 0, INT64_MAX, &delay_us));
    TESSERA_RETURN_IF_ERROR(
        o.GetInt("max_candidate_sequences", 0, INT32_MAX, &sequence.max_candidate_sequences));
    bool preserve_ordering = false;  // a sequence's answers always keep its order
    TESSERA_RETURN_IF_ERROR(o.GetBool("preserve_ordering", &preserve_ordering));
    if (std::optional<YAML::Node> preferred = o.Get("preferred_batch_size")) {
      const int64_t largest = max_batch_size > 0 ? max_batch_size : INT32_MAX;
      TESSERA_ASSIGN_OR_RETURN(
          std::vector<int64_t> sizes,
          yaml::ReadIntList(source, *preferred, o.PathOf("preferred_batch_size"), 1, largest));
      sequence.preferred_batch_sizes.assign(sizes.begin(), sizes.end());
    }
  }
  sequence.max_queue_delay_microseconds = static_cast<uint64_t>(delay_us);
  return absl::OkStatus();
}

// One control_input entry: a name and exactly one control.
StatusOr<SequenceControl> ReadControl(std::string_view source, const YAML::Node& item,
                                      const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(YamlMap m, YamlMap::Create(source, item, path, kControlInputKeys));
  SequenceControl control;
  if (!m.Has("name")) return m.Missing("name");
  TESSERA_RETURN_IF_ERROR(m.GetString("name", &control.input_name));
  if (control.input_name.empty())
    return yaml::ErrorAt(source, m.KeyLine("name"), m.PathOf("name"), "is empty");
  std::optional<YAML::Node> list = m.Get("control");
  if (!list) return m.Missing("control");
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> controls,
                           yaml::ReadList(source, *list, m.PathOf("control")));
  if (controls.size() != 1) {
    return yaml::ErrorAt(source, *list, m.PathOf("control"),
                         absl::StrCat("must hold exactly one control, got ", controls.size()));
  }
  const std::string control_path = yaml::IndexPath(m.PathOf("control"), 0);
  TESSERA_ASSIGN_OR_RETURN(YamlMap c,
                           YamlMap::Create(source, controls[0], control_path, kControlKeys));
  std::string kind = "CONTROL_SEQUENCE_START";  // proto3's default
  TESSERA_RETURN_IF_ERROR(c.GetEnum("kind", kControlKinds, &kind));
  const int lists = c.Has("int32_false_true") + c.Has("fp32_false_true") + c.Has("bool_false_true");
  if (kind == "CONTROL_SEQUENCE_CORRID") {
    control.kind = SequenceControl::Kind::kCorrelationId;
    if (lists != 0) {
      return yaml::ErrorAt(source, controls[0], control_path,
                           "a CONTROL_SEQUENCE_CORRID control takes data_type, no *_false_true");
    }
    std::optional<YAML::Node> type = c.Get("data_type");
    if (!type) return c.Missing("data_type");
    TESSERA_ASSIGN_OR_RETURN(control.data_type, ReadDataType(source, *type, c.PathOf("data_type")));
    if (std::find(kCorrelationIdTypes.begin(), kCorrelationIdTypes.end(), control.data_type) ==
        kCorrelationIdTypes.end()) {
      return yaml::ErrorAt(source, *type, c.PathOf("data_type"),
                           "expected TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 or "
                           "TYPE_STRING");
    }
    return control;
  }
  control.kind = kind == "CONTROL_SEQUENCE_START" ? SequenceControl::Kind::kStart
                 : kind == "CONTROL_SEQUENCE_END" ? SequenceControl::Kind::kEnd
                                                  : SequenceControl::Kind::kReady;
  if (lists != 1 || c.Has("data_type")) {
    return yaml::ErrorAt(source, controls[0], control_path,
                         absl::StrCat("a ", kind,
                                      " control takes exactly one of "
                                      "int32_false_true, fp32_false_true, bool_false_true (its "
                                      "values for false and true; they set the data type)"));
  }
  const char* key = c.Has("int32_false_true")  ? "int32_false_true"
                    : c.Has("fp32_false_true") ? "fp32_false_true"
                                               : "bool_false_true";
  control.data_type = c.Has("int32_false_true")  ? DataType::kInt32
                      : c.Has("fp32_false_true") ? DataType::kFp32
                                                 : DataType::kBool;
  const std::string values_path = c.PathOf(key);
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> values,
                           yaml::ReadList(source, *c.Get(key), values_path));
  if (values.size() != 2) {
    return yaml::ErrorAt(source, *c.Get(key), values_path,
                         absl::StrCat("must hold 2 values (false, true), got ", values.size()));
  }
  double both[2];
  for (size_t i = 0; i < 2; ++i) {
    const std::string at = yaml::IndexPath(values_path, i);
    if (control.data_type == DataType::kBool) {
      TESSERA_ASSIGN_OR_RETURN(bool b, yaml::ReadBool(source, values[i], at));
      both[i] = b ? 1 : 0;
    } else if (control.data_type == DataType::kInt32) {
      TESSERA_ASSIGN_OR_RETURN(int64_t v,
                               yaml::ReadInt(source, values[i], at, INT32_MIN, INT32_MAX));
      both[i] = static_cast<double>(v);
    } else {
      TESSERA_ASSIGN_OR_RETURN(both[i], yaml::ReadDouble(source, values[i], at, -3.4e38, 3.4e38));
    }
  }
  control.false_value = both[0];
  control.true_value = both[1];
  return control;
}

// One state entry: fixed dims, at most one initial state, and that one zeros.
StatusOr<SequenceState> ReadState(std::string_view source, const YAML::Node& item,
                                  const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(YamlMap m, YamlMap::Create(source, item, path, kStateKeys));
  SequenceState state;
  for (const char* key : {"input_name", "output_name"}) {
    if (!m.Has(key)) return m.Missing(key);
    std::string& name =
        std::string_view(key) == "input_name" ? state.input_name : state.output_name;
    TESSERA_RETURN_IF_ERROR(m.GetString(key, &name));
    if (name.empty()) return yaml::ErrorAt(source, m.KeyLine(key), m.PathOf(key), "is empty");
  }
  std::optional<YAML::Node> type = m.Get("data_type");
  if (!type) return m.Missing("data_type");
  TESSERA_ASSIGN_OR_RETURN(state.data_type, ReadDataType(source, *type, m.PathOf("data_type")));
  std::optional<YAML::Node> dims = m.Get("dims");
  if (!dims) return m.Missing("dims");
  TESSERA_ASSIGN_OR_RETURN(state.dims, ReadDims(source, *dims, m.PathOf("dims")));
  // Memory hints with nothing to act on: states live in host memory, sized per request.
  bool growable = false, same_buffer = false;
  TESSERA_RETURN_IF_ERROR(m.GetBool("use_growable_memory", &growable));
  TESSERA_RETURN_IF_ERROR(m.GetBool("use_same_buffer_for_input_output", &same_buffer));
  if (std::optional<YAML::Node> initial = m.Get("initial_state")) {
    const std::string list_path = m.PathOf("initial_state");
    TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                             yaml::ReadList(source, *initial, list_path));
    if (items.size() > 1) {
      return yaml::ErrorAt(source, *initial, list_path, "must hold at most one initial state");
    }
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string at = yaml::IndexPath(list_path, i);
      TESSERA_ASSIGN_OR_RETURN(YamlMap s, YamlMap::Create(source, items[i], at, kInitialStateKeys));
      std::string name;
      TESSERA_RETURN_IF_ERROR(s.GetString("name", &name));
      if (std::optional<YAML::Node> file = s.Get("data_file")) {
        TESSERA_ASSIGN_OR_RETURN(state.initial_data_file,
                                 yaml::ReadString(source, *file, s.PathOf("data_file")));
        TESSERA_RETURN_IF_ERROR(
            CheckPlainFileName(source, *file, s.PathOf("data_file"), state.initial_data_file));
      }
      bool zeros = false;
      TESSERA_RETURN_IF_ERROR(s.GetBool("zero_data", &zeros));
      if (zeros == s.Has("data_file")) {
        return yaml::ErrorAt(source, items[i], at,
                             "needs exactly one of zero_data: true or data_file");
      }
      std::optional<YAML::Node> initial_type = s.Get("data_type");
      if (!initial_type) return s.Missing("data_type");
      TESSERA_ASSIGN_OR_RETURN(DataType t,
                               ReadDataType(source, *initial_type, s.PathOf("data_type")));
      std::optional<YAML::Node> initial_dims = s.Get("dims");
      if (!initial_dims) return s.Missing("dims");
      TESSERA_ASSIGN_OR_RETURN(Shape d, ReadDims(source, *initial_dims, s.PathOf("dims")));
      bool fits = d.size() == state.dims.size();
      for (size_t k = 0; fits && k < d.size(); ++k) {
        fits = d[k] > 0 && (state.dims[k] < 0 || state.dims[k] == d[k]);
      }
      if (t != state.data_type || !fits) {
        return yaml::ErrorAt(
            source, items[i], at,
            absl::StrCat(
                "is ", std::string(DataTypeToConfigName(t)), " ", ShapeToString(d),
                ", the state is ", std::string(DataTypeToConfigName(state.data_type)), " ",
                ShapeToString(state.dims),
                d.size() == state.dims.size() ? " (an initial state has every dim > 0)" : ""));
      }
      state.initial_dims = std::move(d);
    }
  }
  return state;
}

}  // namespace

Status ReadSequenceBatching(const YamlMap& root, ModelConfig& config) {
  std::optional<YAML::Node> node = root.Get("sequence_batching");
  if (!node) return absl::OkStatus();
  std::string_view source = root.source();
  const int line = root.KeyLine("sequence_batching");
  auto refuse = [&](std::string_view why) {
    return yaml::ErrorAt(source, line, "sequence_batching", why);
  };
  if (config.is_ensemble()) return refuse("an ensemble cannot be stateful");
  if (config.dynamic_batching.enabled) {
    return refuse(
        "a model has either dynamic_batching or sequence_batching, not both (the "
        "sequence batcher batches the model itself)");
  }
  if (config.response_cache) {
    return refuse(
        "a stateful model cannot use the response cache: its answers depend on the "
        "sequence's state, not only on the request");
  }
  TESSERA_ASSIGN_OR_RETURN(YamlMap m,
                           YamlMap::Create(source, *node, "sequence_batching", kSequenceKeys));
  SequenceBatchingConfig& sequence = config.sequence_batching;
  sequence.enabled = true;
  TESSERA_RETURN_IF_ERROR(ReadStrategy(m, config.max_batch_size, sequence));
  int64_t idle_us = static_cast<int64_t>(sequence.max_sequence_idle_microseconds);
  TESSERA_RETURN_IF_ERROR(
      m.GetInt("max_sequence_idle_microseconds", 1, INT64_MAX / 1000, &idle_us));
  sequence.max_sequence_idle_microseconds = static_cast<uint64_t>(idle_us);
  bool iterative = false;
  TESSERA_RETURN_IF_ERROR(m.GetBool("iterative_sequence", &iterative));
  if (iterative) {
    return yaml::ErrorAt(source, m.KeyLine("iterative_sequence"), m.PathOf("iterative_sequence"),
                         "iterative sequences are not supported");
  }

  // Every name the model file takes or gives beside the config's own, checked once.
  std::vector<std::pair<std::string, std::string>> names;  // name, where
  auto claim = [&](const std::string& name, const std::string& path, int at_line,
                   const std::vector<TensorConfig>& clashes_with, const char* kind) -> Status {
    for (const auto& [taken, where] : names) {
      if (taken == name) {
        return yaml::ErrorAt(source, at_line, path, absl::StrCat("\"", name, "\" is also ", where));
      }
    }
    if (Named(clashes_with, name)) {
      return yaml::ErrorAt(source, at_line, path,
                           absl::StrCat("\"", name, "\" is also a config ", kind,
                                        ": the server fills it, clients never send or see it"));
    }
    names.emplace_back(name, path);
    return absl::OkStatus();
  };
  if (std::optional<YAML::Node> list = m.Get("control_input")) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                             yaml::ReadList(source, *list, m.PathOf("control_input")));
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string path = yaml::IndexPath(m.PathOf("control_input"), i);
      TESSERA_ASSIGN_OR_RETURN(SequenceControl control, ReadControl(source, items[i], path));
      for (const SequenceControl& earlier : sequence.controls) {
        if (earlier.kind == control.kind) {
          return yaml::ErrorAt(
              source, items[i], path,
              absl::StrCat("a second control of the kind of \"", earlier.input_name, "\""));
        }
      }
      TESSERA_RETURN_IF_ERROR(claim(control.input_name, yaml::JoinPath(path, "name"),
                                    yaml::LineOf(items[i]), config.inputs, "input"));
      sequence.controls.push_back(std::move(control));
    }
  }
  if (std::optional<YAML::Node> list = m.Get("state")) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                             yaml::ReadList(source, *list, m.PathOf("state")));
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string path = yaml::IndexPath(m.PathOf("state"), i);
      TESSERA_ASSIGN_OR_RETURN(SequenceState state, ReadState(source, items[i], path));
      TESSERA_RETURN_IF_ERROR(claim(state.input_name, yaml::JoinPath(path, "input_name"),
                                    yaml::LineOf(items[i]), config.inputs, "input"));
      TESSERA_RETURN_IF_ERROR(claim(state.output_name, yaml::JoinPath(path, "output_name"),
                                    yaml::LineOf(items[i]), config.outputs, "output"));
      sequence.states.push_back(std::move(state));
    }
  }
  return absl::OkStatus();
}

bool IsSequenceTensor(const SequenceBatchingConfig& sequence, const std::string& name) {
  for (const SequenceControl& control : sequence.controls) {
    if (control.input_name == name) return true;
  }
  for (const SequenceState& state : sequence.states) {
    if (state.input_name == name || state.output_name == name) return true;
  }
  return false;
}

const SequenceState* FindStateInput(const SequenceBatchingConfig& sequence,
                                    const std::string& input_name) {
  for (const SequenceState& state : sequence.states) {
    if (state.input_name == input_name) return &state;
  }
  return nullptr;
}

std::vector<TensorConfig> ModelFileInputs(const ModelConfig& config) {
  std::vector<TensorConfig> inputs = config.inputs;
  for (const SequenceControl& control : config.sequence_batching.controls) {
    inputs.push_back(
        TensorConfig{.name = control.input_name, .data_type = control.data_type, .dims = Shape{1}});
  }
  for (const SequenceState& state : config.sequence_batching.states) {
    inputs.push_back(
        TensorConfig{.name = state.input_name, .data_type = state.data_type, .dims = state.dims});
  }
  return inputs;
}

std::vector<TensorConfig> ModelFileOutputs(const ModelConfig& config) {
  std::vector<TensorConfig> outputs = config.outputs;
  for (const SequenceState& state : config.sequence_batching.states) {
    outputs.push_back(
        TensorConfig{.name = state.output_name, .data_type = state.data_type, .dims = state.dims});
  }
  return outputs;
}

}  // namespace tessera::repository
