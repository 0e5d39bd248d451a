#include "tessera/repository/repository.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <system_error>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tessera/common/bytes_tensor.h"
#include "tessera/common/utf8.h"
#include "tessera/common/yaml_util.h"

namespace tessera::repository {
namespace {

namespace fs = std::filesystem;

// 19 digits may overflow int64; no real repository numbers versions that high.
constexpr size_t kMaxVersionDigits = 18;

// FNV-1a, 64 bit: deterministic and dependency-free; fingerprints are compared, never trusted as
// content hashes, so a non-cryptographic hash is enough.
class Fnv1a {
 public:
  void Add(std::string_view bytes) {
    for (unsigned char c : bytes) {
      hash_ ^= c;
      hash_ *= 1099511628211ull;
    }
  }
  void Add(int64_t value) {
    Add(std::string_view(reinterpret_cast<const char*>(&value), sizeof(value)));
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 14695981039346656037ull;
};

bool IsHidden(std::string_view name) { return !name.empty() && name.front() == '.'; }

// "3" → 3. Names with a leading zero ("0", "01") are not versions, as in Triton, so that no two
// folders map to one version.
std::optional<int64_t> ParseVersionFolder(std::string_view name) {
  if (name.empty() || name.size() > kMaxVersionDigits || name.front() == '0') return std::nullopt;
  int64_t version = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    version = version * 10 + (c - '0');
  }
  return version;
}

// Version folders of `model_dir` holding `file_name` as a regular file (links followed), ascending.
// An empty `file_name` (an ensemble, which has no model file) takes every version folder, its
// path standing for the model file.
std::vector<ModelVersion> ListVersions(const fs::path& model_dir, const std::string& file_name) {
  std::vector<ModelVersion> versions;
  std::error_code ec;
  fs::directory_iterator it(model_dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::optional<int64_t> number = ParseVersionFolder(it->path().filename().string());
    if (!number) continue;
    fs::path model_path = file_name.empty() ? it->path() : it->path() / file_name;
    std::error_code file_ec;
    if (file_name.empty() ? !fs::is_directory(model_path, file_ec)
                          : !fs::is_regular_file(model_path, file_ec)) {
      continue;
    }
    // The file may vanish between the checks (an operator replacing it); skip it until next scan.
    uintmax_t bytes = file_name.empty() ? 0 : fs::file_size(model_path, file_ec);
    if (file_ec) continue;
    fs::file_time_type mtime = fs::last_write_time(model_path, file_ec);
    if (file_ec) continue;
    versions.push_back(ModelVersion{
        *number, model_path.string(), static_cast<uint64_t>(bytes),
        std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch()).count()});
  }
  std::sort(versions.begin(), versions.end(),
            [](const ModelVersion& a, const ModelVersion& b) { return a.version < b.version; });
  return versions;
}

// Fills each output's `labels` from its label_filename in the model folder, one label per line
// (Triton's classification labels); the text goes into the fingerprint, so an edit reloads it.
StatusOr<ModelConfig> ReadLabels(const fs::path& dir, const std::string& name, ModelConfig config,
                                 Fnv1a& hash) {
  for (TensorConfig& output : config.outputs) {
    if (output.label_filename.empty()) continue;
    const std::string path = (dir / output.label_filename).string();
    StatusOr<std::string> text = yaml::ReadFileToString(path);
    if (!text.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("model '", name, "': output '", output.name,
                                                     "': cannot read its label_filename ", path));
    }
    hash.Add(*text);
    auto labels = std::make_shared<std::vector<std::string>>();
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      absl::ConsumeSuffix(&line, "\r");
      labels->emplace_back(line);
    }
    if (!labels->empty() && labels->back().empty()) labels->pop_back();
    output.labels = std::move(labels);
  }
  return config;
}

ModelEntry FinishScan(const fs::path& dir, ModelEntry entry, Fnv1a& hash);

// Fills each warm-up input's `data` from its input_data_file in the model's warmup/ folder, and
// each state's `initial_data` from its data_file in initial_state/ (as Triton keeps them); the
// bytes go into the fingerprint, so a changed file reloads the model.
StatusOr<ModelConfig> ReadDataFiles(const fs::path& dir, const std::string& name,
                                    ModelConfig config, Fnv1a& hash) {
  for (WarmupSample& sample : config.model_warmup) {
    for (WarmupInput& input : sample.inputs) {
      if (input.input_data_file.empty()) continue;
      const std::string path = (dir / "warmup" / input.input_data_file).string();
      StatusOr<std::string> bytes = yaml::ReadFileToString(path);
      if (!bytes.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("model '", name, "': model_warmup \"", sample.name, "\" input '",
                         input.name, "': cannot read its input_data_file ", path));
      }
      hash.Add(*bytes);
      input.data = std::make_shared<const std::string>(std::move(bytes).value());
    }
  }
  for (SequenceState& state : config.sequence_batching.states) {
    if (state.initial_data_file.empty()) continue;
    const std::string path = (dir / "initial_state" / state.initial_data_file).string();
    StatusOr<std::string> bytes = yaml::ReadFileToString(path);
    const std::string what = absl::StrCat("model '", name, "': state '", state.input_name,
                                          "': initial_state data_file ", path);
    if (!bytes.ok()) return absl::InvalidArgumentError(absl::StrCat(what, " cannot be read"));
    if (state.data_type == DataType::kString) {
      // BYTES: the elements serialized as on the wire, each a 4-byte length and its bytes.
      const std::optional<uint64_t> count = DenseByteSize(StartShape(state), 1);
      if (!count) return absl::InvalidArgumentError(absl::StrCat(what, ": dims too large"));
      TESSERA_RETURN_IF_ERROR(
          CheckBytesElements(what, bytes->data(), bytes->size(), static_cast<int64_t>(*count)));
      hash.Add(*bytes);
      state.initial_data = std::make_shared<const std::string>(std::move(bytes).value());
      continue;
    }
    const std::optional<uint64_t> wanted =
        DenseByteSize(StartShape(state), DataTypeByteSize(state.data_type));
    if (!wanted || *wanted != bytes->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " holds ", bytes->size(), " bytes; the initial state's dims ",
                       ShapeToString(StartShape(state)), " of ",
                       std::string(DataTypeToConfigName(state.data_type)), " are ",
                       wanted ? absl::StrCat(*wanted) : std::string("more than 2^64"), " bytes"));
    }
    hash.Add(*bytes);
    state.initial_data = std::make_shared<const std::string>(std::move(bytes).value());
  }
  return config;
}

// Reads the model folder; never fails (problems are recorded in the entry). With `config_json`
// the config comes from it and the folder's config file is not read.
ModelEntry ScanModelFolder(const fs::path& dir, const std::string& name,
                           const std::string* config_json = nullptr,
                           const ScanOptions& options = {}) {
  ModelEntry entry;
  entry.name = name;
  entry.path = dir.string();
  if (!IsValidUtf8(name)) {  // no client could name it, and no response could carry its name
    entry.config = absl::InvalidArgumentError(
        absl::StrCat("model folder '", CoerceToUtf8(name), "' (bytes not valid UTF-8 shown as '?') ",
                     "in ", CoerceToUtf8(dir.parent_path().string()),
                     ": model names must be UTF-8; rename the folder"));
    Fnv1a hash;
    hash.Add(std::string_view("<name not UTF-8>"));
    entry.fingerprint = hash.value();
    return entry;
  }

  Fnv1a hash;
  if (config_json != nullptr) {
    hash.Add(std::string_view("<config from a load request>"));
    hash.Add(*config_json);
    entry.config = ParseTritonJsonModelConfig(*config_json, std::string(kLoadRequestConfig), name);
    return FinishScan(dir, std::move(entry), hash);
  }
  // config.yaml, or Triton's config.pbtxt so a Triton repository is served unchanged; never both,
  // since which one wins would be a guess. With a config name, configs/<name>.yaml or .pbtxt
  // where the folder has one (Triton's custom model configuration).
  std::string yaml_path = (dir / kConfigFileName).string();
  std::string pbtxt_path = (dir / kTritonConfigFileName).string();
  if (!options.config_name.empty()) {
    const fs::path custom = dir / "configs" / options.config_name;
    const std::string custom_yaml = custom.string() + ".yaml";
    const std::string custom_pbtxt = custom.string() + ".pbtxt";
    std::error_code ec;
    if (fs::exists(custom_yaml, ec) || fs::exists(custom_pbtxt, ec)) {
      hash.Add(std::string_view("<custom config>"));
      yaml_path = custom_yaml;
      pbtxt_path = custom_pbtxt;
    }
  }
  StatusOr<std::string> yaml_text = yaml::ReadFileToString(yaml_path);
  StatusOr<std::string> pbtxt_text = yaml::ReadFileToString(pbtxt_path);
  if (yaml_text.ok() && pbtxt_text.ok()) {
    entry.config =
        absl::InvalidArgumentError(absl::StrCat("model '", name, "': both ", yaml_path, " and ",
                                                pbtxt_path, " are there; keep one of them"));
    hash.Add(*yaml_text);
    hash.Add(*pbtxt_text);
    entry.fingerprint = hash.value();
    return entry;
  }
  if (!yaml_text.ok() && !pbtxt_text.ok()) {
    // As in Triton, a folder of versioned model files needs no config: it is completed from the
    // model file at load. Without model files it is not a model.
    ModelConfig defaults;
    defaults.name = name;
    if (ListVersions(dir, defaults.default_model_filename).empty()) {
      entry.config = absl::NotFoundError(absl::StrCat(
          "model '", name, "': no ", yaml::AsAbsl(kConfigFileName), " or ",
          yaml::AsAbsl(kTritonConfigFileName), " (looked for ", yaml_path, " and ", pbtxt_path,
          "), and no <version>/", defaults.default_model_filename, " to complete one from"));
      hash.Add(std::string_view("<no config>"));
      entry.fingerprint = hash.value();
      return entry;
    }
    hash.Add(std::string_view("<config from the model file>"));
    entry.config = std::move(defaults);
  } else if (yaml_text.ok()) {
    hash.Add(*yaml_text);
    entry.config = ParseModelConfig(*yaml_text, yaml_path, name);
  } else {
    hash.Add(std::string_view("<config.pbtxt>"));
    hash.Add(*pbtxt_text);
    entry.config = ParseTritonModelConfig(*pbtxt_text, pbtxt_path, name);
  }
  return FinishScan(dir, std::move(entry), hash);
}

// The rest of a folder's scan once its config is parsed (or failed): labels, versions and the
// fingerprint.
ModelEntry FinishScan(const fs::path& dir, ModelEntry entry, Fnv1a& hash) {
  const std::string& name = entry.name;
  if (entry.config.ok()) {
    entry.config = ReadLabels(dir, name, std::move(entry.config).value(), hash);
  }
  if (entry.config.ok()) {
    entry.config = ReadDataFiles(dir, name, std::move(entry.config).value(), hash);
  }
  if (!entry.config.ok()) {
    entry.fingerprint = hash.value();
    return entry;
  }

  entry.versions =
      ListVersions(dir, entry.config->is_ensemble() ? "" : entry.config->default_model_filename);
  std::vector<int64_t> available;
  for (const ModelVersion& v : entry.versions) available.push_back(v.version);
  entry.selected_versions = SelectVersions(entry.config->version_policy, available);
  if (entry.config->version_policy.kind == VersionPolicy::Kind::kSpecific) {
    for (int64_t v : entry.config->version_policy.specific_versions) {
      if (!std::binary_search(available.begin(), available.end(), v)) {
        entry.missing_versions.push_back(v);
      }
    }
    std::sort(entry.missing_versions.begin(), entry.missing_versions.end());
    entry.missing_versions.erase(
        std::unique(entry.missing_versions.begin(), entry.missing_versions.end()),
        entry.missing_versions.end());
  }

  for (int64_t v : entry.selected_versions) {
    const ModelVersion* version = entry.FindVersion(v);
    hash.Add(v);
    hash.Add(static_cast<int64_t>(version->file_bytes));
    hash.Add(version->mtime_ns);
  }
  entry.fingerprint = hash.value();
  return entry;
}

// A name that more than one repository holds: Triton refuses such a model, since which folder
// is meant would be a guess; the others still serve.
ModelEntry AmbiguousModel(const std::string& name, const std::vector<fs::path>& folders) {
  ModelEntry entry;
  entry.name = name;
  entry.path = folders.front().string();
  std::vector<std::string> paths;
  Fnv1a hash;
  hash.Add(std::string_view("<in several repositories>"));
  for (const fs::path& folder : folders) {
    paths.push_back(folder.string());
    hash.Add(folder.string());
  }
  entry.config = absl::InvalidArgumentError(absl::StrCat(
      "model '", CoerceToUtf8(name), "' is in more than one model repository (",
      CoerceToUtf8(absl::StrJoin(paths, ", ")), "); a model name must be unique across them"));
  entry.fingerprint = hash.value();
  return entry;
}

}  // namespace

const ModelVersion* ModelEntry::FindVersion(int64_t version) const {
  for (const ModelVersion& v : versions) {
    if (v.version == version) return &v;
  }
  return nullptr;
}

const ModelEntry* RepositorySnapshot::Find(std::string_view name) const {
  for (const ModelEntry& m : models) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::vector<int64_t> SelectVersions(const VersionPolicy& policy,
                                    const std::vector<int64_t>& available) {
  std::vector<int64_t> selected;
  switch (policy.kind) {
    case VersionPolicy::Kind::kAll:
      selected = available;
      break;
    case VersionPolicy::Kind::kLatest: {
      size_t n =
          std::min(available.size(), static_cast<size_t>(std::max(policy.latest_num_versions, 0)));
      selected.assign(available.end() - static_cast<std::ptrdiff_t>(n), available.end());
      break;
    }
    case VersionPolicy::Kind::kSpecific:
      for (int64_t v : available) {
        if (std::find(policy.specific_versions.begin(), policy.specific_versions.end(), v) !=
            policy.specific_versions.end()) {
          selected.push_back(v);
        }
      }
      break;
  }
  return selected;
}

StatusOr<RepositorySnapshot> ScanRepository(const std::string& root) {
  return ScanRepositories({root}, {});
}

StatusOr<RepositorySnapshot> ScanRepositories(const std::vector<std::string>& roots,
                                              const ScanOptions& options) {
  RepositorySnapshot snapshot;
  snapshot.roots = roots;
  // Each model's folders, in the order of `roots`.
  std::map<std::string, std::vector<fs::path>> folders;
  for (const std::string& root : roots) {
    std::error_code ec;
    fs::file_status status = fs::status(root, ec);
    if (!fs::exists(status)) {
      return absl::NotFoundError(absl::StrCat("model repository '", root, "' does not exist"));
    }
    if (!fs::is_directory(status)) {
      return absl::FailedPreconditionError(
          absl::StrCat("model repository '", root, "' is not a directory"));
    }
    fs::directory_iterator it(root, ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      std::string name = it->path().filename().string();
      std::error_code dir_ec;
      if (IsHidden(name) || !it->is_directory(dir_ec)) continue;
      folders[name].push_back(it->path());
    }
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("cannot list model repository '", root, "': ", ec.message()));
    }
  }
  for (const auto& [name, paths] : folders) {
    snapshot.models.push_back(paths.size() == 1 ? ScanModelFolder(paths[0], name, nullptr, options)
                                                : AmbiguousModel(name, paths));
  }
  return snapshot;  // sorted by name: the map's order
}

StatusOr<ModelEntry> ScanModel(const std::string& root, const std::string& name) {
  return FindModel({root}, name, {});
}

StatusOr<ModelEntry> FindModel(const std::vector<std::string>& roots, const std::string& name,
                               const ScanOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(std::string dir, FindModelFolder(roots, name));
  return ScanModelFolder(dir, name, nullptr, options);
}

StatusOr<std::string> FindModelFolder(const std::vector<std::string>& roots,
                                      const std::string& name) {
  TESSERA_RETURN_IF_ERROR(CheckModelName(name));
  std::vector<fs::path> found;
  for (const std::string& root : roots) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
      return absl::NotFoundError(absl::StrCat("model repository '", root, "' does not exist"));
    }
    fs::path dir = fs::path(root) / name;
    if (fs::is_directory(dir, ec)) found.push_back(dir);
  }
  if (found.size() > 1) return AmbiguousModel(name, found).config.status();
  if (found.empty()) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' not found in ",
                                            roots.size() == 1 ? "repository" : "repositories", " '",
                                            absl::StrJoin(roots, "', '"), "'"));
  }
  return found[0].string();
}

Status CheckModelName(const std::string& name) {
  if (name.empty() || IsHidden(name) || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", CoerceToUtf8(name), "' is not a model name (a plain, non-hidden folder name)"));
  }
  return absl::OkStatus();
}

StatusOr<ModelEntry> ScanModelFolderWithConfig(const std::string& dir, const std::string& name,
                                               const std::string& config_json) {
  TESSERA_RETURN_IF_ERROR(CheckModelName(name));
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("model folder '", dir, "' does not exist"));
  }
  return ScanModelFolder(dir, name, &config_json);
}

Status CheckServable(const ModelEntry& entry) {
  if (!entry.config.ok()) return entry.config.status();
  if (!entry.selected_versions.empty()) return absl::OkStatus();
  const ModelConfig& config = *entry.config;
  if (config.is_ensemble()) {
    return absl::NotFoundError(
        absl::StrCat("model '", entry.name, "': an ensemble needs a version folder (an empty ",
                     entry.path, "/1, as in Triton)",
                     config.version_policy.kind == VersionPolicy::Kind::kSpecific
                         ? " for each version its version_policy lists"
                         : ""));
  }
  if (config.version_policy.kind == VersionPolicy::Kind::kSpecific) {
    return absl::NotFoundError(
        absl::StrCat("model '", entry.name, "': none of the versions its version_policy lists (",
                     absl::StrJoin(config.version_policy.specific_versions, ", "), ") has ",
                     entry.path, "/<version>/", config.default_model_filename));
  }
  return absl::NotFoundError(absl::StrCat("model '", entry.name, "': no version folder holds ",
                                          config.default_model_filename, " (expected ", entry.path,
                                          "/1/", config.default_model_filename, ")"));
}

RepositoryDiff Diff(const RepositorySnapshot& before, const RepositorySnapshot& after) {
  // Maps rather than a merge of the sorted lists, so a hand-built snapshot in any order works too.
  std::map<std::string_view, uint64_t> old_prints;
  for (const ModelEntry& m : before.models) old_prints.emplace(m.name, m.fingerprint);
  std::map<std::string_view, uint64_t> new_prints;
  for (const ModelEntry& m : after.models) new_prints.emplace(m.name, m.fingerprint);

  RepositoryDiff diff;
  for (const auto& [name, print] : new_prints) {
    auto it = old_prints.find(name);
    if (it == old_prints.end()) {
      diff.added.emplace_back(name);
    } else if (it->second != print) {
      diff.changed.emplace_back(name);
    }
  }
  for (const auto& [name, print] : old_prints) {
    if (!new_prints.contains(name)) diff.removed.emplace_back(name);
  }
  return diff;
}

}  // namespace tessera::repository
