#include "engine/memory_planner.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace tessera::engine {
namespace {

uint64_t AlignUp(uint64_t bytes, uint64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

bool Overlaps(const BufferRequest& a, const BufferRequest& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

}  // namespace

StatusOr<ArenaPlan> PlanArena(const std::vector<BufferRequest>& requests, uint64_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("alignment ", alignment, " is not a power of 2"));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].last_step < requests[i].first_step) {
      return absl::InvalidArgumentError(absl::StrCat("buffer ", i, " has last step ",
                                                     requests[i].last_step, " before first step ",
                                                     requests[i].first_step));
    }
  }
  ArenaPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (requests[a].bytes != requests[b].bytes) return requests[a].bytes > requests[b].bytes;
    return requests[a].first_step < requests[b].first_step;
  });

  std::vector<size_t> placed;  // request indices already given an offset
  std::vector<std::pair<uint64_t, uint64_t>> busy;  // [begin, end) of overlapping placed buffers
  for (size_t r : order) {
    const uint64_t size = AlignUp(requests[r].bytes, alignment);
    plan.naive_bytes += size;
    if (size == 0) continue;
    busy.clear();
    for (size_t p : placed) {
      if (Overlaps(requests[r], requests[p])) {
        busy.emplace_back(plan.offsets[p], plan.offsets[p] + AlignUp(requests[p].bytes, alignment));
      }
    }
    std::sort(busy.begin(), busy.end());
    // First gap (by offset) between conflicting buffers that holds `size` bytes; else the end.
    uint64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (begin >= offset + size) break;
      offset = std::max(offset, end);
    }
    plan.offsets[r] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(r);
  }
  return plan;
}

uint64_t PeakLiveBytes(const std::vector<BufferRequest>& requests, uint64_t alignment) {
  std::map<int, int64_t> delta;  // step -> change of live bytes at that step
  for (const BufferRequest& r : requests) {
    const int64_t size = static_cast<int64_t>(AlignUp(r.bytes, alignment));
    delta[r.first_step] += size;
    delta[r.last_step + 1] -= size;
  }
  int64_t live = 0, peak = 0;
  for (const auto& [step, change] : delta) {
    live += change;
    peak = std::max(peak, live);
  }
  return static_cast<uint64_t>(peak);
}

bool PlanIsValid(const std::vector<BufferRequest>& requests, const ArenaPlan& plan,
                 uint64_t alignment) {
  if (plan.offsets.size() != requests.size()) return false;
  for (size_t i = 0; i < requests.size(); ++i) {
    const uint64_t size_i = AlignUp(requests[i].bytes, alignment);
    if (plan.offsets[i] % alignment != 0) return false;
    if (size_i > 0 && plan.offsets[i] + size_i > plan.arena_bytes) return false;
    for (size_t j = i + 1; j < requests.size(); ++j) {
      const uint64_t size_j = AlignUp(requests[j].bytes, alignment);
      if (size_i == 0 || size_j == 0 || !Overlaps(requests[i], requests[j])) continue;
      if (plan.offsets[i] < plan.offsets[j] + size_j && plan.offsets[j] < plan.offsets[i] + size_i) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace tessera::engine
