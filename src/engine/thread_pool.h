// A small fixed-size thread pool for intra-op parallelism (GEMM tiles, conv images).
//
// Thread-safety: ParallelFor is called by one thread at a time (the Model's Run is
// thread-compatible); a ParallelFor issued from inside a task runs inline on that worker, so
// kernels may call parallel helpers without knowing whether they are already parallel.
// Ownership: the pool owns its worker threads and joins them in the destructor.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace tessera::engine {

// Marks a model run in progress in this process for as long as it lives. The pools of the runs in
// progress split the threads between them (ThreadPool::usable_threads): two models running at once
// in a 2-core executor use one thread each, instead of both waking two and oversubscribing the
// cores, which cost more than the second thread gains
// (bench/results/2026-11-24-engine-cpu-concurrent-runs.md).
class ConcurrentRun {
 public:
  ConcurrentRun() { in_progress_.fetch_add(1, std::memory_order_relaxed); }
  ~ConcurrentRun() { in_progress_.fetch_sub(1, std::memory_order_relaxed); }
  ConcurrentRun(const ConcurrentRun&) = delete;
  ConcurrentRun& operator=(const ConcurrentRun&) = delete;

  static int InProgress() { return in_progress_.load(std::memory_order_relaxed); }

 private:
  static std::atomic<int> in_progress_;
};

class ThreadPool {
 public:
  // `num_threads` counts the calling thread: 1 = no workers, everything inline.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // The threads a kernel should use now: num_threads() shared with the other runs in progress
  // (ConcurrentRun), at least 1. Kernels size their splits and OpenMP teams by this.
  int usable_threads() const;

  // Runs fn(i) for every i in [0, n) across up to usable_threads() threads (the caller and
  // workers); returns when all are done. Tasks are handed out one index at a time, so callers
  // should make tasks coarse (a tile, not an element). `fn` must not throw.
  void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  void WorkerLoop();
  void Drain(const std::function<void(int64_t)>& fn, int64_t n);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Workers still to join the current job (each takes one), and workers that joined and have not
  // finished. The caller withdraws the untaken ones once it has drained the job itself.
  int tickets_ ABSL_GUARDED_BY(mu_) = 0;
  int busy_workers_ ABSL_GUARDED_BY(mu_) = 0;
  const std::function<void(int64_t)>* job_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t job_size_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> next_index_{0};
};

// Runs fn(i) for i in [0, n) on `pool`, or inline when `pool` is null.
void ParallelFor(ThreadPool* pool, int64_t n, const std::function<void(int64_t)>& fn);

}  // namespace tessera::engine
