#include "load_override_folders.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"
#include "tessera/repository/repository.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;

// Linux's limits for one name and one path.
constexpr size_t kMaxNameBytes = 255;
constexpr size_t kMaxPathBytes = 4095;

std::string Parameter(const std::string& path) {
  return absl::StrCat("load parameter 'file:", path, "'");
}

Status WriteError(const std::string& path, int error) {
  const std::string what =
      absl::StrCat(Parameter(path), ": cannot write the file: ", std::strerror(error));
  if (error == ENOSPC || error == EDQUOT) return absl::ResourceExhaustedError(what);
  return absl::InternalError(what);
}

// Writes `bytes` to a new file `path` below `folder`; the file must not exist (O_EXCL), and no
// part of the way may be a link (every folder on it was made here, below a fresh folder).
Status WriteFile(const fs::path& folder, const std::string& path, const std::string& bytes) {
  const fs::path target = folder / path;
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec) {
    if (ec == std::errc::not_a_directory || ec == std::errc::file_exists) {
      return absl::InvalidArgumentError(absl::StrCat(
          Parameter(path), ": another file of this load is where this path needs a folder"));
    }
    return WriteError(path, ec.value());
  }
  const int fd = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST || errno == EISDIR) {
      return absl::InvalidArgumentError(
          absl::StrCat(Parameter(path), ": another file of this load needs this path as a folder"));
    }
    return WriteError(path, errno);
  }
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      ::close(fd);
      return WriteError(path, error);
    }
    written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return WriteError(path, errno);
  return absl::OkStatus();
}

}  // namespace

Status CheckOverrideFilePath(const std::string& path) {
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(Parameter(path), ": ", why));
  };
  if (path.empty()) return refuse("no path after 'file:' (e.g. 'file:1/model.onnx')");
  if (path.size() > kMaxPathBytes) return refuse("the path is too long");
  if (path.find('\0') != std::string::npos) return refuse("the path holds a NUL byte");
  if (path.front() == '/') {
    return refuse("the path must be relative to the model folder (e.g. 'file:1/model.onnx')");
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty()) return refuse("the path has an empty part ('//' or a trailing '/')");
    if (part == "." || part == "..") {
      return refuse("'.' and '..' are not allowed: files stay inside the model folder");
    }
    if (part.size() > kMaxNameBytes) return refuse("a name in the path is too long");
  }
  if (path == repository::kConfigFileName || path == repository::kTritonConfigFileName) {
    return refuse("the config comes from the load's 'config' parameter, not from a file");
  }
  return absl::OkStatus();
}

LoadOverrideFolders::LoadOverrideFolders(std::string root) : root_(std::move(root)) {}

LoadOverrideFolders::~LoadOverrideFolders() {
  std::error_code ec;
  fs::remove_all(root_, ec);
  if (ec) spdlog::warn("cannot remove {}: {}", root_, ec.message());
}

StatusOr<std::string> LoadOverrideFolders::Create(const std::map<std::string, std::string>& files) {
  for (const auto& [path, bytes] : files) TESSERA_RETURN_IF_ERROR(CheckOverrideFilePath(path));
  std::error_code ec;
  fs::create_directories(root_, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot make the folder for loads' files ", root_, ": ", ec.message()));
  }
  // The root has a guessable name in a shared temp folder: one that another user made (or a link
  // there) could hand them the model files, so it must be our own plain folder.
  struct stat root_stat {};
  if (::lstat(root_.c_str(), &root_stat) != 0 || !S_ISDIR(root_stat.st_mode) ||
      root_stat.st_uid != ::geteuid()) {
    return absl::InternalError(absl::StrCat("the folder for loads' files ", root_,
                                            " is not a folder of this user; remove it"));
  }
  fs::permissions(root_, fs::perms::owner_all, fs::perm_options::replace, ec);
  const fs::path folder = fs::path(root_) / std::to_string(next_.fetch_add(1));
  fs::remove_all(folder, ec);  // left by an earlier server with this pid
  if (!fs::create_directory(folder, ec) || ec) {
    return absl::InternalError(absl::StrCat("cannot make ", folder.string(), ": ",
                                            ec ? ec.message() : std::string("it exists")));
  }
  for (const auto& [path, bytes] : files) {
    if (Status written = WriteFile(folder, path, bytes); !written.ok()) {
      Remove(folder.string());
      return written;
    }
  }
  return folder.string();
}

void LoadOverrideFolders::Remove(const std::string& folder) {
  if (folder.empty()) return;
  std::error_code ec;
  fs::remove_all(folder, ec);
  if (ec) spdlog::warn("cannot remove {}: {}", folder, ec.message());
}

}  // namespace tessera::server
