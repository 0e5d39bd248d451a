// ai.onnx.ml LabelEncoder: maps each element through a key -> value table from the attributes.
//
// Versions by the node's ai.onnx.ml opset: 1 (classes_strings: a string maps to its index, an
// INT64 index to its string, default_int64 / default_string otherwise), 2-3 (keys_* / values_*
// lists of STRING, INT64 or FLOAT with default_*) and 4-5 (also keys_tensor / values_tensor /
// default_tensor, of those three types). A repeated key maps to its last value from opset 4 on,
// as the spec says, and to its first before (the spec is silent; onnxruntime keeps the first in
// every opset). FLOAT keys compare bit for bit, as opset 2 says, except that any NaN matches a
// NaN key (opset 4's rule; onnxruntime matches no NaN before opset 4).
//
// The table is built once per model (the node's KernelState); STRING results point at its strings,
// so mapping costs one hash lookup per element and no string copy.
#include <bit>
#include <cmath>
#include <functional>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

uint32_t FloatKey(float f) { return std::isnan(f) ? 0x7fc00000u : std::bit_cast<uint32_t>(f); }

// One key type -> one value type. Exactly one of each map/vector pair is used.
struct Table {
  DataType key_type = DataType::kInvalid;
  DataType value_type = DataType::kInvalid;
  std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>> string_keys;
  std::unordered_map<int64_t, int64_t> int_keys;
  std::unordered_map<uint32_t, int64_t> float_keys;  // by FloatKey
  std::vector<std::string> string_values;
  std::vector<int64_t> int_values;
  std::vector<float> float_values;
  std::string default_string = "_Unused";
  int64_t default_int = -1;
  float default_float = -0.0f;
};

struct LabelEncoderState final : KernelState {
  std::vector<Table> tables;  // one, or for opset 1 one per direction
};

// A typed list from the attributes (a keys_* / values_* group): which type, and its elements.
struct TypedList {
  DataType type = DataType::kInvalid;
  std::vector<std::string> strings;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  size_t size() const { return strings.size() + ints.size() + floats.size(); }
};

StatusOr<TypedList> ListFromTensor(const Value& t, const std::string& name) {
  TypedList list;
  list.type = t.dtype();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    switch (t.dtype()) {
      case DataType::kString:
        list.strings.emplace_back(StringAt(t, i));
        break;
      case DataType::kInt64:
        list.ints.push_back(t.data<int64_t>()[i]);
        break;
      case DataType::kFp32:
        list.floats.push_back(t.data<float>()[i]);
        break;
      default:
        return absl::UnimplementedError(absl::StrCat(name, " of type ", TypeName(t.dtype()),
                                                     " (only STRING, INT64 and FLOAT)"));
    }
  }
  return list;
}

// The one of `prefix`_strings/_int64s/_floats/_tensor that is set.
StatusOr<TypedList> ListAttribute(const Node& node, const std::string& prefix) {
  const Attributes& attrs = node.attributes;
  std::vector<std::string> set;
  for (const char* suffix : {"_strings", "_int64s", "_floats", "_tensor"}) {
    if (attrs.Has(prefix + suffix)) set.push_back(prefix + suffix);
  }
  if (set.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("exactly one of ", prefix,
                     "_strings, _int64s, _floats and _tensor must be set, found ", set.size()));
  }
  const Attribute& a = *attrs.Find(set[0]);
  TypedList list;
  if (a.kind == Attribute::Kind::kStrings) {
    list.type = DataType::kString;
    list.strings = a.strings;
  } else if (a.kind == Attribute::Kind::kInts) {
    list.type = DataType::kInt64;
    list.ints = a.ints;
  } else if (a.kind == Attribute::Kind::kFloats) {
    list.type = DataType::kFp32;
    list.floats = a.floats;
  } else if (a.kind == Attribute::Kind::kTensor && node.opset >= 4) {
    return ListFromTensor(a.tensor, set[0]);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(set[0], " has the wrong attribute type"));
  }
  return list;
}

// Sets the table's default of its value type from default_tensor or the typed default_*.
Status SetDefault(const Node& node, Table* table) {
  const Attributes& attrs = node.attributes;
  if (const Attribute* t = attrs.Find("default_tensor");
      t != nullptr && t->kind == Attribute::Kind::kTensor && node.opset >= 4) {
    if (t->tensor.dtype() != table->value_type || t->tensor.num_elements() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("default_tensor is ", DescribeValue(t->tensor),
                                                     ", expected one ",
                                                     TypeName(table->value_type)));
    }
    TESSERA_ASSIGN_OR_RETURN(TypedList d, ListFromTensor(t->tensor, "default_tensor"));
    if (!d.strings.empty()) table->default_string = d.strings[0];
    if (!d.ints.empty()) table->default_int = d.ints[0];
    if (!d.floats.empty()) table->default_float = d.floats[0];
    return absl::OkStatus();
  }
  table->default_string = attrs.GetString("default_string", "_Unused");
  table->default_int = attrs.GetInt("default_int64", -1);
  table->default_float = attrs.GetFloat("default_float", -0.0f);
  return absl::OkStatus();
}

template <typename Map, typename Key>
void Insert(Map* map, Key key, int64_t index, bool last_wins) {
  if (last_wins) {
    (*map)[key] = index;
  } else {
    map->emplace(key, index);
  }
}

void Fill(Table* table, const TypedList& keys, TypedList values, bool last_wins) {
  table->key_type = keys.type;
  table->value_type = values.type;
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto k = static_cast<int64_t>(i);
    if (keys.type == DataType::kString) Insert(&table->string_keys, keys.strings[i], k, last_wins);
    if (keys.type == DataType::kInt64) Insert(&table->int_keys, keys.ints[i], k, last_wins);
    if (keys.type == DataType::kFp32) {
      Insert(&table->float_keys, FloatKey(keys.floats[i]), k, last_wins);
    }
  }
  table->string_values = std::move(values.strings);
  table->int_values = std::move(values.ints);
  table->float_values = std::move(values.floats);
}

StatusOr<std::unique_ptr<LabelEncoderState>> BuildState(const Node& node) {
  auto state = std::make_unique<LabelEncoderState>();
  if (node.opset < 2) {
    TypedList classes, indices;
    classes.type = DataType::kString;
    classes.strings = node.attributes.GetStrings("classes_strings");
    indices.type = DataType::kInt64;
    for (size_t i = 0; i < classes.strings.size(); ++i) {
      indices.ints.push_back(static_cast<int64_t>(i));
    }
    Table to_index, to_string;
    Fill(&to_index, classes, indices, /*last_wins=*/false);
    Fill(&to_string, indices, classes, /*last_wins=*/false);
    for (Table* t : {&to_index, &to_string}) {
      t->default_string = node.attributes.GetString("default_string", "_Unused");
      t->default_int = node.attributes.GetInt("default_int64", -1);
    }
    state->tables.push_back(std::move(to_index));
    state->tables.push_back(std::move(to_string));
    return state;
  }
  TESSERA_ASSIGN_OR_RETURN(TypedList keys, ListAttribute(node, "keys"));
  TESSERA_ASSIGN_OR_RETURN(TypedList values, ListAttribute(node, "values"));
  if (keys.size() != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(keys.size(), " keys but ", values.size(), " values"));
  }
  Table table;
  Fill(&table, keys, std::move(values), /*last_wins=*/node.opset >= 4);
  TESSERA_RETURN_IF_ERROR(SetDefault(node, &table));
  state->tables.push_back(std::move(table));
  return state;
}

// Index of element i's key in the table's values, or -1 for the default.
int64_t Lookup(const Table& table, const Value& x, int64_t i) {
  if (table.key_type == DataType::kString) {
    auto it = table.string_keys.find(StringAt(x, i));
    return it == table.string_keys.end() ? -1 : it->second;
  }
  if (table.key_type == DataType::kInt64) {
    auto it = table.int_keys.find(x.data<int64_t>()[i]);
    return it == table.int_keys.end() ? -1 : it->second;
  }
  auto it = table.float_keys.find(FloatKey(x.data<float>()[i]));
  return it == table.float_keys.end() ? -1 : it->second;
}

}  // namespace

Status CheckLabelEncoder(const Node& node, const Graph&) { return BuildState(node).status(); }

std::unique_ptr<KernelState> MakeLabelEncoderState(const Node& node, const Graph&) {
  StatusOr<std::unique_ptr<LabelEncoderState>> state = BuildState(node);
  return state.ok() ? std::move(*state) : nullptr;  // the kernel then reports the error itself
}

Status RunLabelEncoder(const OpContext& ctx, const Node& node, const Inputs& inputs,
                       std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(
      const Value* x,
      RequireInput(inputs, 0, "X", {DataType::kString, DataType::kInt64, DataType::kFp32}));
  // Without a state made at load (constant folding, tests), a table for this call only: its
  // strings must then be copied into the Run's arena, since the table dies with the call.
  const auto* state = static_cast<const LabelEncoderState*>(ctx.state);
  std::unique_ptr<LabelEncoderState> local;
  if (state == nullptr) {
    TESSERA_ASSIGN_OR_RETURN(local, BuildState(node));
    state = local.get();
  }
  const Table* table = nullptr;
  for (const Table& t : state->tables) {
    if (t.key_type == x->dtype()) table = &t;
  }
  if (table == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("X is ", TypeName(x->dtype()), ", which is not the type of the keys"));
  }
  if (table->value_type == DataType::kString && ctx.strings == nullptr && local != nullptr) {
    return absl::InternalError("no string arena for LabelEncoder");
  }
  Value y = ctx.NewOutput(0, table->value_type, x->shape());
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    const int64_t k = Lookup(*table, *x, i);
    switch (table->value_type) {
      case DataType::kString: {
        const std::string& s = k < 0 ? table->default_string : table->string_values[k];
        StringHandle h = s.empty() ? nullptr : &s;
        y.mutable_data<StringHandle>()[i] = local != nullptr ? ctx.strings->Add(s) : h;
        break;
      }
      case DataType::kInt64:
        y.mutable_data<int64_t>()[i] = k < 0 ? table->default_int : table->int_values[k];
        break;
      default:
        y.mutable_data<float>()[i] = k < 0 ? table->default_float : table->float_values[k];
        break;
    }
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
