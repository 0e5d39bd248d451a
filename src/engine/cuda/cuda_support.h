// Where each node of a graph runs under the CUDA backend, and whether the backend supports it: the
// part of loading that needs the graph alone, no device. CudaModel::Init builds on it; so does
// CheckCudaSupport (cuda_model.h), which tells on any machine whether a model would load on CUDA.
#pragma once

#include <vector>

#include "engine/cuda/cuda_ops.h"
#include "engine/graph.h"
#include "tessera/common/status.h"

namespace tessera::engine::cuda {

enum class Place { kDevice, kHost, kConstant };

struct NodePlacement {
  std::vector<Place> place;           // per value id
  std::vector<bool> host_node;        // per node
  std::vector<const CudaOpDef*> ops;  // per node; null for host nodes
};

// A node runs on the HOST (with the CPU kernel, at planning time) when it is Shape or all its
// inputs are host-known (constants or other host values): the INT64 shape arithmetic of PyTorch
// exports. Every other node runs on the device and needs a CUDA op whose load check passes.
// UNIMPLEMENTED lists every node that cannot run, as `node "name" (Op): why`.
StatusOr<NodePlacement> PlaceNodes(const Graph& graph);

// What planning one tuple of input shapes finds, before any buffer is placed.
struct NodePlans {
  std::vector<ValueMeta> meta;     // per value id; a host value's `host` points into host_values
  std::vector<Value> host_values;  // per value id: contents of host values
  std::vector<NodeState> states;   // per node
};

// Plans every node for `input_shapes` (one per graph input, in order): host nodes run on the CPU
// kernels, each device op's plan step fills its outputs' metas and its state. Launches nothing
// and touches no device memory; with device.shapes_only it needs no device at all. Errors name
// the node.
Status PlanNodes(const Graph& graph, const NodePlacement& placement, const Device& device,
                 const std::vector<Shape>& input_shapes, NodePlans* plans);

// UNIMPLEMENTED naming a STRING (BYTES) tensor of the graph, if it has one: the CUDA backend has
// no string kernels, and such models run on the CPU backend (engine/string_tensor.h).
Status RefuseStringTensors(const Graph& graph);

// The graph passes the CUDA backend applies before placing (the epilogue fusions; see
// cuda_model.cc). TESSERA_CUDA_EPILOGUES=0 leaves them out.
void PrepareCudaGraph(Graph* graph);

}  // namespace tessera::engine::cuda
