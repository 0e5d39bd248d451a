// Graph queries and edits the passes share (graph_passes.cc, cpu_fusion_passes.cc). Internal to
// the engine.
#pragma once

#include <vector>

#include "engine/graph.h"

namespace tessera::engine::pass_util {

// How many node inputs read each value (graph outputs count as one more reader each).
std::vector<int> ReaderCounts(const Graph& graph);
// The index of the node producing each value, or -1.
std::vector<int> Producers(const Graph& graph);
// Drops the nodes marked in `remove` (indexed like graph->nodes), keeping the order of the rest.
void EraseMarked(const std::vector<bool>& remove, Graph* graph);
// A constant FP32 scalar (any rank, one element), or false.
bool ConstantScalar(const Graph& graph, int id, float* value);
// The value id a two-input node combines with `id`, or kNoValue (also when `id` is not an input).
int OtherInput(const Node& node, int id);
// Gives a node the attributes (graph_passes.h) of a fused Relu, or of a fused Clip with constant
// bounds; false, setting nothing, for anything else.
bool SetFusedActivation(const Graph& graph, const Node& act, Attributes* attributes);

}  // namespace tessera::engine::pass_util
