#include "engine/prepare_cpu_graph.h"

#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cpu/ops.h"
#include "engine/graph_passes.h"
#include "engine/onnx_import.h"
#include "spdlog/spdlog.h"

namespace tessera::engine {
namespace {

Status Prefixed(const Status& status, const std::string& prefix) {
  return Status(status.code(), absl::StrCat(prefix, ": ", status.message()));
}

}  // namespace

StatusOr<Graph> PrepareCpuGraph(const std::string& path, const std::vector<std::string>& kept) {
  TESSERA_ASSIGN_OR_RETURN(Graph graph, ImportOnnxModel(path, [](const std::string& op) {
                             return cpu::FindOp(op) != nullptr;
                           }));
  if (Status status = KeepInitializerInputs(kept, &graph); !status.ok()) {
    return Prefixed(status, path);
  }
  // Every node the kernels cannot run as configured, and every one that is invalid, reported
  // together.
  std::vector<std::string> problems;
  std::vector<std::string> invalid;
  // Ops whose opset 1..6 semantics equal today's; the others had legacy attributes then
  // (`broadcast`, `consumed_inputs`, Reshape's `shape`) that the kernels do not implement.
  static const std::unordered_set<std::string> kStableSinceOpset1 = {
      "GlobalAveragePool", "Relu", "Sigmoid", "Tanh", "Identity", "Transpose", "Flatten", "MatMul",
      "Softmax", "Shape", "Gather", "MaxPool", "AveragePool", "Squeeze", "Unsqueeze", "Not",
      "GlobalMaxPool", "Size", "SpaceToDepth", "DepthToSpace", "TopK", "LRN",
      // Version 1 differs only by the legacy consumed_inputs attribute.
      "InstanceNormalization",

      // LogSoftmax and Hardmax read their pre-13 axis semantics from the node's opset.
      "Softplus", "Softsign", "LogSoftmax", "Hardmax", "ArgMax", "ArgMin", "ReduceProd", "ReduceL1",
      "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};
  // Ops whose opset-6 version (which dropped `consumed_inputs`) equals today's.
  static const std::unordered_set<std::string> kStableSinceOpset6 = {"Abs", "Ceil", "Floor",
                                                                     "Log", "Elu",  "Selu"};
  for (const Node& node : graph.nodes) {
    if (graph.opset < 7 && kStableSinceOpset1.count(node.op_type) == 0 &&
        !(graph.opset == 6 && kStableSinceOpset6.count(node.op_type) != 0)) {
      problems.push_back(absl::StrCat(node.Describe(graph.value_names), ": opset ", graph.opset,
                                      " semantics are not supported (need opset >= 7)"));
      continue;
    }
    const cpu::OpDef* op = cpu::FindOp(node.op_type);
    if (op->check == nullptr) continue;
    Status status = op->check(node, graph);
    if (!status.ok()) {
      (status.code() == absl::StatusCode::kInvalidArgument ? invalid : problems)
          .push_back(absl::StrCat(node.Describe(graph.value_names), ": ", status.message()));
    }
  }
  // A node that breaks the operator's spec makes the file invalid, whatever else is unsupported.
  if (!invalid.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": invalid node: ", absl::StrJoin(invalid, "; ")));
  }
  if (!problems.empty()) {
    return absl::UnimplementedError(
        absl::StrCat(path, ": unsupported node configuration: ", absl::StrJoin(problems, "; ")));
  }
  GraphPassOptions options;
  options.fuse_qdq_convs = cpu::FastQLinearConv();
  options.fuse_qdq_adds = true;
  StatusOr<PassSummary> passes = RunGraphPasses(&graph, options);
  if (!passes.ok()) return Prefixed(passes.status(), path);
  // Typed now: a STRING value reaching a kernel without string support is refused at load.
  if (Status strings = cpu::CheckStringUse(graph); !strings.ok()) return Prefixed(strings, path);
  spdlog::info("{}: graph passes: {}", path, passes->ToString());
  return graph;
}

}  // namespace tessera::engine
