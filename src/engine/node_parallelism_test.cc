#include "engine/node_parallelism.h"

#include "gtest/gtest.h"

namespace tessera::engine {
namespace {

using Mode = NodeParallelism::Mode;
constexpr int kSamples = NodeParallelism::kSamples;

// Feeds node `n` kSamples timings per mode, as the CPU model's first Runs would, returning the
// modes Next asked for in order.
std::vector<Mode> Explore(NodeParallelism* choice, size_t n, int64_t pool_nanos,
                          int64_t alone_nanos) {
  std::vector<Mode> asked;
  for (int run = 0; run < 2 * kSamples; ++run) {
    bool timed = false;
    const Mode mode = choice->Next(n, &timed);
    EXPECT_TRUE(timed) << "run " << run;
    asked.push_back(mode);
    choice->Record(n, mode, mode == Mode::kPool ? pool_nanos : alone_nanos);
  }
  return asked;
}

Mode Decided(NodeParallelism& choice, size_t n) {
  bool timed = true;
  const Mode mode = choice.Next(n, &timed);
  EXPECT_FALSE(timed) << "node " << n << " is still being timed";
  return mode;
}

TEST(NodeParallelismTest, UndecidedNodesAlternateStartingWithThePool) {
  NodeParallelism choice(1);
  std::vector<Mode> asked = Explore(&choice, 0, 100, 100);
  ASSERT_EQ(asked.size(), 2u * kSamples);
  for (size_t i = 0; i < asked.size(); ++i) {
    EXPECT_EQ(asked[i], i % 2 == 0 ? Mode::kPool : Mode::kAlone) << "run " << i;
  }
}

TEST(NodeParallelismTest, KeepsTheFasterModeOncePerNode) {
  NodeParallelism choice(3);
  EXPECT_EQ(choice.undecided(), 3u);
  Explore(&choice, 0, /*pool_nanos=*/40'000, /*alone_nanos=*/12'000);  // a wake-up costs more
  Explore(&choice, 1, /*pool_nanos=*/60'000, /*alone_nanos=*/110'000);
  EXPECT_EQ(choice.undecided(), 1u);
  EXPECT_EQ(Decided(choice, 0), Mode::kAlone);
  EXPECT_EQ(Decided(choice, 1), Mode::kPool);
  bool timed = false;
  choice.Next(2, &timed);
  EXPECT_TRUE(timed);
  // Late reports for a decided node change nothing.
  choice.Record(0, Mode::kPool, 1);
  EXPECT_EQ(Decided(choice, 0), Mode::kAlone);
}

TEST(NodeParallelismTest, AnyPoolSaysWhetherARunMayUseThePool) {
  NodeParallelism choice(2);
  EXPECT_TRUE(choice.any_pool());  // undecided nodes try the pool
  Explore(&choice, 0, /*pool_nanos=*/40'000, /*alone_nanos=*/12'000);
  EXPECT_TRUE(choice.any_pool());
  Explore(&choice, 1, /*pool_nanos=*/10'000, /*alone_nanos=*/30'000);
  EXPECT_TRUE(choice.any_pool());  // node 1 on the pool
  // Node 1's decision comes up for a re-check, and this time it is faster alone.
  for (int64_t run = 0; run < NodeParallelism::kFirstRecheck - 1; ++run) {
    choice.BeginRun(0);
    EXPECT_EQ(Decided(choice, 1), Mode::kPool);
  }
  choice.BeginRun(0);  // both nodes were decided in the same Runs: both are re-timed
  EXPECT_EQ(choice.undecided(), 2u);
  EXPECT_TRUE(choice.any_pool());
  Explore(&choice, 0, /*pool_nanos=*/40'000, /*alone_nanos=*/12'000);
  Explore(&choice, 1, /*pool_nanos=*/30'000, /*alone_nanos=*/10'000);
  EXPECT_EQ(Decided(choice, 0), Mode::kAlone);
  EXPECT_EQ(Decided(choice, 1), Mode::kAlone);
  EXPECT_FALSE(choice.any_pool());  // every node alone: a Run need not wake the workers
  // The Run that re-times them says so as it starts, before any node asks: its workers are woken
  // then, not by the first re-timed node's pool sample.
  for (int64_t run = 0; run < 4 * NodeParallelism::kFirstRecheck - 1; ++run) {
    choice.BeginRun(0);
  }
  EXPECT_FALSE(choice.any_pool());
  choice.BeginRun(0);
  EXPECT_TRUE(choice.any_pool());
}

TEST(NodeParallelismTest, ThePoolMustWinByTheMargin) {
  NodeParallelism choice(2);
  // 5 % faster on the pool: not worth keeping a second core busy.
  Explore(&choice, 0, 100'000, 105'000);
  // 25 % faster on the pool: worth it.
  Explore(&choice, 1, 100'000, 125'000);
  EXPECT_EQ(Decided(choice, 0), Mode::kAlone);
  EXPECT_EQ(Decided(choice, 1), Mode::kPool);
}

TEST(NodeParallelismTest, TheFastestSampleCountsNotOneSlowRun) {
  NodeParallelism choice(1);
  // The pool's first run pays a page fault (a fresh arena); its later ones show its real speed.
  const int64_t pool_runs[kSamples] = {500'000, 60'000, 61'000};
  int pool_seen = 0;
  for (int run = 0; run < 2 * kSamples; ++run) {
    bool timed = false;
    const Mode mode = choice.Next(0, &timed);
    choice.Record(0, mode, mode == Mode::kPool ? pool_runs[pool_seen++] : 100'000);
  }
  EXPECT_EQ(pool_seen, kSamples);
  EXPECT_EQ(Decided(choice, 0), Mode::kPool);
  EXPECT_EQ(choice.undecided(), 0u);
}

TEST(NodeParallelismTest, DecisionsAreTimedAgainLessAndLessOften) {
  NodeParallelism choice(1);
  // Timed while something else slowed the pool: alone looked faster.
  Explore(&choice, 0, /*pool_nanos=*/300'000, /*alone_nanos=*/200'000);
  int64_t interval = NodeParallelism::kFirstRecheck;
  for (int recheck = 0; recheck < 3; ++recheck) {
    for (int64_t run = 1; run < interval; ++run) {
      choice.BeginRun(0);
      ASSERT_EQ(Decided(choice, 0), recheck == 0 ? Mode::kAlone : Mode::kPool)
          << "recheck " << recheck << " run " << run;
    }
    // The interval-th run times the node again; now the pool is clearly faster.
    choice.BeginRun(0);
    Explore(&choice, 0, /*pool_nanos=*/100'000, /*alone_nanos=*/190'000);
    EXPECT_EQ(choice.undecided(), 0u);
    interval *= 4;
  }
}

TEST(NodeParallelismTest, AloneDecisionsAreTimedAgainOnceTheyAreOld) {
  NodeParallelism choice(2);
  constexpr int64_t kSecond = 1'000'000'000;
  choice.BeginRun(100 * kSecond);
  // Both timed while another process held the second core: node 0 looked faster alone, node 1
  // still gained from the pool.
  Explore(&choice, 0, /*pool_nanos=*/300'000, /*alone_nanos=*/200'000);
  Explore(&choice, 1, /*pool_nanos=*/100'000, /*alone_nanos=*/250'000);
  // A few runs later, well before kFirstRecheck runs: nothing is timed again while young.
  choice.BeginRun(100 * kSecond + NodeParallelism::kAloneRecheckNanos - 1);
  EXPECT_EQ(Decided(choice, 0), Mode::kAlone);
  EXPECT_EQ(Decided(choice, 1), Mode::kPool);
  // Once the alone decision is old, the next Run times it again, and the pool wins now; the pool
  // decision waits for its count (timing it means runs alone, which cost more).
  choice.BeginRun(100 * kSecond + NodeParallelism::kAloneRecheckNanos);
  Explore(&choice, 0, /*pool_nanos=*/100'000, /*alone_nanos=*/190'000);
  EXPECT_EQ(Decided(choice, 0), Mode::kPool);
  EXPECT_EQ(Decided(choice, 1), Mode::kPool);
  choice.BeginRun(200 * kSecond);
  EXPECT_EQ(Decided(choice, 0), Mode::kPool);
}

}  // namespace
}  // namespace tessera::engine
