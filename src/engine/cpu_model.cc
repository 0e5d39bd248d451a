// The CPU implementation of Model and LoadOnnxModel: import, check every node against its kernel,
// fold constant subgraphs, then interpret the remaining nodes in order on each Run.
#include <cstring>
#include <memory>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cpu/ops.h"
#include "engine/graph.h"
#include "engine/onnx_import.h"
#include "engine/thread_pool.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {
namespace {

Status Prefixed(const Status& status, const std::string& prefix) {
  return Status(status.code(), absl::StrCat(prefix, ": ", status.message()));
}

// Runs every node whose inputs are all constants (weights, Constant nodes, shapes derived from
// them) once, at load, and keeps its outputs as constants. What stays is the data-dependent part.
Status FoldConstants(Graph* graph) {
  std::vector<Node> remaining;
  cpu::OpContext ctx;  // single-threaded: folded subgraphs are small
  for (Node& node : graph->nodes) {
    bool foldable = true;
    cpu::Inputs inputs;
    for (int id : node.inputs) {
      if (id == kNoValue) {
        inputs.push_back(nullptr);
      } else if (graph->IsConstant(id)) {
        inputs.push_back(&*graph->constants[id]);
      } else {
        foldable = false;
        break;
      }
    }
    if (!foldable) {
      remaining.push_back(std::move(node));
      continue;
    }
    std::vector<Value> outputs(node.outputs.size());
    Status status = cpu::FindOp(node.op_type)->run(ctx, node, inputs, &outputs);
    if (!status.ok()) return Prefixed(status, node.Describe(graph->value_names));
    for (size_t i = 0; i < outputs.size(); ++i) graph->constants[node.outputs[i]] = outputs[i];
  }
  graph->nodes = std::move(remaining);
  return absl::OkStatus();
}

class CpuModel final : public Model {
 public:
  CpuModel(Graph graph, int num_threads)
      : graph_(std::move(graph)), pool_(std::make_unique<ThreadPool>(num_threads)) {
    const size_t values = graph_.value_names.size();
    last_use_.assign(values, -1);
    keep_.assign(values, false);
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      ops_.push_back(cpu::FindOp(graph_.nodes[n].op_type));
      for (int id : graph_.nodes[n].inputs) {
        if (id != kNoValue) last_use_[id] = static_cast<int>(n);
      }
    }
    for (int id : graph_.output_ids) keep_[id] = true;
    weight_bytes_ = graph_.ConstantBytes();
  }

  const std::vector<TensorInfo>& inputs() const override { return graph_.inputs; }
  const std::vector<TensorInfo>& outputs() const override { return graph_.outputs; }
  uint64_t weight_bytes() const override { return weight_bytes_; }

  Status Run(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs) override {
    try {
      return RunImpl(inputs, outputs);
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of memory allocating activations");
    }
  }

 private:
  Status ValidateInputs(const std::vector<TensorView>& views, std::vector<Value>* slots) const;
  Status RunImpl(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs);

  const Value* Lookup(const std::vector<Value>& slots, int id) const {
    if (graph_.IsConstant(id)) return &*graph_.constants[id];
    return slots[id].defined() ? &slots[id] : nullptr;
  }

  const Graph graph_;
  std::vector<const cpu::OpDef*> ops_;  // parallel to graph_.nodes
  std::vector<int> last_use_;           // per value: index of the last node reading it, or -1
  std::vector<bool> keep_;              // per value: a graph output, never released early
  uint64_t weight_bytes_ = 0;
  std::unique_ptr<ThreadPool> pool_;
};

Status CpuModel::ValidateInputs(const std::vector<TensorView>& views,
                                std::vector<Value>* slots) const {
  std::vector<bool> seen(graph_.inputs.size(), false);
  for (const TensorView& view : views) {
    size_t index = 0;
    while (index < graph_.inputs.size() && graph_.inputs[index].name != view.name) ++index;
    if (index == graph_.inputs.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected input \"", view.name, "\": the model has no such input"));
    }
    if (seen[index]) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", view.name, "\" given twice"));
    }
    seen[index] = true;
    const TensorInfo& info = graph_.inputs[index];
    if (view.dtype != info.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input \"", view.name, "\" has data type ", TypeName(view.dtype),
          ", expected ", TypeName(info.dtype)));
    }
    bool shape_ok = !graph_.input_rank_known[index] || view.shape.size() == info.shape.size();
    for (size_t d = 0; d < view.shape.size(); ++d) {
      if (view.shape[d] < 0) shape_ok = false;
      if (shape_ok && graph_.input_rank_known[index] && info.shape[d] >= 0 &&
          info.shape[d] != view.shape[d]) {
        shape_ok = false;
      }
    }
    if (!shape_ok) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", view.name, "\" has shape ",
                                                     ShapeToString(view.shape), ", expected ",
                                                     ShapeToString(info.shape),
                                                     " (-1 = any size)"));
    }
    const size_t expected_bytes =
        static_cast<size_t>(ElementCount(view.shape)) * DataTypeByteSize(view.dtype);
    if (view.byte_size != expected_bytes || (expected_bytes > 0 && view.data == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", view.name, "\" has ",
                                                     view.byte_size, " bytes, expected ",
                                                     expected_bytes, " for shape ",
                                                     ShapeToString(view.shape)));
    }
    (*slots)[graph_.input_ids[index]] = Value::Borrow(view.dtype, view.shape, view.data);
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing input \"", graph_.inputs[i].name, "\""));
    }
  }
  return absl::OkStatus();
}

Status CpuModel::RunImpl(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs) {
  // Memory planner goes here: today every activation is a fresh allocation, freed after its last
  // reader (last_use_). A planner would assign each value an offset in one arena per batch size
  // from the same liveness intervals, so a Run allocates nothing.
  std::vector<Value> slots(graph_.value_names.size());
  TESSERA_RETURN_IF_ERROR(ValidateInputs(inputs, &slots));

  cpu::OpContext ctx;
  ctx.pool = pool_.get();
  cpu::Inputs node_inputs;
  std::vector<Value> node_outputs;
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    const Node& node = graph_.nodes[n];
    node_inputs.clear();
    for (int id : node.inputs) {
      const Value* v = id == kNoValue ? nullptr : Lookup(slots, id);
      if (id != kNoValue && v == nullptr) {
        return absl::InternalError(absl::StrCat(node.Describe(graph_.value_names), ": input \"",
                                                graph_.value_names[id], "\" was never computed"));
      }
      node_inputs.push_back(v);
    }
    node_outputs.assign(node.outputs.size(), Value());
    Status status = ops_[n]->run(ctx, node, node_inputs, &node_outputs);
    if (!status.ok()) return Prefixed(status, node.Describe(graph_.value_names));
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      slots[node.outputs[i]] = std::move(node_outputs[i]);
    }
    for (int id : node.inputs) {
      if (id != kNoValue && last_use_[id] == static_cast<int>(n) && !keep_[id]) slots[id] = Value();
    }
  }

  outputs->clear();
  for (size_t i = 0; i < graph_.output_ids.size(); ++i) {
    const Value* v = Lookup(slots, graph_.output_ids[i]);
    const TensorInfo& info = graph_.outputs[i];
    if (v == nullptr || v->dtype() != info.dtype) {
      return absl::InternalError(absl::StrCat("output \"", info.name, "\" was not computed as ",
                                              TypeName(info.dtype)));
    }
    Tensor tensor;
    tensor.name = info.name;
    tensor.dtype = v->dtype();
    tensor.shape = v->shape();
    const auto* data = v->data<std::byte>();
    tensor.bytes.assign(data, data + v->byte_size());
    outputs->push_back(std::move(tensor));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<Model>> LoadOnnxModel(const std::string& path,
                                               const ModelOptions& options) {
  if (options.backend != Backend::kCpu) {
    return absl::UnimplementedError("only the CPU backend is available in this build");
  }
  try {
    TESSERA_ASSIGN_OR_RETURN(
        Graph graph, ImportOnnxModel(path, [](const std::string& op) {
          return cpu::FindOp(op) != nullptr;
        }));
    // Every node the kernels cannot run as configured, reported together.
    std::vector<std::string> problems;
    // Ops whose opset 1..6 semantics equal today's; the others had legacy attributes then
    // (`broadcast`, `consumed_inputs`, Reshape's `shape`) that the kernels do not implement.
    static const std::unordered_set<std::string> kStableSinceOpset1 = {
        "GlobalAveragePool", "Relu", "Sigmoid", "Tanh", "Identity", "Transpose", "Flatten",
        "MatMul", "Softmax", "Shape", "Gather", "MaxPool", "AveragePool", "Squeeze", "Unsqueeze"};
    for (const Node& node : graph.nodes) {
      if (graph.opset < 7 && kStableSinceOpset1.count(node.op_type) == 0) {
        problems.push_back(absl::StrCat(node.Describe(graph.value_names), ": opset ", graph.opset,
                                        " semantics are not supported (need opset >= 7)"));
        continue;
      }
      const cpu::OpDef* op = cpu::FindOp(node.op_type);
      if (op->check == nullptr) continue;
      Status status = op->check(node, graph);
      if (!status.ok()) {
        problems.push_back(absl::StrCat(node.Describe(graph.value_names), ": ", status.message()));
      }
    }
    if (!problems.empty()) {
      return absl::UnimplementedError(
          absl::StrCat(path, ": unsupported node configuration: ", absl::StrJoin(problems, "; ")));
    }
    Status folded = FoldConstants(&graph);
    if (!folded.ok()) return Prefixed(folded, path);
    return std::unique_ptr<Model>(
        std::make_unique<CpuModel>(std::move(graph), std::max(1, options.num_threads)));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(path, ": out of memory loading the model"));
  }
}

}  // namespace tessera::engine
