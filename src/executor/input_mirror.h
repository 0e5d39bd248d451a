// A copy of the executor's input pool in memory its engine reads faster (E²bird's GPU-resident
// input pool, seed 002): each request's tensors are copied as soon as the server announces them
// (InputsStaged), so a batch finds its inputs already in place and waits only for the copy of the
// latest of its slots. docs/executor-protocol.md, "Input mirror".
//
// Thread-compatible: the executor's receive thread calls Stage and View.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/common/status.h"

namespace tessera::executor {

// Where a batch input's mirrored bytes are.
struct MirroredInput {
  const void* data = nullptr;  // in the mirror
  void* ready = nullptr;       // a cudaEvent_t the reader waits on first; null = ready now
  bool on_device = false;      // data is device memory (TensorView::device_data), else host
};

class InputMirror {
 public:
  virtual ~InputMirror() = default;
  virtual std::string Describe() const = 0;
  // Starts copying ring bytes [offset, offset + bytes) into the mirror.
  virtual Status Stage(uint64_t offset, uint64_t bytes) = 0;
  // The mirrored copy of [offset, offset + bytes) when every byte of it was staged since it was
  // last overwritten; nullopt otherwise (the caller reads the ring instead).
  virtual std::optional<MirroredInput> View(uint64_t offset, uint64_t bytes) = 0;
};

// What was staged where, and in which order: the bookkeeping both mirrors share. A batch is a run
// of slots staged in any order (requests arrive on several threads), so its readiness is that of
// the slot staged last, the copies being in staging order.
class StagedRanges {
 public:
  // Records [offset, offset + bytes) as staged with sequence number `seq` (increasing), dropping
  // older ranges it overlaps.
  void Add(uint64_t offset, uint64_t bytes, uint64_t seq);
  // Forgets every range overlapping [offset, offset + bytes): their bytes are being overwritten
  // (a mirror calls it before it copies, so a failed copy leaves no stale range behind).
  void Drop(uint64_t offset, uint64_t bytes);
  // The largest sequence number among the ranges that exactly tile [offset, offset + bytes), or
  // nullopt when some byte of it is not covered.
  std::optional<uint64_t> LatestCovering(uint64_t offset, uint64_t bytes) const;
  size_t size() const { return ranges_.size(); }

 private:
  struct Range {
    uint64_t end = 0;
    uint64_t seq = 0;
  };
  std::map<uint64_t, Range> ranges_;  // by start offset; never overlapping
};

// The mirror in host memory: a private copy made at staging time. It changes nothing for a CPU
// engine but runs the whole staging protocol, so CI checks it end to end
// (tessera-executor --input-mirror host).
std::unique_ptr<InputMirror> MakeHostInputMirror(const void* ring, uint64_t ring_bytes);

// The mirror on the current CUDA device: the ring is registered with the driver (page-locked,
// so copies from it are asynchronous DMA) and each staged range is copied on a copy stream and
// followed by an event. On device `ordinal`, which becomes the calling thread's current device;
// -1 = the thread's current device (a green context made current there). UNAVAILABLE in builds
// without CUDA or when the device refuses.
StatusOr<std::unique_ptr<InputMirror>> MakeCudaInputMirror(void* ring, uint64_t ring_bytes,
                                                           int ordinal);

}  // namespace tessera::executor
