// Unit tests of the liveness planner on hand-built lifetimes.
#include "engine/memory_planner.h"

#include <random>

#include "gtest/gtest.h"

namespace tessera::engine {
namespace {

ArenaPlan PlanOrDie(const std::vector<BufferRequest>& requests, uint64_t alignment = 64) {
  auto plan = PlanArena(requests, alignment);
  EXPECT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(PlanIsValid(requests, *plan, alignment));
  EXPECT_LE(plan->arena_bytes, plan->naive_bytes);
  EXPECT_GE(plan->arena_bytes, PeakLiveBytes(requests, alignment));
  return *plan;
}

TEST(MemoryPlannerTest, ChainReusesTheFirstBufferForTheThird) {
  // a -> b -> c -> d: a is last read at step 1 (writing b); c is written at step 2.
  std::vector<BufferRequest> r = {{1024, 0, 1}, {1024, 1, 2}, {1024, 2, 3}, {1024, 3, 4}};
  ArenaPlan plan = PlanOrDie(r);
  EXPECT_EQ(plan.offsets[2], plan.offsets[0]);
  EXPECT_EQ(plan.offsets[3], plan.offsets[1]);
  EXPECT_EQ(plan.arena_bytes, 2048u);
  EXPECT_EQ(plan.naive_bytes, 4096u);
}

TEST(MemoryPlannerTest, ValueUsedLateKeepsItsBuffer) {
  // a is read again at step 3 (a skip connection), so neither b nor c may take its bytes.
  std::vector<BufferRequest> r = {{1024, 0, 3}, {1024, 1, 2}, {1024, 2, 3}};
  ArenaPlan plan = PlanOrDie(r);
  EXPECT_NE(plan.offsets[1], plan.offsets[0]);
  EXPECT_NE(plan.offsets[2], plan.offsets[0]);
  EXPECT_NE(plan.offsets[2], plan.offsets[1]);
  EXPECT_EQ(plan.arena_bytes, 3072u);
}

TEST(MemoryPlannerTest, OutputsLiveToTheEndAndAreNeverClobbered) {
  // Step count 4: an output produced at step 1 is "read" at step 4 (copied out after the last
  // node). Every later buffer must avoid it even though no node reads it.
  std::vector<BufferRequest> r = {{512, 0, 1}, {256, 1, 4}, {512, 2, 3}, {512, 3, 4}};
  ArenaPlan plan = PlanOrDie(r);
  for (size_t i : {2u, 3u}) {
    const bool disjoint = plan.offsets[i] + 512 <= plan.offsets[1] ||
                          plan.offsets[1] + 256 <= plan.offsets[i];
    EXPECT_TRUE(disjoint) << "buffer " << i << " overlaps the output";
  }
}

TEST(MemoryPlannerTest, OffsetsRespectAlignment) {
  std::vector<BufferRequest> r = {{100, 0, 2}, {1, 0, 2}, {65, 1, 2}, {0, 0, 2}};
  ArenaPlan plan = PlanOrDie(r);
  for (uint64_t offset : plan.offsets) EXPECT_EQ(offset % 64, 0u);
  EXPECT_EQ(plan.naive_bytes, 128u + 64 + 128);  // 0-byte buffers take nothing
  EXPECT_EQ(plan.arena_bytes, 320u);
  ArenaPlan wide = PlanOrDie(r, 256);
  for (uint64_t offset : wide.offsets) EXPECT_EQ(offset % 256, 0u);
  EXPECT_EQ(wide.arena_bytes, 768u);
}

TEST(MemoryPlannerTest, MatchesHandComputedOptimum) {
  // Live sets: {a,b} = 6 KiB at step 1, {b,c} = 6 KiB at step 2; c fits where a was.
  std::vector<BufferRequest> r = {{4096, 0, 1}, {2048, 1, 2}, {4096, 2, 3}};
  ArenaPlan plan = PlanOrDie(r);
  EXPECT_EQ(plan.arena_bytes, 6144u);
  EXPECT_EQ(plan.arena_bytes, PeakLiveBytes(r));
  // Diamond: x feeds y and z, both feed w. Peak: x,y,z alive at step 2.
  std::vector<BufferRequest> d = {{2048, 0, 2}, {1024, 1, 3}, {1024, 2, 3}, {2048, 3, 4}};
  ArenaPlan diamond = PlanOrDie(d);
  EXPECT_EQ(diamond.arena_bytes, 4096u);
  EXPECT_EQ(diamond.arena_bytes, PeakLiveBytes(d));
}

TEST(MemoryPlannerTest, RandomLifetimesGiveValidPlansWithinBounds) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferRequest> r;
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      const int first = static_cast<int>(rng() % 20);
      r.push_back({rng() % 5000, first, first + static_cast<int>(rng() % 6)});
    }
    PlanOrDie(r);
  }
}

TEST(MemoryPlannerTest, RejectsBadInput) {
  EXPECT_EQ(PlanArena({{64, 3, 2}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanArena({{64, 0, 1}}, 48).status().code(), absl::StatusCode::kInvalidArgument);
  auto empty = PlanArena({});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->arena_bytes, 0u);
}

}  // namespace
}  // namespace tessera::engine
