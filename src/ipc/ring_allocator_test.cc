#include "tessera/ipc/ring_allocator.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::ipc {
namespace {

TEST(RingAllocatorTest, AllocatesInRingOrderWithAlignment) {
  RingAllocator ring(1024, 256);
  EXPECT_EQ(ring.Allocate(10), 0u);
  EXPECT_EQ(ring.Allocate(256), 256u);
  EXPECT_EQ(ring.Allocate(257), 512u);  // takes two units
  EXPECT_EQ(ring.bytes_in_use(), 1024u);
  EXPECT_EQ(ring.live_ranges(), 3u);
  EXPECT_EQ(ring.Allocate(1), std::nullopt);
}

TEST(RingAllocatorTest, OffsetsAreMultiplesOfAlignment) {
  RingAllocator ring(10000, 64);
  for (uint64_t bytes : {1, 63, 64, 65, 200, 0, 7}) {
    auto offset = ring.Allocate(bytes);
    ASSERT_TRUE(offset.has_value());
    EXPECT_EQ(*offset % 64, 0u) << "bytes=" << bytes;
  }
}

TEST(RingAllocatorTest, ZeroByteRequestsGetDistinctOffsets) {
  RingAllocator ring(1024, 256);
  auto a = ring.Allocate(0);
  auto b = ring.Allocate(0);
  ASSERT_TRUE(a && b);
  EXPECT_NE(*a, *b);
}

TEST(RingAllocatorTest, ExactFitFillsTheRing) {
  RingAllocator ring(1024, 256);
  EXPECT_EQ(ring.Allocate(1024), 0u);
  EXPECT_EQ(ring.Allocate(1), std::nullopt);
  EXPECT_TRUE(ring.Release(0));
  EXPECT_EQ(ring.bytes_in_use(), 0u);
  EXPECT_EQ(ring.Allocate(1024), 0u);
}

TEST(RingAllocatorTest, RequestLargerThanCapacityNeverFits) {
  RingAllocator ring(1024, 256);
  EXPECT_EQ(ring.Allocate(1025), std::nullopt);
  EXPECT_EQ(ring.Allocate(UINT64_MAX), std::nullopt);
  // An unaligned capacity: 1000 bytes hold three 256-byte units, not four.
  RingAllocator odd(1000, 256);
  EXPECT_EQ(odd.Allocate(1000), std::nullopt);
  EXPECT_EQ(odd.Allocate(768), 0u);
}

TEST(RingAllocatorTest, WrapsAroundWhenTailIsTooShort) {
  RingAllocator ring(1024, 256);
  auto a = ring.Allocate(256);  // [0, 256)
  auto b = ring.Allocate(512);  // [256, 768)
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(ring.Release(*a));
  // 256 bytes left at the tail, 256 free at the front: 512 fits nowhere...
  EXPECT_EQ(ring.Allocate(512), std::nullopt);
  // ...but 256 goes to the tail, then the next 256 wraps to the front.
  EXPECT_EQ(ring.Allocate(256), 768u);
  EXPECT_EQ(ring.Allocate(256), 0u);
  EXPECT_EQ(ring.Allocate(1), std::nullopt);
}

TEST(RingAllocatorTest, WrapSkipsTheUnusableTail) {
  RingAllocator ring(1024, 256);
  auto a = ring.Allocate(512);  // [0, 512)
  auto b = ring.Allocate(256);  // [512, 768)
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(ring.Release(*a));
  // 256 left at the tail is too short for 512: the range starts at 0 instead.
  EXPECT_EQ(ring.Allocate(512), 0u);
  EXPECT_EQ(ring.bytes_in_use(), 768u);  // the skipped tail is not counted
  // Wrapped: free space is only between the newest end (512) and the oldest start (512).
  EXPECT_EQ(ring.Allocate(1), std::nullopt);
  ASSERT_TRUE(ring.Release(*b));
  // Oldest is now the wrapped range at 0; [512, 1024) is free again.
  EXPECT_EQ(ring.Allocate(512), 512u);
}

TEST(RingAllocatorTest, OutOfOrderReleaseWaitsForTheOldest) {
  RingAllocator ring(1024, 256);
  auto a = ring.Allocate(256);
  auto b = ring.Allocate(256);
  auto c = ring.Allocate(256);
  auto d = ring.Allocate(256);
  ASSERT_TRUE(a && b && c && d);
  // b and c released while a (oldest) and d (newest) are live: nothing comes back yet.
  EXPECT_TRUE(ring.Release(*b));
  EXPECT_TRUE(ring.Release(*c));
  EXPECT_EQ(ring.bytes_in_use(), 1024u);
  EXPECT_EQ(ring.live_ranges(), 2u);
  EXPECT_EQ(ring.Allocate(1), std::nullopt);
  // Releasing a reclaims a, b and c in one step.
  EXPECT_TRUE(ring.Release(*a));
  EXPECT_EQ(ring.bytes_in_use(), 256u);
  EXPECT_EQ(ring.Allocate(768), 0u);
}

TEST(RingAllocatorTest, ReleasingTheNewestRetractsTheTail) {
  RingAllocator ring(1024, 256);
  auto a = ring.Allocate(256);
  auto b = ring.Allocate(256);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(ring.Release(*b));
  EXPECT_EQ(ring.Allocate(768), 256u);
}

TEST(RingAllocatorTest, DoubleOrUnknownReleaseIsRejected) {
  RingAllocator ring(1024, 256);
  auto a = ring.Allocate(100);
  auto b = ring.Allocate(100);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(ring.Release(512));
  EXPECT_TRUE(ring.Release(*a));
  EXPECT_FALSE(ring.Release(*a));
  EXPECT_EQ(ring.live_ranges(), 1u);
}

TEST(RingAllocatorTest, EmptyRingRestartsAtZero) {
  RingAllocator ring(1024, 256);
  auto a = ring.Allocate(256);
  auto b = ring.Allocate(256);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(ring.Release(*a));
  ASSERT_TRUE(ring.Release(*b));
  EXPECT_EQ(ring.Allocate(1024), 0u);
}

// Random allocate/release sequences checked against a model that only knows the live ranges.
// Invariants: live ranges are inside the ring, pairwise disjoint, aligned; bytes_in_use never
// exceeds capacity; an empty ring can always serve any request that fits the capacity.
TEST(RingAllocatorTest, RandomizedAgainstModel) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    const uint64_t alignment = uint64_t{1} << (rng() % 9);  // 1 .. 256
    const uint64_t capacity = 1 + rng() % 8192;
    RingAllocator ring(capacity, alignment);
    std::map<uint64_t, uint64_t> live;  // offset -> rounded length
    std::vector<uint64_t> order;        // live offsets, for picking one at random

    for (int step = 0; step < 5000; ++step) {
      if (order.empty() || rng() % 100 < 55) {
        uint64_t bytes = rng() % (capacity / 2 + 2);
        auto offset = ring.Allocate(bytes);
        if (live.empty()) {
          ASSERT_EQ(offset.has_value(), ring.RoundUp(bytes) <= capacity)
              << "seed " << seed << " step " << step;
        }
        if (!offset) continue;
        uint64_t length = ring.RoundUp(bytes);
        ASSERT_GE(length, bytes);
        ASSERT_EQ(*offset % alignment, 0u);
        ASSERT_LE(*offset + length, capacity) << "seed " << seed << " step " << step;
        // Disjoint from every live range: check the neighbours in offset order.
        auto next = live.lower_bound(*offset);
        if (next != live.end()) {
          ASSERT_LE(*offset + length, next->first);
        }
        if (next != live.begin()) {
          auto prev = std::prev(next);
          ASSERT_LE(prev->first + prev->second, *offset) << "seed " << seed << " step " << step;
        }
        live.emplace(*offset, length);
        order.push_back(*offset);
      } else {
        size_t i = rng() % order.size();
        uint64_t offset = order[i];
        order[i] = order.back();
        order.pop_back();
        ASSERT_TRUE(ring.Release(offset));
        live.erase(offset);
      }
      ASSERT_EQ(ring.live_ranges(), live.size());
      ASSERT_LE(ring.bytes_in_use(), capacity);
      uint64_t live_bytes = 0;
      for (const auto& [o, l] : live) live_bytes += l;
      ASSERT_GE(ring.bytes_in_use(), live_bytes);
      if (live.empty()) {
        ASSERT_EQ(ring.bytes_in_use(), 0u);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::ipc
