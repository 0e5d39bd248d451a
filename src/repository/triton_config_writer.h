// The pieces the config.pbtxt reader (triton_config.cc) writes config.yaml text with, shared by
// the files that write its blocks; internal to the repository component.
#pragma once

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "inference/model_config.pb.h"
#include "tessera/common/status.h"

namespace tessera::repository::pbtxt {

using ParseInfoTree = google::protobuf::TextFormat::ParseInfoTree;

// Lines (1-based) of fields in the parsed text. A field absent from the text is on line 0, and
// callers fall back to the enclosing field's line.
class Locator {
 public:
  Locator(const ParseInfoTree* tree, const google::protobuf::Descriptor* type)
      : tree_(tree), type_(type) {}

  int At(std::string_view field, int index = -1) const {
    const google::protobuf::FieldDescriptor* f = Field(field);
    if (tree_ == nullptr || f == nullptr) return 0;
    return std::max(tree_->GetLocation(f, Index(f, index)).line + 1, 0);
  }
  Locator Nested(std::string_view field, const google::protobuf::Descriptor* type,
                 int index = -1) const {
    const google::protobuf::FieldDescriptor* f = Field(field);
    if (tree_ == nullptr || f == nullptr) return Locator(nullptr, type);
    return Locator(tree_->GetTreeForNested(f, Index(f, index)), type);
  }

 private:
  const google::protobuf::FieldDescriptor* Field(std::string_view name) const {
    return type_->FindFieldByName(std::string(name));
  }
  // protobuf wants -1 for a singular field and an index for a repeated one (maps included).
  static int Index(const google::protobuf::FieldDescriptor* f, int index) {
    if (!f->is_repeated()) return -1;
    return index < 0 ? 0 : index;
  }
  const ParseInfoTree* tree_;
  const google::protobuf::Descriptor* type_;
};

inline int LineOr(int line, int fallback) { return line > 0 ? line : fallback; }

// config.yaml text, one key per line, with the config.pbtxt line of each.
class YamlWriter {
 public:
  void Add(int indent, const std::string& text, int pbtxt_line) {
    text_.append(static_cast<size_t>(indent), ' ');
    absl::StrAppend(&text_, text, "\n");
    pbtxt_lines_.push_back(pbtxt_line);
  }
  const std::string& text() const { return text_; }
  // The config.pbtxt line for a line of the written text (1-based); 1 when out of range.
  int PbtxtLine(int yaml_line) const {
    if (yaml_line < 1 || yaml_line > static_cast<int>(pbtxt_lines_.size())) return 1;
    return std::max(pbtxt_lines_[static_cast<size_t>(yaml_line - 1)], 1);
  }

 private:
  std::string text_;
  std::vector<int> pbtxt_lines_;
};

// A YAML double-quoted scalar: the value goes through as text, whatever it holds.
inline std::string Quoted(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

template <typename Repeated>
std::string FlowList(const Repeated& values) {
  return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
}

inline Status RefuseAt(const std::string& source, int line, const std::string& path,
                       const std::string& reason) {
  return absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": ", path, ": ", reason));
}

// What the reader collects besides the YAML text.
struct Reading {
  const std::string& source;
  std::vector<std::string> notes;

  void Ignore(int line, const std::string& path, const std::string& why) {
    notes.push_back(absl::StrCat(source, ":", line, ": ", path, ": ignored (", why, ")"));
  }
};

// ensemble_scheduling and sequence_batching, as the same keys in YAML
// (triton_config_scheduling.cc).
void WriteEnsembleScheduling(const inference::ModelConfig& config, const Locator& root,
                             YamlWriter& yaml);
void WriteSequenceBatching(const inference::ModelConfig& config, const Locator& root,
                           YamlWriter& yaml);

// batch_input and batch_output (ragged batching), as the same keys in YAML
// (triton_config_batch_io.cc).
void WriteBatchInputs(const inference::ModelConfig& config, const Locator& root, YamlWriter& yaml);
void WriteBatchOutputs(const inference::ModelConfig& config, const Locator& root, YamlWriter& yaml);

}  // namespace tessera::repository::pbtxt
