// Profile files on disk: profiles/<device>/<model>.yaml and device.yaml (docs/profile-format.md).
//
// The reader checks everything it can at the offending line (shapes, ordering, ranges, latency
// rising with the partition) so an operator editing a measured table is sent to the right row;
// ModelProfile::Create runs afterwards as the last word on validity.
#include <algorithm>
#include <array>
#include <limits>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tessera/common/yaml_util.h"
#include "tessera/scheduler/profile.h"
#include "yaml_text.h"

namespace tessera::scheduler {
namespace {

using yaml::YamlMap;

constexpr std::array<std::string_view, 8> kProfileKeys = {
    "model", "device", "synthetic", "source", "memory_mb", "latency_ms", "utilisation", "note"};
constexpr std::array<std::string_view, 3> kTableKeys = {"partitions", "batches", "rows"};
constexpr std::array<std::string_view, 3> kUtilKeys = {"batch", "l2", "dram"};
constexpr std::array<std::string_view, 5> kDeviceKeys = {"name", "memory_mb", "synthetic", "source",
                                                         "note"};

// Same tolerance as ModelProfile::Create: more compute may not slow a batch by more than 5 %.
constexpr double kMaxRise = 1.05;
// Values per line of a latency row in written files (32 batches → 4 lines).
constexpr size_t kValuesPerLine = 8;

Status RequireString(const YamlMap& m, std::string_view key, std::string* out) {
  std::optional<YAML::Node> node = m.Get(key);
  if (!node) return m.Missing(key);
  TESSERA_ASSIGN_OR_RETURN(*out, yaml::ReadString(m.source(), *node, m.PathOf(key)));
  if (out->empty()) return yaml::ErrorAt(m.source(), *node, m.PathOf(key), "is empty");
  return absl::OkStatus();
}

Status RequireDouble(const YamlMap& m, std::string_view key, double min, double max, double* out) {
  if (!m.Has(key)) return m.Missing(key);
  return m.GetDouble(key, min, max, out);
}

// A strictly ascending integer list whose entries lie in [min, max]; errors point at the entry.
StatusOr<std::vector<int>> ReadAscending(std::string_view source, const YAML::Node& node,
                                         const std::string& path, int min, int max) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items, yaml::ReadList(source, node, path));
  if (items.empty()) return yaml::ErrorAt(source, node, path, "must not be empty");
  std::vector<int> values;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string item_path = yaml::IndexPath(path, i);
    TESSERA_ASSIGN_OR_RETURN(int64_t value, yaml::ReadInt(source, items[i], item_path, min, max));
    if (!values.empty() && value <= values.back()) {
      return yaml::ErrorAt(
          source, items[i], item_path,
          absl::StrCat("must be strictly ascending: ", value, " follows ", values.back()));
    }
    values.push_back(static_cast<int>(value));
  }
  return values;
}

Status ReadTable(const YamlMap& root, ModelProfile::Table* table) {
  std::optional<YAML::Node> node = root.Get("latency_ms");
  if (!node) return root.Missing("latency_ms");
  std::string_view source = root.source();
  TESSERA_ASSIGN_OR_RETURN(YamlMap m, YamlMap::Create(source, *node, "latency_ms", kTableKeys));

  std::optional<YAML::Node> parts = m.Get("partitions");
  if (!parts) return m.Missing("partitions");
  TESSERA_ASSIGN_OR_RETURN(table->partitions_pct,
                           ReadAscending(source, *parts, m.PathOf("partitions"), 1, 100));
  if (table->partitions_pct.back() != 100) {
    return yaml::ErrorAt(source, *parts, m.PathOf("partitions"),
                         "must include 100 (the whole device)");
  }

  std::optional<YAML::Node> batches = m.Get("batches");
  if (!batches) return m.Missing("batches");
  TESSERA_ASSIGN_OR_RETURN(table->batches,
                           ReadAscending(source, *batches, m.PathOf("batches"), 1, 1024));
  if (table->batches.front() != 1) {
    return yaml::ErrorAt(source, *batches, m.PathOf("batches"), "must include batch 1");
  }

  std::optional<YAML::Node> rows_node = m.Get("rows");
  if (!rows_node) return m.Missing("rows");
  const std::string rows_path = m.PathOf("rows");
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> rows,
                           yaml::ReadList(source, *rows_node, rows_path));
  if (rows.size() != table->partitions_pct.size()) {
    return yaml::ErrorAt(
        source, *rows_node, rows_path,
        absl::StrCat("has ", rows.size(), " rows for ", table->partitions_pct.size(),
                     " partitions (one row per partition, in order)"));
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string row_path = yaml::IndexPath(rows_path, i);
    TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> cells,
                             yaml::ReadList(source, rows[i], row_path));
    if (cells.size() != table->batches.size()) {
      return yaml::ErrorAt(
          source, rows[i], row_path,
          absl::StrCat("row for partition ", table->partitions_pct[i], " % has ", cells.size(),
                       " values for ", table->batches.size(), " batches"));
    }
    std::vector<double> row;
    for (size_t j = 0; j < cells.size(); ++j) {
      const std::string cell_path = yaml::IndexPath(row_path, j);
      TESSERA_ASSIGN_OR_RETURN(double ms, yaml::ReadDouble(source, cells[j], cell_path, 0,
                                                           std::numeric_limits<double>::max()));
      if (!(ms > 0)) {
        return yaml::ErrorAt(source, cells[j], cell_path, "latency must be > 0 ms, got 0");
      }
      if (i > 0 && ms > table->latency_ms[i - 1][j] * kMaxRise) {
        return yaml::ErrorAt(
            source, cells[j], cell_path,
            absl::StrCat("batch ", table->batches[j], " takes ", ms, " ms at ",
                         table->partitions_pct[i], " %, more than 5 % above its ",
                         table->latency_ms[i - 1][j], " ms at ", table->partitions_pct[i - 1],
                         " % (latency must not rise with the partition)"));
      }
      row.push_back(ms);
    }
    table->latency_ms.push_back(std::move(row));
  }
  return absl::OkStatus();
}

Status ReadUtilisation(const YamlMap& root, std::vector<UtilisationPoint>* points) {
  std::optional<YAML::Node> node = root.Get("utilisation");
  if (!node) return absl::OkStatus();
  std::string_view source = root.source();
  TESSERA_ASSIGN_OR_RETURN(std::vector<YAML::Node> items,
                           yaml::ReadList(source, *node, "utilisation"));
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string path = yaml::IndexPath("utilisation", i);
    TESSERA_ASSIGN_OR_RETURN(YamlMap m, YamlMap::Create(source, items[i], path, kUtilKeys));
    UtilisationPoint point;
    if (!m.Has("batch")) return m.Missing("batch");
    TESSERA_RETURN_IF_ERROR(m.GetInt("batch", 1, 1024, &point.batch));
    if (!points->empty() && point.batch <= points->back().batch) {
      return yaml::ErrorAt(source, m.KeyLine("batch"), m.PathOf("batch"),
                           absl::StrCat("batches must be strictly ascending: ", point.batch,
                                        " follows ", points->back().batch));
    }
    TESSERA_RETURN_IF_ERROR(RequireDouble(m, "l2", 0, 1, &point.l2_util));
    TESSERA_RETURN_IF_ERROR(RequireDouble(m, "dram", 0, 1, &point.dram_util));
    points->push_back(point);
  }
  return absl::OkStatus();
}

// `source:` (where the numbers come from) and `note:` are free text for people; only their type
// is checked.
Status ReadFreeText(const YamlMap& root) {
  std::string ignored;
  TESSERA_RETURN_IF_ERROR(root.GetString("source", &ignored));
  return root.GetString("note", &ignored);
}

void AppendRow(std::string* out, const std::vector<double>& row) {
  *out += "    - [";
  for (size_t j = 0; j < row.size(); ++j) {
    if (j > 0) *out += (j % kValuesPerLine == 0) ? ",\n       " : ", ";
    *out += FormatYamlNumber(row[j]);
  }
  *out += "]\n";
}

template <typename T>
std::string FlowList(const std::vector<T>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += absl::StrCat(values[i]);
  }
  return out + "]";
}

}  // namespace

StatusOr<ModelProfile> ParseProfileYaml(const std::string& text, std::string_view source) {
  TESSERA_ASSIGN_OR_RETURN(YAML::Node doc, yaml::ParseDocument(text, source));
  if (doc.IsNull()) return yaml::ErrorAt(source, 1, "", "empty profile file");
  TESSERA_ASSIGN_OR_RETURN(YamlMap root, YamlMap::Create(source, doc, "", kProfileKeys));

  std::string model, device;
  TESSERA_RETURN_IF_ERROR(RequireString(root, "model", &model));
  TESSERA_RETURN_IF_ERROR(RequireString(root, "device", &device));
  bool synthetic = false;
  TESSERA_RETURN_IF_ERROR(root.GetBool("synthetic", &synthetic));
  TESSERA_RETURN_IF_ERROR(ReadFreeText(root));
  double memory_mb = 0;
  TESSERA_RETURN_IF_ERROR(RequireDouble(root, "memory_mb", 0, 1e9, &memory_mb));
  ModelProfile::Table table;
  TESSERA_RETURN_IF_ERROR(ReadTable(root, &table));
  std::vector<UtilisationPoint> utilisation;
  TESSERA_RETURN_IF_ERROR(ReadUtilisation(root, &utilisation));

  // Everything Create checks was checked above at its line; this is a backstop.
  auto profile = ModelProfile::Create(std::move(model), std::move(device), std::move(table),
                                      memory_mb, std::move(utilisation), synthetic);
  if (!profile.ok()) {
    return yaml::ErrorAt(source, root.KeyLine("latency_ms"), "",
                         std::string(profile.status().message()));
  }
  return profile;
}

StatusOr<ModelProfile> LoadProfileFile(const std::filesystem::path& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, yaml::ReadFileToString(path.string()));
  return ParseProfileYaml(text, path.string());
}

std::string ProfileToYaml(const ModelProfile& profile, std::string_view source) {
  const ModelProfile::Table& t = profile.table();
  std::string out;
  if (profile.synthetic()) {
    out += "# SYNTHETIC profile: the numbers are made up, NOT measured.\n";
  }
  out +=
      "# Format: docs/profile-format.md. latency_ms.rows[i][j] = L(batches[j], partitions[i]).\n";
  absl::StrAppend(&out, "model: ", QuoteYamlString(profile.model()), "\n");
  absl::StrAppend(&out, "device: ", QuoteYamlString(profile.device()), "\n");
  absl::StrAppend(&out, "synthetic: ", profile.synthetic() ? "true" : "false", "\n");
  if (!source.empty()) absl::StrAppend(&out, "source: ", QuoteYamlString(source), "\n");
  absl::StrAppend(&out, "memory_mb: ", FormatYamlNumber(profile.memory_mb()), "\n");
  out += "latency_ms:\n";
  absl::StrAppend(&out, "  partitions: ", FlowList(t.partitions_pct), "\n");
  absl::StrAppend(&out, "  batches: ", FlowList(t.batches), "\n");
  out += "  rows:\n";
  for (size_t i = 0; i < t.latency_ms.size(); ++i) {
    absl::StrAppend(&out, "    # partition ", t.partitions_pct[i], " %\n");
    AppendRow(&out, t.latency_ms[i]);
  }
  if (!profile.utilisation().empty()) {
    out += "utilisation:  # standalone, whole device (100 %), fractions of peak\n";
    for (const UtilisationPoint& u : profile.utilisation()) {
      absl::StrAppend(&out, "  - {batch: ", u.batch, ", l2: ", FormatYamlNumber(u.l2_util),
                      ", dram: ", FormatYamlNumber(u.dram_util), "}\n");
    }
  }
  return out;
}

StatusOr<DeviceInfo> ParseDeviceYaml(const std::string& text, std::string_view source) {
  TESSERA_ASSIGN_OR_RETURN(YAML::Node doc, yaml::ParseDocument(text, source));
  if (doc.IsNull()) return yaml::ErrorAt(source, 1, "", "empty device file");
  TESSERA_ASSIGN_OR_RETURN(YamlMap root, YamlMap::Create(source, doc, "", kDeviceKeys));
  DeviceInfo device;
  TESSERA_RETURN_IF_ERROR(RequireString(root, "name", &device.name));
  TESSERA_RETURN_IF_ERROR(RequireDouble(root, "memory_mb", 0, 1e9, &device.memory_mb));
  if (!(device.memory_mb > 0)) {
    return yaml::ErrorAt(source, root.KeyLine("memory_mb"), "memory_mb", "must be > 0, got 0");
  }
  TESSERA_RETURN_IF_ERROR(root.GetBool("synthetic", &device.synthetic));
  TESSERA_RETURN_IF_ERROR(ReadFreeText(root));
  return device;
}

std::string DeviceToYaml(const DeviceInfo& device, std::string_view source) {
  std::string out;
  if (device.synthetic) out += "# SYNTHETIC device description: NOT measured.\n";
  out += "# Format: docs/profile-format.md.\n";
  absl::StrAppend(&out, "name: ", QuoteYamlString(device.name), "\n");
  absl::StrAppend(&out, "memory_mb: ", FormatYamlNumber(device.memory_mb), "\n");
  absl::StrAppend(&out, "synthetic: ", device.synthetic ? "true" : "false", "\n");
  if (!source.empty()) absl::StrAppend(&out, "source: ", QuoteYamlString(source), "\n");
  return out;
}

StatusOr<ProfileSet> ProfileSet::LoadDirectory(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("profile directory ", dir.string(), " does not exist"));
  }
  const std::filesystem::path device_path = dir / "device.yaml";
  if (!std::filesystem::is_regular_file(device_path, ec)) {
    return absl::NotFoundError(
        absl::StrCat(device_path.string(), ": missing (every profile directory needs one)"));
  }
  TESSERA_ASSIGN_OR_RETURN(std::string device_text, yaml::ReadFileToString(device_path.string()));
  TESSERA_ASSIGN_OR_RETURN(DeviceInfo device, ParseDeviceYaml(device_text, device_path.string()));

  // Sorted, so the first error reported does not depend on directory order.
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::filesystem::path& path = entry.path();
    if (path.extension() != ".yaml" || !entry.is_regular_file()) continue;
    const std::string name = path.filename().string();
    if (name == "device.yaml" || name.rfind("interference", 0) == 0) continue;
    files.push_back(path);
  }
  if (ec) {
    return absl::NotFoundError(absl::StrCat(dir.string(), ": cannot list: ", ec.message()));
  }
  std::sort(files.begin(), files.end());

  ProfileSet set(std::move(device));
  for (const std::filesystem::path& path : files) {
    TESSERA_ASSIGN_OR_RETURN(ModelProfile profile, LoadProfileFile(path));
    if (profile.model() != path.stem().string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path.string(), ": holds the profile of model '", profile.model(),
                       "'; the file must be named ", profile.model(), ".yaml"));
    }
    Status added = set.Add(std::move(profile));
    if (!added.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path.string(), ": ", std::string(added.message())));
    }
  }
  return set;
}

}  // namespace tessera::scheduler
