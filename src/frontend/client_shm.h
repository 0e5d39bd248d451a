// The system shared-memory extension (Triton's `system_shared_memory`): a client puts tensors in a
// POSIX shared-memory object it created, registers a window of it by name
// (SystemSharedMemoryRegister{name, key, offset, byte_size}), and then names that region in a
// tensor's parameters (`shared_memory_region`, `shared_memory_byte_size`, `shared_memory_offset`)
// instead of sending the bytes over gRPC. Inputs are read from the window, outputs written into it.
//
// Off unless the server is started with `allow_client_shm` (Triton also asks for
// --allow-client-shm since 2026-04): a registered region lets a client make the server read and
// write a file it chose.
//
// Thread-safety: every method may be called from any thread. Lifetime: a region handed out by
// Find stays mapped for as long as its shared_ptr lives, even if it is unregistered meanwhile, so
// an in-flight request never reads unmapped memory. Mapped is not backed: the client may truncate
// its object, and an access to the lost pages raises SIGBUS. The request path therefore touches a
// region only through ipc::CopyGuardingSigbus (inputs copied out once, outputs copied in).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "inference/grpc_service.pb.h"
#include "tessera/common/status.h"
#include "tessera/ipc/shared_memory.h"

namespace tessera::frontend {

// The answer to CUDA shared-memory calls on either endpoint: a client's cudaIpcMemHandle needs
// the GPU-resident input pool to be worth anything.
inline constexpr char kCudaShmRefusal[] =
    "CUDA shared memory is not supported yet; register system shared memory instead";

struct ClientShmRegion {
  std::string name;
  std::string key;  // the POSIX shm name the client gave
  uint64_t offset = 0;
  uint64_t byte_size = 0;
  // Maps [0, offset + byte_size) of the object: mmap offsets must be page-aligned, the client's
  // offset need not be.
  std::shared_ptr<ipc::SharedMemoryRegion> mapping;

  std::byte* data() const { return mapping->data() + offset; }
};

// A tensor's bytes in a registered region: [data, data + byte_size). `region` keeps them mapped.
struct ClientShmSlice {
  std::shared_ptr<const ClientShmRegion> region;
  std::byte* data = nullptr;
  size_t byte_size = 0;
};

class ClientShmRegistry {
 public:
  explicit ClientShmRegistry(bool enabled) : enabled_(enabled) {}

  bool enabled() const { return enabled_; }

  // ALREADY_EXISTS for a taken name, NOT_FOUND for a key that names no shm object,
  // INVALID_ARGUMENT for an empty name or key, a zero size or a window past the object's end,
  // PERMISSION_DENIED when the extension is off.
  Status Register(const std::string& name, const std::string& key, uint64_t offset,
                  uint64_t byte_size);
  // name "" = every region. An unknown name is not an error (as in Triton: clients unregister
  // defensively, e.g. perf_analyzer before and after a run).
  Status Unregister(const std::string& name);
  // name "" = every region (possibly none); NOT_FOUND for an unknown name.
  StatusOr<std::vector<std::shared_ptr<const ClientShmRegion>>> Regions(
      const std::string& name) const;

  // The slice a tensor's parameters name, or nullopt when they name no region. `what` starts the
  // error messages ("input 'x'"). Checks that the window lies inside the region.
  StatusOr<std::optional<ClientShmSlice>> SliceFor(
      const std::string& what,
      const google::protobuf::Map<std::string, inference::InferParameter>& parameters) const;

 private:
  StatusOr<std::shared_ptr<const ClientShmRegion>> Find(const std::string& name) const;

  const bool enabled_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const ClientShmRegion>> regions_ ABSL_GUARDED_BY(mu_);
};

// True when the parameters name a shared-memory region (whether or not it exists).
bool NamesShmRegion(const google::protobuf::Map<std::string, inference::InferParameter>& parameters);

}  // namespace tessera::frontend
