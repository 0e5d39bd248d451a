// A device buffer that other processes on the same GPU can map: physical memory from the CUDA
// virtual memory management API (cuMemCreate) with a POSIX file-descriptor handle, mapped into
// this process's address space. Used for weights, so a shadow executor maps its active's copy
// instead of loading its own (GSLICE §4.4, docs/engine-cuda.md "Weights shared within and across
// processes").
//
// Why VMM and not cudaIpcGetMemHandle: legacy IPC memory is freed when the exporting process frees
// it or exits, while the shadow must outlive its active. VMM physical memory lives while any
// process holds a handle or a mapping of it.
//
// The driver entry points come through cudaGetDriverEntryPointByVersion, so nothing links against
// libcuda and a build without a driver still loads.
//
// Thread-compatible; the buffer belongs to the device that was current (or named) at creation.
#pragma once

#include <cstdint>
#include <memory>

#include "tessera/common/status.h"
#include "tessera/common/unique_fd.h"

namespace tessera::engine::cuda {

class ShareableDeviceBuffer {
 public:
  // Allocates at least `bytes` on device `ordinal`, readable and writable from it. UNAVAILABLE,
  // saying why, when the driver or the device lacks VMM or POSIX file-descriptor handles (callers
  // then fall back to cudaMalloc); RESOURCE_EXHAUSTED when the device is out of memory.
  static StatusOr<std::unique_ptr<ShareableDeviceBuffer>> Allocate(int ordinal, uint64_t bytes);

  // Maps a buffer of `bytes` that another process exported as `fd` (borrowed; the caller still
  // closes it) onto device `ordinal`.
  static StatusOr<std::unique_ptr<ShareableDeviceBuffer>> Import(int ordinal, int fd,
                                                                 uint64_t bytes);

  // Unmaps the buffer and drops this process's handle; the memory itself is freed with the last
  // handle or mapping, in whichever process that is.
  ~ShareableDeviceBuffer();
  ShareableDeviceBuffer(const ShareableDeviceBuffer&) = delete;
  ShareableDeviceBuffer& operator=(const ShareableDeviceBuffer&) = delete;

  void* data() const { return reinterpret_cast<void*>(static_cast<uintptr_t>(address_)); }
  uint64_t bytes() const { return bytes_; }

  // A new descriptor of the buffer for another process (pass it over a Unix socket). An imported
  // buffer hands out a duplicate of the descriptor it was imported from: the driver does not
  // re-export an imported handle (cuMemExportToShareableHandle fails on one, seen on an H100 with
  // driver 580), and a shadow that became the active must still share with the next shadow.
  StatusOr<UniqueFd> Export() const;

 private:
  ShareableDeviceBuffer() = default;
  // Reserves address space for the handle, maps it and grants `device` (a CUdevice) read/write
  // access.
  Status Map(int device);

  unsigned long long handle_ = 0;   // CUmemGenericAllocationHandle
  unsigned long long address_ = 0;  // CUdeviceptr; 0 while unmapped
  uint64_t mapped_bytes_ = 0;       // rounded up to the allocation granularity
  uint64_t bytes_ = 0;
  UniqueFd imported_from_;  // our duplicate of the descriptor an imported buffer came from
};

}  // namespace tessera::engine::cuda
