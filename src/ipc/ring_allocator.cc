#include "tessera/ipc/ring_allocator.h"

namespace tessera::ipc {

RingAllocator::RingAllocator(uint64_t capacity, uint64_t alignment)
    : capacity_(capacity), alignment_(alignment == 0 ? 1 : alignment) {}

uint64_t RingAllocator::RoundUp(uint64_t bytes) const {
  if (bytes == 0) bytes = 1;
  uint64_t units = bytes / alignment_ + (bytes % alignment_ != 0 ? 1 : 0);
  // Saturate instead of wrapping so that absurd requests compare as "larger than capacity".
  if (units > UINT64_MAX / alignment_) return UINT64_MAX;
  return units * alignment_;
}

std::optional<uint64_t> RingAllocator::Allocate(uint64_t bytes) {
  const uint64_t length = RoundUp(bytes);
  if (length > capacity_) return std::nullopt;

  uint64_t offset;
  if (blocks_.empty()) {
    offset = 0;
  } else {
    const uint64_t head = blocks_.front().offset;
    const uint64_t tail = blocks_.back().offset + blocks_.back().length;
    if (tail > head) {
      // Occupied [head, tail): free space is [tail, capacity) then [0, head).
      if (length <= capacity_ - tail) {
        offset = tail;
      } else if (length <= head) {
        offset = 0;  // the rest of the tail is skipped until head passes it
      } else {
        return std::nullopt;
      }
    } else {
      // Wrapped: occupied [head, capacity) + [0, tail); free space is [tail, head).
      if (length <= head - tail) {
        offset = tail;
      } else {
        return std::nullopt;
      }
    }
  }
  live_.emplace(offset, front_seq_ + blocks_.size());
  blocks_.push_back(Block{offset, length, false});
  bytes_in_use_ += length;
  return offset;
}

bool RingAllocator::Release(uint64_t offset) {
  auto it = live_.find(offset);
  if (it == live_.end()) return false;
  blocks_[it->second - front_seq_].released = true;
  live_.erase(it);
  Reclaim();
  return true;
}

void RingAllocator::Reclaim() {
  while (!blocks_.empty() && blocks_.front().released) {
    bytes_in_use_ -= blocks_.front().length;
    blocks_.pop_front();
    ++front_seq_;
  }
  // Retracting the newest end lets a caller undo a partly failed group of allocations.
  while (!blocks_.empty() && blocks_.back().released) {
    bytes_in_use_ -= blocks_.back().length;
    blocks_.pop_back();
  }
}

}  // namespace tessera::ipc
