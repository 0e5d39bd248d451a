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

// The graph passes the CUDA backend applies before placing (the epilogue fusions; see
// cuda_model.cc). TESSERA_CUDA_EPILOGUES=0 leaves them out.
void PrepareCudaGraph(Graph* graph);

}  // namespace tessera::engine::cuda
