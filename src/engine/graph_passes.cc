// The pass pipeline of graph_passes.h, except shape inference and shape-subgraph folding, which
// live in shape_inference.cc.
#include "engine/graph_passes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"
#include "spdlog/spdlog.h"

namespace tessera::engine {
namespace {

// How many node inputs read each value (graph outputs count as one more reader each).
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

// The index of the node producing each value, or -1.
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

const Value* ConstantFp32(const Graph& graph, int id, int64_t elements) {
  if (id == kNoValue || !graph.IsConstant(id)) return nullptr;
  const Value& v = *graph.constants[id];
  if (v.dtype() != DataType::kFp32 || v.rank() != 1 || v.num_elements() != elements) {
    return nullptr;
  }
  return &v;
}

// A Clip's bound: attribute (opset < 11) or constant scalar input; false when not constant.
bool ClipBound(const Graph& graph, const Node& clip, size_t input, const char* attr, float fallback,
               float* bound) {
  *bound = clip.attributes.GetFloat(attr, fallback);
  if (input >= clip.inputs.size() || clip.inputs[input] == kNoValue) return true;
  const int id = clip.inputs[input];
  if (!graph.IsConstant(id)) return false;
  const Value& v = *graph.constants[id];
  if (v.dtype() != DataType::kFp32 || v.num_elements() != 1) return false;
  *bound = v.data<float>()[0];
  return true;
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
      " BatchNorms folded into Conv, ", activations_fused, " activations fused, ",
      layernorms_fused, " LayerNorms fused",
      batch_pinned_by.empty() ? "" : absl::StrCat("; batch pinned by ", batch_pinned_by));
}

StatusOr<int> FoldConstants(Graph* graph) {
  std::vector<Node> remaining;
  cpu::OpContext ctx;  // single-threaded: folded subgraphs are small
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
    Status status = op->run(ctx, node, inputs, &outputs);
    if (!status.ok()) {
      return Status(status.code(),
                    absl::StrCat(node.Describe(graph->value_names), ": ", status.message()));
    }
    for (size_t i = 0; i < outputs.size(); ++i) graph->constants[node.outputs[i]] = outputs[i];
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

int FuseConvActivation(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  const std::vector<int> producer = Producers(*graph);
  std::vector<bool> remove(graph->nodes.size(), false);
  int fused = 0;
  constexpr float kInf = std::numeric_limits<float>::infinity();
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
    Attribute kind;
    kind.kind = Attribute::Kind::kString;
    kind.s = act.op_type;
    if (act.op_type == "Clip") {
      Attribute lo, hi;
      lo.kind = hi.kind = Attribute::Kind::kFloat;
      if (!ClipBound(*graph, act, 1, "min", -kInf, &lo.f) ||
          !ClipBound(*graph, act, 2, "max", kInf, &hi.f)) {
        continue;
      }
      conv.attributes.Set("tessera_clip_min", lo);
      conv.attributes.Set("tessera_clip_max", hi);
    }
    conv.attributes.Set("tessera_activation", kind);
    conv.outputs[0] = act.outputs[0];
    remove[n] = true;
    ++fused;
  }
  EraseMarked(remove, graph);
  return fused;
}

namespace {
// A constant FP32 scalar (any rank, one element), or false.
bool ConstantScalar(const Graph& graph, int id, float* value) {
  if (id == kNoValue || !graph.IsConstant(id)) return false;
  const Value& v = *graph.constants[id];
  if (v.dtype() != DataType::kFp32 || v.num_elements() != 1) return false;
  *value = v.data<float>()[0];
  return true;
}

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
  auto other_input = [](const Node& node, int id) {
    return node.inputs.size() == 2 ? (node.inputs[0] == id ? node.inputs[1] : node.inputs[0])
                                   : kNoValue;
  };
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
                        other_input(graph->nodes[add_eps_n], graph->nodes[var_n].outputs[0]),
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
    const int gamma = other_input(graph->nodes[mul_n], graph->nodes[div_n].outputs[0]);
    const int beta = other_input(graph->nodes[add_beta_n], graph->nodes[mul_n].outputs[0]);
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

namespace {

// Whether `value` is within a relative 1e-4 of `expected` (exported constants are rounded).
bool Near(float value, double expected) {
  return std::fabs(value - expected) <= 1e-4 * std::fabs(expected);
}

// The value id a two-input node combines with `id`, or kNoValue.
int OtherInput(const Node& node, int id) {
  if (node.inputs.size() != 2) return kNoValue;
  if (node.inputs[0] == id) return node.inputs[1];
  return node.inputs[1] == id ? node.inputs[0] : kNoValue;
}

// The end both GELU forms share, from `one_plus` (1 + erf(..) or 1 + tanh(..)) back to x:
//   Mul(x, one_plus) -> Mul 0.5, or Mul(half, one_plus) where half = Mul(x, 0.5) is
//   `half_first_n` (-1 when x has no such reader). Appends the nodes; returns false on no match.
bool MatchGeluTail(const Graph& graph, const std::vector<int>& readers,
                   const std::vector<std::vector<int>>& readers_of, int x, int one_plus,
                   int half_first_n, std::vector<int>* nodes) {
  auto single = [&](int id) {
    return readers[id] == 1 && readers_of[id].size() == 1 ? readers_of[id][0] : -1;
  };
  float c = 0;
  const int mul_n = single(one_plus);
  if (mul_n < 0 || graph.nodes[mul_n].op_type != "Mul") return false;
  const int partner = OtherInput(graph.nodes[mul_n], one_plus);
  int last_n = -1;
  if (half_first_n >= 0) {
    // x * 0.5 * (1 + ..): the Mul by 0.5 comes first and is the partner.
    const int half = graph.nodes[half_first_n].outputs[0];
    if (partner != half || readers[half] != 1) return false;
    last_n = mul_n;
    nodes->insert(nodes->end(), {half_first_n, mul_n});
  } else {
    // x * (1 + ..) * 0.5.
    if (partner != x) return false;
    last_n = single(graph.nodes[mul_n].outputs[0]);
    if (last_n < 0 || graph.nodes[last_n].op_type != "Mul" ||
        !ConstantScalar(graph, OtherInput(graph.nodes[last_n], graph.nodes[mul_n].outputs[0]),
                        &c) ||
        c != 0.5f) {
      return false;
    }
    nodes->insert(nodes->end(), {mul_n, last_n});
  }
  return graph.nodes[last_n].outputs.size() == 1;
}

// The reader of x that is Mul(x, 0.5), or -1.
int HalfOf(const Graph& graph, const std::vector<std::vector<int>>& readers_of, int x) {
  float c = 0;
  for (int r : readers_of[x]) {
    const Node& node = graph.nodes[r];
    if (node.op_type == "Mul" && node.outputs.size() == 1 &&
        ConstantScalar(graph, OtherInput(node, x), &c) && Near(c, 0.5)) {
      return r;
    }
  }
  return -1;
}

// Matches GELU as PyTorch exports it, starting at its input `x`, and returns its kind ("Gelu" or
// "GeluTanh", "" for no match) with the nodes (the last one's output is GELU's):
//   erf form:  Div(x, sqrt 2) (or Mul(x, 1/sqrt 2)) -> Erf -> Add 1 -> tail
//   tanh form: Mul(x, x) -> Mul x -> Mul 0.044715 -> Add x -> Mul sqrt(2/pi) -> Tanh -> Add 1
//              -> tail (nn.GELU(approximate="tanh"))
// where the tail is Mul x -> Mul 0.5, or Mul 0.5 on x first (MatchGeluTail).
std::string MatchGelu(const Graph& graph, const std::vector<int>& readers,
                      const std::vector<std::vector<int>>& readers_of, int x,
                      std::vector<int>* nodes) {
  if (readers_of[x].size() != static_cast<size_t>(readers[x])) return "";  // a graph output
  auto single = [&](int id) {
    return readers[id] == 1 && readers_of[id].size() == 1 ? readers_of[id][0] : -1;
  };
  // One Add of a constant 1 reading `id`, or -1.
  auto add_one = [&](int id) {
    float c = 0;
    const int n = single(id);
    return n >= 0 && graph.nodes[n].op_type == "Add" &&
                   ConstantScalar(graph, OtherInput(graph.nodes[n], id), &c) && c == 1.0f
               ? n
               : -1;
  };
  const int half_first_n = HalfOf(graph, readers_of, x);
  float c = 0;
  nodes->clear();
  if (readers[x] == 2) {
    int scale_n = -1;
    for (int r : readers_of[x]) {
      const Node& node = graph.nodes[r];
      if (node.outputs.size() != 1 || !ConstantScalar(graph, OtherInput(node, x), &c)) continue;
      if ((node.op_type == "Div" && node.inputs[0] == x && Near(c, M_SQRT2)) ||
          (node.op_type == "Mul" && Near(c, M_SQRT1_2))) {
        scale_n = r;
      }
    }
    if (scale_n < 0) return "";
    const int erf_n = single(graph.nodes[scale_n].outputs[0]);
    if (erf_n < 0 || graph.nodes[erf_n].op_type != "Erf") return "";
    const int one_n = add_one(graph.nodes[erf_n].outputs[0]);
    if (one_n < 0) return "";
    *nodes = {scale_n, erf_n, one_n};
    return MatchGeluTail(graph, readers, readers_of, x, graph.nodes[one_n].outputs[0],
                         half_first_n, nodes)
               ? "Gelu"
               : "";
  }
  // tanh form: x is read twice by x*x, then by x*x², the Add and the tail's Mul.
  if (readers[x] != 5) return "";
  int square_n = -1;
  for (int r : readers_of[x]) {
    const Node& node = graph.nodes[r];
    if (node.op_type == "Mul" && node.inputs.size() == 2 && node.inputs[0] == x &&
        node.inputs[1] == x) {
      square_n = r;
    }
  }
  if (square_n < 0) return "";
  const int square = graph.nodes[square_n].outputs[0];
  const int cube_n = single(square);
  if (cube_n < 0 || graph.nodes[cube_n].op_type != "Mul" ||
      OtherInput(graph.nodes[cube_n], square) != x) {
    return "";
  }
  const int cube = graph.nodes[cube_n].outputs[0];
  const int scaled_n = single(cube);
  if (scaled_n < 0 || graph.nodes[scaled_n].op_type != "Mul" ||
      !ConstantScalar(graph, OtherInput(graph.nodes[scaled_n], cube), &c) || !Near(c, 0.044715)) {
    return "";
  }
  const int scaled = graph.nodes[scaled_n].outputs[0];
  const int inner_n = single(scaled);
  if (inner_n < 0 || graph.nodes[inner_n].op_type != "Add" ||
      OtherInput(graph.nodes[inner_n], scaled) != x) {
    return "";
  }
  const int inner = graph.nodes[inner_n].outputs[0];
  const int pre_n = single(inner);
  if (pre_n < 0 || graph.nodes[pre_n].op_type != "Mul" ||
      !ConstantScalar(graph, OtherInput(graph.nodes[pre_n], inner), &c) ||
      !Near(c, std::sqrt(2.0 / M_PI))) {
    return "";
  }
  const int tanh_n = single(graph.nodes[pre_n].outputs[0]);
  if (tanh_n < 0 || graph.nodes[tanh_n].op_type != "Tanh") return "";
  const int one_n = add_one(graph.nodes[tanh_n].outputs[0]);
  if (one_n < 0) return "";
  *nodes = {square_n, cube_n, scaled_n, inner_n, pre_n, tanh_n, one_n};
  return MatchGeluTail(graph, readers, readers_of, x, graph.nodes[one_n].outputs[0], half_first_n,
                       nodes)
             ? "GeluTanh"
             : "";
}

}  // namespace

int FuseMatMulEpilogues(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  std::vector<std::vector<int>> readers_of(graph->value_names.size());
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    for (int id : graph->nodes[n].inputs) {
      if (id != kNoValue) readers_of[id].push_back(static_cast<int>(n));
    }
  }
  std::vector<bool> remove(graph->nodes.size(), false);
  int fused = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    Node& mm = graph->nodes[n];
    if (mm.op_type != "MatMul" || mm.inputs.size() != 2 || mm.outputs.size() != 1 ||
        mm.inputs[0] == kNoValue || !graph->IsConstant(mm.inputs[1])) {
      continue;
    }
    const Value& w = *graph->constants[mm.inputs[1]];
    const auto& a_shape = graph->shapes[mm.inputs[0]];
    if (w.dtype() != DataType::kFp32 || w.rank() != 2 ||
        graph->dtypes[mm.inputs[0]] != DataType::kFp32) {
      continue;
    }
    // A bias of higher rank than A would broadcast the output to more dims: only a 1-D bias when
    // A's rank is not known statically.
    const int max_bias_rank = a_shape.has_value() ? static_cast<int>(a_shape->size()) : 1;
    const int64_t cols = w.dim(1);
    int y = mm.outputs[0];
    std::vector<int> absorbed;
    // Bias: Add(y, b) with b a constant of the output's width, broadcast over the rows only.
    if (readers[y] == 1 && readers_of[y].size() == 1) {
      const int add_n = readers_of[y][0];
      const Node& add = graph->nodes[add_n];
      const int b = OtherInput(add, y);
      if (add.op_type == "Add" && add.outputs.size() == 1 && b != kNoValue &&
          graph->IsConstant(b)) {
        const Value& bias = *graph->constants[b];
        const bool row_vector = bias.dtype() == DataType::kFp32 && bias.rank() >= 1 &&
                                bias.rank() <= max_bias_rank &&
                                bias.dim(bias.rank() - 1) == cols && bias.num_elements() == cols;
        if (row_vector) {
          mm.inputs.push_back(b);
          absorbed.push_back(add_n);
          y = add.outputs[0];
        }
      }
    }
    std::vector<int> gelu;
    if (std::string form = MatchGelu(*graph, readers, readers_of, y, &gelu); !form.empty()) {
      Attribute kind;
      kind.kind = Attribute::Kind::kString;
      kind.s = form;
      mm.attributes.Set("tessera_activation", kind);
      absorbed.insert(absorbed.end(), gelu.begin(), gelu.end());
      y = graph->nodes[gelu.back()].outputs[0];
    }
    if (absorbed.empty()) continue;
    for (int k : absorbed) remove[k] = true;
    mm.outputs[0] = y;
    ++fused;
  }
  EraseMarked(remove, graph);
  return fused;
}

int FuseConvResidual(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  const std::vector<int> producer = Producers(*graph);
  std::vector<bool> remove(graph->nodes.size(), false);
  int fused = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& add = graph->nodes[n];
    if (add.op_type != "Add" || add.inputs.size() != 2 || add.outputs.size() != 1) continue;
    for (int side = 0; side < 2; ++side) {
      const int c = add.inputs[side], r = add.inputs[1 - side];
      if (c == kNoValue || r == kNoValue || c == r || producer[c] < 0 || readers[c] != 1) {
        continue;
      }
      Node& conv = graph->nodes[producer[c]];
      if (conv.op_type != "Conv" || conv.outputs.size() != 1 || conv.inputs.size() > 3 ||
          conv.attributes.Has("tessera_activation") || conv.attributes.Has("tessera_residual")) {
        continue;
      }
      // The Conv reads the residual at its own step: it must exist by then, and have the Conv
      // output's shape exactly (no broadcasting), as far as shapes are known statically.
      if (producer[r] > producer[c] || graph->IsConstant(r)) continue;
      const auto& conv_shape = graph->shapes[c];
      const auto& residual_shape = graph->shapes[r];
      if (!conv_shape.has_value() || !residual_shape.has_value() ||
          *conv_shape != *residual_shape || conv_shape->size() != 4 ||
          std::count(conv_shape->begin(), conv_shape->end(), kUnknownDim) != 0 ||
          graph->dtypes[r] != DataType::kFp32) {
        continue;
      }
      conv.inputs.resize(3, kNoValue);
      conv.inputs.push_back(r);
      Attribute flag;
      flag.kind = Attribute::Kind::kInt;
      flag.i = 1;
      conv.attributes.Set("tessera_residual", flag);
      conv.outputs[0] = add.outputs[0];
      remove[n] = true;
      ++fused;
      break;
    }
  }
  EraseMarked(remove, graph);
  return fused;
}

StatusOr<PassSummary> RunGraphPasses(Graph* graph) {
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
