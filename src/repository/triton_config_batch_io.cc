// The config.pbtxt reader's ragged batching blocks, batch_input and batch_output, written out as
// the same keys in config.yaml text for ParseModelConfig to check.
#include <string>
#include <vector>

#include "triton_config_writer.h"

namespace tessera::repository::pbtxt {
namespace {

std::string NameList(const google::protobuf::RepeatedPtrField<std::string>& names) {
  std::vector<std::string> quoted;
  for (const std::string& name : names) quoted.push_back(Quoted(name));
  return FlowList(quoted);
}

// target_name and source_input, the fields BatchInput and BatchOutput share, when present.
template <typename Entry>
void AddNames(const Entry& entry, const Locator& at, std::vector<std::pair<std::string, int>>& keys,
              bool sources) {
  const auto& names = sources ? entry.source_input() : entry.target_name();
  const char* key = sources ? "source_input" : "target_name";
  if (!names.empty()) keys.emplace_back(absl::StrCat(key, ": ", NameList(names)), at.At(key, 0));
}

// Each entry's fields as written, so the YAML reader reports a missing one (proto3 leaves an
// absent list empty and an absent data type TYPE_INVALID, which the reader refuses by name).
template <typename Entry, typename WriteFields>
void WriteEntries(const google::protobuf::RepeatedPtrField<Entry>& entries, const char* key,
                  const Locator& root, YamlWriter& yaml, WriteFields write_fields) {
  if (entries.empty()) return;
  const int block_line = LineOr(root.At(key, 0), 1);
  yaml.Add(0, absl::StrCat(key, ":"), block_line);
  for (int i = 0; i < entries.size(); ++i) {
    const Entry& entry = entries.Get(i);
    Locator at = root.Nested(key, entry.GetDescriptor(), i);
    std::vector<std::pair<std::string, int>> keys;
    write_fields(entry, at, keys);
    const int line = LineOr(root.At(key, i), block_line);
    for (size_t k = 0; k < keys.size(); ++k) {
      yaml.Add(k == 0 ? 2 : 4, absl::StrCat(k == 0 ? "- " : "", keys[k].first),
               LineOr(keys[k].second, line));
    }
  }
}

}  // namespace

void WriteBatchInputs(const inference::ModelConfig& config, const Locator& root, YamlWriter& yaml) {
  WriteEntries(config.batch_input(), "batch_input", root, yaml,
               [](const inference::BatchInput& entry, const Locator& at,
                  std::vector<std::pair<std::string, int>>& keys) {
                 keys.emplace_back(
                     absl::StrCat("kind: ", inference::BatchInput::Kind_Name(entry.kind())),
                     at.At("kind"));
                 AddNames(entry, at, keys, /*sources=*/false);
                 if (entry.data_type() != inference::TYPE_INVALID) {
                   keys.emplace_back(
                       absl::StrCat("data_type: ", inference::DataType_Name(entry.data_type())),
                       at.At("data_type"));
                 }
                 AddNames(entry, at, keys, /*sources=*/true);
               });
}

void WriteBatchOutputs(const inference::ModelConfig& config, const Locator& root,
                       YamlWriter& yaml) {
  WriteEntries(config.batch_output(), "batch_output", root, yaml,
               [](const inference::BatchOutput& entry, const Locator& at,
                  std::vector<std::pair<std::string, int>>& keys) {
                 keys.emplace_back(
                     absl::StrCat("kind: ", inference::BatchOutput::Kind_Name(entry.kind())),
                     at.At("kind"));
                 AddNames(entry, at, keys, /*sources=*/false);
                 AddNames(entry, at, keys, /*sources=*/true);
               });
}

}  // namespace tessera::repository::pbtxt
