// The CPU model's activation plan for one tuple of input shapes: from what the first Run with
// those shapes recorded (each kernel-allocated value's size and producer, and which values are
// aliases of which), where every activation goes in one reused arena (memory_planner.h), with
// outputs that may overwrite an input (cpu/ops.h OpDef::in_place_input) placed in its bytes when
// nothing reads them afterwards.
//
// Thread-safety: BuildActivationPlan is a pure function; a plan is read-only but for its
// NodeParallelism, which the Model's one Run at a time updates.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/graph.h"
#include "engine/node_parallelism.h"
#include "tessera/common/status.h"

namespace tessera::engine {

// What a Run without a plan learns about each value, so a plan can be built from it.
struct Recording {
  explicit Recording(size_t values) : bytes(values, 0), root(values, -1), def_step(values, -1) {}
  std::vector<uint64_t> bytes;  // per value: bytes its kernel allocated with NewOutput, else 0
  std::vector<int> root;        // per value: the allocated value whose bytes it uses, or -1
  std::vector<int> def_step;    // per value: the node index that produced it
};

// Where each activation lives in the arena for one tuple of input shapes.
struct ActivationPlan {
  std::vector<int64_t> offset;  // per value id: arena offset, or -1 when not in the arena
  std::vector<uint64_t> bytes;  // per value id: planned bytes (when offset >= 0)
  uint64_t arena_bytes = 0;
  uint64_t naive_bytes = 0;
  int num_values = 0;
  // Which nodes of a Run with these shapes get the pool. Changed by Run as it times them, on a
  // plan otherwise read-only: Run has one caller at a time, and a plan belongs to one Model.
  mutable NodeParallelism parallelism{0};
};

// The plan for `recording` of a Run of `graph` whose node n runs `ops[n]`; `last_use` (per value,
// the last node reading it, or -1) and `keep` (per value, a graph output: lives to the end) are the
// Model's.
StatusOr<std::shared_ptr<const ActivationPlan>> BuildActivationPlan(
    const Graph& graph, const std::vector<const cpu::OpDef*>& ops, const std::vector<int>& last_use,
    const std::vector<bool>& keep, const Recording& recording);

}  // namespace tessera::engine
