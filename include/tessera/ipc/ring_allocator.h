// Hands out byte ranges of a ring buffer (the executor's output ring; the server may use it for the
// input ring). Only offsets are managed; the bytes live elsewhere (a SharedMemoryRegion).
//
// Allocation is FIFO in ring order: each range starts where the previous one ended, and a range
// never straddles the end of the ring (if the tail is too short it is skipped and the range starts
// at offset 0). Ranges may be released in any order; a released range that is neither the oldest
// nor the newest stays marked and its space comes back once every older (or every newer) range is
// released too. So one slow consumer holds back reuse of the space behind it, never correctness.
//
// Thread-safety: none (thread-compatible). Callers that share one allocator hold their own lock.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>

namespace tessera::ipc {

class RingAllocator {
 public:
  // `capacity` in bytes. `alignment` (bytes, >= 1; 0 is taken as 1) applies to every offset and
  // every range length, so with a page-aligned base every range is `alignment`-aligned.
  explicit RingAllocator(uint64_t capacity, uint64_t alignment = 256);

  // Offset of a free contiguous range of at least `bytes` (rounded up to the alignment; 0 bytes
  // takes one alignment unit so that every live range has a unique offset), or nullopt if the ring
  // has no such range right now. A request that can never fit (rounded size > capacity) is always
  // nullopt; callers tell the two apart with `capacity()`.
  std::optional<uint64_t> Allocate(uint64_t bytes);

  // Gives back the range that starts at `offset`. Returns false (and changes nothing) if no live
  // range starts there, e.g. a double release.
  bool Release(uint64_t offset);

  // Bytes held by ranges not yet reclaimed (live ones plus released ones waiting behind a live
  // one), alignment padding included, wrap-around skip excluded.
  uint64_t bytes_in_use() const { return bytes_in_use_; }
  // Ranges allocated and not yet released.
  size_t live_ranges() const { return live_.size(); }
  uint64_t capacity() const { return capacity_; }
  uint64_t alignment() const { return alignment_; }
  // Rounded length of a request of `bytes`, as Allocate would reserve it.
  uint64_t RoundUp(uint64_t bytes) const;

 private:
  struct Block {
    uint64_t offset;
    uint64_t length;  // rounded
    bool released;
  };

  // Drops released blocks from both ends of the ring.
  void Reclaim();

  const uint64_t capacity_;
  const uint64_t alignment_;
  // Blocks in allocation (= ring) order. The occupied part of the ring runs from the front block's
  // offset to the back block's end; it has wrapped iff that end is <= the front offset.
  std::deque<Block> blocks_;
  // Sequence number of blocks_.front(); block i of the deque has sequence front_seq_ + i.
  uint64_t front_seq_ = 0;
  // Offset -> sequence number, live (unreleased) blocks only.
  std::unordered_map<uint64_t, uint64_t> live_;
  uint64_t bytes_in_use_ = 0;
};

}  // namespace tessera::ipc
