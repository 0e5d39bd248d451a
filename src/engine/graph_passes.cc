// The pass pipeline of graph_passes.h, except shape inference and shape-subgraph folding, which
// live in shape_inference.cc, and the CPU-only fusions, in cpu_fusion_passes.cc.
#include "engine/graph_passes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"
#include "engine/graph_pass_util.h"
#include "spdlog/spdlog.h"

namespace tessera::engine {
namespace pass_util {

std::vector<int> ReaderCounts(const Graph& graph) {
  std::vector<int> readers(graph.value_names.size(), 0);
  for (const Node& node : graph.nodes) {
    for (int id : node.inputs) {
      if (id != kNoValue) ++readers[id];
    }
  }
  for (int id : graph.output_ids) ++readers[id];
  return readers;
}

std::vector<int> Producers(const Graph& graph) {
  std::vector<int> producer(graph.value_names.size(), -1);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (int id : graph.nodes[n].outputs) producer[id] = static_cast<int>(n);
  }
  return producer;
}

void EraseMarked(const std::vector<bool>& remove, Graph* graph) {
  std::vector<Node> kept;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    if (!remove[n]) kept.push_back(std::move(graph->nodes[n]));
  }
  graph->nodes = std::move(kept);
}

bool ConstantScalar(const Graph& graph, int id, float* value) {
  if (id == kNoValue || !graph.IsConstant(id)) return false;
  const Value& v = *graph.constants[id];
  if (v.dtype() != DataType::kFp32 || v.num_elements() != 1) return false;
  *value = v.data<float>()[0];
  return true;
}

int OtherInput(const Node& node, int id) {
  if (node.inputs.size() != 2) return kNoValue;
  if (node.inputs[0] == id) return node.inputs[1];
  return node.inputs[1] == id ? node.inputs[0] : kNoValue;
}

// A Clip's bound: attribute (opset < 11) or constant scalar input; false when not constant.
static bool ClipBound(const Graph& graph, const Node& clip, size_t input, const char* attr,
                      float fallback, float* bound) {
  *bound = clip.attributes.GetFloat(attr, fallback);
  if (input >= clip.inputs.size() || clip.inputs[input] == kNoValue) return true;
  const int id = clip.inputs[input];
  if (!graph.IsConstant(id)) return false;
  const Value& v = *graph.constants[id];
  if (v.dtype() != DataType::kFp32 || v.num_elements() != 1) return false;
  *bound = v.data<float>()[0];
  return true;
}

bool SetFusedActivation(const Graph& graph, const Node& act, Attributes* attributes) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  Attribute kind;
  kind.kind = Attribute::Kind::kString;
  kind.s = act.op_type;
  if (act.op_type == "Clip") {
    Attribute lo, hi;
    lo.kind = hi.kind = Attribute::Kind::kFloat;
    if (!ClipBound(graph, act, 1, "min", -kInf, &lo.f) ||
        !ClipBound(graph, act, 2, "max", kInf, &hi.f)) {
      return false;
    }
    attributes->Set("tessera_clip_min", lo);
    attributes->Set("tessera_clip_max", hi);
  } else if (act.op_type != "Relu") {
    return false;
  }
  attributes->Set("tessera_activation", kind);
  return true;
}

}  // namespace pass_util

namespace {

using pass_util::ConstantScalar;
using pass_util::EraseMarked;
using pass_util::OtherInput;
using pass_util::Producers;
using pass_util::ReaderCounts;

const Value* ConstantFp32(const Graph& graph, int id, int64_t elements) {
  if (id == kNoValue || !graph.IsConstant(id)) return nullptr;
  const Value& v = *graph.constants[id];
  if (v.dtype() != DataType::kFp32 || v.rank() != 1 || v.num_elements() != elements) {
    return nullptr;
  }
  return &v;
}

// Dynamic batch check of graph_passes.h: the first Reshape hard-coding a literal leading size for
// an input whose dim 0 is the batch. Returns that size (0 = none) and names the node.
int64_t FindPinnedBatch(const Graph& graph, std::string* node_name) {
  for (const Node& node : graph.nodes) {
    if (node.op_type != "Reshape" || node.inputs.size() < 2 || !graph.IsConstant(node.inputs[1])) {
      continue;
    }
    const auto& x = graph.shapes[node.inputs[0]];
    const Value& target = *graph.constants[node.inputs[1]];
    if (!x || x->empty() || (*x)[0] != kBatchDim || target.dtype() != DataType::kInt64 ||
        target.num_elements() == 0) {
      continue;
    }
    const int64_t first = target.data<int64_t>()[0];
    if (first > 0) {
      *node_name = node.Describe(graph.value_names);
      return first;
    }
  }
  return 0;
}

}  // namespace

std::string PassSummary::ToString() const {
  return absl::StrCat(
      nodes_before, " -> ", nodes_after, " nodes: ", constant_folded, " constant-folded, ",
      shape_values_folded, " shape values folded, ", reshapes_rewritten,
      " reshape targets made static, ", dead_removed, " dead removed, ", batchnorms_folded,
      " BatchNorms folded into Conv, ", activations_fused, " activations fused, ", layernorms_fused,
      " LayerNorms fused, ", gemm_weights_transposed, " Gemm weights transposed",
      qdq_convs_fused == 0 ? ""
                           : absl::StrCat(", ", qdq_convs_fused, " QDQ Convs made QLinearConv"),
      qdq_adds_fused == 0 ? "" : absl::StrCat(", ", qdq_adds_fused, " QDQ Adds made QLinearAdd"),
      batch_pinned_by.empty() ? "" : absl::StrCat("; batch pinned by ", batch_pinned_by));
}

StatusOr<int> FoldConstants(Graph* graph) {
  std::vector<Node> remaining;
  cpu::OpContext ctx;  // single-threaded: folded subgraphs are small
  StringArena strings;  // only until the folded STRING values own their strings (below)
  ctx.strings = &strings;
  int folded = 0;
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
    const cpu::OpDef* op = cpu::FindOp(node.op_type, /*onednn=*/false);  // row-major constants
    if (!foldable || op == nullptr) {
      remaining.push_back(std::move(node));
      continue;
    }
    std::vector<Value> outputs(node.outputs.size());
    Status status = cpu::RefuseStrings(*op, node.op_type, inputs);
    if (status.ok()) status = op->run(ctx, node, inputs, &outputs);
    if (!status.ok()) {
      return Status(status.code(),
                    absl::StrCat(node.Describe(graph->value_names), ": ", status.message()));
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].dtype() == DataType::kString) outputs[i] = OwnStrings(outputs[i]);
      graph->constants[node.outputs[i]] = outputs[i];
    }
    ++folded;
  }
  graph->nodes = std::move(remaining);
  return folded;
}

int RemoveDeadNodes(Graph* graph) {
  std::vector<bool> live(graph->value_names.size(), false);
  for (int id : graph->output_ids) live[id] = true;
  std::vector<bool> remove(graph->nodes.size(), false);
  int removed = 0;
  for (size_t n = graph->nodes.size(); n-- > 0;) {
    const Node& node = graph->nodes[n];
    bool needed = false;
    for (int id : node.outputs) needed = needed || (live[id] && !graph->IsConstant(id));
    if (!needed) {
      remove[n] = true;
      ++removed;
      continue;
    }
    for (int id : node.inputs) {
      if (id != kNoValue) live[id] = true;
    }
  }
  EraseMarked(remove, graph);
  // Constants nothing reads any more (replaced weights, folded intermediates) free their memory.
  for (size_t id = 0; id < graph->constants.size(); ++id) {
    if (!live[id]) graph->constants[id].reset();
  }
  return removed;
}

int FoldBatchNormIntoConv(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  const std::vector<int> producer = Producers(*graph);
  std::vector<bool> remove(graph->nodes.size(), false);
  int folded = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& bn = graph->nodes[n];
    if (bn.op_type != "BatchNormalization" || bn.outputs.size() != 1 || bn.inputs.size() != 5 ||
        bn.attributes.GetInt("training_mode", 0) != 0 || bn.inputs[0] == kNoValue) {
      continue;
    }
    const int x = bn.inputs[0];
    if (producer[x] < 0 || readers[x] != 1) continue;
    Node& conv = graph->nodes[producer[x]];
    if (conv.op_type != "Conv" || conv.outputs.size() != 1 || conv.inputs.size() < 2 ||
        conv.attributes.Has("tessera_activation") || !graph->IsConstant(conv.inputs[1])) {
      continue;
    }
    const Value& w = *graph->constants[conv.inputs[1]];
    if (w.dtype() != DataType::kFp32 || w.rank() < 3) continue;
    const int64_t cout = w.dim(0);
    const Value* bias = nullptr;
    if (conv.inputs.size() > 2 && conv.inputs[2] != kNoValue) {
      bias = ConstantFp32(*graph, conv.inputs[2], cout);
      if (bias == nullptr) continue;
    }
    const Value* gamma = ConstantFp32(*graph, bn.inputs[1], cout);
    const Value* beta = ConstantFp32(*graph, bn.inputs[2], cout);
    const Value* mean = ConstantFp32(*graph, bn.inputs[3], cout);
    const Value* var = ConstantFp32(*graph, bn.inputs[4], cout);
    if (gamma == nullptr || beta == nullptr || mean == nullptr || var == nullptr) continue;
    const double epsilon = bn.attributes.GetFloat("epsilon", 1e-5f);
    const int64_t per_channel = w.num_elements() / cout;
    Value new_w = Value::Allocate(DataType::kFp32, w.shape());
    Value new_b = Value::Allocate(DataType::kFp32, {cout});
    for (int64_t c = 0; c < cout; ++c) {
      const double scale = gamma->data<float>()[c] / std::sqrt(var->data<float>()[c] + epsilon);
      const double b0 = bias != nullptr ? bias->data<float>()[c] : 0.0;
      new_b.mutable_data<float>()[c] =
          static_cast<float>((b0 - mean->data<float>()[c]) * scale + beta->data<float>()[c]);
      const float* src = w.data<float>() + c * per_channel;
      float* dst = new_w.mutable_data<float>() + c * per_channel;
      for (int64_t i = 0; i < per_channel; ++i) dst[i] = static_cast<float>(src[i] * scale);
    }
    // Fresh values: the old weight may be read by another node.
    const int w_id = graph->AddValue(graph->value_names[conv.inputs[1]] + "_bn");
    const int b_id = graph->AddValue(graph->value_names[bn.inputs[2]] + "_conv_bias");
    graph->constants[w_id] = std::move(new_w);
    graph->constants[b_id] = std::move(new_b);
    conv.inputs.resize(3);
    conv.inputs[1] = w_id;
    conv.inputs[2] = b_id;
    conv.outputs[0] = bn.outputs[0];
    remove[n] = true;
    ++folded;
  }
  EraseMarked(remove, graph);
  return folded;
}

int TransposeGemmWeights(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  int transposed = 0;
  for (Node& gemm : graph->nodes) {
    if (gemm.op_type != "Gemm" || gemm.inputs.size() < 2 ||
        gemm.attributes.GetInt("transB", 0) == 0) {
      continue;
    }
    const int b = gemm.inputs[1];
    if (!graph->IsConstant(b) || readers[b] != 1) continue;
    const Value& w = *graph->constants[b];
    if (w.dtype() != DataType::kFp32 || w.rank() != 2) continue;
    const int64_t n = w.dim(0), k = w.dim(1);
    Value t = Value::Allocate(DataType::kFp32, {k, n});
    const float* src = w.data<float>();
    float* dst = t.mutable_data<float>();
    constexpr int64_t kTile = 32;  // both sides' lines stay in cache within a tile
    for (int64_t i0 = 0; i0 < n; i0 += kTile) {
      for (int64_t j0 = 0; j0 < k; j0 += kTile) {
        for (int64_t i = i0; i < std::min(n, i0 + kTile); ++i) {
          for (int64_t j = j0; j < std::min(k, j0 + kTile); ++j) dst[j * n + i] = src[i * k + j];
        }
      }
    }
    const int id = graph->AddValue(graph->value_names[b] + "_transposed");
    graph->constants[id] = std::move(t);
    gemm.inputs[1] = id;
    Attribute untransposed;
    untransposed.kind = Attribute::Kind::kInt;
    untransposed.i = 0;
    gemm.attributes.Set("transB", untransposed);
    ++transposed;
  }
  return transposed;
}

int FuseConvActivation(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  const std::vector<int> producer = Producers(*graph);
  std::vector<bool> remove(graph->nodes.size(), false);
  int fused = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& act = graph->nodes[n];
    if ((act.op_type != "Relu" && act.op_type != "Clip") || act.inputs.empty() ||
        act.inputs[0] == kNoValue || act.outputs.size() != 1) {
      continue;
    }
    const int x = act.inputs[0];
    // readers[x] == 1 also excludes a Conv output that is a graph output.
    if (producer[x] < 0 || readers[x] != 1) continue;
    Node& conv = graph->nodes[producer[x]];
    if (conv.op_type != "Conv" || conv.outputs.size() != 1 ||
        conv.attributes.Has("tessera_activation")) {
      continue;
    }
    if (!pass_util::SetFusedActivation(*graph, act, &conv.attributes)) continue;
    conv.outputs[0] = act.outputs[0];
    remove[n] = true;
    ++fused;
  }
  EraseMarked(remove, graph);
  return fused;
}

namespace {
// Whether a ReduceMean node averages its input over the last axis only, keeping dims (opset
// < 18: axes is an attribute).
bool MeanOverLastAxis(const Graph& graph, const Node& node) {
  if (node.op_type != "ReduceMean" || node.inputs.size() != 1 || node.outputs.size() != 1 ||
      node.attributes.GetInt("keepdims", 1) != 1) {
    return false;
  }
  const std::vector<int64_t> axes = node.attributes.GetInts("axes");
  if (axes.size() != 1) return false;
  if (axes[0] == -1) return true;
  const auto& shape = graph.shapes[node.inputs[0]];
  return shape.has_value() && axes[0] == static_cast<int64_t>(shape->size()) - 1;
}

}  // namespace

int FuseLayerNorm(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  // The single node reading `id` (readers[id] == 1 and not a graph output), or -1.
  std::vector<int> reader(graph->value_names.size(), -1);
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    for (int id : graph->nodes[n].inputs) {
      if (id != kNoValue) reader[id] = static_cast<int>(n);
    }
  }
  auto only_reader = [&](int id) { return readers[id] == 1 ? reader[id] : -1; };
  std::vector<bool> remove(graph->nodes.size(), false);
  int fused = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    // The decomposed LayerNorm of PyTorch's opset < 17 exports:
    //   mean = ReduceMean(x); d = x - mean; var = ReduceMean(Pow(d, 2));
    //   y = d / Sqrt(var + eps) * gamma + beta
    const Node& mean = graph->nodes[n];
    if (remove[n] || !MeanOverLastAxis(*graph, mean)) continue;
    const int x = mean.inputs[0];
    const int sub_n = only_reader(mean.outputs[0]);
    if (sub_n < 0) continue;
    const Node& sub = graph->nodes[sub_n];
    if (sub.op_type != "Sub" || sub.inputs.size() != 2 || sub.inputs[0] != x ||
        sub.inputs[1] != mean.outputs[0] || readers[sub.outputs[0]] != 2) {
      continue;
    }
    const int d = sub.outputs[0];
    int pow_n = -1, div_n = -1;
    for (size_t k = 0; k < graph->nodes.size(); ++k) {
      const Node& node = graph->nodes[k];
      if (node.op_type == "Pow" && node.inputs.size() == 2 && node.inputs[0] == d) {
        pow_n = static_cast<int>(k);
      }
      if (node.op_type == "Div" && node.inputs.size() == 2 && node.inputs[0] == d) {
        div_n = static_cast<int>(k);
      }
    }
    float two = 0, eps = 0;
    if (pow_n < 0 || div_n < 0 || !ConstantScalar(*graph, graph->nodes[pow_n].inputs[1], &two) ||
        two != 2.0f) {
      continue;
    }
    const int var_n = only_reader(graph->nodes[pow_n].outputs[0]);
    if (var_n < 0 || !MeanOverLastAxis(*graph, graph->nodes[var_n])) continue;
    const int add_eps_n = only_reader(graph->nodes[var_n].outputs[0]);
    if (add_eps_n < 0 || graph->nodes[add_eps_n].op_type != "Add" ||
        !ConstantScalar(*graph,
                        OtherInput(graph->nodes[add_eps_n], graph->nodes[var_n].outputs[0]),
                        &eps)) {
      continue;
    }
    const int sqrt_n = only_reader(graph->nodes[add_eps_n].outputs[0]);
    if (sqrt_n < 0 || graph->nodes[sqrt_n].op_type != "Sqrt" ||
        only_reader(graph->nodes[sqrt_n].outputs[0]) != div_n ||
        graph->nodes[div_n].inputs[1] != graph->nodes[sqrt_n].outputs[0]) {
      continue;
    }
    const int mul_n = only_reader(graph->nodes[div_n].outputs[0]);
    if (mul_n < 0 || graph->nodes[mul_n].op_type != "Mul") continue;
    const int add_beta_n = only_reader(graph->nodes[mul_n].outputs[0]);
    if (add_beta_n < 0 || graph->nodes[add_beta_n].op_type != "Add") continue;
    // gamma and beta: 1-D constants of the normalised width (LayerNormalization checks it
    // against x at run time).
    const int gamma = OtherInput(graph->nodes[mul_n], graph->nodes[div_n].outputs[0]);
    const int beta = OtherInput(graph->nodes[add_beta_n], graph->nodes[mul_n].outputs[0]);
    if (gamma == kNoValue || !graph->IsConstant(gamma)) continue;
    const int64_t width = graph->constants[gamma]->num_elements();
    if (ConstantFp32(*graph, gamma, width) == nullptr ||
        ConstantFp32(*graph, beta, width) == nullptr) {
      continue;
    }
    // The fused node takes the place of the last one (every input exists by then).
    Node fused_node;
    fused_node.name = graph->nodes[add_beta_n].name;
    fused_node.op_type = "LayerNormalization";
    fused_node.opset = mean.opset;
    Attribute axis, epsilon;
    axis.kind = Attribute::Kind::kInt;
    axis.i = -1;
    epsilon.kind = Attribute::Kind::kFloat;
    epsilon.f = eps;
    fused_node.attributes.Set("axis", axis);
    fused_node.attributes.Set("epsilon", epsilon);
    fused_node.inputs = {x, gamma, beta};
    fused_node.outputs = {graph->nodes[add_beta_n].outputs[0]};
    for (int k : {static_cast<int>(n), sub_n, pow_n, var_n, add_eps_n, sqrt_n, div_n, mul_n}) {
      remove[k] = true;
    }
    graph->nodes[add_beta_n] = std::move(fused_node);
    ++fused;
  }
  EraseMarked(remove, graph);
  return fused;
}

StatusOr<PassSummary> RunGraphPasses(Graph* graph, const GraphPassOptions& options) {
  PassSummary summary;
  summary.nodes_before = static_cast<int>(graph->nodes.size());
  // Folding one kind enables the other (a folded shape feeds Concat, a folded Concat a Reshape).
  auto fold = [&]() -> Status {
    for (int round = 0; round < 8; ++round) {
      TESSERA_ASSIGN_OR_RETURN(int constants, FoldConstants(graph));
      int rewritten = 0;
      const int shapes = FoldShapeSubgraphs(graph, &rewritten);
      summary.constant_folded += constants;
      summary.shape_values_folded += shapes - rewritten;
      summary.reshapes_rewritten += rewritten;
      if (constants + shapes == 0) break;
    }
    summary.dead_removed += RemoveDeadNodes(graph);
    return absl::OkStatus();
  };
  InferShapes(graph);
  if (options.fuse_qdq_convs) summary.qdq_convs_fused = FuseQdqConv(graph);
  if (options.fuse_qdq_adds) summary.qdq_adds_fused = FuseQdqAdd(graph);
  if (summary.qdq_convs_fused + summary.qdq_adds_fused > 0) {
    // Before folding: the replaced weights' DequantizeLinear nodes are dead, not to be run.
    summary.dead_removed += RemoveDeadNodes(graph);
    InferShapes(graph);
  }
  TESSERA_RETURN_IF_ERROR(fold());
  std::string pinned_by;
  if (graph->dynamic_batch) {
    if (const int64_t batch = FindPinnedBatch(*graph, &pinned_by); batch > 0) {
      spdlog::warn(
          "{} hard-codes a leading size of {} for the batch dim: the model runs at "
          "batch {} only (re-export it with the batch taken from the input shape)",
          pinned_by, batch, batch);
      for (size_t i = 0; i < graph->inputs.size(); ++i) {
        Shape& s = graph->inputs[i].shape;
        if (graph->input_rank_known[i] && !s.empty() && s[0] < 0) s[0] = batch;
      }
      summary.batch_pinned_by = pinned_by;
      InferShapes(graph);
      TESSERA_RETURN_IF_ERROR(fold());  // every shape is static now
    }
  }
  summary.batchnorms_folded = FoldBatchNormIntoConv(graph);
  summary.activations_fused = FuseConvActivation(graph);
  summary.layernorms_fused = FuseLayerNorm(graph);
  summary.gemm_weights_transposed = TransposeGemmWeights(graph);
  summary.dead_removed += RemoveDeadNodes(graph);
  InferShapes(graph);
  // A graph output declared as one type and computed as another would fail every run: refused at
  // load, where the message can name the model file.
  for (size_t i = 0; i < graph->outputs.size(); ++i) {
    const DataType computed = graph->dtypes[graph->output_ids[i]];
    const DataType declared = graph->outputs[i].dtype;
    if (computed != DataType::kInvalid && computed != declared) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph output \"", graph->outputs[i].name, "\" is declared as ", TypeName(declared),
          ", but the graph computes it as ", TypeName(computed)));
    }
  }
  summary.nodes_after = static_cast<int>(graph->nodes.size());
  return summary;
}

}  // namespace tessera::engine
