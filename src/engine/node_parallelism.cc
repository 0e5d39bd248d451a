#include "engine/node_parallelism.h"

#include <algorithm>

namespace tessera::engine {

void NodeParallelism::BeginRun(int64_t now_nanos) {
  now_nanos_ = now_nanos;
  for (NodeState& node : nodes_) {
    if (!node.decided) continue;
    const bool aged =
        node.mode == Mode::kAlone && now_nanos_ > 0 && now_nanos_ >= node.recheck_at_nanos;
    if (--node.runs_to_recheck > 0 && !aged) continue;
    node.decided = false;
    node.samples[0] = node.samples[1] = 0;
    ++undecided_;
    if (node.mode == Mode::kPool) --pool_nodes_;
  }
}

NodeParallelism::Mode NodeParallelism::Next(size_t n, bool* timed) {
  NodeState& node = nodes_[n];
  *timed = !node.decided;
  if (node.decided) return node.mode;
  const int pool = static_cast<int>(Mode::kPool), alone = static_cast<int>(Mode::kAlone);
  return node.samples[pool] <= node.samples[alone] ? Mode::kPool : Mode::kAlone;
}

void NodeParallelism::Record(size_t n, Mode mode, int64_t nanos) {
  NodeState& node = nodes_[n];
  if (node.decided) return;
  const int m = static_cast<int>(mode);
  if (node.samples[m] == 0 || nanos < node.fastest[m]) node.fastest[m] = nanos;
  ++node.samples[m];
  const int pool = static_cast<int>(Mode::kPool), alone = static_cast<int>(Mode::kAlone);
  if (node.samples[pool] < kSamples || node.samples[alone] < kSamples) return;
  node.decided = true;
  node.mode = static_cast<double>(node.fastest[alone]) <=
                      kPoolMargin * static_cast<double>(node.fastest[pool])
                  ? Mode::kAlone
                  : Mode::kPool;
  if (node.mode == Mode::kPool) ++pool_nodes_;
  node.runs_to_recheck = node.recheck_interval;
  node.recheck_at_nanos = now_nanos_ + kAloneRecheckNanos;
  node.recheck_interval = std::min(kMaxRecheck, 4 * node.recheck_interval);
  --undecided_;
}

}  // namespace tessera::engine
