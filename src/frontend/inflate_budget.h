// The memory that compressed requests may take while they are inflated and parsed, shared by both
// endpoints. A few megabytes of gzip'd zeros inflate to gigabytes; each request is bounded by
// grpc.max_message_bytes, and this bounds all of them together, so that a handful of such requests
// are refused (RESOURCE_EXHAUSTED) instead of running the server out of memory.
#pragma once

#include <atomic>
#include <cstdint>

namespace tessera::frontend {

class InflateBudget {
 public:
  explicit InflateBudget(int64_t limit_bytes) : limit_(limit_bytes) {}

  int64_t limit() const { return limit_; }
  int64_t in_use() const { return in_use_.load(std::memory_order_relaxed); }

 private:
  friend class InflateHold;
  bool TryTake(int64_t bytes);
  void Give(int64_t bytes) { in_use_.fetch_sub(bytes, std::memory_order_relaxed); }

  const int64_t limit_;
  std::atomic<int64_t> in_use_{0};
};

// Bytes of one request held in an InflateBudget, given back when the hold is destroyed. A hold
// without a budget admits anything.
class InflateHold {
 public:
  explicit InflateHold(InflateBudget* budget = nullptr) : budget_(budget) {}
  InflateHold(const InflateHold&) = delete;
  InflateHold& operator=(const InflateHold&) = delete;
  ~InflateHold() {
    if (budget_ != nullptr) budget_->Give(held_);
  }

  // Holds `bytes` in all (only grows). False, holding what it held, when the budget has no room.
  bool GrowTo(int64_t bytes);
  InflateBudget* budget() const { return budget_; }

 private:
  InflateBudget* const budget_;
  int64_t held_ = 0;
};

}  // namespace tessera::frontend
