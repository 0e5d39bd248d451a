#include "engine/shape_inference_rules.h"

#include <algorithm>
#include <set>
#include <utility>

#include "engine/cpu/ops.h"

namespace tessera::engine::shape_rules {

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

}  // namespace tessera::engine::shape_rules
