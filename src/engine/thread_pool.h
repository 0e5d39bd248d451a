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
  // Marks a model run on the pool for as long as it lives (one at a time per pool, like Run).
  // Meanwhile a worker that finishes its part of a job spins for the next job for up to
  // SpinLimitNanos() instead of sleeping, and the caller spins for the workers' parts to finish, as
  // long as the pool has threads to share (usable_threads() > 1). Waking a sleeping thread costs
  // 25-30 us on a VM, more than most of a small model's nodes take: mnasnet at batch 1 ran at 3.2
  // ms with sleeping threads and 1.8 ms with spinning ones
  // (bench/results/2026-11-24-engine-cpu-pool-spin-and-sliced-conv.md). Sleeping again when
  // the run ends, unlike OpenMP's spin, leaves the cores to other models and to gRPC between runs.
  // With `wake`, sleeping workers are woken at once, so that their wake-up overlaps the run's
  // first nodes rather than delaying its first parallel one.
  class RunScope {
   public:
    RunScope(ThreadPool* pool, bool wake);  // `pool` may be null: no effect
    ~RunScope();
    RunScope(const RunScope&) = delete;
    RunScope& operator=(const RunScope&) = delete;

   private:
    ThreadPool* pool_;
  };

  // How long an idle worker spins for the next job during a run before it sleeps, and a caller
  // for the workers' parts: 100 us, or TESSERA_ENGINE_SPIN_US from the environment (read once;
  // 0 turns the spinning and the wake-up at a run's start off, for a machine shared with work
  // that needs every idle moment of the cores).
  static int64_t SpinLimitNanos();

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
  // While a run is in progress: spins until a ticket is offered, the run ends, or
  // SpinLimitNanos() pass. Returns at once outside runs.
  void SpinForWork() const;
  // While a run is in progress: spins until `busy_` drops to 0 or SpinLimitNanos() pass.
  void SpinForWorkers() const;
  bool Spinning() const;

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Workers still to join the current job (each takes one), and workers that joined and have not
  // finished. The caller withdraws the untaken ones once it has drained the job itself.
  int tickets_ ABSL_GUARDED_BY(mu_) = 0;
  int busy_workers_ ABSL_GUARDED_BY(mu_) = 0;
  // Mirrors of tickets_ and busy_workers_ for spinning threads to poll without the lock.
  std::atomic<int> offered_{0};
  std::atomic<int> busy_{0};
  // Workers waiting on work_cv_; a job or a run's start notifies only when there are some.
  int sleeping_ ABSL_GUARDED_BY(mu_) = 0;
  // Bumped by a RunScope with `wake`: sleeping workers wake to spin for the run's jobs.
  uint64_t wake_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> in_run_{false};
  const std::function<void(int64_t)>* job_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t job_size_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> next_index_{0};
};

// Runs fn(i) for i in [0, n) on `pool`, or inline when `pool` is null.
void ParallelFor(ThreadPool* pool, int64_t n, const std::function<void(int64_t)>& fn);

}  // namespace tessera::engine
