#include "engine/cuda/cuda_support.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cpu/ops.h"
#include "engine/cuda/cuda_model.h"
#include "engine/graph_passes.h"

namespace tessera::engine::cuda {

StatusOr<NodePlacement> PlaceNodes(const Graph& graph) {
  const size_t values = graph.value_names.size();
  NodePlacement out;
  out.place.assign(values, Place::kDevice);
  for (size_t v = 0; v < values; ++v) {
    if (graph.IsConstant(static_cast<int>(v))) out.place[v] = Place::kConstant;
  }
  std::vector<bool> on_device(values, false);  // graph inputs and device nodes' outputs
  for (size_t v = 0; v < values; ++v) on_device[v] = out.place[v] == Place::kDevice;
  std::vector<std::string> problems;
  for (const Node& node : graph.nodes) {
    bool host = node.op_type == "Shape";
    if (!host) {
      host = true;
      for (int id : node.inputs) {
        if (id != kNoValue && out.place[id] == Place::kDevice) host = false;
      }
    }
    out.host_node.push_back(host);
    out.ops.push_back(host ? nullptr : FindCudaOp(node.op_type));
    for (int id : node.outputs) {
      if (id == kNoValue) continue;
      out.place[id] = host ? Place::kHost : Place::kDevice;
      on_device[id] = !host;
    }
    if (host) {
      if (cpu::FindOp(node.op_type, /*onednn=*/false) == nullptr) {
        // Graphs from files only hold ops the CPU has; a graph built otherwise may not.
        problems.push_back(absl::StrCat(node.Describe(graph.value_names),
                                        ": runs on the host (its inputs are host-known) but the "
                                        "CPU has no kernel for ",
                                        node.op_type));
      }
      continue;
    }
    const CudaOpDef* op = out.ops.back();
    if (op == nullptr) {
      problems.push_back(
          absl::StrCat(node.Describe(graph.value_names), ": no CUDA kernel for ", node.op_type));
    } else if (op->check != nullptr) {
      const std::string why = op->check(CheckCtx{node, graph, on_device});
      if (!why.empty())
        problems.push_back(absl::StrCat(node.Describe(graph.value_names), ": ", why));
    }
  }
  if (!problems.empty()) {
    return absl::UnimplementedError(
        absl::StrCat("unsupported by the CUDA backend: ", absl::StrJoin(problems, "; ")));
  }
  return out;
}

void PrepareCudaGraph(Graph* graph) {
  // The CPU model's epilogue fusions (graph_passes.h) pay here too: a MatMul's bias Add and GELU
  // become one pass over the product, a Conv's residual Add and Relu go into the convolution's
  // epilogue (cuDNN's z input), saving several passes over the largest activations.
  // TESSERA_CUDA_EPILOGUES=0 leaves them out (docs/engine-cuda.md: for comparisons).
  const char* epilogue_env = std::getenv("TESSERA_CUDA_EPILOGUES");
  if (epilogue_env != nullptr && std::string(epilogue_env) == "0") return;
  const int epilogues = FuseMatMulEpilogues(graph);
  const int residuals = FuseConvResidual(graph);
  if (residuals > 0) FuseConvActivation(graph);
  if (epilogues + residuals > 0) RemoveDeadNodes(graph);
}

}  // namespace tessera::engine::cuda

namespace tessera::engine {

Status CheckCudaSupport(Graph graph) {
  cuda::PrepareCudaGraph(&graph);
  return cuda::PlaceNodes(graph).status();
}

}  // namespace tessera::engine
