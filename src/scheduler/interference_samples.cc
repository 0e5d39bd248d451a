// The co-location samples CSV (docs/profile-format.md): what tessera-profile measures and
// tessera-fit-interference fits.
//
// Besides the five columns the fit uses, a file may name what was measured (models, batches,
// partitions) in known descriptive columns, so a person can trace an outlier back to its run;
// any other column is an error, as an unknown key is in the YAML files.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tessera/common/yaml_util.h"
#include "tessera/scheduler/interference.h"

namespace tessera::scheduler {
namespace {

constexpr std::array<std::string_view, 5> kRequired = {"l2_self", "l2_other", "dram_self",
                                                       "dram_other", "slowdown"};
constexpr std::array<std::string_view, 6> kDescriptive = {
    "self_model", "self_batch", "self_partition", "other_model", "other_batch", "other_partition"};

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

std::vector<std::string_view> SplitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    fields.push_back(
        Trim(line.substr(start, comma == std::string_view::npos ? line.npos : comma - start)));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

std::optional<double> ParseNumber(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

std::string Quoted(std::string_view text) { return absl::StrCat("\"", yaml::AsAbsl(text), "\""); }

}  // namespace

StatusOr<std::vector<CoLocationSample>> ParseSamplesCsv(const std::string& text,
                                                        std::string_view source) {
  std::vector<std::string> columns;
  // Index of each required column in a row, in kRequired order.
  std::array<size_t, kRequired.size()> where{};
  std::vector<CoLocationSample> samples;

  std::string_view rest = text;
  int line_number = 0;
  while (!rest.empty()) {
    const size_t newline = rest.find('\n');
    std::string_view line = Trim(rest.substr(0, newline));
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    ++line_number;
    if (line.empty() || line.front() == '#') continue;  // blank lines and comments

    const std::vector<std::string_view> fields = SplitFields(line);
    if (columns.empty()) {  // the header
      for (std::string_view name : fields) {
        const bool known =
            std::find(kRequired.begin(), kRequired.end(), name) != kRequired.end() ||
            std::find(kDescriptive.begin(), kDescriptive.end(), name) != kDescriptive.end();
        if (!known) {
          return yaml::ErrorAt(
              source, line_number, absl::StrCat("column ", Quoted(name)),
              absl::StrCat("unknown column (required: ", yaml::JoinNames(kRequired),
                           "; optional: ", yaml::JoinNames(kDescriptive), ")"));
        }
        if (std::find(columns.begin(), columns.end(), name) != columns.end()) {
          return yaml::ErrorAt(source, line_number, absl::StrCat("column ", Quoted(name)),
                               "appears twice in the header");
        }
        columns.emplace_back(name);
      }
      for (size_t r = 0; r < kRequired.size(); ++r) {
        auto it = std::find(columns.begin(), columns.end(), kRequired[r]);
        if (it == columns.end()) {
          return yaml::ErrorAt(source, line_number, absl::StrCat("column ", Quoted(kRequired[r])),
                               "required column is missing from the header");
        }
        where[r] = static_cast<size_t>(it - columns.begin());
      }
      continue;
    }

    if (fields.size() != columns.size()) {
      return yaml::ErrorAt(
          source, line_number, "",
          absl::StrCat("has ", fields.size(), " fields for ", columns.size(), " columns"));
    }
    // Descriptive columns are not used by the fit, but a malformed one means a malformed file.
    for (size_t i = 0; i < columns.size(); ++i) {
      const std::string& name = columns[i];
      const bool is_model = name == "self_model" || name == "other_model";
      if (is_model) {
        if (fields[i].empty()) return yaml::ErrorAt(source, line_number, name, "is empty");
        continue;
      }
      if (std::find(kDescriptive.begin(), kDescriptive.end(), name) == kDescriptive.end()) {
        continue;
      }
      const bool is_batch = name == "self_batch" || name == "other_batch";
      std::optional<double> value = ParseNumber(fields[i]);
      const double max = is_batch ? 1024 : 100;
      if (!value || *value != std::floor(*value) || *value < 1 || *value > max) {
        return yaml::ErrorAt(
            source, line_number, name,
            absl::StrCat("expected an integer in 1..", max, ", got ", Quoted(fields[i])));
      }
    }
    std::array<double, kRequired.size()> values{};
    for (size_t r = 0; r < kRequired.size(); ++r) {
      std::optional<double> value = ParseNumber(fields[where[r]]);
      if (!value) {
        return yaml::ErrorAt(source, line_number, kRequired[r],
                             absl::StrCat("expected a number, got ", Quoted(fields[where[r]])));
      }
      const bool is_slowdown = kRequired[r] == "slowdown";
      if (is_slowdown ? !(*value > 0) : (*value < 0 || *value > 1)) {
        return yaml::ErrorAt(
            source, line_number, kRequired[r],
            absl::StrCat(is_slowdown ? "must be > 0" : "must be in [0, 1]", ", got ", *value));
      }
      values[r] = *value;
    }
    samples.push_back(CoLocationSample{values[0], values[1], values[2], values[3], values[4]});
  }
  if (columns.empty()) {
    return yaml::ErrorAt(
        source, std::max(1, line_number), "",
        absl::StrCat("no header line (expected the columns ", yaml::JoinNames(kRequired), ")"));
  }
  return samples;
}

}  // namespace tessera::scheduler
