// Per node of a graph, for one tuple of input shapes: does the node run faster across the thread
// pool or on the calling thread alone?
//
// Waking a sleeping worker (the pool's condition variable, or OpenMP's PASSIVE wait) costs tens
// of microseconds on a VM, more than a small MatMul or a late MobileNet convolution takes on one
// thread: with every node on 2 threads, bert_tiny at batch 1 ran more than 2x slower than on 1
// thread (bench/results/2026-11-24-engine-cpu-node-parallelism.md). Whether the second thread
// pays depends on the node, its shapes and the machine's wake-up cost, so it is measured rather
// than modelled: the first runs with a shape time each node both ways, alternating, and keep the
// faster.
//
// Thread-compatible: one caller at a time, like the Model that owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::engine {

class NodeParallelism {
 public:
  enum class Mode : uint8_t { kPool, kAlone };

  // Timed runs per mode before a node's mode is fixed; the fastest of them counts, so one run
  // slowed by a page fault or a preemption does not decide.
  static constexpr int kSamples = 3;
  // A node stays alone unless the pool is this much faster: a node run alone leaves the other
  // cores to concurrent runs of other models and to the executor's own threads.
  static constexpr double kPoolMargin = 1.1;
  // A decision is timed afresh after this many runs of the node in its mode, then after 4 times
  // as many each time, up to kMaxRecheck: something else on the machine may have slowed one mode
  // while it was timed (another process's spinning threads made mobilenetv2's large convolutions
  // look faster alone once, and the model ran 30 % slower for the rest of the process).
  static constexpr int64_t kFirstRecheck = 64;
  static constexpr int64_t kMaxRecheck = int64_t{1} << 16;
  // A node decided alone is also timed afresh once this long has passed since (at the next Run):
  // CPU load while it was timed (another model loading, a burst of requests on the other core)
  // slows the pool more than the calling thread, and two decisions in a row under load pushed the
  // next recheck hundreds of runs away, seconds to minutes at half speed. Checking an alone node
  // costs little: its pool runs are at worst a wake-up slower.
  static constexpr int64_t kAloneRecheckNanos = 5'000'000'000;

  // Called as each Run starts, at `now_nanos`: counts the Run for every decided node, and makes
  // those due for a recheck (by count, or by age for alone ones: kAloneRecheckNanos; a time of 0
  // counts only) undecided now, so that any_pool() tells the Run to wake the workers before a
  // re-timed node's pool sample, which would otherwise include the wake-up.
  void BeginRun(int64_t now_nanos);

  explicit NodeParallelism(size_t nodes) : nodes_(nodes) {}

  // How node `n` runs in this Run (BeginRun); `*timed` says whether to report its time with
  // Record. Undecided nodes alternate between the modes, starting with the pool.
  Mode Next(size_t n, bool* timed);
  // The time node `n` took in `mode`, as Next asked.
  void Record(size_t n, Mode mode, int64_t nanos);

  // Nodes whose mode is not fixed yet; 0 once every node is decided.
  size_t undecided() const { return undecided_; }
  // Whether any node runs on the pool, or may (undecided): if none does, a Run has no use for
  // waking the pool's workers.
  bool any_pool() const { return undecided_ > 0 || pool_nodes_ > 0; }

 private:
  struct NodeState {
    bool decided = false;
    Mode mode = Mode::kPool;
    int samples[2] = {0, 0};
    int64_t fastest[2] = {0, 0};
    int64_t recheck_interval = kFirstRecheck;
    int64_t runs_to_recheck = 0;  // while decided
    int64_t recheck_at_nanos = 0;  // while decided alone: when to time it again regardless
  };

  std::vector<NodeState> nodes_;
  size_t undecided_ = nodes_.size();
  size_t pool_nodes_ = 0;  // decided nodes whose mode is kPool
  int64_t now_nanos_ = 0;  // BeginRun's
};

}  // namespace tessera::engine
