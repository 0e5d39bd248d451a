// Strict reading of YAML config files (server.yaml, model config.yaml, profiles) into structs.
//
// Every error is INVALID_ARGUMENT with the message "<source>:<line>: <key path>: <reason>", the
// line 1-based, so an operator can jump to the offending line. Nothing here throws: yaml-cpp
// exceptions are caught and turned into Status. Thread-safety: plain values; a YamlMap is used by
// one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "tessera/common/status.h"
#include "yaml-cpp/yaml.h"

namespace tessera::yaml {

// Debian's abseil is built with its own string_view type, so absl::StrCat/StrJoin do not take a
// std::string_view; pass it through this.
inline absl::string_view AsAbsl(std::string_view text) { return {text.data(), text.size()}; }

// "a, b, c" for "expected one of" messages.
std::string JoinNames(std::span<const std::string_view> names);

// 1-based line of `node`, or 1 when yaml-cpp has no position for it (an empty document).
int LineOf(const YAML::Node& node);

// "<source>:<line>: <path>: <reason>" as INVALID_ARGUMENT. An empty `path` is left out.
Status ErrorAt(std::string_view source, int line, std::string_view path, std::string_view reason);
Status ErrorAt(std::string_view source, const YAML::Node& node, std::string_view path,
               std::string_view reason);

// Parses one YAML document. A syntax error becomes "<source>:<line>: YAML syntax error: ...".
// An empty document yields a Null node.
StatusOr<YAML::Node> ParseDocument(const std::string& text, std::string_view source);

// Reads a whole file. A missing or unreadable file is NOT_FOUND naming the path.
StatusOr<std::string> ReadFileToString(const std::string& path);

// "a.b" / "a[3]" key paths for messages.
std::string JoinPath(std::string_view parent, std::string_view key);
std::string IndexPath(std::string_view parent, size_t index);

// Describes a node for "expected X, got Y" messages: `"eight"`, `a list`, `a map`, `null`.
std::string Describe(const YAML::Node& node);

// Scalar readers. `path` names the key in messages. Integers are decimal (optional sign); ranges
// are inclusive.
StatusOr<int64_t> ReadInt(std::string_view source, const YAML::Node& node, std::string_view path,
                          int64_t min, int64_t max);
StatusOr<double> ReadDouble(std::string_view source, const YAML::Node& node, std::string_view path,
                            double min, double max);
StatusOr<bool> ReadBool(std::string_view source, const YAML::Node& node, std::string_view path);
StatusOr<std::string> ReadString(std::string_view source, const YAML::Node& node,
                                 std::string_view path);
// A string that must be one of `allowed`; the message lists them.
StatusOr<std::string> ReadEnum(std::string_view source, const YAML::Node& node,
                               std::string_view path, std::span<const std::string_view> allowed);
// A list of integers, each in [min, max]. A null node is an empty list.
StatusOr<std::vector<int64_t>> ReadIntList(std::string_view source, const YAML::Node& node,
                                           std::string_view path, int64_t min, int64_t max);

// The entries of a list node; null is an empty list, anything else is an error.
StatusOr<std::vector<YAML::Node>> ReadList(std::string_view source, const YAML::Node& node,
                                           std::string_view path);

// A map checked against the keys it may hold. A null node reads as an empty map (`all:` and
// `all: {}` mean the same). Unknown and duplicate keys are errors at the key's line, found when the
// map is made, so a typo ("dimz") is reported as itself rather than as a missing key ("dims").
class YamlMap {
 public:
  static StatusOr<YamlMap> Create(std::string_view source, const YAML::Node& node, std::string path,
                                  std::span<const std::string_view> known_keys);

  // The value under `key`, or nullopt when absent.
  std::optional<YAML::Node> Get(std::string_view key) const;
  bool Has(std::string_view key) const { return Get(key).has_value(); }
  // 1-based line of `key` itself (of the map when absent): where to report a bad section as a
  // whole.
  int KeyLine(std::string_view key) const;

  // Error for a required key that is absent (reported at the map's line).
  Status Missing(std::string_view key) const;

  // Reads `key` into `*out` when present, leaving `*out` (the default) unchanged when absent.
  Status GetInt(std::string_view key, int64_t min, int64_t max, int64_t* out) const;
  Status GetInt(std::string_view key, int64_t min, int64_t max, int* out) const;
  Status GetDouble(std::string_view key, double min, double max, double* out) const;
  Status GetBool(std::string_view key, bool* out) const;
  Status GetString(std::string_view key, std::string* out) const;
  Status GetEnum(std::string_view key, std::span<const std::string_view> allowed,
                 std::string* out) const;

  // Key path of `key` inside this map, for messages about its value.
  std::string PathOf(std::string_view key) const { return JoinPath(path_, key); }
  const std::string& path() const { return path_; }
  std::string_view source() const { return source_; }
  int line() const { return line_; }

 private:
  struct Entry {
    std::string key;
    YAML::Node key_node;
    YAML::Node value;
  };
  YamlMap() = default;
  const Entry* Find(std::string_view key) const;

  std::string source_;
  std::string path_;
  int line_ = 1;
  std::vector<Entry> entries_;
};

}  // namespace tessera::yaml
