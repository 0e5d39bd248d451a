// Monotonic time in nanoseconds, and an injectable Clock so batching and polling logic is testable.
#pragma once

#include <cstdint>

namespace tessera {

// Monotonic nanoseconds (steady_clock).
uint64_t MonotonicNs();
// Wall-clock nanoseconds since the Unix epoch (for last_inference timestamps).
uint64_t WallNs();

class Clock {
 public:
  virtual ~Clock() = default;
  virtual uint64_t NowNs() const = 0;
};

class SteadyClock final : public Clock {
 public:
  uint64_t NowNs() const override { return MonotonicNs(); }
};

}  // namespace tessera
