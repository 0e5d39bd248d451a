#include "engine/cpu_activation_plan.h"

#include <algorithm>
#include <utility>

#include "engine/memory_planner.h"

namespace tessera::engine {
namespace {

// Gives outputs of nodes whose kernel can write over an input (OpDef::in_place_input) that
// input's buffer where nothing reads it afterwards: `root` (per value, the buffer it uses) and
// `last` (per buffer, its last reading step) are updated.
void ShareInPlaceBuffers(const Graph& graph, const std::vector<const cpu::OpDef*>& ops,
                         const Recording& recording, std::vector<int>* root,
                         std::vector<int>* last) {
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    const int j = ops[n]->in_place_input;
    if (j < 0 || static_cast<size_t>(j) >= node.inputs.size() || node.outputs.empty()) continue;
    const int in = node.inputs[j], out = node.outputs[0];
    if (in == kNoValue || (*root)[in] < 0 || (*root)[out] != out) continue;
    const int buffer = (*root)[in];
    // The input's bytes must be free after this node, of the output's size, and read by no other
    // input of it (a Conv reading X while its output overwrote X would read its own results).
    if ((*last)[buffer] != static_cast<int>(n) || recording.bytes[buffer] != recording.bytes[out]) {
      continue;
    }
    bool read_otherwise = false;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const int other = node.inputs[k];
      if (k != static_cast<size_t>(j) && other != kNoValue && (*root)[other] == buffer) {
        read_otherwise = true;
      }
    }
    if (read_otherwise) continue;
    for (int& r : *root) {
      if (r == out) r = buffer;
    }
    (*last)[buffer] = std::max((*last)[buffer], (*last)[out]);
    (*last)[out] = -1;
  }
}

}  // namespace

StatusOr<std::shared_ptr<const ActivationPlan>> BuildActivationPlan(
    const Graph& graph, const std::vector<const cpu::OpDef*>& ops, const std::vector<int>& last_use,
    const std::vector<bool>& keep, const Recording& recording) {
  const int num_steps = static_cast<int>(graph.nodes.size());
  const size_t values = recording.root.size();
  // Lifetime of each allocated buffer: from its producer to the last reader of any alias of it.
  // Graph outputs live to the end: they are copied out after the last node.
  std::vector<int> root = recording.root;
  std::vector<int> last(values, -1);
  for (size_t v = 0; v < values; ++v) {
    if (root[v] < 0) continue;
    const int until = keep[v] ? num_steps : last_use[v];
    last[root[v]] = std::max({last[root[v]], until, recording.def_step[root[v]]});
  }
  ShareInPlaceBuffers(graph, ops, recording, &root, &last);
  std::vector<BufferRequest> requests;
  std::vector<int> ids;
  for (size_t v = 0; v < values; ++v) {
    if (root[v] != static_cast<int>(v) || recording.bytes[v] == 0) continue;
    requests.push_back(BufferRequest{recording.bytes[v], recording.def_step[v], last[v]});
    ids.push_back(static_cast<int>(v));
  }
  TESSERA_ASSIGN_OR_RETURN(ArenaPlan arena, PlanArena(requests));
  auto plan = std::make_shared<ActivationPlan>();
  plan->offset.assign(values, -1);
  plan->bytes.assign(values, 0);
  for (size_t r = 0; r < ids.size(); ++r) {
    plan->offset[ids[r]] = static_cast<int64_t>(arena.offsets[r]);
    plan->bytes[ids[r]] = requests[r].bytes;
  }
  // An output that took over an input's buffer is placed there.
  for (size_t v = 0; v < values; ++v) {
    if (recording.root[v] == static_cast<int>(v) && root[v] != static_cast<int>(v)) {
      plan->offset[v] = plan->offset[root[v]];
      plan->bytes[v] = recording.bytes[v];
    }
  }
  plan->arena_bytes = arena.arena_bytes;
  plan->naive_bytes = arena.naive_bytes;
  plan->num_values = static_cast<int>(ids.size());
  plan->parallelism = NodeParallelism(graph.nodes.size());
  return std::shared_ptr<const ActivationPlan>(std::move(plan));
}

}  // namespace tessera::engine
