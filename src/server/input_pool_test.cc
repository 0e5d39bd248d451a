#include "input_pool.h"

#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::server {
namespace {

// One fp32 input of 64 floats per row (the mlp): 256 bytes per row.
const std::vector<PoolInputSpec> kMlpInputs = {{4, 256}};

// Without spill areas unless asked, so that sub-rings are the whole region share.
std::shared_ptr<InputPool> MakePool(uint64_t bytes, int regions, uint64_t base = 0,
                                    double spill_share = 0) {
  InputPoolOptions options;
  options.base = base;
  options.bytes = bytes;
  options.regions = regions;
  options.spill_share = spill_share;
  return InputPool::Create(options);
}

std::vector<const PooledInputs*> Views(const std::vector<std::unique_ptr<PooledInputs>>& handles) {
  std::vector<const PooledInputs*> views;
  for (const auto& handle : handles) views.push_back(handle.get());
  return views;
}

TEST(InputPoolTest, ConsecutiveRequestsAreOneContiguousRun) {
  auto pool = MakePool(4096, 1, /*base=*/8192);
  ASSERT_TRUE(pool->AddInstance("mlp/1#0", kMlpInputs));
  std::vector<std::unique_ptr<PooledInputs>> handles;
  for (uint64_t rows : {1, 3, 2}) {
    handles.push_back(pool->Reserve("mlp/1#0", {rows * 256}));
    ASSERT_NE(handles.back(), nullptr);
  }
  EXPECT_EQ(handles[0]->slots()[0].offset, 8192u);  // the pool's base, not 0
  EXPECT_EQ(handles[1]->slots()[0].offset, 8192u + 256);
  EXPECT_EQ(handles[2]->slots()[0].offset, 8192u + 1024);
  auto run = pool->ContiguousRun("mlp/1#0", Views(handles));
  ASSERT_TRUE(run.has_value());
  ASSERT_EQ(run->runs.size(), 1u);
  EXPECT_TRUE(run->spills.empty());
  EXPECT_EQ(run->runs[0].offset, 8192u);
  EXPECT_EQ(run->runs[0].bytes, 6u * 256);
  // A sub-range of the batch in order is a run too; the wrong order is not.
  EXPECT_TRUE(pool->ContiguousRun("mlp/1#0", {handles[1].get(), handles[2].get()}).has_value());
  EXPECT_FALSE(pool->ContiguousRun("mlp/1#0", {handles[1].get(), handles[0].get()}).has_value());
  EXPECT_FALSE(pool->ContiguousRun("mlp/1#0", {handles[0].get(), handles[2].get()}).has_value());
  EXPECT_FALSE(pool->ContiguousRun("other", Views(handles)).has_value());
  EXPECT_EQ(pool->stats().requests_staged, 3u);
  EXPECT_EQ(pool->stats().live_slots, 3u);
}

TEST(InputPoolTest, RowSizesWhoseSumOverflowsSplitTheRegionEvenlyInsideIt) {
  // Rows of a model file's huge dims: 2^63 + 64 bytes each, whose sum wraps to 128. Weighing the
  // region by such rows would carve sub-rings past its end.
  auto pool = MakePool(4096, 2, /*base=*/8192);
  const uint64_t huge = (uint64_t{1} << 63) + 64;
  ASSERT_TRUE(pool->AddInstance("m", {{4, huge}, {4, huge}, {4, 16}}));
  for (size_t k = 0; k < 3; ++k) {
    std::optional<PoolRange> ring = pool->SubRing("m", k);
    ASSERT_TRUE(ring.has_value());
    EXPECT_GE(ring->offset, 8192u);
    EXPECT_LE(ring->offset + ring->bytes, 8192u + 2048) << "sub-ring " << k << " leaves its region";
  }
}

TEST(InputPoolTest, SlotsAreUnpaddedSoOddSizesStayContiguous) {
  auto pool = MakePool(4096, 1);
  ASSERT_TRUE(pool->AddInstance("m", {{4, 12}}));  // 3 floats per row: not a multiple of 64
  auto a = pool->Reserve("m", {12});
  auto b = pool->Reserve("m", {24});
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->slots()[0].offset, a->slots()[0].offset + 12);
  auto run = pool->ContiguousRun("m", {a.get(), b.get()});
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->runs[0].bytes, 36u);
}

TEST(InputPoolTest, WrapAroundBreaksContiguity) {
  auto pool = MakePool(1024, 1);
  ASSERT_TRUE(pool->AddInstance("m", kMlpInputs));
  auto a = pool->Reserve("m", {512});
  auto b = pool->Reserve("m", {256});
  ASSERT_TRUE(a && b);
  a.reset();  // [0, 512) free again; tail [768, 1024) is only 256 bytes
  auto c = pool->Reserve("m", {512});
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->slots()[0].offset, 0u);  // did not fit at the end: starts over
  EXPECT_FALSE(pool->ContiguousRun("m", {b.get(), c.get()}).has_value());
  EXPECT_TRUE(pool->ContiguousRun("m", {c.get()}).has_value());
}

TEST(InputPoolTest, SpillAreaFollowsEachSubRingInsideItsShare) {
  auto pool = MakePool(4096, 1, /*base=*/0, /*spill_share=*/0.25);
  ASSERT_TRUE(pool->AddInstance("m", {{4, 768}, {4, 256}}));
  // Input 0's share is [0, 3072): 2304 bytes of sub-ring, then 768 of spill; input 1's
  // [3072, 4096): 768 and 256.
  EXPECT_EQ(pool->SubRing("m", 0)->offset, 0u);
  EXPECT_EQ(pool->SubRing("m", 0)->bytes, 2304u);
  EXPECT_EQ(pool->SubRing("m", 1)->offset, 3072u);
  EXPECT_EQ(pool->SubRing("m", 1)->bytes, 768u);
  // The default keeps a fifth of each share.
  InputPoolOptions options;
  options.bytes = 4096;
  options.regions = 1;
  auto defaulted = InputPool::Create(options);
  ASSERT_TRUE(defaulted->AddInstance("m", kMlpInputs));
  EXPECT_EQ(defaulted->SubRing("m", 0)->bytes, 4096u - 816);
}

TEST(InputPoolTest, ABatchStraddlingTheWrapIsOneRunOnceItsHeadIsCopiedAfterItsTail) {
  // Sub-ring [0, 1024), spill [1024, 1280).
  auto pool = MakePool(1280, 1, /*base=*/0, /*spill_share=*/0.2);
  ASSERT_TRUE(pool->AddInstance("m", kMlpInputs));
  ASSERT_EQ(pool->SubRing("m", 0)->bytes, 1024u);
  auto a = pool->Reserve("m", {512});
  auto b = pool->Reserve("m", {384});  // [512, 896)
  ASSERT_TRUE(a && b);
  a.reset();
  auto c = pool->Reserve("m", {256});  // 128 bytes left at the end: starts over at 0
  auto d = pool->Reserve("m", {128});  // [256, 384)
  ASSERT_TRUE(c && d);
  ASSERT_EQ(c->slots()[0].offset, 0u);

  auto run = pool->ContiguousRun("m", {b.get(), c.get(), d.get()});
  ASSERT_TRUE(run.has_value());
  ASSERT_EQ(run->runs.size(), 1u);
  EXPECT_EQ(run->runs[0].offset, 512u);
  EXPECT_EQ(run->runs[0].bytes, 384u + 256 + 128);
  ASSERT_EQ(run->spills.size(), 1u);
  EXPECT_EQ(run->spills[0].from, 0u);
  EXPECT_EQ(run->spills[0].to, 896u);  // over the skipped bytes, then into the spill area
  EXPECT_EQ(run->spills[0].bytes, 384u);
  // A batch that starts at the wrap needs no copy; one that breaks again after it is no run.
  auto head_only = pool->ContiguousRun("m", {c.get(), d.get()});
  ASSERT_TRUE(head_only.has_value());
  EXPECT_TRUE(head_only->spills.empty());
  EXPECT_FALSE(pool->ContiguousRun("m", {b.get(), d.get()}).has_value());
  EXPECT_FALSE(pool->ContiguousRun("m", {b.get(), c.get(), c.get()}).has_value());
}

TEST(InputPoolTest, AWrapIsRunOnlyForTheNextReservationAndAHeadThatFitsTheSpill) {
  auto pool = MakePool(1280, 1, /*base=*/0, /*spill_share=*/0.2);
  ASSERT_TRUE(pool->AddInstance("m", kMlpInputs));
  auto a = pool->Reserve("m", {512});
  auto b = pool->Reserve("m", {384});  // [512, 896)
  auto x = pool->Reserve("m", {128});  // [896, 1024): another request's slot
  ASSERT_TRUE(a && b && x);
  a.reset();
  auto c = pool->Reserve("m", {256});
  ASSERT_TRUE(c);
  ASSERT_EQ(c->slots()[0].offset, 0u);
  // b then c skips x's live slot: copying c's head after b would overwrite it.
  EXPECT_FALSE(pool->ContiguousRun("m", {b.get(), c.get()}).has_value());
  auto through_x = pool->ContiguousRun("m", {b.get(), x.get(), c.get()});
  ASSERT_TRUE(through_x.has_value());
  EXPECT_EQ(through_x->spills.at(0).to, 1024u);

  // A head longer than the tail's end plus the spill area gathers.
  auto d = pool->Reserve("m", {256});  // [256, 512)
  ASSERT_TRUE(d);
  EXPECT_FALSE(pool->ContiguousRun("m", {b.get(), x.get(), c.get(), d.get()}).has_value());
}

TEST(InputPoolTest, FullPoolGivesNullAndCountsIt) {
  auto pool = MakePool(1024, 1);
  ASSERT_TRUE(pool->AddInstance("m", kMlpInputs));
  auto a = pool->Reserve("m", {1024});
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(pool->Reserve("m", {4}), nullptr);
  EXPECT_EQ(pool->Reserve("m", {4096}), nullptr);  // can never fit
  EXPECT_EQ(pool->Reserve("unknown", {4}), nullptr);
  EXPECT_EQ(pool->Reserve("m", {4, 4}), nullptr);  // wrong number of inputs
  EXPECT_EQ(pool->stats().requests_not_staged, 4u);
  a.reset();
  EXPECT_NE(pool->Reserve("m", {1024}), nullptr);
}

TEST(InputPoolTest, OutOfOrderReleaseFreesSpaceInRingOrder) {
  auto pool = MakePool(1024, 1);
  ASSERT_TRUE(pool->AddInstance("m", kMlpInputs));
  auto a = pool->Reserve("m", {256});
  auto b = pool->Reserve("m", {256});
  auto c = pool->Reserve("m", {256});
  auto d = pool->Reserve("m", {256});
  ASSERT_TRUE(a && b && c && d);
  b.reset();  // not the oldest: its space waits behind a
  EXPECT_EQ(pool->Reserve("m", {256}), nullptr);
  a.reset();  // a and b come back together
  auto e = pool->Reserve("m", {512});
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->slots()[0].offset, 0u);
  EXPECT_EQ(pool->stats().live_slots, 3u);
}

TEST(InputPoolTest, MultiInputSubRingsFollowRowBytesAndShareOrder) {
  auto pool = MakePool(4096, 1);
  // Input 0: 3 rows' worth per 1 of input 1.
  ASSERT_TRUE(pool->AddInstance("m", {{4, 768}, {4, 256}}));
  auto ring0 = pool->SubRing("m", 0);
  auto ring1 = pool->SubRing("m", 1);
  ASSERT_TRUE(ring0 && ring1);
  EXPECT_EQ(ring0->offset, 0u);
  EXPECT_EQ(ring0->bytes, 3072u);
  EXPECT_EQ(ring1->offset, 3072u);
  EXPECT_EQ(ring1->bytes, 1024u);
  auto a = pool->Reserve("m", {768, 256});
  auto b = pool->Reserve("m", {768, 256});
  ASSERT_TRUE(a && b);
  auto run = pool->ContiguousRun("m", {a.get(), b.get()});
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->runs[0].offset, 0u);
  EXPECT_EQ(run->runs[0].bytes, 1536u);
  EXPECT_EQ(run->runs[1].offset, 3072u);
  EXPECT_EQ(run->runs[1].bytes, 512u);
  // Input 1 is full after two more; a failed Reserve must give input 0's slot back.
  auto c = pool->Reserve("m", {768, 512});
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(pool->Reserve("m", {768, 256}), nullptr);
  c.reset();
  auto d = pool->Reserve("m", {768, 256});
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->slots()[0].offset, 1536u);  // input 0 did not leak the failed attempt's slot
}

TEST(InputPoolTest, RegionsAreAFixedBudgetPerInstance) {
  auto pool = MakePool(4096, 2);
  ASSERT_TRUE(pool->AddInstance("a", kMlpInputs));
  ASSERT_TRUE(pool->AddInstance("b", kMlpInputs));
  EXPECT_FALSE(pool->AddInstance("c", kMlpInputs));  // no region left: not pooled
  EXPECT_FALSE(pool->AddInstance("a", kMlpInputs));  // already has one
  EXPECT_FALSE(pool->AddInstance("s", {{0, 0}}));    // strings cannot be pooled
  EXPECT_EQ(pool->SubRing("b", 0)->offset, 2048u);
  EXPECT_EQ(pool->Reserve("c", {256}), nullptr);
  EXPECT_EQ(pool->Reserve("a", {4096}), nullptr);  // more than its half

  // A removed instance's region is reused only after its last slot is gone.
  auto held = pool->Reserve("a", {256});
  ASSERT_NE(held, nullptr);
  pool->RemoveInstance("a");
  EXPECT_EQ(pool->Reserve("a", {256}), nullptr);
  EXPECT_FALSE(pool->AddInstance("c", kMlpInputs));
  EXPECT_EQ(pool->stats().instances, 1);
  held.reset();
  EXPECT_TRUE(pool->AddInstance("c", kMlpInputs));
  EXPECT_EQ(pool->SubRing("c", 0)->offset, 0u);
}

TEST(InputPoolTest, DeclaredInstancesTakeARegionOnlyWhenTheyStage) {
  auto pool = MakePool(4096, 2);
  // Four workers of one model and one of another, as an executor declares its loads: only the
  // two that stage may hold the two regions.
  for (const char* key : {"a#0", "a#1", "a#2", "a#3", "b#0"})
    pool->DeclareInstance(key, kMlpInputs);
  EXPECT_EQ(pool->stats().instances, 0);
  auto first = pool->Reserve("a#0", {256});
  auto other = pool->Reserve("b#0", {256});
  ASSERT_NE(first, nullptr);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(pool->stats().instances, 2);
  EXPECT_EQ(pool->Reserve("a#1", {256}), nullptr);  // both regions taken: gathered
  EXPECT_EQ(pool->Reserve("unknown", {256}), nullptr);
  // A region given back goes to a declared instance that stages next; a removed declaration
  // never takes one again.
  pool->RemoveInstance("b#0");
  other.reset();
  pool->RemoveInstance("a#2");
  EXPECT_EQ(pool->Reserve("a#2", {256}), nullptr);
  EXPECT_NE(pool->Reserve("a#1", {256}), nullptr);
  EXPECT_EQ(pool->stats().requests_not_staged, 3u);
}

TEST(InputPoolTest, HandlesFromAnotherCarveOrPoolAreNotARun) {
  auto pool = MakePool(4096, 2);
  auto other = MakePool(4096, 2);
  ASSERT_TRUE(pool->AddInstance("m", kMlpInputs));
  ASSERT_TRUE(other->AddInstance("m", kMlpInputs));
  auto a = pool->Reserve("m", {256});
  auto foreign = other->Reserve("m", {256});
  EXPECT_FALSE(pool->ContiguousRun("m", {a.get(), foreign.get()}).has_value());
  EXPECT_FALSE(pool->ContiguousRun("m", {foreign.get()}).has_value());
  EXPECT_FALSE(pool->ContiguousRun("m", {nullptr}).has_value());
  // Unload and reload under the same key: old handles belong to the old carve.
  pool->RemoveInstance("m");
  ASSERT_TRUE(pool->AddInstance("m", kMlpInputs));
  EXPECT_FALSE(pool->ContiguousRun("m", {a.get()}).has_value());
}

TEST(InputPoolTest, HandleOutlivesItsOwner) {
  auto pool = MakePool(4096, 1);
  ASSERT_TRUE(pool->AddInstance("m", kMlpInputs));
  std::unique_ptr<PooledInputs> handle = pool->Reserve("m", {256});
  ASSERT_NE(handle, nullptr);
  pool.reset();  // the executor that owned the pool is gone
  std::thread([h = std::move(handle)]() mutable { h.reset(); }).join();  // no crash, no leak (ASan)
}

TEST(InputPoolTest, EmptyPoolStagesNothing) {
  auto pool = MakePool(0, 4);
  EXPECT_FALSE(pool->AddInstance("m", kMlpInputs));
  EXPECT_EQ(pool->Reserve("m", {256}), nullptr);
}

}  // namespace
}  // namespace tessera::server
