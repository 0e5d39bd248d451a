// The model repository on disk, read as plain values (format: docs/model-config.md):
//
//   <root>/<model>/config.yaml          (or Triton's config.pbtxt; not both)
//   <root>/<model>/<version>/<default_model_filename>      version = 1, 2, ... (no leading zero)
//
// A scan is a snapshot; the poller compares two snapshots with Diff() to learn what to load, unload
// and reload. Nothing here loads a model or keeps state between calls.
//
// Thread-safety: free functions over plain values; concurrent scans of one root are safe (they only
// read the file system). A file edited during a scan shows up in that scan or the next one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/common/status.h"
#include "tessera/repository/model_config.h"

namespace tessera::repository {

inline constexpr std::string_view kConfigFileName = "config.yaml";
inline constexpr std::string_view kTritonConfigFileName = "config.pbtxt";

// A version folder that holds the model file.
struct ModelVersion {
  int64_t version = 0;
  std::string model_path;  // <root>/<model>/<version>/<default_model_filename>
  uint64_t file_bytes = 0;
  int64_t mtime_ns = 0;  // last write time; for change detection only (the epoch is unspecified)
};

struct ModelEntry {
  std::string name;  // the folder name
  std::string path;  // <root>/<name>
  // The parsed config, or why it could not be had: NOT_FOUND (no config.yaml or config.pbtxt) or INVALID_ARGUMENT
  // ("<path>:<line>: <key>: <reason>"). A broken config is a property of this model, not a scan
  // error.
  StatusOr<ModelConfig> config = absl::UnknownError("not scanned");
  // Version folders that hold the model file, ascending. Empty when the config is broken (the model
  // file name comes from it).
  std::vector<ModelVersion> versions;
  // The versions the config's version_policy serves, ascending (a subset of `versions`).
  std::vector<int64_t> selected_versions;
  // Versions a `specific` policy lists that have no folder with the model file, ascending.
  std::vector<int64_t> missing_versions;
  // Changes when the config text changes or a selected version's model file changes (size, mtime)
  // or the selection itself changes. Stable within one build; compare, do not persist.
  uint64_t fingerprint = 0;

  // The version with this number, or nullptr.
  const ModelVersion* FindVersion(int64_t version) const;
};

struct RepositorySnapshot {
  std::vector<std::string> roots;
  std::vector<ModelEntry> models;  // sorted by name; one per non-hidden subfolder of root

  // The model with this name, or nullptr.
  const ModelEntry* Find(std::string_view name) const;
};

struct RepositoryDiff {
  // Each sorted by name.
  std::vector<std::string> added;    // in `after` only
  std::vector<std::string> removed;  // in `before` only
  std::vector<std::string> changed;  // in both, fingerprint differs

  bool empty() const { return added.empty() && removed.empty() && changed.empty(); }
};

// Scans every non-hidden subfolder of `root` (files and names starting with '.' are skipped).
// NOT_FOUND when `root` does not exist, FAILED_PRECONDITION when it is not a directory.
StatusOr<RepositorySnapshot> ScanRepository(const std::string& root);

// INVALID_ARGUMENT unless `name` can be a model folder's name: not empty, not hidden, no '/' or
// NUL.
Status CheckModelName(const std::string& name);

// How a scan reads each model folder.
struct ScanOptions {
  // Triton's --model-config-name: a folder's configs/<config_name>.pbtxt (or .yaml) is its config
  // in place of config.pbtxt / config.yaml where the folder has one; the others keep theirs.
  // "" = none.
  std::string config_name;
};

// Scans several repositories as one (Triton's repeated --model-repository): the models of all of
// them, by name. A name that more than one holds is an entry whose config is INVALID_ARGUMENT
// naming the folders. Fails as ScanRepository does when any root cannot be read.
StatusOr<RepositorySnapshot> ScanRepositories(const std::vector<std::string>& roots,
                                              const ScanOptions& options = {});

// The folder of model `name` in whichever of `roots` holds it. NOT_FOUND when none does (or a
// root is missing), INVALID_ARGUMENT when more than one does or the name is not a folder name.
StatusOr<std::string> FindModelFolder(const std::vector<std::string>& roots,
                                      const std::string& name);
// FindModelFolder, then the folder's scan (as ScanModel).
StatusOr<ModelEntry> FindModel(const std::vector<std::string>& roots, const std::string& name,
                               const ScanOptions& options = {});

// Scans one model folder, for an explicit load. NOT_FOUND when `root` or `<root>/<name>` is
// missing, INVALID_ARGUMENT when `name` is not a plain folder name. A broken config is returned
// inside the entry, as in ScanRepository; use CheckServable() to turn it into an error.
StatusOr<ModelEntry> ScanModel(const std::string& root, const std::string& name);

// How errors in a load request's config are introduced ("the load request's 'config': ...").
inline constexpr std::string_view kLoadRequestConfig = "the load request's 'config'";

// Scans the model folder `dir` (anywhere; the model is called `name`) as ScanModel does, but with
// `config_json` in place of the folder's config file, which is not read: Triton's ModelConfig as
// JSON, a load request's "config" parameter (ParseTritonJsonModelConfig). NOT_FOUND when `dir` is
// not a folder, INVALID_ARGUMENT for a name ScanModel would refuse; a broken config is returned
// inside the entry.
StatusOr<ModelEntry> ScanModelFolderWithConfig(const std::string& dir, const std::string& name,
                                               const std::string& config_json);

// OK when the entry can be served: its config parsed and at least one version is selected.
// Otherwise the config's error, or NOT_FOUND naming the model, the file looked for and the
// versions.
Status CheckServable(const ModelEntry& entry);

// What differs between two scans of the same root.
RepositoryDiff Diff(const RepositorySnapshot& before, const RepositorySnapshot& after);

// The versions `policy` serves out of `available` (ascending, no duplicates): latest N = the N
// highest; specific = those listed that are available; all = all. Result ascending.
std::vector<int64_t> SelectVersions(const VersionPolicy& policy,
                                    const std::vector<int64_t>& available);

}  // namespace tessera::repository
