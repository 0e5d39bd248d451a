#include "engine/thread_pool.h"

#include <algorithm>

#include "tessera/common/thread_name.h"

namespace tessera::engine {
namespace {

// Set on pool workers and while a caller drains its own job, so nested ParallelFor runs inline
// instead of deadlocking on a pool that is already busy.
thread_local bool tls_inside_pool = false;

}  // namespace

std::atomic<int> ConcurrentRun::in_progress_{0};

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

int ThreadPool::usable_threads() const {
  return std::max(1, num_threads() / std::max(1, ConcurrentRun::InProgress()));
}

void ThreadPool::Drain(const std::function<void(int64_t)>& fn, int64_t n) {
  for (int64_t i = next_index_.fetch_add(1); i < n; i = next_index_.fetch_add(1)) fn(i);
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t helpers =
      std::min<int64_t>({static_cast<int64_t>(workers_.size()), usable_threads() - 1, n - 1});
  if (helpers <= 0 || tls_inside_pool) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_size_ = n;
    next_index_.store(0);
    tickets_ = static_cast<int>(helpers);
    busy_workers_ = static_cast<int>(helpers);
  }
  if (helpers == static_cast<int64_t>(workers_.size())) {
    work_cv_.notify_all();
  } else {
    for (int64_t i = 0; i < helpers; ++i) work_cv_.notify_one();
  }
  tls_inside_pool = true;
  Drain(fn, n);
  tls_inside_pool = false;
  // Every index is taken: a worker that has not woken yet has nothing left to do, so its ticket
  // is withdrawn rather than waited for. Those that joined may still be running `fn`.
  std::unique_lock<std::mutex> lock(mu_);
  busy_workers_ -= tickets_;
  tickets_ = 0;
  done_cv_.wait(lock, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return busy_workers_ == 0; });
  job_ = nullptr;
}

void ThreadPool::WorkerLoop() {
  SetCurrentThreadName("ts-engine-pool");
  tls_inside_pool = true;
  while (true) {
    const std::function<void(int64_t)>* job;
    int64_t size;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock,
                    [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || tickets_ > 0; });
      if (stop_) return;
      --tickets_;
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
