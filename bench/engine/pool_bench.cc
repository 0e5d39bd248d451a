// The engine pool's hand-offs, against the same work on one thread (Google Benchmark):
//   - a 2-part ParallelFor of short parts, with the workers sleeping between jobs (no RunScope)
//     and spinning for them (in a RunScope): the wake-up a Conv cut into parts pays per node;
//   - the NCHW -> NHWC conversion of a first Conv's input on one thread and split over the pool.
// Each compares with the single-threaded run in the same binary.
//
//   build/bin/engine_pool_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/cpu/ops.h"
#include "engine/thread_pool.h"

namespace tessera::engine {
namespace {

// Busy work of about `micros` microseconds on the calling thread.
void Work(int64_t micros) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  while (std::chrono::steady_clock::now() < end) {
  }
}

// Two 20 us parts, then 20 us of work on the caller alone (a node the pool does not help), as a
// model's run alternates: arg 0 = one thread, 1 = pool with sleeping workers, 2 = in a RunScope.
void BM_TwoPartJobs(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  ThreadPool pool(2);
  ThreadPool* used = mode == 0 ? nullptr : &pool;
  for (auto _ : state) {
    const ThreadPool::RunScope scope(mode == 2 ? &pool : nullptr, /*wake=*/true);
    for (int node = 0; node < 10; ++node) {
      ParallelFor(used, 2, [](int64_t) { Work(20); });
      Work(20);
    }
  }
  state.SetLabel(mode == 0   ? "one thread"
                 : mode == 1 ? "pool, sleeping workers"
                             : "pool, RunScope");
}
BENCHMARK(BM_TwoPartJobs)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

// [batch, 3, 224, 224] row-major to channels-last: arg 1 = batch, arg 2 = 0 one thread, 1 pool.
void BM_ToChannelsLast(benchmark::State& state) {
  const int64_t batch = state.range(0);
  ThreadPool pool(2);
  ThreadPool* used = state.range(1) == 0 ? nullptr : &pool;
  const Value v = Value::Allocate(DataType::kFp32, {batch, 3, 224, 224});
  for (auto _ : state) {
    const ThreadPool::RunScope scope(used, /*wake=*/true);
    benchmark::DoNotOptimize(cpu::ToChannelsLast(v, used));
  }
  state.SetLabel(used == nullptr ? "one thread" : "pool of 2");
}
BENCHMARK(BM_ToChannelsLast)
    ->Args({1, 0})
    ->Args({1, 1})
    ->Args({8, 0})
    ->Args({8, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace tessera::engine

BENCHMARK_MAIN();
