// What QLinearConv's two kernels share (qlinear_conv.cc, the own one; dnnl_integer_conv.cc, the
// integer convolution through oneDNN): the node's quantization inputs, read and checked.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {

// QLinearConv (ONNX opset 10) computes, per output element, with integer sums,
//   acc = sum((x - x_zero_point) * (w - w_zero_point[m])) + B[m]
//   y   = saturate(round_half_even(acc * x_scale * w_scale[m] / y_scale) + y_zero_point)
// for output channel m. The node's inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point,
// y_scale, y_zero_point, and optionally B (INT32, [M]).
struct QLinearConvParams {
  const Value* x = nullptr;     // UINT8 or INT8
  const Value* w = nullptr;     // UINT8 or INT8, [M, C / group, kH, kW] (or 3-D)
  const Value* bias = nullptr;  // INT32 [M], or null
  float x_scale = 1.0f, y_scale = 1.0f;
  int32_t x_zero = 0, y_zero = 0;
  std::vector<float> w_scale;   // one per output channel
  std::vector<int32_t> w_zero;  // one per output channel
  DataType y_type = DataType::kUint8;

  // x_scale * w_scale[m] / y_scale, in FP32 as ONNX's reference computes it.
  std::vector<float> Multipliers() const;
};

// The node's inputs as QLinearConvParams; INVALID_ARGUMENT naming the input that breaks the spec
// (a wrong type, a scale or zero point of the wrong size, types that disagree).
StatusOr<QLinearConvParams> ReadQLinearConvParams(const Inputs& inputs);

}  // namespace tessera::engine::cpu
