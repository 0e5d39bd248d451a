#include "engine/graph.h"

#include "absl/strings/str_cat.h"
#include "engine/string_tensor.h"

namespace tessera::engine {

const Attribute* Attributes::Find(const std::string& name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

int64_t Attributes::GetInt(const std::string& name, int64_t fallback) const {
  const Attribute* a = Find(name);
  return a != nullptr && a->kind == Attribute::Kind::kInt ? a->i : fallback;
}

float Attributes::GetFloat(const std::string& name, float fallback) const {
  const Attribute* a = Find(name);
  return a != nullptr && a->kind == Attribute::Kind::kFloat ? a->f : fallback;
}

std::vector<int64_t> Attributes::GetInts(const std::string& name,
                                         std::vector<int64_t> fallback) const {
  const Attribute* a = Find(name);
  return a != nullptr && a->kind == Attribute::Kind::kInts ? a->ints : fallback;
}

std::string Attributes::GetString(const std::string& name, std::string fallback) const {
  const Attribute* a = Find(name);
  return a != nullptr && a->kind == Attribute::Kind::kString ? a->s : fallback;
}

std::vector<std::string> Attributes::GetStrings(const std::string& name) const {
  const Attribute* a = Find(name);
  return a != nullptr && a->kind == Attribute::Kind::kStrings ? a->strings
                                                              : std::vector<std::string>();
}

std::string Node::Describe(const std::vector<std::string>& value_names) const {
  if (!name.empty()) return absl::StrCat("node \"", name, "\" (", op_type, ")");
  std::string first_output = outputs.empty() ? "" : value_names[outputs[0]];
  return absl::StrCat("node producing \"", first_output, "\" (", op_type, ")");
}

int Graph::AddValue(const std::string& name) {
  value_names.push_back(name);
  constants.emplace_back();
  if (!shapes.empty() || !dtypes.empty()) {
    shapes.resize(value_names.size());
    dtypes.resize(value_names.size(), DataType::kInvalid);
  }
  return static_cast<int>(value_names.size()) - 1;
}

uint64_t Graph::ConstantBytes() const {
  uint64_t bytes = 0;
  for (const auto& c : constants) {
    if (!c.has_value()) continue;
    bytes += c->byte_size();
    if (c->dtype() != DataType::kString) continue;
    for (int64_t i = 0; i < c->num_elements(); ++i) bytes += StringAt(*c, i).size();
  }
  return bytes;
}

std::optional<std::string> FindStringTensor(const Graph& graph) {
  for (const TensorInfo& info : graph.inputs) {
    if (info.dtype == DataType::kString) return info.name;
  }
  for (const TensorInfo& info : graph.outputs) {
    if (info.dtype == DataType::kString) return info.name;
  }
  for (size_t id = 0; id < graph.value_names.size(); ++id) {
    const bool constant =
        graph.constants[id].has_value() && graph.constants[id]->dtype() == DataType::kString;
    const bool typed = id < graph.dtypes.size() && graph.dtypes[id] == DataType::kString;
    if (constant || typed) return graph.value_names[id];
  }
  return std::nullopt;
}

}  // namespace tessera::engine
