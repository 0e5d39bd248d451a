// InferShapes and FoldShapeSubgraphs (graph_passes.h). One forward sweep in topological order
// computes each value's static shape and dtype and, for small int64 tensors (the shape vectors
// PyTorch exports compute with Shape/Gather/Unsqueeze/Concat), each element's value where known.
// The per-node rules it applies are in shape_inference_rules.h.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include "engine/graph_passes.h"
#include "engine/shape_inference_rules.h"

namespace tessera::engine {
namespace {

using shape_rules::Analysis;
using shape_rules::AxesOf;
using shape_rules::Axis;
using shape_rules::BroadcastDim;
using shape_rules::BroadcastShape;
using shape_rules::DimFromElement;
using shape_rules::ElementFromDim;
using shape_rules::Elements;
using shape_rules::ElementsOf;
using shape_rules::Factor;
using shape_rules::IsSym;
using shape_rules::kMaxTrackedElements;
using shape_rules::kSymBatch;
using shape_rules::kSymUnknown;
using shape_rules::LabelEncoderOutputType;
using shape_rules::ReshapeShape;
using shape_rules::SliceRange;
using shape_rules::SliceSpec;
using shape_rules::SliceSpecOf;
using shape_rules::Static;
using shape_rules::UnshapedOutputType;
using shape_rules::WindowDims;

void InferNode(const Node& node, Analysis* a) {
  const std::string& op = node.op_type;
  auto shape_of = [&](size_t i) -> const std::optional<Shape>& {
    static const std::optional<Shape> kNone;
    return i < node.inputs.size() && node.inputs[i] != kNoValue ? a->shapes[node.inputs[i]] : kNone;
  };
  auto data_of = [&](size_t i) -> const std::optional<Elements>& {
    static const std::optional<Elements> kNone;
    return i < node.inputs.size() && node.inputs[i] != kNoValue ? a->data[node.inputs[i]] : kNone;
  };
  const DataType in_dtype = !node.inputs.empty() && node.inputs[0] != kNoValue
                                ? a->dtypes[node.inputs[0]]
                                : DataType::kInvalid;
  const std::optional<Shape>& x = shape_of(0);
  std::optional<Shape> out;
  DataType dtype = in_dtype;
  const Attributes& attrs = node.attributes;

  if (op == "Identity" || op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "Clip" ||
      op == "Softmax" || op == "BatchNormalization") {
    out = x;
  } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    if (x && shape_of(1)) out = BroadcastShape(*x, *shape_of(1));
  } else if (op == "Conv" || op == "QLinearConv" || op == "ConvInteger") {
    const bool quantized = op == "QLinearConv";
    const auto& w = shape_of(quantized ? 3 : 1);
    if (x && w && x->size() == w->size() && x->size() >= 3) {
      Shape kernel(w->begin() + 2, w->end());
      out = Shape{(*x)[0], (*w)[0]};
      WindowDims(node, *x, kernel, false, &*out);
    }
    // QLinearConv's output has y_zero_point's type.
    if (quantized) dtype = node.inputs.size() > 7 ? a->dtypes[node.inputs[7]] : DataType::kInvalid;
    if (op == "ConvInteger") dtype = DataType::kInt32;
  } else if (op == "MaxPool" || op == "AveragePool") {
    std::vector<int64_t> kernel = attrs.GetInts("kernel_shape");
    if (x && x->size() == kernel.size() + 2) {
      out = Shape{(*x)[0], (*x)[1]};
      WindowDims(node, *x, kernel, attrs.GetInt("ceil_mode", 0) != 0, &*out);
    }
  } else if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    if (x && x->size() >= 3) {
      out = Shape(x->size(), 1);
      (*out)[0] = (*x)[0];
      (*out)[1] = (*x)[1];
    }
  } else if (op == "Gemm") {
    const auto& b = shape_of(1);
    if (x && b && x->size() == 2 && b->size() == 2) {
      out = Shape{(*x)[attrs.GetInt("transA", 0) != 0 ? 1 : 0],
                  (*b)[attrs.GetInt("transB", 0) != 0 ? 0 : 1]};
    }
  } else if (op == "MatMul" || op == "MatMulInteger" || op == "QLinearMatMul") {
    const auto& b = shape_of(op == "QLinearMatMul" ? 3 : 1);
    if (x && b && !x->empty() && !b->empty()) {
      Shape sa = *x, sb = *b;
      const bool av = sa.size() == 1, bv = sb.size() == 1;
      if (av) sa.insert(sa.begin(), 1);
      if (bv) sb.push_back(1);
      out = BroadcastShape(Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2));
      if (!av) out->push_back(sa[sa.size() - 2]);
      if (!bv) out->push_back(sb.back());
    }
    if (op == "MatMulInteger") dtype = DataType::kInt32;
    // QLinearMatMul's output has y_zero_point's type.
    if (op == "QLinearMatMul") {
      dtype = node.inputs.size() > 7 ? a->dtypes[node.inputs[7]] : DataType::kInvalid;
    }
  } else if (op == "Reshape") {
    out = ReshapeShape(node, *a);
  } else if (op == "Flatten") {
    if (x) {
      auto axis = Axis(attrs.GetInt("axis", 1), x->size() + 1);
      if (axis) {
        Factor rows, cols;
        for (size_t d = 0; d < x->size(); ++d)
          (static_cast<int>(d) < *axis ? rows : cols).Add((*x)[d]);
        out = Shape{rows.AsDim(), cols.AsDim()};
      }
    }
  } else if (op == "Transpose") {
    if (x) {
      std::vector<int64_t> perm = attrs.GetInts("perm");
      if (perm.empty()) {
        for (size_t d = x->size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
      }
      if (perm.size() == x->size()) {
        out = Shape();
        for (int64_t p : perm)
          out->push_back(p >= 0 && p < static_cast<int64_t>(x->size()) ? (*x)[p] : kUnknownDim);
      }
    }
  } else if (op == "Pad") {
    // pads: [begins..., ends...] over `axes` (all by default; input 3 from opset 18), from the
    // attribute before opset 11 and input 1 after. PyTorch puts a zero one before DenseNet's pools.
    std::optional<Elements> pads;
    if (attrs.Has("pads")) {
      pads = attrs.GetInts("pads");
    } else {
      pads = data_of(1);
    }
    if (x && pads && std::none_of(pads->begin(), pads->end(), IsSym)) {
      Elements axes;
      if (const auto& given = data_of(3)) {
        axes = *given;
      } else if (node.inputs.size() <= 3 || node.inputs[3] == kNoValue) {
        for (size_t d = 0; d < x->size(); ++d) axes.push_back(static_cast<int64_t>(d));
      }
      const size_t n = axes.size();
      if (n > 0 && pads->size() == 2 * n) {
        out = *x;
        for (size_t k = 0; k < n; ++k) {
          const auto axis = IsSym(axes[k]) ? std::nullopt : Axis(axes[k], x->size());
          if (!axis) {
            out.reset();
            break;
          }
          int64_t& d = (*out)[*axis];
          const int64_t grow = (*pads)[k] + (*pads)[k + n];
          if (grow != 0) d = Static(d) && d + grow >= 0 ? d + grow : kUnknownDim;
        }
      }
    }
  } else if (op == "Concat") {
    bool all = true;
    for (size_t i = 0; i < node.inputs.size(); ++i) all = all && shape_of(i).has_value();
    if (all && x && !x->empty()) {
      auto axis = Axis(attrs.GetInt("axis", 0), x->size());
      if (axis) {
        out = *x;
        int64_t sum = 0;
        bool known = true;
        for (size_t i = 0; i < node.inputs.size(); ++i) {
          const Shape& s = *shape_of(i);
          if (s.size() != x->size()) return;  // inconsistent: leave unknown
          known = known && Static(s[*axis]);
          sum += s[*axis];
          for (size_t d = 0; d < s.size(); ++d) {
            if (static_cast<int>(d) != *axis && (Static(s[d]) || (*out)[d] == kUnknownDim)) {
              (*out)[d] = s[d];
            }
          }
        }
        (*out)[*axis] = known ? sum : kUnknownDim;
      }
    }
  } else if (op == "Gather") {
    const auto& idx = shape_of(1);
    if (x && idx && !x->empty()) {
      auto axis = Axis(attrs.GetInt("axis", 0), x->size());
      if (axis) {
        out = Shape(x->begin(), x->begin() + *axis);
        out->insert(out->end(), idx->begin(), idx->end());
        out->insert(out->end(), x->begin() + *axis + 1, x->end());
      }
    }
  } else if (op == "Shape") {
    dtype = DataType::kInt64;
    if (x) {
      const auto rank = static_cast<int64_t>(x->size());
      int64_t start = attrs.GetInt("start", 0), end = attrs.GetInt("end", rank);
      if (start < 0) start += rank;
      if (end < 0) end += rank;
      start = std::clamp<int64_t>(start, 0, rank);
      end = std::clamp<int64_t>(end, start, rank);
      out = Shape{end - start};
      Elements e;
      for (int64_t d = start; d < end; ++d) e.push_back(ElementFromDim((*x)[d]));
      a->data[node.outputs[0]] = e;
    }
  } else if (op == "Unsqueeze") {
    auto axes = AxesOf(node, *a);
    if (x && axes) {
      const size_t rank = x->size() + axes->size();
      std::vector<bool> inserted(rank, false);
      for (int64_t ax : *axes) {
        auto n = Axis(ax, rank);
        if (!n) return;
        inserted[*n] = true;
      }
      out = Shape();
      size_t next = 0;
      for (size_t d = 0; d < rank; ++d)
        out->push_back(inserted[d] || next >= x->size() ? 1 : (*x)[next++]);
    }
  } else if (op == "Squeeze") {
    auto axes = AxesOf(node, *a);
    if (x && axes) {
      std::vector<bool> drop(x->size(), false);
      for (size_t d = 0; d < x->size() && axes->empty(); ++d) {
        if (!Static((*x)[d])) return;  // a runtime dim might be 1: rank unknown
        drop[d] = (*x)[d] == 1;
      }
      for (int64_t ax : *axes) {
        auto n = Axis(ax, x->size());
        if (!n) return;
        drop[*n] = true;
      }
      out = Shape();
      for (size_t d = 0; d < x->size(); ++d) {
        if (!drop[d]) out->push_back((*x)[d]);
      }
    }
  } else if (op == "Cast") {
    out = x;
    const int64_t to = attrs.GetInt("to", 0);  // onnx.TensorProto.DataType
    dtype = to == 1   ? DataType::kFp32
            : to == 7 ? DataType::kInt64
            : to == 8 ? DataType::kString
                      : DataType::kInvalid;
  } else if (op == "com.microsoft.QLinearAdd") {
    if (x && shape_of(3) && *x == *shape_of(3)) out = x;
    dtype = node.inputs.size() > 7 ? a->dtypes[node.inputs[7]] : DataType::kInvalid;
  } else if (op == "DynamicQuantizeLinear") {
    out = x;
    dtype = DataType::kUint8;
    // y_scale (FP32) and y_zero_point (UINT8) are scalars.
    for (size_t i = 1; i < node.outputs.size() && i < 3; ++i) {
      if (node.outputs[i] == kNoValue) continue;
      a->shapes[node.outputs[i]] = Shape{};
      a->dtypes[node.outputs[i]] = i == 1 ? DataType::kFp32 : DataType::kUint8;
    }
  } else if (op == "QuantizeLinear" || op == "DequantizeLinear") {
    out = x;
    const bool zero_point = node.inputs.size() > 2 && node.inputs[2] != kNoValue;
    dtype = op == "DequantizeLinear" ? DataType::kFp32
            : zero_point             ? a->dtypes[node.inputs[2]]
                                     : DataType::kUint8;
  } else if (op == "Slice") {
    auto spec = x ? SliceSpecOf(node, *a, x->size()) : std::nullopt;
    if (spec) {
      out = x;
      for (size_t i = 0; i < spec->axes.size(); ++i) {
        int64_t& d = (*out)[spec->axes[i]];
        if (Static(d)) {
          auto range = SliceRange(d, spec->starts[i], spec->ends[i], spec->steps[i]);
          d = range ? range->first : kUnknownDim;
        } else if (!(spec->starts[i] == 0 && spec->steps[i] == 1 &&
                     spec->ends[i] >= std::numeric_limits<int32_t>::max())) {
          d = kUnknownDim;  // only the whole of a runtime dim keeps its symbol
        }
      }
      const auto& d = data_of(0);
      if (d && x->size() == 1 && static_cast<int64_t>(d->size()) == (*x)[0]) {
        auto range = SliceRange((*x)[0], spec->starts[0], spec->ends[0], spec->steps[0]);
        if (range) {
          Elements e;
          for (int64_t k = 0, i = range->second; k < range->first; ++k, i += spec->steps[0]) {
            e.push_back((*d)[i]);
          }
          a->data[node.outputs[0]] = e;
        }
      }
    }
  } else {
    // An op whose shape this pass does not compute: its shape stays unknown, its type may not.
    dtype = UnshapedOutputType(node, *a, in_dtype);
  }
  if (node.outputs.empty()) return;
  const int y = node.outputs[0];
  if (!a->shapes[y]) a->shapes[y] = out;
  if (a->dtypes[y] == DataType::kInvalid) a->dtypes[y] = dtype;

  // Element values of small int64 results.
  if (dtype != DataType::kInt64 || a->data[y] || !out || out->size() > 1) return;
  if (op == "Identity" || op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" ||
      op == "Flatten" || (op == "Cast" && in_dtype == DataType::kInt64)) {
    a->data[y] = data_of(0);  // element order is unchanged
  } else if (op == "Gather") {
    const auto& d = data_of(0);
    const auto& idx = data_of(1);
    if (d && idx && x && x->size() == 1 && std::none_of(idx->begin(), idx->end(), IsSym)) {
      Elements e;
      const auto len = static_cast<int64_t>(d->size());
      for (int64_t i : *idx) {
        if (i < 0) i += len;
        if (i < 0 || i >= len) return;
        e.push_back((*d)[i]);
      }
      a->data[y] = e;
    }
  } else if (op == "Concat") {
    Elements e;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const auto& d = data_of(i);
      if (!d) return;
      e.insert(e.end(), d->begin(), d->end());
    }
    if (static_cast<int64_t>(e.size()) <= kMaxTrackedElements) a->data[y] = e;
  } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    const auto& l = data_of(0);
    const auto& r = data_of(1);
    if (!l || !r || (l->size() != r->size() && l->size() != 1 && r->size() != 1)) return;
    Elements e(std::max(l->size(), r->size()));
    for (size_t i = 0; i < e.size(); ++i) {
      const int64_t p = (*l)[l->size() == 1 ? 0 : i], q = (*r)[r->size() == 1 ? 0 : i];
      if (!IsSym(p) && !IsSym(q)) {
        if (op == "Div" && q == 0) return;
        e[i] = op == "Add" ? p + q : op == "Sub" ? p - q : op == "Mul" ? p * q : p / q;
      } else if ((op == "Mul" || op == "Div") && q == 1) {
        e[i] = p;  // keeps the batch symbol: x*1, x/1
      } else if ((op == "Add" || op == "Sub") && q == 0) {
        e[i] = p;
      } else if ((op == "Mul" && p == 1) || (op == "Add" && p == 0)) {
        e[i] = q;
      } else {
        e[i] = kSymUnknown;
      }
    }
    a->data[y] = e;
  }
}

Analysis Analyze(const Graph& graph) {
  const size_t values = graph.value_names.size();
  Analysis a;
  a.shapes.resize(values);
  a.dtypes.assign(values, DataType::kInvalid);
  a.data.resize(values);
  for (size_t id = 0; id < values; ++id) {
    if (!graph.constants[id]) continue;
    a.shapes[id] = graph.constants[id]->shape();
    a.dtypes[id] = graph.constants[id]->dtype();
    a.data[id] = ElementsOf(*graph.constants[id]);
  }
  for (size_t i = 0; i < graph.input_ids.size(); ++i) {
    const int id = graph.input_ids[i];
    a.dtypes[id] = graph.inputs[i].dtype;
    if (!graph.input_rank_known[i]) continue;
    Shape s = graph.inputs[i].shape;
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] < 0) s[d] = d == 0 ? kBatchDim : kUnknownDim;
    }
    a.shapes[id] = s;
  }
  for (const Node& node : graph.nodes) InferNode(node, &a);
  return a;
}

void Store(Analysis a, Graph* graph) {
  graph->shapes = std::move(a.shapes);
  graph->dtypes = std::move(a.dtypes);
  graph->dynamic_batch = false;
  for (size_t i = 0; i < graph->inputs.size(); ++i) {
    const Shape& s = graph->inputs[i].shape;
    if (graph->input_rank_known[i] && !s.empty() && s[0] < 0) graph->dynamic_batch = true;
  }
}

}  // namespace

void InferShapes(Graph* graph) { Store(Analyze(*graph), graph); }

int FoldShapeSubgraphs(Graph* graph, int* reshapes_rewritten) {
  Analysis a = Analyze(*graph);
  int folded = 0, rewritten = 0;
  for (const Node& node : graph->nodes) {
    for (int y : node.outputs) {
      if (graph->IsConstant(y) || !a.data[y] || !a.shapes[y] || a.dtypes[y] != DataType::kInt64 ||
          std::any_of(a.data[y]->begin(), a.data[y]->end(), IsSym)) {
        continue;
      }
      Value v = Value::Allocate(DataType::kInt64, *a.shapes[y]);
      if (v.num_elements() != static_cast<int64_t>(a.data[y]->size())) continue;
      std::copy(a.data[y]->begin(), a.data[y]->end(), v.mutable_data<int64_t>());
      graph->constants[y] = std::move(v);
      ++folded;
    }
  }
  for (Node& node : graph->nodes) {
    if (node.op_type != "Reshape" || node.inputs.size() < 2 || node.inputs[1] == kNoValue ||
        graph->IsConstant(node.inputs[1]) || node.attributes.GetInt("allowzero", 0) != 0) {
      continue;
    }
    const auto& target = a.data[node.inputs[1]];
    const auto& x = a.shapes[node.inputs[0]];
    if (!target || !x) continue;
    Elements fixed = *target;
    bool ok = true;
    for (size_t i = 0; i < fixed.size() && ok; ++i) {
      if (fixed[i] == kSymBatch && i < x->size() && (*x)[i] == kBatchDim) {
        fixed[i] = 0;  // "copy input dim i", which is the batch
      } else {
        ok = !IsSym(fixed[i]);
      }
    }
    if (!ok) continue;
    const int id = graph->AddValue(graph->value_names[node.inputs[1]] + "_static");
    Value v = Value::Allocate(DataType::kInt64, {static_cast<int64_t>(fixed.size())});
    std::copy(fixed.begin(), fixed.end(), v.mutable_data<int64_t>());
    graph->constants[id] = std::move(v);
    node.inputs[1] = id;
    ++rewritten;
  }
  if (folded + rewritten > 0) a = Analyze(*graph);
  Store(std::move(a), graph);
  if (reshapes_rewritten != nullptr) *reshapes_rewritten = rewritten;
  return folded + rewritten;
}

}  // namespace tessera::engine
