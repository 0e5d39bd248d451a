// A POSIX shared-memory region mapped read/write into this process. The server creates one input
// ring and one output ring per executor; the executor opens both by name
// (docs/executor-protocol.md).
//
// Ownership: the creator (Create) unlinks the name when it is destroyed, so the region disappears
// once every process has unmapped it; an opener (Open) only unmaps. The mapping lives exactly as
// long as the object. Thread-safety: the object is immutable after construction; synchronising
// access to the bytes is the caller's business (the protocol hands ranges back and forth by
// message).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "tessera/common/status.h"

namespace tessera::ipc {

class SharedMemoryRegion {
 public:
  // Creates a new region of `bytes` (> 0) bytes, zero-filled. `name` is a POSIX shm name; a missing
  // leading '/' is added. Fails with ALREADY_EXISTS if the name is taken (O_EXCL: a stale region of
  // a crashed server is never silently reused).
  static StatusOr<std::unique_ptr<SharedMemoryRegion>> Create(const std::string& name,
                                                              size_t bytes);

  // Maps an existing region created by another process. Fails if it is smaller than `bytes`.
  static StatusOr<std::unique_ptr<SharedMemoryRegion>> Open(const std::string& name, size_t bytes);

  // Removes the name now; the mapping stays. For a region every user has opened: it then
  // disappears with the last process that maps it, even if none of them exits cleanly (a
  // SIGKILLed server would otherwise leave its rings in /dev/shm, in RAM, until reboot).
  // Creator only; the destructor then leaves the name alone.
  Status Unlink();

  ~SharedMemoryRegion();
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  std::byte* data() const { return data_; }
  // Mapped bytes (the `bytes` given to Create/Open).
  size_t size() const { return size_; }
  // The normalised name, with its leading '/'.
  const std::string& name() const { return name_; }

 private:
  SharedMemoryRegion(std::string name, std::byte* data, size_t size, bool owner)
      : name_(std::move(name)), data_(data), size_(size), owner_(owner) {}

  const std::string name_;
  std::byte* const data_;
  const size_t size_;
  const bool owner_;       // true: unlink the name on destruction
  bool unlinked_ = false;  // Unlink() ran
};

}  // namespace tessera::ipc
