#include "tessera/ipc/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera::ipc {
namespace {

std::string NormalizeName(const std::string& name) {
  return (!name.empty() && name[0] == '/') ? name : "/" + name;
}

Status ErrnoError(int err, const std::string& what, const std::string& name,
                  const std::string& hint = "") {
  std::string message =
      absl::StrCat(what, " shared-memory region ", name, ": ", std::strerror(err), hint);
  switch (err) {
    case EEXIST:
      return absl::AlreadyExistsError(message);
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOMEM:
    case ENOSPC:
      return absl::ResourceExhaustedError(message);
    case EINVAL:  // a malformed name, or a size the system cannot map
    case ENAMETOOLONG:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

// "/dev/shm: N MiB free of M MiB", where POSIX shared memory lives on Linux.
std::string ShmSpace() {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0) return "/dev/shm: size unknown";
  constexpr uint64_t kMiB = 1 << 20;
  return absl::StrCat("/dev/shm: ", fs.f_bavail * fs.f_frsize / kMiB, " MiB free of ",
                      fs.f_blocks * fs.f_frsize / kMiB, " MiB");
}

}  // namespace

StatusOr<std::unique_ptr<SharedMemoryRegion>> SharedMemoryRegion::Create(const std::string& name,
                                                                         size_t bytes) {
  std::string shm_name = NormalizeName(name);
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared-memory region ", shm_name, ": size must be > 0"));
  }
  int fd = shm_open(shm_name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return ErrnoError(errno, "cannot create", shm_name);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(shm_name.c_str());
    return ErrnoError(err, absl::StrCat("cannot size (", bytes, " bytes)"), shm_name);
  }
  // The pages are reserved now. tmpfs hands them out on first touch otherwise, and once /dev/shm
  // is full (Docker's default is 64 MiB) the process that touches the next page dies of SIGBUS in
  // the middle of serving; reserved, a region that does not fit is refused here, with the fix.
  int reserve_err = 0;
  do {
    reserve_err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  } while (reserve_err == EINTR);
  if (reserve_err != 0) {
    close(fd);
    shm_unlink(shm_name.c_str());
    return ErrnoError(
        reserve_err, absl::StrCat("cannot reserve ", bytes, " bytes for"), shm_name,
        absl::StrCat(" (", ShmSpace(),
                     "; in Docker, run with --shm-size, e.g. --shm-size=1g; in "
                     "Kubernetes, mount an emptyDir with medium: Memory at /dev/shm)"));
  }
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  // The mapping keeps the object alive; the descriptor is not needed any more.
  close(fd);
  if (addr == MAP_FAILED) {
    shm_unlink(shm_name.c_str());
    return ErrnoError(err, absl::StrCat("cannot map (", bytes, " bytes)"), shm_name);
  }
  return std::unique_ptr<SharedMemoryRegion>(
      new SharedMemoryRegion(shm_name, static_cast<std::byte*>(addr), bytes, /*owner=*/true));
}

StatusOr<std::unique_ptr<SharedMemoryRegion>> SharedMemoryRegion::Open(const std::string& name,
                                                                       size_t bytes) {
  std::string shm_name = NormalizeName(name);
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared-memory region ", shm_name, ": size must be > 0"));
  }
  int fd = shm_open(shm_name.c_str(), O_RDWR, 0);
  if (fd < 0) return ErrnoError(errno, "cannot open", shm_name);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return ErrnoError(err, "cannot stat", shm_name);
  }
  // Mapping past the end of the object would turn later accesses into SIGBUS; refuse up front.
  if (static_cast<uint64_t>(st.st_size) < bytes) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("shared-memory region ", shm_name, " has ",
                                                   st.st_size, " bytes, expected at least ",
                                                   bytes));
  }
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (addr == MAP_FAILED) {
    return ErrnoError(err, absl::StrCat("cannot map (", bytes, " bytes)"), shm_name);
  }
  return std::unique_ptr<SharedMemoryRegion>(
      new SharedMemoryRegion(shm_name, static_cast<std::byte*>(addr), bytes, /*owner=*/false));
}

Status SharedMemoryRegion::Unlink() {
  if (!owner_)
    return absl::FailedPreconditionError(absl::StrCat(name_, ": only its creator unlinks it"));
  if (unlinked_) return absl::OkStatus();
  if (shm_unlink(name_.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("shm_unlink of ", name_, ": ", std::strerror(errno)));
  }
  unlinked_ = true;
  return absl::OkStatus();
}

SharedMemoryRegion::~SharedMemoryRegion() {
  if (munmap(data_, size_) != 0) {
    spdlog::warn("munmap of shared-memory region {} failed: {}", name_, std::strerror(errno));
  }
  if (owner_ && !unlinked_ && shm_unlink(name_.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("shm_unlink of {} failed: {}", name_, std::strerror(errno));
  }
}

}  // namespace tessera::ipc
