#include "engine/thread_pool.h"

#include "tessera/common/thread_name.h"

namespace tessera::engine {
namespace {

// Set on pool workers and while a caller drains its own job, so nested ParallelFor runs inline
// instead of deadlocking on a pool that is already busy.
thread_local bool tls_inside_pool = false;

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::Drain(const std::function<void(int64_t)>& fn, int64_t n) {
  for (int64_t i = next_index_.fetch_add(1); i < n; i = next_index_.fetch_add(1)) fn(i);
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1 || tls_inside_pool) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_size_ = n;
    next_index_.store(0);
    busy_workers_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  work_cv_.notify_all();
  tls_inside_pool = true;
  Drain(fn, n);
  tls_inside_pool = false;
  // Every worker acknowledges every generation, so the next job cannot start while one is still
  // looking at this one's `fn`.
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return busy_workers_ == 0; });
  job_ = nullptr;
}

void ThreadPool::WorkerLoop() {
  SetCurrentThreadName("ts-engine-pool");
  tls_inside_pool = true;
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int64_t)>* job;
    int64_t size;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || generation_ != seen;
      });
      if (stop_) return;
      seen = generation_;
      job = job_;
      size = job_size_;
    }
    Drain(*job, size);
    std::lock_guard<std::mutex> lock(mu_);
    if (--busy_workers_ == 0) done_cv_.notify_one();
  }
}

void ParallelFor(ThreadPool* pool, int64_t n, const std::function<void(int64_t)>& fn) {
  if (pool != nullptr) {
    pool->ParallelFor(n, fn);
  } else {
    for (int64_t i = 0; i < n; ++i) fn(i);
  }
}

}  // namespace tessera::engine
