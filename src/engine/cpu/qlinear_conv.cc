// QLinearConv, the own kernel: the integer sums computed as FP32 sums of the zero-point-shifted
// integers by the own Conv kernel, then requantized. Exact while the sums stay below 2^24 (a
// 3x3x256 window of full-range UINT8 values reaches 2^27, off by at most a few units of the
// accumulator, far below one step of the output); the oneDNN build runs integer convolutions
// where the CPU has 8-bit dot products (dnnl_integer_conv.cc).
#include "engine/cpu/qlinear_conv.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/cpu/broadcast.h"

namespace tessera::engine::cpu {
namespace {

StatusOr<const Value*> ScalarInput(const Inputs& inputs, size_t index, const char* what,
                                   std::initializer_list<DataType> dtypes) {
  TESSERA_ASSIGN_OR_RETURN(const Value* v, RequireInput(inputs, index, what, dtypes));
  if (v->num_elements() != 1 || v->rank() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", DescribeValue(*v), " must be a scalar"));
  }
  return v;
}

// A scale or zero point given per tensor (one element) or per output channel ([M]).
StatusOr<int64_t> PerChannelCount(const Value& v, int64_t channels, const char* what) {
  if (v.num_elements() == 1 && v.rank() <= 1) return 1;
  if (v.rank() == 1 && v.dim(0) == channels) return channels;
  return absl::InvalidArgumentError(absl::StrCat(what, " ", DescribeValue(v),
                                                 " is neither a scalar nor one value per output "
                                                 "channel (",
                                                 channels, ")"));
}

template <typename Q>
void Requantize(ThreadPool* pool, const float* acc, int64_t planes, int64_t channels,
                int64_t plane_size, const std::vector<float>& multipliers, int32_t zero, Q* y) {
  constexpr double lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
  ParallelChunks(pool, planes, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const double m = multipliers[p % channels];
      for (int64_t i = p * plane_size; i < (p + 1) * plane_size; ++i) {
        // nearbyint rounds half to even in the default rounding mode, as ONNX specifies.
        const double q = std::nearbyint(static_cast<double>(acc[i]) * m) + zero;
        y[i] = static_cast<Q>(std::fmin(std::fmax(q, lo), hi));
      }
    }
  });
}

}  // namespace

std::vector<float> QLinearConvParams::Multipliers() const {
  std::vector<float> out(w_scale.size());
  for (size_t m = 0; m < out.size(); ++m) out[m] = x_scale * w_scale[m] / y_scale;
  return out;
}

StatusOr<QLinearConvParams> ReadQLinearConvParams(const Inputs& inputs) {
  QLinearConvParams p;
  TESSERA_ASSIGN_OR_RETURN(p.x, RequireInput(inputs, 0, "x", kEightBitTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* x_scale,
                           ScalarInput(inputs, 1, "x_scale", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* x_zero,
                           ScalarInput(inputs, 2, "x_zero_point", kEightBitTypes));
  TESSERA_ASSIGN_OR_RETURN(p.w, RequireInput(inputs, 3, "w", kEightBitTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* w_scale,
                           RequireInput(inputs, 4, "w_scale", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* w_zero,
                           RequireInput(inputs, 5, "w_zero_point", kEightBitTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* y_scale,
                           ScalarInput(inputs, 6, "y_scale", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* y_zero,
                           ScalarInput(inputs, 7, "y_zero_point", kEightBitTypes));
  if (x_zero->dtype() != p.x->dtype() || w_zero->dtype() != p.w->dtype()) {
    const bool x_side = x_zero->dtype() != p.x->dtype();
    return absl::InvalidArgumentError(absl::StrCat(
        x_side ? "x_zero_point " : "w_zero_point ", DescribeValue(x_side ? *x_zero : *w_zero),
        " is not of the type of ", x_side ? "x " : "w ", DescribeValue(x_side ? *p.x : *p.w)));
  }
  if (p.w->rank() < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("w ", DescribeValue(*p.w), " must be [M, C / group, kernel...]"));
  }
  const int64_t channels = p.w->dim(0);
  TESSERA_ASSIGN_OR_RETURN(int64_t scales, PerChannelCount(*w_scale, channels, "w_scale"));
  TESSERA_ASSIGN_OR_RETURN(int64_t zeros, PerChannelCount(*w_zero, channels, "w_zero_point"));
  if (inputs.size() > 8 && inputs[8] != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(p.bias, RequireInput(inputs, 8, "B", {DataType::kInt32}));
    if (p.bias->rank() != 1 || p.bias->dim(0) != channels) {
      return absl::InvalidArgumentError(absl::StrCat("B ", DescribeValue(*p.bias),
                                                     " must hold one value per output channel (",
                                                     channels, ")"));
    }
  }
  p.x_scale = x_scale->data<float>()[0];
  p.y_scale = y_scale->data<float>()[0];
  if (!(p.x_scale > 0.0f) || !(p.y_scale > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("x_scale (", p.x_scale, ") and y_scale (", p.y_scale, ") must be positive"));
  }
  p.x_zero = EightBitElement(*x_zero, 0);
  p.y_zero = EightBitElement(*y_zero, 0);
  p.y_type = y_zero->dtype();
  p.w_scale.resize(channels);
  p.w_zero.resize(channels);
  for (int64_t m = 0; m < channels; ++m) {
    p.w_scale[m] = w_scale->data<float>()[scales == 1 ? 0 : m];
    p.w_zero[m] = EightBitElement(*w_zero, zeros == 1 ? 0 : m);
  }
  return p;
}

Status CheckQLinearConv(const Node& node, const Graph& graph) {
  if (node.inputs.size() < 8 || node.inputs.size() > 9) {
    return absl::InvalidArgumentError(
        absl::StrCat("QLinearConv takes 8 or 9 inputs, the node has ", node.inputs.size()));
  }
  if (node.attributes.Has("tessera_activation")) {
    return absl::InvalidArgumentError(
        "attribute tessera_activation is the engine's own, set by its graph passes");
  }
  return CheckConvWindow(node, graph, 3);
}

Status RunQLinearConv(const OpContext& ctx, const Node& node, const Inputs& inputs,
                      std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(QLinearConvParams p, ReadQLinearConvParams(inputs));
  const int64_t channels = p.w->dim(0);
  Value x = Value::Allocate(DataType::kFp32, p.x->shape());
  ParallelChunks(ctx.pool, x.num_elements(), [&](int64_t begin, int64_t end) {
    float* out = x.mutable_data<float>();
    for (int64_t i = begin; i < end; ++i) out[i] = EightBitElement(*p.x, i) - p.x_zero;
  });
  Value w = Value::Allocate(DataType::kFp32, p.w->shape());
  const int64_t per_channel = p.w->num_elements() / channels;
  for (int64_t i = 0; i < w.num_elements(); ++i) {
    w.mutable_data<float>()[i] = EightBitElement(*p.w, i) - p.w_zero[i / per_channel];
  }
  Value bias;
  if (p.bias != nullptr) {
    bias = Value::Allocate(DataType::kFp32, p.bias->shape());
    for (int64_t m = 0; m < channels; ++m) {
      bias.mutable_data<float>()[m] = static_cast<float>(p.bias->data<int32_t>()[m]);
    }
  }
  // The FP32 sums are a temporary: the node's planned output bytes are for its 8-bit result.
  OpContext conv_ctx = ctx;
  conv_ctx.state = nullptr;
  conv_ctx.planned_outputs = nullptr;
  conv_ctx.allocated_outputs = nullptr;
  Node conv = node;
  conv.op_type = "Conv";
  std::vector<Value> acc(1);
  TESSERA_RETURN_IF_ERROR(
      RunConv(conv_ctx, conv, {&x, &w, p.bias != nullptr ? &bias : nullptr}, &acc));
  const Value& sums = acc[0];
  const int64_t plane = sums.num_elements() / std::max<int64_t>(1, sums.dim(0) * channels);
  const int64_t planes = sums.dim(0) * channels;
  Value y = ctx.NewOutput(0, p.y_type, sums.shape());
  if (p.y_type == DataType::kUint8) {
    Requantize(ctx.pool, sums.data<float>(), planes, channels, plane, p.Multipliers(), p.y_zero,
               y.mutable_data<uint8_t>());
  } else {
    Requantize(ctx.pool, sums.data<float>(), planes, channels, plane, p.Multipliers(), p.y_zero,
               y.mutable_data<int8_t>());
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
