// The CPU-only fusions of graph_passes.h (FuseMatMulEpilogues, FuseConvResidual, ...): the CPU
// model applies them to its own copy of the prepared graph, so the CUDA backend never sees their
// nodes.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/graph_pass_util.h"
#include "engine/graph_passes.h"

namespace tessera::engine {

using pass_util::ConstantScalar;
using pass_util::EraseMarked;
using pass_util::OtherInput;
using pass_util::Producers;
using pass_util::ReaderCounts;

namespace {

// Whether `value` is `expected` as a model file may round it: to FP32 in an export, or to FP16
// (relative error up to 2^-11: 0.044715 is 0.0447083) or BF16 (2^-8) in a 16-bit model, whose
// constants the import widened (graph.h Graph::input_float16).
bool Near(float value, double expected) {
  return std::fabs(value - expected) <= 0.00390625 * std::fabs(expected);
}

// The indices of the nodes reading each value, once per input that reads it.
std::vector<std::vector<int>> ReadersOf(const Graph& graph) {
  std::vector<std::vector<int>> readers_of(graph.value_names.size());
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (int id : graph.nodes[n].inputs) {
      if (id != kNoValue) readers_of[id].push_back(static_cast<int>(n));
    }
  }
  return readers_of;
}

// The one node reading `id`, or -1 (also when the reader is a graph output).
int SingleReader(const std::vector<int>& readers, const std::vector<std::vector<int>>& readers_of,
                 int id) {
  return readers[id] == 1 && readers_of[id].size() == 1 ? readers_of[id][0] : -1;
}

// The end both GELU forms share, from `one_plus` (1 + erf(..) or 1 + tanh(..)) back to x:
//   Mul(x, one_plus) -> Mul 0.5, or Mul(half, one_plus) where half = Mul(x, 0.5) is
//   `half_first_n` (-1 when x has no such reader). Appends the nodes; returns false on no match.
bool MatchGeluTail(const Graph& graph, const std::vector<int>& readers,
                   const std::vector<std::vector<int>>& readers_of, int x, int one_plus,
                   int half_first_n, std::vector<int>* nodes) {
  auto single = [&](int id) { return SingleReader(readers, readers_of, id); };
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
  auto single = [&](int id) { return SingleReader(readers, readers_of, id); };
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

// Whether FP32 `id`, of static shape and broadcast against a product of rank `rank`, is one value
// or one per line along the product's dim `axis` (`lines` of them) without changing the
// product's shape; `*per_line` says which.
bool LineValues(const Graph& graph, int id, size_t rank, size_t axis, int64_t lines,
                bool* per_line) {
  if (id == kNoValue || graph.dtypes[id] != DataType::kFp32) return false;
  const auto& shape = graph.shapes[id];
  if (!shape.has_value() || shape->size() > rank || lines < 0) return false;
  *per_line = false;
  for (size_t i = 0; i < shape->size(); ++i) {
    const int64_t d = (*shape)[i];
    if (d == 1) continue;
    if (rank - shape->size() + i != axis || d != lines) return false;
    *per_line = true;
  }
  return true;
}

// Where the scaled product of an integer MatMul (over its columns) or Conv (over its output
// channels) has its lines, from the weights' static shape. A Conv's output has the weights' rank;
// a MatMul's rank may be unknown (a LayerNormalization before it has no static shape), and then
// only scales of rank <= 1 are taken, which cannot widen a product of rank >= 1.
bool ProductLines(const Graph& graph, const Node& node, size_t* rank, size_t* axis,
                  int64_t* lines) {
  const auto& w = graph.shapes[node.inputs[1]];
  if (!w.has_value() || w->size() < 2) return false;
  if (node.op_type == "ConvInteger") {
    *rank = w->size();
    *axis = 1;
    *lines = (*w)[0];
  } else {
    const auto& out = graph.shapes[node.outputs[0]];
    *rank = out.has_value() ? out->size() : 1;
    *axis = *rank - 1;
    *lines = w->back();
  }
  return *lines >= 0 && *rank >= 1;
}

int FuseIntegerToFloat(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  const std::vector<int> producer = Producers(*graph);
  const std::vector<std::vector<int>> readers_of = ReadersOf(*graph);
  std::vector<bool> remove(graph->nodes.size(), false);
  // The one node reading `id`, or -1, also when an earlier fusion here took it: two Convs' sums
  // meet in one residual Add, which only the first of them may take.
  auto single = [&](int id) {
    const int k = SingleReader(readers, readers_of, id);
    return k >= 0 && !remove[k] ? k : -1;
  };
  int fused = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& mm = graph->nodes[n];
    const bool conv = mm.op_type == "ConvInteger";
    if ((mm.op_type != "MatMulInteger" && !conv) || mm.inputs.size() < 2 ||
        mm.outputs.size() != 1) {
      continue;
    }
    size_t rank = 0, axis = 0;
    int64_t lines = 0;
    if (!ProductLines(*graph, mm, &rank, &axis, &lines)) continue;
    const int cast_n = single(mm.outputs[0]);
    if (cast_n < 0 || graph->nodes[cast_n].op_type != "Cast" ||
        graph->nodes[cast_n].attributes.GetInt("to", 0) != 1 /* FLOAT */) {
      continue;
    }
    const int f = graph->nodes[cast_n].outputs[0];
    int last_n = single(f);
    if (last_n < 0 || graph->nodes[last_n].op_type != "Mul" ||
        graph->nodes[last_n].outputs.size() != 1) {
      continue;
    }
    // The scale must not change the product's shape: one value, or one per line.
    const int s = OtherInput(graph->nodes[last_n], f);
    bool per_line = false;
    if (s == f || !LineValues(*graph, s, rank, axis, lines, &per_line)) continue;
    // Mul(a_scale, b_scale) read by the Mul alone gives the kernel both; else a_scale is the
    // product and b_scale 1.
    int a_scale = s, b_scale = kNoValue, scales_n = producer[s];
    if (scales_n >= 0 && readers[s] == 1 && graph->nodes[scales_n].op_type == "Mul" &&
        graph->nodes[scales_n].inputs.size() == 2) {
      for (int side = 0; side < 2 && b_scale == kNoValue; ++side) {
        const int x = graph->nodes[scales_n].inputs[side];
        const int y = graph->nodes[scales_n].inputs[1 - side];
        bool x_lines = true, y_lines = false;
        if (LineValues(*graph, x, rank, axis, lines, &x_lines) && !x_lines &&
            LineValues(*graph, y, rank, axis, lines, &y_lines)) {
          a_scale = x;
          b_scale = y;
        }
      }
    }
    if (b_scale == kNoValue) {
      scales_n = -1;
      b_scale = graph->AddValue(graph->value_names[s] + "/tessera_one");
      Value one = Value::Allocate(DataType::kFp32, {});
      one.mutable_data<float>()[0] = 1.0f;
      graph->constants[b_scale] = std::move(one);
      graph->shapes[b_scale] = Shape{};
      graph->dtypes[b_scale] = DataType::kFp32;
    }
    Node fused_node;
    fused_node.name = mm.name;
    fused_node.op_type = conv ? kConvIntegerToFloat : kMatMulIntegerToFloat;
    fused_node.opset = 1;
    fused_node.attributes = mm.attributes;  // ConvInteger's window
    fused_node.inputs = {mm.inputs[0],
                         mm.inputs[1],
                         a_scale,
                         b_scale,
                         mm.inputs.size() > 2 ? mm.inputs[2] : kNoValue,
                         mm.inputs.size() > 3 ? mm.inputs[3] : kNoValue};
    std::vector<int> absorbed = {static_cast<int>(n), cast_n};
    if (scales_n >= 0) absorbed.push_back(scales_n);
    // A Conv's bias (one value per output channel), residual and Relu or Clip; a MatMul's are
    // FuseMatMulEpilogues'.
    if (conv) {
      if (const int add_n = single(graph->nodes[last_n].outputs[0]);
          add_n >= 0 && graph->nodes[add_n].op_type == "Add") {
        const int b = OtherInput(graph->nodes[add_n], graph->nodes[last_n].outputs[0]);
        bool per_channel = false;
        if (graph->IsConstant(b) && LineValues(*graph, b, rank, axis, lines, &per_channel) &&
            per_channel) {
          fused_node.inputs.push_back(b);
          absorbed.push_back(last_n);
          last_n = add_n;
        }
      }
      // A residual: Add of a computed value of exactly the sum's static shape (no broadcast).
      const int sum = graph->nodes[last_n].outputs[0];
      if (const int add_n = single(sum); add_n >= 0 && graph->nodes[add_n].op_type == "Add") {
        const int r = OtherInput(graph->nodes[add_n], sum);
        const auto& r_shape = graph->shapes[r == kNoValue ? sum : r];
        if (r != kNoValue && r != sum && !graph->IsConstant(r) && r_shape.has_value() &&
            r_shape == graph->shapes[sum] &&
            std::none_of(r_shape->begin(), r_shape->end(),
                         [](int64_t d) { return d == kUnknownDim; })) {
          fused_node.inputs.resize(7, kNoValue);  // bias or none
          fused_node.inputs.push_back(r);
          absorbed.push_back(last_n);
          last_n = add_n;
        }
      }
      // A Relu, or a Clip with constant bounds (MobileNets' Relu6).
      if (const int act_n = single(graph->nodes[last_n].outputs[0]);
          act_n >= 0 &&
          pass_util::SetFusedActivation(*graph, graph->nodes[act_n], &fused_node.attributes)) {
        absorbed.push_back(last_n);
        last_n = act_n;
      }
    }
    fused_node.outputs = graph->nodes[last_n].outputs;
    // In the last absorbed node's place: every input exists by then.
    graph->nodes[last_n] = std::move(fused_node);
    for (int k : absorbed) remove[k] = true;
    ++fused;
  }
  EraseMarked(remove, graph);
  return fused;
}

int FuseMatMulEpilogues(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  const std::vector<std::vector<int>> readers_of = ReadersOf(*graph);
  std::vector<bool> remove(graph->nodes.size(), false);
  int fused = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    Node& mm = graph->nodes[n];
    // A MatMul, or FuseIntegerToFloat's MatMul node (whose bias is input 6).
    const bool integer = mm.op_type == kMatMulIntegerToFloat;
    if ((mm.op_type != "MatMul" && !integer) || mm.inputs.size() != (integer ? 6 : 2) ||
        mm.outputs.size() != 1 || mm.inputs[0] == kNoValue || !graph->IsConstant(mm.inputs[1])) {
      continue;
    }
    const Value& w = *graph->constants[mm.inputs[1]];
    const auto& a_shape = graph->shapes[mm.inputs[0]];
    if (w.rank() != 2 || (!integer && (w.dtype() != DataType::kFp32 ||
                                       graph->dtypes[mm.inputs[0]] != DataType::kFp32))) {
      continue;
    }
    // A bias of higher rank than A would broadcast the output to more dims: only a 1-D bias when
    // A's rank is not known statically.
    const int max_bias_rank = a_shape.has_value() ? static_cast<int>(a_shape->size()) : 1;
    const int64_t cols = w.dim(1);
    int y = mm.outputs[0];
    std::vector<int> absorbed;
    // Bias: Add(y, b) with b a constant of the output's width, broadcast over the rows only.
    if (const int add_n = SingleReader(readers, readers_of, y); add_n >= 0) {
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

int FuseConvEltwise(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  const std::vector<int> producer = Producers(*graph);
  std::vector<bool> remove(graph->nodes.size(), false);
  // The Conv producing `value`, when `value` has exactly `reads` readers and the Conv has no
  // fused activation yet; else null.
  auto bare_conv = [&](int value, int reads) -> Node* {
    if (value == kNoValue || producer[value] < 0 || readers[value] != reads) return nullptr;
    Node& conv = graph->nodes[producer[value]];
    if (conv.op_type != "Conv" || conv.outputs.size() != 1 ||
        conv.attributes.Has("tessera_activation")) {
      return nullptr;
    }
    return &conv;
  };
  int fused = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& node = graph->nodes[n];
    if (node.outputs.size() != 1) continue;
    Node* conv = nullptr;
    std::string kind;
    if ((node.op_type == "LeakyRelu" || node.op_type == "Sigmoid" || node.op_type == "Tanh") &&
        node.inputs.size() == 1) {
      conv = bare_conv(node.inputs[0], 1);
      kind = node.op_type;
    } else if (node.op_type == "Mul" && node.inputs.size() == 2) {
      // SiLU: Mul(x, Sigmoid(x)) in either order, x read by nothing else, the Sigmoid's output
      // by nothing but this Mul.
      for (int side = 0; side < 2 && conv == nullptr; ++side) {
        const int x = node.inputs[side], s = node.inputs[1 - side];
        if (s == kNoValue || producer[s] < 0 || readers[s] != 1) continue;
        const Node& sigmoid = graph->nodes[producer[s]];
        if (sigmoid.op_type != "Sigmoid" || sigmoid.inputs.size() != 1 || sigmoid.inputs[0] != x ||
            sigmoid.outputs.size() != 1) {
          continue;
        }
        conv = bare_conv(x, 2);
        if (conv != nullptr) remove[producer[s]] = true;
      }
      kind = "Swish";
    }
    if (conv == nullptr) continue;
    Attribute name;
    name.kind = Attribute::Kind::kString;
    name.s = kind;
    conv->attributes.Set("tessera_activation", name);
    if (kind == "LeakyRelu") {
      Attribute alpha;
      alpha.kind = Attribute::Kind::kFloat;
      alpha.f = node.attributes.GetFloat("alpha", 0.01f);
      conv->attributes.Set("tessera_alpha", alpha);
    }
    conv->outputs[0] = node.outputs[0];
    remove[n] = true;
    ++fused;
  }
  EraseMarked(remove, graph);
  return fused;
}

int FuseBatchNormRelu(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  const std::vector<int> producer = Producers(*graph);
  std::vector<bool> remove(graph->nodes.size(), false);
  int fused = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& relu = graph->nodes[n];
    if (relu.op_type != "Relu" || relu.inputs.size() != 1 || relu.outputs.size() != 1) continue;
    const int x = relu.inputs[0];
    if (x == kNoValue || producer[x] < 0 || readers[x] != 1) continue;
    Node& norm = graph->nodes[producer[x]];
    if (norm.op_type != "BatchNormalization" || norm.outputs.size() != 1 ||
        norm.attributes.Has("tessera_activation")) {
      continue;
    }
    Attribute name;
    name.kind = Attribute::Kind::kString;
    name.s = "Relu";
    norm.attributes.Set("tessera_activation", name);
    norm.outputs[0] = relu.outputs[0];
    remove[n] = true;
    ++fused;
  }
  EraseMarked(remove, graph);
  return fused;
}

int FuseConcatBatchNorm(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  const std::vector<int> producer = Producers(*graph);
  std::vector<bool> remove(graph->nodes.size(), false);
  int fused = 0;
  for (Node& norm : graph->nodes) {
    if (norm.op_type != "BatchNormalization" || norm.inputs.size() != 5 ||
        norm.outputs.size() != 1 || norm.attributes.Has("tessera_concat")) {
      continue;
    }
    const int x = norm.inputs[0];
    if (x == kNoValue || producer[x] < 0 || readers[x] != 1) continue;
    const Node& concat = graph->nodes[producer[x]];
    if (concat.op_type != "Concat" || concat.outputs.size() != 1 || concat.inputs.empty() ||
        graph->dtypes[x] != DataType::kFp32) {
      continue;
    }
    // Channels only: axis 1, or counted from the end where the rank is known.
    const int64_t axis = concat.attributes.GetInt("axis", 0);
    const auto& shape = graph->shapes[x];
    if (axis != 1 && !(shape.has_value() && axis == 1 - static_cast<int64_t>(shape->size()))) {
      continue;
    }
    if (std::count(concat.inputs.begin(), concat.inputs.end(), kNoValue) != 0) continue;
    norm.inputs[0] = concat.inputs[0];
    norm.inputs.insert(norm.inputs.end(), concat.inputs.begin() + 1, concat.inputs.end());
    Attribute count;
    count.kind = Attribute::Kind::kInt;
    count.i = static_cast<int64_t>(concat.inputs.size());
    norm.attributes.Set("tessera_concat", count);
    remove[producer[x]] = true;
    ++fused;
  }
  EraseMarked(remove, graph);
  return fused;
}

int FuseMatMulScale(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  const std::vector<int> producer = Producers(*graph);
  std::vector<bool> remove(graph->nodes.size(), false);
  int fused = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& scale = graph->nodes[n];
    const bool div = scale.op_type == "Div";
    if ((!div && scale.op_type != "Mul") || scale.inputs.size() != 2 || scale.outputs.size() != 1) {
      continue;
    }
    // Div's product is its first input; Mul's either.
    for (int side = 0; side < (div ? 1 : 2); ++side) {
      const int x = scale.inputs[side];
      float c = 0.0f;
      if (x == kNoValue || producer[x] < 0 || readers[x] != 1 ||
          !ConstantScalar(*graph, scale.inputs[1 - side], &c) || !std::isfinite(c) ||
          (div && c == 0.0f)) {
        continue;
      }
      Node& product = graph->nodes[producer[x]];
      if (product.op_type != "MatMul" || product.inputs.size() != 2 ||
          product.outputs.size() != 1 || product.attributes.Has("tessera_activation") ||
          product.attributes.Has("tessera_scale")) {
        continue;
      }
      Attribute alpha;
      alpha.kind = Attribute::Kind::kFloat;
      alpha.f = div ? 1.0f / c : c;
      product.attributes.Set("tessera_scale", alpha);
      product.outputs[0] = scale.outputs[0];
      remove[n] = true;
      ++fused;
      break;
    }
  }
  EraseMarked(remove, graph);
  return fused;
}

}  // namespace tessera::engine
