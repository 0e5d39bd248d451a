// Liveness-based activation memory planner: places every activation buffer of one Run at an
// offset in a single arena so that buffers whose lifetimes do not overlap share bytes.
//
// Algorithm: offset assignment by decreasing size ("greedy by size", Pisarchyk & Lee 2020,
// "Efficient Memory Management for Deep Neural Net Inference", §4). Buffers are taken largest
// first (ties: earlier first use, then request index, so plans are deterministic); each goes into
// the lowest offset that fits between the already placed buffers whose lifetimes overlap its own
// (first fit over the gaps, ordered by offset). Not optimal in general (the problem is NP-hard)
// but never worse than the naive sum and usually at or near the peak of live bytes.
//
// Lifetimes are closed intervals of step (node) indices: a buffer is written at `first_step` and
// last read at `last_step`. Two buffers overlap when the intervals share a step, so a node's output
// never shares bytes with an input it reads at that step (kernels need not support in-place).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/common/status.h"

namespace tessera::engine {

// 64 bytes: matches Value's allocation alignment (one cache line, any SIMD load).
inline constexpr uint64_t kArenaAlignment = 64;

struct BufferRequest {
  uint64_t bytes = 0;   // 0 is allowed: placed at offset 0, takes no space
  int first_step = 0;   // step that writes the buffer
  int last_step = 0;    // last step that reads it (>= first_step); a graph output: the last step
};

struct ArenaPlan {
  std::vector<uint64_t> offsets;  // per request, multiples of `alignment`
  uint64_t arena_bytes = 0;       // arena size the offsets need
  uint64_t naive_bytes = 0;       // sum of each request rounded up to `alignment` (one allocation
                                  // per buffer, all alive at once)
};

// Plans `requests`. INVALID_ARGUMENT for a lifetime with last_step < first_step or an alignment
// that is not a power of two.
StatusOr<ArenaPlan> PlanArena(const std::vector<BufferRequest>& requests,
                              uint64_t alignment = kArenaAlignment);

// The lower bound any plan must meet: the largest total of aligned bytes live at one step.
uint64_t PeakLiveBytes(const std::vector<BufferRequest>& requests,
                       uint64_t alignment = kArenaAlignment);

// True when no two requests whose lifetimes overlap have overlapping byte ranges and every
// offset is aligned and inside the arena (a checker for tests and debug builds).
bool PlanIsValid(const std::vector<BufferRequest>& requests, const ArenaPlan& plan,
                 uint64_t alignment = kArenaAlignment);

}  // namespace tessera::engine
