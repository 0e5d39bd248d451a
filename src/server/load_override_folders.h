// Model folders made from a load request's files (Triton's "file:<path>" load parameters). Each
// such load gets a fresh folder under one root the server owns. The folder lives as long as that
// load serves, since an executor that restarts reads the model file again, and goes once the load
// is replaced or unloaded; the destructor removes the root with whatever is left in it.
//
// Thread-safety: Create and Remove may be called from any thread.
#pragma once

#include <atomic>
#include <map>
#include <string>

#include "tessera/common/status.h"

namespace tessera::server {

class LoadOverrideFolders {
 public:
  // `root` is made on first use, readable by this user only.
  explicit LoadOverrideFolders(std::string root);
  ~LoadOverrideFolders();
  LoadOverrideFolders(const LoadOverrideFolders&) = delete;
  LoadOverrideFolders& operator=(const LoadOverrideFolders&) = delete;

  // Writes `files` (a path inside the model folder, such as "1/model.onnx" → its bytes) into a
  // new folder and returns that folder's path. INVALID_ARGUMENT naming the parameter
  // ("file:<path>") for a path that could leave the folder or is not a plain relative path
  // (absolute, empty parts, "." or "..", NUL), for a config file (the config comes from the
  // load's "config"), and for two paths that collide (a file where another needs a folder);
  // RESOURCE_EXHAUSTED when the disk is full, INTERNAL for other write errors. Nothing is left
  // behind when it fails.
  StatusOr<std::string> Create(const std::map<std::string, std::string>& files);

  // Removes a folder Create returned; "" is a no-op.
  void Remove(const std::string& folder);

  const std::string& root() const { return root_; }

 private:
  const std::string root_;
  std::atomic<uint64_t> next_{1};
};

// Why `path` may not name a file of a load request's model folder, or OK.
Status CheckOverrideFilePath(const std::string& path);

}  // namespace tessera::server
