// FuseQdqConv (graph_passes.h): the DequantizeLinear -> Conv -> QuantizeLinear groups of a
// statically quantized (QDQ) model become QLinearConv nodes, as onnxruntime's QDQ transformer
// makes them, so that the CPU runs integer convolutions on the 8-bit activations.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/graph_pass_util.h"
#include "engine/graph_passes.h"

namespace tessera::engine {
namespace {

using pass_util::EraseMarked;
using pass_util::Producers;
using pass_util::ReaderCounts;

bool IsEightBit(DataType t) { return t == DataType::kUint8 || t == DataType::kInt8; }

// The constant `id` if it is one value (a scalar or [1]) of type `dtype`, else null.
const Value* ConstantScalarOf(const Graph& graph, int id, DataType dtype) {
  if (!graph.IsConstant(id)) return nullptr;
  const Value& v = *graph.constants[id];
  return v.dtype() == dtype && v.num_elements() == 1 && v.rank() <= 1 ? &v : nullptr;
}

// A QuantizeLinear or DequantizeLinear node's parts: the 8-bit side's type, and a constant
// per-tensor scale with a constant zero point (kNoValue when the node has none: 0 of `type`).
struct QdqParts {
  int x = kNoValue, scale = kNoValue, zero = kNoValue;
  DataType type = DataType::kInvalid;
};

// `node` (a QuantizeLinear when `quantize`, else a DequantizeLinear) with a constant FP32 scale
// of one value and a constant 8-bit zero point of one value or none.
bool PerTensorQdq(const Graph& graph, const Node& node, bool quantize, QdqParts* out) {
  if (node.inputs.size() < 2 || node.inputs[0] == kNoValue || node.outputs.size() != 1 ||
      node.attributes.Has("saturate") ||
      ConstantScalarOf(graph, node.inputs[1], DataType::kFp32) == nullptr) {
    return false;
  }
  out->x = node.inputs[0];
  out->scale = node.inputs[1];
  out->zero = node.inputs.size() > 2 ? node.inputs[2] : kNoValue;
  out->type = graph.dtypes[quantize ? node.outputs[0] : node.inputs[0]];
  if (out->zero != kNoValue && ConstantScalarOf(graph, out->zero, out->type) == nullptr) {
    return false;
  }
  return IsEightBit(out->type);
}

// The DequantizeLinear producing `id`, or null.
const Node* DequantizeOf(const Graph& graph, const std::vector<int>& producer, int id) {
  if (id == kNoValue || producer[id] < 0) return nullptr;
  const Node& node = graph.nodes[producer[id]];
  return node.op_type == "DequantizeLinear" ? &node : nullptr;
}

// Whether DequantizeLinear `dq` has no zero point or a constant one of `type`, all zeros.
bool ZeroPointIsZero(const Graph& graph, const Node& dq, DataType type) {
  if (dq.inputs.size() < 3 || dq.inputs[2] == kNoValue) return true;
  if (!graph.IsConstant(dq.inputs[2])) return false;
  const Value& z = *graph.constants[dq.inputs[2]];
  if (z.dtype() != type) return false;
  const auto* bytes = static_cast<const uint8_t*>(z.raw());
  for (size_t i = 0; i < z.byte_size(); ++i) {
    if (bytes[i] != 0) return false;
  }
  return true;
}

// A Conv's quantized weights: DequantizeLinear of constant INT8 [M, C / group, kH, kW] weights
// with zero point 0 and a constant scale per tensor or per output channel (axis 0). Sets the
// per-channel scales.
bool QuantizedWeights(const Graph& graph, const Node& dq, std::vector<float>* scales) {
  if (dq.inputs.size() < 2 || !graph.IsConstant(dq.inputs[0]) || !graph.IsConstant(dq.inputs[1])) {
    return false;
  }
  const Value& w = *graph.constants[dq.inputs[0]];
  const Value& s = *graph.constants[dq.inputs[1]];
  if (w.dtype() != DataType::kInt8 || w.rank() != 4 || s.dtype() != DataType::kFp32) return false;
  const int64_t m = w.dim(0);
  const bool per_channel = s.rank() == 1 && s.dim(0) == m && m > 1;
  if (per_channel && dq.attributes.GetInt("axis", 1) != 0) return false;
  if (!per_channel && !(s.num_elements() == 1 && s.rank() <= 1)) return false;
  if (!ZeroPointIsZero(graph, dq, DataType::kInt8)) return false;
  scales->resize(m);
  for (int64_t c = 0; c < m; ++c) (*scales)[c] = s.data<float>()[per_channel ? c : 0];
  return true;
}

// The Conv's bias (`id`: a constant FP32 [M], or DequantizeLinear of a constant INT32 [M] with
// zero point 0) in units of x_scale * w_scale[m], the integer convolution's sums. A bias that
// onnxruntime quantized with exactly that scale is taken as it is.
bool IntegerBias(const Graph& graph, const std::vector<int>& producer, int id, float x_scale,
                 const std::vector<float>& w_scales, Value* out) {
  const int64_t m = static_cast<int64_t>(w_scales.size());
  std::vector<double> real(m);
  std::vector<int32_t> exact(m);
  bool same_scale = true;
  if (const Node* dq = DequantizeOf(graph, producer, id)) {
    if (dq->inputs.size() < 2 || !graph.IsConstant(dq->inputs[0]) ||
        !graph.IsConstant(dq->inputs[1]) || !ZeroPointIsZero(graph, *dq, DataType::kInt32)) {
      return false;
    }
    const Value& b = *graph.constants[dq->inputs[0]];
    const Value& s = *graph.constants[dq->inputs[1]];
    const bool per_channel = s.rank() == 1 && s.dim(0) == m;
    if (b.dtype() != DataType::kInt32 || b.rank() != 1 || b.dim(0) != m ||
        s.dtype() != DataType::kFp32 || (!per_channel && s.num_elements() != 1)) {
      return false;
    }
    for (int64_t c = 0; c < m; ++c) {
      const float scale = s.data<float>()[per_channel ? c : 0];
      exact[c] = b.data<int32_t>()[c];
      real[c] = static_cast<double>(exact[c]) * scale;
      same_scale &= scale == x_scale * w_scales[c];
    }
  } else if (graph.IsConstant(id)) {
    const Value& b = *graph.constants[id];
    if (b.dtype() != DataType::kFp32 || b.rank() != 1 || b.dim(0) != m) return false;
    for (int64_t c = 0; c < m; ++c) real[c] = b.data<float>()[c];
    same_scale = false;
  } else {
    return false;
  }
  *out = Value::Allocate(DataType::kInt32, {m});
  for (int64_t c = 0; c < m; ++c) {
    double q = same_scale ? exact[c] : std::nearbyint(real[c] / (x_scale * w_scales[c]));
    q = std::fmin(std::fmax(q, std::numeric_limits<int32_t>::min()),
                  std::numeric_limits<int32_t>::max());
    out->mutable_data<int32_t>()[c] = static_cast<int32_t>(q);
  }
  return true;
}

// `id` itself, or a new constant 0 of `type` when the node had no zero point.
int ZeroPoint(Graph* graph, int id, DataType type, const std::string& name) {
  if (id != kNoValue) return id;
  const int zero = graph->AddValue(name);
  graph->constants[zero] = Value::Zeros(type, {});
  return zero;
}

int NewConstant(Graph* graph, const std::string& name, Value value) {
  const int id = graph->AddValue(name);
  graph->constants[id] = std::move(value);
  return id;
}

}  // namespace

int FuseQdqConv(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  const std::vector<int> producer = Producers(*graph);
  std::vector<bool> remove(graph->nodes.size(), false);
  int fused = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& q = graph->nodes[n];
    QdqParts y;
    if (q.op_type != "QuantizeLinear" || !PerTensorQdq(*graph, q, true, &y)) continue;
    // Conv -> QuantizeLinear, or Conv -> Relu -> QuantizeLinear; nothing else reads between.
    int conv_out = y.x;
    int relu = -1;
    if (readers[conv_out] != 1 || producer[conv_out] < 0) continue;
    if (graph->nodes[producer[conv_out]].op_type == "Relu") {
      relu = producer[conv_out];
      if (graph->nodes[relu].inputs.size() != 1) continue;
      conv_out = graph->nodes[relu].inputs[0];
      if (readers[conv_out] != 1 || producer[conv_out] < 0) continue;
    }
    const int conv_index = producer[conv_out];
    const Node& conv = graph->nodes[conv_index];
    if (conv.op_type != "Conv" || conv.outputs.size() != 1 || conv.inputs.size() < 2 ||
        conv.attributes.Has("tessera_activation") || remove[conv_index]) {
      continue;
    }
    const Node* dx = DequantizeOf(*graph, producer, conv.inputs[0]);
    const Node* dw = DequantizeOf(*graph, producer, conv.inputs[1]);
    QdqParts x;
    std::vector<float> w_scales;
    if (dx == nullptr || dw == nullptr || !PerTensorQdq(*graph, *dx, false, &x) ||
        !QuantizedWeights(*graph, *dw, &w_scales)) {
      continue;
    }
    const float x_scale = graph->constants[x.scale]->data<float>()[0];
    Value bias;
    const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] != kNoValue;
    if (has_bias && !IntegerBias(*graph, producer, conv.inputs[2], x_scale, w_scales, &bias)) {
      continue;
    }
    const std::string base = graph->value_names[q.outputs[0]];
    Node fused_node;
    fused_node.name = conv.name;
    fused_node.op_type = "QLinearConv";
    fused_node.opset = conv.opset;
    fused_node.attributes = conv.attributes;
    if (relu >= 0) {
      Attribute activation;
      activation.kind = Attribute::Kind::kString;
      activation.s = "Relu";
      fused_node.attributes.Set("tessera_activation", activation);
    }
    fused_node.inputs = {x.x,
                         x.scale,
                         ZeroPoint(graph, x.zero, x.type, base + "/x_zero_point"),
                         dw->inputs[0],
                         dw->inputs[1],
                         ZeroPoint(graph, dw->inputs.size() > 2 ? dw->inputs[2] : kNoValue,
                                   DataType::kInt8, base + "/w_zero_point"),
                         y.scale,
                         ZeroPoint(graph, y.zero, y.type, base + "/y_zero_point")};
    if (has_bias) fused_node.inputs.push_back(NewConstant(graph, base + "/bias", std::move(bias)));
    fused_node.outputs = {q.outputs[0]};
    // The QuantizeLinear's output is now made where the Conv was, before any of its readers.
    graph->nodes[conv_index] = std::move(fused_node);
    remove[n] = true;
    if (relu >= 0) remove[relu] = true;
    ++fused;
  }
  EraseMarked(remove, graph);
  return fused;
}

int FuseQdqAdd(Graph* graph) {
  const std::vector<int> readers = ReaderCounts(*graph);
  const std::vector<int> producer = Producers(*graph);
  std::vector<bool> remove(graph->nodes.size(), false);
  int fused = 0;
  for (size_t n = 0; n < graph->nodes.size(); ++n) {
    const Node& q = graph->nodes[n];
    QdqParts c;
    if (q.op_type != "QuantizeLinear" || !PerTensorQdq(*graph, q, true, &c)) continue;
    if (readers[c.x] != 1 || producer[c.x] < 0) continue;
    const int add_index = producer[c.x];
    const Node& add = graph->nodes[add_index];
    if (add.op_type != "Add" || add.inputs.size() != 2 || add.outputs.size() != 1) continue;
    const Node* da = DequantizeOf(*graph, producer, add.inputs[0]);
    const Node* db = DequantizeOf(*graph, producer, add.inputs[1]);
    QdqParts a, b;
    if (da == nullptr || db == nullptr || !PerTensorQdq(*graph, *da, false, &a) ||
        !PerTensorQdq(*graph, *db, false, &b)) {
      continue;
    }
    // Same static shapes only: the kernel does not broadcast.
    const auto& sa = graph->shapes[a.x];
    const auto& sb = graph->shapes[b.x];
    if (!sa.has_value() || !sb.has_value() || *sa != *sb ||
        std::any_of(sa->begin(), sa->end(), [](int64_t d) { return d == kUnknownDim; })) {
      continue;
    }
    const std::string base = graph->value_names[q.outputs[0]];
    Node fused_node;
    fused_node.name = add.name;
    fused_node.op_type = "com.microsoft.QLinearAdd";
    fused_node.opset = 1;
    fused_node.inputs = {a.x,
                         a.scale,
                         ZeroPoint(graph, a.zero, a.type, base + "/a_zero_point"),
                         b.x,
                         b.scale,
                         ZeroPoint(graph, b.zero, b.type, base + "/b_zero_point"),
                         c.scale,
                         ZeroPoint(graph, c.zero, c.type, base + "/c_zero_point")};
    fused_node.outputs = {q.outputs[0]};
    graph->nodes[add_index] = std::move(fused_node);
    remove[n] = true;
    ++fused;
  }
  EraseMarked(remove, graph);
  return fused;
}

}  // namespace tessera::engine
