// ThreadPool: every index runs once, concurrent runs share the threads, a pool with workers
// that never get to join a job still returns, and workers spin only while a run has the pool.
#include "engine/thread_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace tessera::engine {
namespace {

// The distinct threads that ran the tasks of one ParallelFor of `n` tasks, each taking a while so
// that idle workers have time to join.
std::set<std::thread::id> ThreadsUsed(ThreadPool* pool, int64_t n) {
  std::mutex mu;
  std::set<std::thread::id> ids;
  pool->ParallelFor(n, [&](int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  return ids;
}

TEST(ThreadPoolTest, EveryIndexRunsExactlyOnceAcrossManyJobsOfRandomSizes) {
  ThreadPool pool(4);
  std::mt19937 rng(7);
  for (int job = 0; job < 3000; ++job) {
    const int64_t n = std::uniform_int_distribution<int64_t>(0, 40)(rng);
    std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
    pool.ParallelFor(n, [&](int64_t i) { runs[static_cast<size_t>(i)].fetch_add(1); });
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(runs[static_cast<size_t>(i)].load(), 1) << "job " << job << " index " << i;
    }
  }
}

TEST(ThreadPoolTest, UsesAllItsThreadsWhenNoOtherRunIsInProgress) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.usable_threads(), 3);
  EXPECT_EQ(ThreadsUsed(&pool, 200).size(), 3u);
}

TEST(ThreadPoolTest, ConcurrentRunsSplitThePoolsThreads) {
  ThreadPool pool(4);
  const ConcurrentRun first;
  EXPECT_EQ(pool.usable_threads(), 4);
  {
    const ConcurrentRun second;
    EXPECT_EQ(pool.usable_threads(), 2);
    EXPECT_LE(ThreadsUsed(&pool, 40).size(), 2u);
    const ConcurrentRun third;
    const ConcurrentRun fourth;
    const ConcurrentRun fifth;
    EXPECT_EQ(pool.usable_threads(), 1);  // never below one
    const std::set<std::thread::id> inline_only = ThreadsUsed(&pool, 10);
    ASSERT_EQ(inline_only.size(), 1u);
    EXPECT_EQ(*inline_only.begin(), std::this_thread::get_id());
  }
  EXPECT_EQ(pool.usable_threads(), 4);
  EXPECT_EQ(ThreadsUsed(&pool, 200).size(), 4u);
}

TEST(ThreadPoolTest, NestedParallelForRunsInlineOnTheTaskThatCalledIt) {
  ThreadPool pool(2);
  std::atomic<int> inner_runs{0};
  std::atomic<int> inner_on_other_thread{0};
  pool.ParallelFor(8, [&](int64_t) {
    const std::thread::id outer = std::this_thread::get_id();
    pool.ParallelFor(5, [&](int64_t) {
      inner_runs.fetch_add(1);
      if (std::this_thread::get_id() != outer) inner_on_other_thread.fetch_add(1);
    });
  });
  EXPECT_EQ(inner_runs.load(), 40);
  EXPECT_EQ(inner_on_other_thread.load(), 0);
}

TEST(ThreadPoolTest, JobsInARunScopeRunEveryIndexOnceWithWorkersSpinningBetweenThem) {
  ThreadPool pool(3);
  std::mt19937 rng(3);
  for (int run = 0; run < 50; ++run) {
    const ThreadPool::RunScope scope(&pool, /*wake=*/run % 2 == 0);
    for (int job = 0; job < 60; ++job) {
      const int64_t n = std::uniform_int_distribution<int64_t>(0, 12)(rng);
      std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
      pool.ParallelFor(n, [&](int64_t i) { runs[static_cast<size_t>(i)].fetch_add(1); });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(runs[static_cast<size_t>(i)].load(), 1);
    }
  }
}

TEST(ThreadPoolTest, RunsOfSeveralModelsAtOnceEachRunEveryIndexOnce) {
  // Three models' pools, each run by its own thread with a RunScope, as an executor's instances
  // do: the runs start and end at random moments, so the threads are shared, not shared, and
  // shared again while jobs are in flight and workers spin.
  constexpr int kModels = 3;
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int m = 0; m < kModels; ++m) pools.push_back(std::make_unique<ThreadPool>(2 + m));
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int m = 0; m < kModels; ++m) {
    callers.emplace_back([&, m] {
      std::mt19937 rng(100 + m);
      for (int run = 0; run < 500; ++run) {
        const ConcurrentRun share;
        const ThreadPool::RunScope scope(pools[m].get(), /*wake=*/run % 3 != 0);
        const int jobs = std::uniform_int_distribution<int>(1, 20)(rng);
        for (int job = 0; job < jobs; ++job) {
          const int64_t n = std::uniform_int_distribution<int64_t>(0, 9)(rng);
          std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
          pools[m]->ParallelFor(n, [&](int64_t i) { runs[static_cast<size_t>(i)].fetch_add(1); });
          for (auto& r : runs) {
            if (r.load() != 1) wrong.fetch_add(1);
          }
        }
        if (run % 10 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  for (auto& caller : callers) caller.join();
  EXPECT_EQ(wrong.load(), 0);
}

// CPU time of the whole process (every thread) in microseconds.
int64_t ProcessCpuMicros() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000;
}

TEST(ThreadPoolTest, WorkersSleepAfterTheSpinLimitOnceTheRunEndsOrAnotherRunStarts) {
  ThreadPool pool(3);
  {
    const ThreadPool::RunScope scope(&pool, /*wake=*/true);
    pool.ParallelFor(8, [](int64_t) {});
  }
  // Idle after the run: the two workers must not spin (they would take ~2 x 50 ms of CPU).
  int64_t before = ProcessCpuMicros();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_LT(ProcessCpuMicros() - before, 20000);

  // A run whose jobs do not come: woken workers spin for SpinLimitNanos(), then sleep.
  {
    const ThreadPool::RunScope scope(&pool, /*wake=*/true);
    before = ProcessCpuMicros();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_LT(ProcessCpuMicros() - before, 20000);
  }

  // During a run that shares the threads with another, woken workers do not spin either.
  const ConcurrentRun other;
  const ConcurrentRun mine;
  const ThreadPool::RunScope scope(&pool, /*wake=*/true);
  before = ProcessCpuMicros();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_LT(ProcessCpuMicros() - before, 20000);
}

}  // namespace
}  // namespace tessera::engine
