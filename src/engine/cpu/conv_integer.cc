// ConvInteger (ONNX opset 10): a convolution of 8-bit x and w, less their zero points, summed
// exactly in INT32; what onnxruntime.quantization's quantize_dynamic makes of a Conv. Each image
// and group is unfolded into INT16 rows, one per output pixel, and multiplied with the weights'
// rows (integer_gemm.h). Padding is x's zero point, the real value 0, as in the ONNX reference.
// Also kConvIntegerToFloat's own kernel (graph.h): those sums scaled, biased and rectified.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cpu/integer_gemm.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

struct ConvIntegerShape {
  int64_t batch = 0, cin = 0, h = 1, w = 0;
  int64_t cout = 0, kh = 1, kw = 0, groups = 1;
  int64_t oh = 1, ow = 0;
  Window2d win;
};

// Row p of `cols` = the window of output pixel p over one group's channels of one image, less
// x_zero. Which positions fall in the padding depends on the pixel only, not on the image or
// group, so those are never written and keep the zeros Int16Rows::Resize put there.
template <typename Q>
void UnfoldPixels(const Q* image, int64_t first_channel, int64_t channels,
                  const ConvIntegerShape& s, int32_t x_zero, Int16Rows* cols, ThreadPool* pool) {
  const Window2d& win = s.win;
  ParallelFor(pool, s.oh, [&](int64_t oy) {
    for (int64_t ox = 0; ox < s.ow; ++ox) {
      int16_t* dst = cols->row(oy * s.ow + ox);
      for (int64_t c = 0; c < channels; ++c) {
        const Q* plane = image + (first_channel + c) * s.h * s.w;
        for (int64_t ki = 0; ki < win.kernel_h; ++ki) {
          const int64_t iy = oy * win.stride_h - win.pad_top + ki * win.dilation_h;
          int16_t* out = dst + (c * win.kernel_h + ki) * win.kernel_w;
          if (iy < 0 || iy >= s.h) continue;
          for (int64_t kj = 0; kj < win.kernel_w; ++kj) {
            const int64_t ix = ox * win.stride_w - win.pad_left + kj * win.dilation_w;
            if (ix >= 0 && ix < s.w) {
              out[kj] = static_cast<int16_t>(static_cast<int32_t>(plane[iy * s.w + ix]) - x_zero);
            }
          }
        }
      }
    }
  });
}

StatusOr<ConvIntegerShape> ShapeOf(const Node& node, const Value& x, const Value& w) {
  if ((x.rank() != 3 && x.rank() != 4) || w.rank() != x.rank()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "x ", DescribeValue(x), " and w ", DescribeValue(w), " must both be 3-D or both 4-D"));
  }
  ConvIntegerShape s;
  const int spatial_rank = x.rank() - 2;
  s.batch = x.dim(0);
  s.cin = x.dim(1);
  s.h = spatial_rank == 2 ? x.dim(2) : 1;
  s.w = x.dim(x.rank() - 1);
  s.cout = w.dim(0);
  s.kh = spatial_rank == 2 ? w.dim(2) : 1;
  s.kw = w.dim(w.rank() - 1);
  s.groups = node.attributes.GetInt("group", 1);
  if (s.groups < 1 || s.cin % s.groups != 0 || s.cout % s.groups != 0 ||
      w.dim(1) * s.groups != s.cin) {
    return absl::InvalidArgumentError(absl::StrCat(
        "x ", DescribeValue(x), " and w ", DescribeValue(w), " do not fit group=", s.groups));
  }
  const std::vector<int64_t> kernel_shape = node.attributes.GetInts("kernel_shape");
  if (!kernel_shape.empty() &&
      kernel_shape != std::vector<int64_t>(w.shape().begin() + 2, w.shape().end())) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel_shape does not match w ", DescribeValue(w)));
  }
  TESSERA_ASSIGN_OR_RETURN(s.win, ResolveWindow(node, spatial_rank, s.h, s.w, s.kh, s.kw));
  TESSERA_ASSIGN_OR_RETURN(s.oh, WindowOutputSize(s.h, s.kh, s.win.stride_h, s.win.dilation_h,
                                                  s.win.pad_top, s.win.pad_bottom, false));
  TESSERA_ASSIGN_OR_RETURN(s.ow, WindowOutputSize(s.w, s.kw, s.win.stride_w, s.win.dilation_w,
                                                  s.win.pad_left, s.win.pad_right, false));
  return s;
}

template <typename X>
void ConvolveImages(const OpContext& ctx, const Value& x, const ConvIntegerShape& s, int32_t x_zero,
                    const Int16Rows& weights, int32_t* y) {
  const int64_t cin_g = s.cin / s.groups, cout_g = s.cout / s.groups;
  const int64_t pixels = s.oh * s.ow;
  Int16Rows cols;
  cols.Resize(pixels, cin_g * s.kh * s.kw);
  for (int64_t n = 0; n < s.batch; ++n) {
    const X* image = x.data<X>() + n * s.cin * s.h * s.w;
    for (int64_t g = 0; g < s.groups; ++g) {
      UnfoldPixels(image, g * cin_g, cin_g, s, x_zero, &cols, ctx.pool);
      Int16RowDots(weights.Span(g * cout_g, cout_g), cols.All(),
                   y + (n * s.cout + g * cout_g) * pixels, pixels, ctx.pool);
    }
  }
}

}  // namespace

Status CheckConvInteger(const Node& node, const Graph& graph) {
  if (node.inputs.size() < 2 || node.inputs.size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConvInteger takes 2 to 4 inputs, the node has ", node.inputs.size()));
  }
  return CheckConvWindow(node, graph, 1);
}

Status RunConvInteger(const OpContext& ctx, const Node& node, const Inputs& inputs,
                      std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "x", kEightBitTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* w, RequireInput(inputs, 1, "w", kEightBitTypes));
  TESSERA_ASSIGN_OR_RETURN(const ConvIntegerShape s, ShapeOf(node, *x, *w));
  int32_t x_zero = 0;
  if (inputs.size() > 2 && inputs[2] != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(const Value* z, RequireInput(inputs, 2, "x_zero_point", {x->dtype()}));
    if (z->num_elements() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("x_zero_point ", DescribeValue(*z), " must hold one value"));
    }
    x_zero = EightBitElement(*z, 0);
  }
  std::vector<int32_t> w_zero(s.cout, 0);
  if (inputs.size() > 3 && inputs[3] != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(const Value* z, RequireInput(inputs, 3, "w_zero_point", {w->dtype()}));
    const bool per_tensor = z->num_elements() == 1 && z->rank() <= 1;
    if (!per_tensor && !(z->rank() == 1 && z->dim(0) == s.cout)) {
      return absl::InvalidArgumentError(absl::StrCat("w_zero_point ", DescribeValue(*z),
                                                     " is neither a scalar nor one value per "
                                                     "output channel (",
                                                     s.cout, ")"));
    }
    for (int64_t m = 0; m < s.cout; ++m) w_zero[m] = EightBitElement(*z, per_tensor ? 0 : m);
  }
  Int16Rows weights;
  const int64_t depth = w->num_elements() / std::max<int64_t>(1, s.cout);
  weights.Resize(s.cout, depth);
  if (w->dtype() == DataType::kUint8) {
    WidenRows(w->data<uint8_t>(), 0, s.cout, depth, 1, w_zero.data(), 0, &weights, 0);
  } else {
    WidenRows(w->data<int8_t>(), 0, s.cout, depth, 1, w_zero.data(), 0, &weights, 0);
  }
  Shape out_shape = {s.batch, s.cout};
  if (x->rank() == 4) out_shape.push_back(s.oh);
  out_shape.push_back(s.ow);
  Value y = ctx.NewOutput(0, DataType::kInt32, out_shape);
  if (x->dtype() == DataType::kUint8) {
    ConvolveImages<uint8_t>(ctx, *x, s, x_zero, weights, y.mutable_data<int32_t>());
  } else {
    ConvolveImages<int8_t>(ctx, *x, s, x_zero, weights, y.mutable_data<int32_t>());
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunConvIntegerToFloat(const OpContext& ctx, const Node& node, const Inputs& inputs,
                             std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x_scale,
                           RequireInput(inputs, 2, "x_scale", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* w_scale,
                           RequireInput(inputs, 3, "w_scale", {DataType::kFp32}));
  if (x_scale->num_elements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("x_scale ", DescribeValue(*x_scale), " must hold one value"));
  }
  const Value* bias = inputs.size() > 6 ? inputs[6] : nullptr;
  if (bias != nullptr && bias->dtype() != DataType::kFp32) {
    return absl::InvalidArgumentError(absl::StrCat("bias ", DescribeValue(*bias), " must be FP32"));
  }
  // The INT32 sums in storage of their own: the planned output is for the FP32 result.
  OpContext sums_ctx = ctx;
  sums_ctx.planned_outputs = nullptr;
  sums_ctx.allocated_outputs = nullptr;
  std::vector<Value> sums(1);
  const Value* zero_points[2] = {inputs.size() > 4 ? inputs[4] : nullptr,
                                 inputs.size() > 5 ? inputs[5] : nullptr};
  TESSERA_RETURN_IF_ERROR(RunConvInteger(
      sums_ctx, node, {inputs[0], inputs[1], zero_points[0], zero_points[1]}, &sums));
  const Value& acc = sums[0];
  const int64_t cout = acc.dim(1);
  const int64_t planes = acc.dim(0) * cout;
  const int64_t pixels = planes == 0 ? 0 : acc.num_elements() / planes;
  for (const Value* v : {w_scale, bias}) {
    if (v != nullptr && v->num_elements() != 1 && v->num_elements() != cout) {
      return absl::InvalidArgumentError(
          absl::StrCat(v == bias ? "bias " : "w_scale ", DescribeValue(*v),
                       " is neither one value nor one per output channel (", cout, ")"));
    }
  }
  const Value* residual = inputs.size() > 7 ? inputs[7] : nullptr;
  if (residual != nullptr &&
      (residual->dtype() != DataType::kFp32 || residual->shape() != acc.shape())) {
    return absl::InvalidArgumentError(absl::StrCat("residual ", DescribeValue(*residual),
                                                   " is not FP32 of the output's shape [",
                                                   absl::StrJoin(acc.shape(), ", "), "]"));
  }
  const float* add = residual != nullptr ? residual->data<float>() : nullptr;
  float lo = 0.0f, hi = 0.0f;
  const bool clamp = FusedClamp(node, &lo, &hi);
  Value y = ctx.NewOutput(0, DataType::kFp32, acc.shape());
  const int32_t* in = acc.data<int32_t>();
  float* out = y.mutable_data<float>();
  ParallelFor(ctx.pool, planes, [&](int64_t plane) {
    const int64_t m = plane % cout;
    // As the fused nodes computed it: Cast, Mul by (x_scale * w_scale), Add, Add, Relu or Clip.
    const float scale =
        x_scale->data<float>()[0] * w_scale->data<float>()[w_scale->num_elements() == 1 ? 0 : m];
    const float b = bias == nullptr ? 0.0f : bias->data<float>()[bias->num_elements() == 1 ? 0 : m];
    for (int64_t p = plane * pixels; p < (plane + 1) * pixels; ++p) {
      float v = static_cast<float>(in[p]) * scale;
      if (bias != nullptr) v += b;
      if (add != nullptr) v += add[p];
      out[p] = clamp ? std::min(std::max(v, lo), hi) : v;
    }
  });
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
