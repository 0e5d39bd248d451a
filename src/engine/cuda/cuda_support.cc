#include "engine/cuda/cuda_support.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cpu/ops.h"
#include "engine/cuda/cuda_model.h"
#include "engine/cuda/cuda_model_impl.h"
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

Status PlanNodes(const Graph& graph, const NodePlacement& placement, const Device& device,
                 const std::vector<Shape>& input_shapes, NodePlans* plans) {
  const size_t values = graph.value_names.size();
  plans->meta.assign(values, ValueMeta{});
  plans->host_values.assign(values, Value());
  plans->states.assign(graph.nodes.size(), NodeState{});
  for (size_t v = 0; v < values; ++v) {
    if (placement.place[v] != Place::kConstant) continue;
    const Value& c = *graph.constants[v];
    plans->meta[v] = ValueMeta{c.dtype(), c.shape(), &c};
  }
  if (input_shapes.size() != graph.input_ids.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(input_shapes.size(), " input shapes for ", graph.input_ids.size(), " inputs"));
  }
  for (size_t i = 0; i < graph.input_ids.size(); ++i) {
    plans->meta[graph.input_ids[i]] = ValueMeta{graph.inputs[i].dtype, input_shapes[i], nullptr};
  }
  cpu::OpContext host_ctx;  // single-threaded: host nodes are shape-sized
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (placement.host_node[n]) {
      cpu::Inputs inputs;
      std::vector<Value> borrowed(node.inputs.size());  // device inputs: shape only (Shape op)
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        const int id = node.inputs[j];
        if (id == kNoValue) {
          inputs.push_back(nullptr);
        } else if (plans->meta[id].host != nullptr) {
          inputs.push_back(plans->meta[id].host);
        } else {
          borrowed[j] = Value::Borrow(plans->meta[id].dtype, plans->meta[id].shape, nullptr);
          inputs.push_back(&borrowed[j]);
        }
      }
      std::vector<Value> outputs(node.outputs.size());
      // The own (stateless, row-major) CPU kernels, as constant folding uses: oneDNN's variants
      // may want a KernelState this backend never makes. PlaceNodes checked that one exists.
      Status status =
          cpu::FindOp(node.op_type, /*onednn=*/false)->run(host_ctx, node, inputs, &outputs);
      if (!status.ok()) return Prefixed(status, node.Describe(graph.value_names));
      for (size_t j = 0; j < outputs.size(); ++j) {
        const int id = node.outputs[j];
        plans->host_values[id] = std::move(outputs[j]);
        const Value& h = plans->host_values[id];
        plans->meta[id] = ValueMeta{h.dtype(), h.shape(), &h};
      }
      continue;
    }
    std::vector<ValueMeta> out(node.outputs.size());
    PlanCtx ctx{node, device, {}, &out, &plans->states[n]};
    for (int id : node.inputs) ctx.in.push_back(id == kNoValue ? nullptr : &plans->meta[id]);
    Status status = placement.ops[n]->plan(ctx);
    if (!status.ok()) return Prefixed(status, node.Describe(graph.value_names));
    for (size_t j = 0; j < out.size(); ++j) plans->meta[node.outputs[j]] = std::move(out[j]);
  }
  return absl::OkStatus();
}

Status RefuseStringTensors(const Graph& graph) {
  if (std::optional<std::string> name = FindStringTensor(graph)) {
    return absl::UnimplementedError(
        absl::StrCat("the model has BYTES (string) tensor '", *name,
                     "'; string tensors run on the CPU backend only (instance_group kind: KIND_CPU "
                     "puts the model there)"));
  }
  return absl::OkStatus();
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

Status CheckCudaSupport(Graph graph, const std::vector<Shape>* input_shapes,
                        std::vector<Shape>* output_shapes) {
  TESSERA_RETURN_IF_ERROR(cuda::RefuseStringTensors(graph));
  cuda::PrepareCudaGraph(&graph);
  TESSERA_ASSIGN_OR_RETURN(cuda::NodePlacement placement, cuda::PlaceNodes(graph));
  if (input_shapes == nullptr) return absl::OkStatus();
  cuda::Device device;
  device.shapes_only = true;
  cuda::NodePlans plans;
  Status status = cuda::PlanNodes(graph, placement, device, *input_shapes, &plans);
  if (!status.ok()) {
    return Status(status.code(),
                  absl::StrCat("planning the CUDA backend for input shapes: ", status.message()));
  }
  if (output_shapes != nullptr) {
    output_shapes->clear();
    for (int id : graph.output_ids) output_shapes->push_back(plans.meta[id].shape);
  }
  return absl::OkStatus();
}

}  // namespace tessera::engine
