// InferShapes and FoldShapeSubgraphs (graph_passes.h). One forward sweep in topological order
// computes each value's static shape and dtype and, for small int64 tensors (the shape vectors
// PyTorch exports compute with Shape/Gather/Unsqueeze/Concat), each element's value where known.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>

#include "engine/cpu/ops.h"
#include "engine/graph_passes.h"

namespace tessera::engine {
namespace {

// Element values of tracked int64 tensors: the batch size, or some value known only at Run.
// Far outside any real dim or Reshape code (-1, 0), so they never collide with literals.
constexpr int64_t kSymBatch = std::numeric_limits<int64_t>::min();
constexpr int64_t kSymUnknown = std::numeric_limits<int64_t>::min() + 1;
constexpr int64_t kMaxTrackedElements = 64;

bool IsSym(int64_t v) { return v == kSymBatch || v == kSymUnknown; }
bool Static(int64_t d) { return d >= 0; }

using Elements = std::vector<int64_t>;

struct Analysis {
  std::vector<std::optional<Shape>> shapes;
  std::vector<DataType> dtypes;
  std::vector<std::optional<Elements>> data;  // int64, rank <= 1, <= kMaxTrackedElements
};

// Dims that numpy-broadcast together (static sizes win over symbols: a symbol must equal them or
// 1).
int64_t BroadcastDim(int64_t a, int64_t b) {
  if (a == 1) return b;
  if (b == 1 || a == b) return a;
  if (Static(a) && Static(b)) return kUnknownDim;  // inconsistent; the kernel will say so
  if (Static(a)) return a;
  if (Static(b)) return b;
  return kUnknownDim;
}

std::optional<Shape> BroadcastShape(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    out[i] = BroadcastDim(da, db);
  }
  return out;
}

// The product of some dims as static_product × batch^batch_count, or unknown.
struct Factor {
  int64_t product = 1;
  int batch = 0;
  bool unknown = false;
  void Add(int64_t d) {
    if (d == kBatchDim) {
      ++batch;
    } else if (Static(d)) {
      product *= d;
    } else {
      unknown = true;
    }
  }
  // The dim this product is, when expressible.
  int64_t AsDim() const {
    if (unknown || batch > 1) return kUnknownDim;
    if (batch == 1) return product == 1 ? kBatchDim : kUnknownDim;
    return product;
  }
};

int64_t DimFromElement(int64_t e) {
  if (e == kSymBatch) return kBatchDim;
  if (e == kSymUnknown) return kUnknownDim;
  return e;
}
int64_t ElementFromDim(int64_t d) {
  if (d == kBatchDim) return kSymBatch;
  return Static(d) ? d : kSymUnknown;
}

std::optional<Elements> ElementsOf(const Value& v) {
  if (v.dtype() != DataType::kInt64 || v.rank() > 1 || v.num_elements() > kMaxTrackedElements) {
    return std::nullopt;
  }
  return Elements(v.data<int64_t>(), v.data<int64_t>() + v.num_elements());
}

// Axes of Unsqueeze/Squeeze: the attribute (opset < 13) or the statically known input 1.
std::optional<std::vector<int64_t>> AxesOf(const Node& node, const Analysis& a) {
  if (node.inputs.size() > 1 && node.inputs[1] != kNoValue) {
    const auto& axes = a.data[node.inputs[1]];
    if (!axes || std::any_of(axes->begin(), axes->end(), IsSym)) return std::nullopt;
    return *axes;
  }
  return node.attributes.GetInts("axes");
}

std::optional<int> Axis(int64_t axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) return std::nullopt;
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

// Spatial output dims of Conv and the pools, when the input's spatial dims are static.
void WindowDims(const Node& node, const Shape& x, const std::vector<int64_t>& kernel,
                bool ceil_mode, Shape* out) {
  const int spatial_rank = static_cast<int>(kernel.size());
  if ((spatial_rank != 1 && spatial_rank != 2) || x.size() != kernel.size() + 2) {
    out->insert(out->end(), kernel.size(), kUnknownDim);
    return;
  }
  const int64_t h = spatial_rank == 2 ? x[2] : 1, w = x.back();
  const int64_t kh = spatial_rank == 2 ? kernel[0] : 1, kw = kernel.back();
  if (!Static(h) || !Static(w) || !Static(kh) || !Static(kw)) {
    out->insert(out->end(), kernel.size(), kUnknownDim);
    return;
  }
  auto win = cpu::ResolveWindow(node, spatial_rank, h, w, kh, kw);
  std::optional<int64_t> oh, ow;
  if (win.ok()) {
    auto rh = cpu::WindowOutputSize(h, kh, win->stride_h, win->dilation_h, win->pad_top,
                                    win->pad_bottom, ceil_mode);
    auto rw = cpu::WindowOutputSize(w, kw, win->stride_w, win->dilation_w, win->pad_left,
                                    win->pad_right, ceil_mode);
    if (rh.ok()) oh = *rh;
    if (rw.ok()) ow = *rw;
  }
  if (spatial_rank == 2) out->push_back(oh.value_or(kUnknownDim));
  out->push_back(ow.value_or(kUnknownDim));
}

// Slice's starts/ends/axes/steps: inputs 1..4 (opset >= 10) or attributes; all statically known.
struct SliceSpec {
  std::vector<int64_t> starts, ends, axes, steps;
};

std::optional<SliceSpec> SliceSpecOf(const Node& node, const Analysis& a, size_t rank) {
  SliceSpec spec;
  std::vector<int64_t>* parts[] = {&spec.starts, &spec.ends, &spec.axes, &spec.steps};
  if (node.opset < 10) {
    spec.starts = node.attributes.GetInts("starts");
    spec.ends = node.attributes.GetInts("ends");
    spec.axes = node.attributes.GetInts("axes");
  } else {
    for (size_t i = 1; i < 5; ++i) {
      if (i >= node.inputs.size() || node.inputs[i] == kNoValue) continue;
      const auto& d = a.data[node.inputs[i]];
      if (!d || std::any_of(d->begin(), d->end(), IsSym)) return std::nullopt;
      *parts[i - 1] = *d;
    }
  }
  if (spec.axes.empty()) {
    for (size_t i = 0; i < spec.starts.size(); ++i) spec.axes.push_back(static_cast<int64_t>(i));
  }
  if (spec.steps.empty()) spec.steps.assign(spec.starts.size(), 1);
  if (spec.ends.size() != spec.starts.size() || spec.axes.size() != spec.starts.size() ||
      spec.steps.size() != spec.starts.size()) {
    return std::nullopt;
  }
  for (int64_t& axis : spec.axes) {
    auto n = Axis(axis, rank);
    if (!n) return std::nullopt;
    axis = *n;
  }
  return spec;
}

// Elements a Slice takes along a static dim: count, first index (ONNX clamping rules).
std::optional<std::pair<int64_t, int64_t>> SliceRange(int64_t dim, int64_t start, int64_t end,
                                                      int64_t step) {
  if (step == 0) return std::nullopt;
  if (dim == 0) return std::make_pair(int64_t{0}, int64_t{0});
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return std::make_pair(std::max<int64_t>(0, (end - start + step - 1) / step), start);
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  return std::make_pair(std::max<int64_t>(0, (start - end - step - 1) / -step), start);
}

std::optional<Shape> ReshapeShape(const Node& node, const Analysis& a) {
  const auto& x = a.shapes[node.inputs[0]];
  const int target_id = node.inputs.size() > 1 ? node.inputs[1] : kNoValue;
  if (target_id == kNoValue) return std::nullopt;
  const auto& target = a.data[target_id];
  if (!target) {
    const auto& ts = a.shapes[target_id];
    if (ts && ts->size() == 1 && Static((*ts)[0])) return Shape((*ts)[0], kUnknownDim);
    return std::nullopt;
  }
  const bool allow_zero = node.attributes.GetInt("allowzero", 0) != 0;
  Shape out;
  int infer = -1;
  Factor rest;
  for (size_t i = 0; i < target->size(); ++i) {
    int64_t t = (*target)[i];
    if (t == 0 && !allow_zero) t = x && i < x->size() ? ElementFromDim((*x)[i]) : kSymUnknown;
    if (t == -1) {
      infer = static_cast<int>(i);
      out.push_back(kUnknownDim);
      continue;
    }
    out.push_back(DimFromElement(t));
    rest.Add(out.back());
  }
  if (infer >= 0) {
    Factor in;
    if (!x) return out;
    for (int64_t d : *x) in.Add(d);
    if (!in.unknown && !rest.unknown && rest.product > 0) {
      if (in.batch == rest.batch && in.product % rest.product == 0) {
        out[infer] = in.product / rest.product;
      } else if (in.batch == rest.batch + 1 && in.product == rest.product) {
        out[infer] = kBatchDim;
      }
    }
  }
  return out;
}

// LabelEncoder's output type: that of its values_* (opset 1: the other of STRING and INT64).
DataType LabelEncoderOutputType(const Node& node, DataType input) {
  const Attributes& attrs = node.attributes;
  if (node.opset < 2) {
    return input == DataType::kString  ? DataType::kInt64
           : input == DataType::kInt64 ? DataType::kString
                                       : DataType::kInvalid;
  }
  if (attrs.Has("values_strings")) return DataType::kString;
  if (attrs.Has("values_int64s")) return DataType::kInt64;
  if (attrs.Has("values_floats")) return DataType::kFp32;
  const Attribute* t = attrs.Find("values_tensor");
  return t != nullptr && t->kind == Attribute::Kind::kTensor ? t->tensor.dtype()
                                                             : DataType::kInvalid;
}

// The element type of output 0 of an op whose shape InferNode does not compute, by ONNX's type
// constraints; kInvalid where it depends on more than the inputs' types (Cast's `to`, say).
DataType UnshapedOutputType(const Node& node, const Analysis& a, DataType first_input) {
  static const std::set<std::string> kBoolResult = {
      "And",  "Or",          "Xor",   "Not",  "Equal", "Greater", "GreaterOrEqual",
      "Less", "LessOrEqual", "IsNaN", "IsInf"};
  static const std::set<std::string> kFirstInputType = {
      "Pow", "CumSum", "Dropout", "Erf", "Exp", "Expand", "HardSigmoid", "HardSwish",
      "LayerNormalization", "LeakyRelu", "Max", "Min", "Neg", "Pad", "Reciprocal", "ReduceMax",
      "ReduceMean", "ReduceMin", "ReduceSum", "Split", "Sqrt", "Trilu", "Range",
      // The math kernels take one dtype for all inputs and give it back, integers included.
      "Abs", "Sign", "Ceil", "Floor", "Round", "Log", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
      "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Softplus", "Softsign", "Elu", "Selu", "Celu",
      "ThresholdedRelu", "Shrink", "PRelu", "Mod", "Sum", "Mean", "LogSoftmax", "Hardmax",
      "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};
  // Data movement and selection: the output holds elements of input 0.
  static const std::set<std::string> kMovesFirstInput = {
      "GatherElements", "GatherND", "Scatter",      "ScatterElements", "ScatterND",    "TopK",
      "Tile",           "Compress", "DepthToSpace", "SpaceToDepth",    "GlobalMaxPool"};
  // Computed in the input's type: interpolation, normalisation, convolution.
  static const std::set<std::string> kComputesInFirstInputType = {
      "ConvTranspose", "Einsum",  "InstanceNormalization", "LRN", "MeanVarianceNormalization",
      "Resize",        "Upsample"};
  const std::string& op = node.op_type;
  if (kBoolResult.count(op)) return DataType::kBool;
  if (kFirstInputType.count(op) || kMovesFirstInput.count(op) ||
      kComputesInFirstInputType.count(op)) {
    return first_input;
  }
  if (op == "NonZero" || op == "Size" || op == "NonMaxSuppression" || op == "ArgMax" ||
      op == "ArgMin") {
    return DataType::kInt64;
  }
  auto input_type = [&](size_t i) {
    return i < node.inputs.size() && node.inputs[i] != kNoValue ? a.dtypes[node.inputs[i]]
                                                                : DataType::kInvalid;
  };
  if (op == "CastLike") return input_type(1);
  if (op == "OneHot") return input_type(2);
  if (op == "EyeLike") {
    if (!node.attributes.Has("dtype")) return first_input;
    // kInvalid (unknown) for a type the engine lacks: the kernel check refuses it anyway.
    return DataTypeFromOnnxElementType(static_cast<int32_t>(node.attributes.GetInt("dtype", 0)))
        .value_or(DataType::kInvalid);
  }
  if (op == "Where" && node.inputs.size() > 1 && node.inputs[1] != kNoValue) {
    return a.dtypes[node.inputs[1]];
  }
  if (op == "StringNormalizer") return DataType::kString;
  if (op == "ai.onnx.ml.LabelEncoder") return LabelEncoderOutputType(node, first_input);
  return DataType::kInvalid;
}

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
