#include "engine/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "tessera/common/thread_name.h"

namespace tessera::engine {
namespace {

// Set on pool workers and while a caller drains its own job, so nested ParallelFor runs inline
// instead of deadlocking on a pool that is already busy.
thread_local bool tls_inside_pool = false;

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Polls `done` between pauses until it holds, `limit_nanos` pass or `keep_on` stops holding (the
// last two are checked every 64 polls). Returns whether `done` held.
template <typename Done, typename KeepOn>
bool SpinUntil(Done done, KeepOn keep_on, int64_t limit_nanos) {
  const int64_t deadline = NowNanos() + limit_nanos;
  for (int i = 1;; ++i) {
    if (done()) return true;
    CpuRelax();
    if (i % 64 == 0) {
      if (NowNanos() > deadline || !keep_on()) return false;
      sched_yield();
    }
  }
}

}  // namespace

int64_t ThreadPool::SpinLimitNanos() {
  static const int64_t limit = [] {
    constexpr int64_t kDefaultMicros = 100;
    const char* text = std::getenv("TESSERA_ENGINE_SPIN_US");
    if (text == nullptr || *text == '\0') return kDefaultMicros * 1000;
    char* end = nullptr;
    const long long micros = std::strtoll(text, &end, 10);
    if (*end != '\0' || micros < 0 || micros > 1'000'000) {
      std::fprintf(stderr,
                   "TESSERA_ENGINE_SPIN_US=%s is not a number of microseconds in [0, 1000000]; "
                   "using %lld\n",
                   text, static_cast<long long>(kDefaultMicros));
      return kDefaultMicros * 1000;
    }
    return static_cast<int64_t>(micros) * 1000;
  }();
  return limit;
}

ThreadPool::RunScope::RunScope(ThreadPool* pool, bool wake) : pool_(pool) {
  if (pool_ == nullptr || pool_->workers_.empty() || SpinLimitNanos() == 0) {
    pool_ = nullptr;
    return;
  }
  pool_->in_run_.store(true, std::memory_order_release);
  if (!wake || pool_->usable_threads() < 2) return;
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(pool_->mu_);
    if (pool_->sleeping_ > 0) {
      ++pool_->wake_generation_;
      notify = true;
    }
  }
  if (notify) pool_->work_cv_.notify_all();
}

ThreadPool::RunScope::~RunScope() {
  if (pool_ != nullptr) pool_->in_run_.store(false, std::memory_order_release);
}

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

bool ThreadPool::Spinning() const {
  return in_run_.load(std::memory_order_acquire) && usable_threads() > 1;
}

// Both spins stop as soon as another run starts in the process: the threads are then shared, and
// a spinning thread would hold a core the other run needs.
void ThreadPool::SpinForWork() const {
  if (!Spinning()) return;
  SpinUntil([this] { return offered_.load(std::memory_order_acquire) > 0; },
            [this] { return Spinning(); }, SpinLimitNanos());
}

void ThreadPool::SpinForWorkers() const {
  if (!Spinning()) return;
  SpinUntil([this] { return busy_.load(std::memory_order_acquire) == 0; },
            [this] { return Spinning(); }, SpinLimitNanos());
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
  int to_wake = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_size_ = n;
    next_index_.store(0);
    tickets_ = static_cast<int>(helpers);
    busy_workers_ = static_cast<int>(helpers);
    busy_.store(busy_workers_, std::memory_order_relaxed);
    offered_.store(tickets_, std::memory_order_release);
    to_wake = std::min(sleeping_, tickets_);  // spinning workers see offered_ without a wake-up
  }
  if (to_wake == static_cast<int>(workers_.size())) {
    work_cv_.notify_all();
  } else {
    for (int i = 0; i < to_wake; ++i) work_cv_.notify_one();
  }
  tls_inside_pool = true;
  Drain(fn, n);
  tls_inside_pool = false;
  // Every index is taken: a worker that has not woken yet has nothing left to do, so its ticket
  // is withdrawn rather than waited for. Those that joined may still be running `fn`.
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_workers_ -= tickets_;
    tickets_ = 0;
    offered_.store(0, std::memory_order_relaxed);
    busy_.store(busy_workers_, std::memory_order_relaxed);
  }
  SpinForWorkers();
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return busy_workers_ == 0; });
  job_ = nullptr;
}

void ThreadPool::WorkerLoop() {
  SetCurrentThreadName("ts-engine-pool");
  tls_inside_pool = true;
  uint64_t seen_wake = 0;
  while (true) {
    SpinForWork();
    const std::function<void(int64_t)>* job;
    int64_t size;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++sleeping_;
      work_cv_.wait(lock, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || tickets_ > 0 || wake_generation_ != seen_wake;
      });
      --sleeping_;
      if (stop_) return;
      seen_wake = wake_generation_;
      if (tickets_ == 0) continue;  // woken by a run's start: spin for its jobs
      --tickets_;
      offered_.store(tickets_, std::memory_order_relaxed);
      job = job_;
      size = job_size_;
    }
    Drain(*job, size);
    std::lock_guard<std::mutex> lock(mu_);
    busy_.store(--busy_workers_, std::memory_order_release);
    if (busy_workers_ == 0) done_cv_.notify_one();
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
