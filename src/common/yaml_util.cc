#include "tessera/common/yaml_util.h"

#include "tessera/common/utf8.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>

namespace tessera::yaml {
namespace {

// Long scalars are cut so one bad value cannot flood a log line.
constexpr size_t kMaxQuotedChars = 60;

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::optional<int64_t> ParseInt64(std::string_view text) {
  text = Trim(text);
  // from_chars rejects a leading '+', which YAML allows.
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> ParseDouble(std::string_view text) {
  text = Trim(text);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

std::string JoinNames(std::span<const std::string_view> names) {
  std::string joined;
  for (std::string_view name : names) {
    if (!joined.empty()) joined += ", ";
    joined += name;
  }
  return joined;
}

int LineOf(const YAML::Node& node) {
  // A Node for an absent key (a "zombie") throws from Mark(); guard with IsDefined.
  if (!node.IsDefined()) return 1;
  YAML::Mark mark = node.Mark();
  return mark.is_null() || mark.line < 0 ? 1 : mark.line + 1;
}

Status ErrorAt(std::string_view source, int line, std::string_view path, std::string_view reason) {
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(AsAbsl(source), ":", line, ": ", AsAbsl(reason)));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(AsAbsl(source), ":", line, ": ", AsAbsl(path), ": ", AsAbsl(reason)));
}

Status ErrorAt(std::string_view source, const YAML::Node& node, std::string_view path,
               std::string_view reason) {
  return ErrorAt(source, LineOf(node), path, reason);
}

StatusOr<YAML::Node> ParseDocument(const std::string& text, std::string_view source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    int line = e.mark.is_null() || e.mark.line < 0 ? 1 : e.mark.line + 1;
    std::string where = e.mark.is_null() ? "" : absl::StrCat(" (column ", e.mark.column + 1, ")");
    return ErrorAt(source, line, "", absl::StrCat("YAML syntax error: ", e.msg, where));
  } catch (const std::exception& e) {
    return ErrorAt(source, 1, "", absl::StrCat("YAML syntax error: ", e.what()));
  }
}

StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::NotFoundError(absl::StrCat(path, ": read error"));
  return std::move(text).str();
}

std::string JoinPath(std::string_view parent, std::string_view key) {
  return parent.empty() ? std::string(key) : absl::StrCat(AsAbsl(parent), ".", AsAbsl(key));
}

std::string IndexPath(std::string_view parent, size_t index) {
  return absl::StrCat(AsAbsl(parent), "[", index, "]");
}

std::string Describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "null";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a map";
  const std::string& text = node.Scalar();
  if (text.size() > kMaxQuotedChars)
    return absl::StrCat("\"", text.substr(0, kMaxQuotedChars), "...\"");
  return absl::StrCat("\"", text, "\"");
}

StatusOr<int64_t> ReadInt(std::string_view source, const YAML::Node& node, std::string_view path,
                          int64_t min, int64_t max) {
  std::optional<int64_t> value;
  if (node.IsScalar()) value = ParseInt64(node.Scalar());
  if (!value) {
    return ErrorAt(source, node, path, absl::StrCat("expected an integer, got ", Describe(node)));
  }
  if (*value < min || *value > max) {
    // A bound at a type's limit is noise in a message ("0..9223372036854775807").
    std::string range = *value < min && max >= INT32_MAX   ? absl::StrCat(">= ", min)
                        : *value > max && min <= INT32_MIN ? absl::StrCat("<= ", max)
                                                           : absl::StrCat(min, "..", max);
    return ErrorAt(source, node, path, absl::StrCat("must be ", range, ", got ", *value));
  }
  return *value;
}

StatusOr<double> ReadDouble(std::string_view source, const YAML::Node& node, std::string_view path,
                            double min, double max) {
  std::optional<double> value;
  if (node.IsScalar()) value = ParseDouble(node.Scalar());
  if (!value) {
    return ErrorAt(source, node, path, absl::StrCat("expected a number, got ", Describe(node)));
  }
  if (*value < min || *value > max) {
    return ErrorAt(source, node, path,
                   absl::StrCat("must be in [", min, ", ", max, "], got ", *value));
  }
  return *value;
}

StatusOr<bool> ReadBool(std::string_view source, const YAML::Node& node, std::string_view path) {
  if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
  }
  return ErrorAt(source, node, path, absl::StrCat("expected true or false, got ", Describe(node)));
}

StatusOr<std::string> ReadString(std::string_view source, const YAML::Node& node,
                                 std::string_view path) {
  if (!node.IsScalar()) {
    return ErrorAt(source, node, path, absl::StrCat("expected a string, got ", Describe(node)));
  }
  // Names and other strings end up in protobuf string fields (responses, the executor protocol),
  // which must be UTF-8.
  if (!IsValidUtf8(node.Scalar())) return ErrorAt(source, node, path, "is not valid UTF-8 text");
  return node.Scalar();
}

StatusOr<std::string> ReadEnum(std::string_view source, const YAML::Node& node,
                               std::string_view path, std::span<const std::string_view> allowed) {
  if (node.IsScalar()) {
    for (std::string_view name : allowed) {
      if (node.Scalar() == name) return node.Scalar();
    }
  }
  return ErrorAt(source, node, path,
                 absl::StrCat("expected one of ", JoinNames(allowed), ", got ", Describe(node)));
}

StatusOr<std::vector<YAML::Node>> ReadList(std::string_view source, const YAML::Node& node,
                                           std::string_view path) {
  std::vector<YAML::Node> items;
  if (node.IsNull()) return items;
  if (!node.IsSequence()) {
    return ErrorAt(source, node, path, absl::StrCat("expected a list, got ", Describe(node)));
  }
  items.reserve(node.size());
  for (const YAML::Node& item : node) items.push_back(item);
  return items;
}

StatusOr<std::vector<int64_t>> ReadIntList(std::string_view source, const YAML::Node& node,
                                           std::string_view path, int64_t min, int64_t max) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, ReadList(source, node, path));
  std::vector<int64_t> values;
  values.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(int64_t value,
                             ReadInt(source, items[i], IndexPath(path, i), min, max));
    values.push_back(value);
  }
  return values;
}

StatusOr<YamlMap> YamlMap::Create(std::string_view source, const YAML::Node& node, std::string path,
                                  std::span<const std::string_view> known_keys) {
  YamlMap map;
  map.source_ = std::string(source);
  map.path_ = std::move(path);
  map.line_ = LineOf(node);
  if (node.IsNull()) return map;
  if (!node.IsMap()) {
    return ErrorAt(source, node, map.path_, absl::StrCat("expected a map, got ", Describe(node)));
  }
  // Range-for keeps each pair alive; `it->first` would point into a temporary proxy.
  for (const auto& pair : node) {
    const YAML::Node key = pair.first;
    if (!key.IsScalar()) return ErrorAt(source, key, map.path_, "keys must be plain strings");
    const std::string& name = key.Scalar();
    if (std::find(known_keys.begin(), known_keys.end(), name) == known_keys.end()) {
      return ErrorAt(source, key, map.PathOf(name),
                     absl::StrCat("unknown key (known: ", JoinNames(known_keys), ")"));
    }
    // yaml-cpp keeps both entries of a repeated key; silently using one would hide an edit.
    if (const Entry* seen = map.Find(name)) {
      return ErrorAt(source, key, map.PathOf(name),
                     absl::StrCat("duplicate key (first at line ", LineOf(seen->key_node), ")"));
    }
    map.entries_.push_back(Entry{name, key, pair.second});
  }
  return map;
}

const YamlMap::Entry* YamlMap::Find(std::string_view key) const {
  for (const Entry& entry : entries_) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

std::optional<YAML::Node> YamlMap::Get(std::string_view key) const {
  const Entry* entry = Find(key);
  if (entry == nullptr) return std::nullopt;
  return entry->value;
}

int YamlMap::KeyLine(std::string_view key) const {
  const Entry* entry = Find(key);
  return entry == nullptr ? line_ : LineOf(entry->key_node);
}

Status YamlMap::Missing(std::string_view key) const {
  return ErrorAt(source_, line_, PathOf(key), "required key is missing");
}

Status YamlMap::GetInt(std::string_view key, int64_t min, int64_t max, int64_t* out) const {
  std::optional<YAML::Node> node = Get(key);
  if (!node) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(*out, ReadInt(source_, *node, PathOf(key), min, max));
  return absl::OkStatus();
}

Status YamlMap::GetInt(std::string_view key, int64_t min, int64_t max, int* out) const {
  int64_t value = *out;
  TESSERA_RETURN_IF_ERROR(
      GetInt(key, std::max<int64_t>(min, INT32_MIN), std::min<int64_t>(max, INT32_MAX), &value));
  *out = static_cast<int>(value);
  return absl::OkStatus();
}

Status YamlMap::GetDouble(std::string_view key, double min, double max, double* out) const {
  std::optional<YAML::Node> node = Get(key);
  if (!node) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(*out, ReadDouble(source_, *node, PathOf(key), min, max));
  return absl::OkStatus();
}

Status YamlMap::GetBool(std::string_view key, bool* out) const {
  std::optional<YAML::Node> node = Get(key);
  if (!node) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(*out, ReadBool(source_, *node, PathOf(key)));
  return absl::OkStatus();
}

Status YamlMap::GetString(std::string_view key, std::string* out) const {
  std::optional<YAML::Node> node = Get(key);
  if (!node) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(*out, ReadString(source_, *node, PathOf(key)));
  return absl::OkStatus();
}

Status YamlMap::GetEnum(std::string_view key, std::span<const std::string_view> allowed,
                        std::string* out) const {
  std::optional<YAML::Node> node = Get(key);
  if (!node) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(*out, ReadEnum(source_, *node, PathOf(key), allowed));
  return absl::OkStatus();
}

}  // namespace tessera::yaml
