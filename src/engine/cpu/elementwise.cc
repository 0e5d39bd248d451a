// Broadcasting binary ops (fp32, and int64/int32 for shape arithmetic) and unary activations.
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/cpu/broadcast.h"
#include "engine/cpu/fast_math.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

template <typename FloatOp, typename IntOp>
Status RunBinary(const OpContext& ctx, const Inputs& inputs, std::vector<Value>* outputs,
                 FloatOp float_op, IntOp int_op) {
  TESSERA_ASSIGN_OR_RETURN(
      const Value* a,
      RequireInput(inputs, 0, "A", {DataType::kFp32, DataType::kInt64, DataType::kInt32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* b, RequireInput(inputs, 1, "B", {a->dtype()}));
  TESSERA_ASSIGN_OR_RETURN(Shape out_shape, BroadcastShapes(a->shape(), b->shape()));
  Value y = ctx.NewOutput(0, a->dtype(), out_shape);
  switch (a->dtype()) {
    case DataType::kFp32:
      BroadcastBinary(a->data<float>(), a->shape(), b->data<float>(), b->shape(),
                      y.mutable_data<float>(), out_shape, ctx.pool, float_op);
      break;
    case DataType::kInt64:
      BroadcastBinary(a->data<int64_t>(), a->shape(), b->data<int64_t>(), b->shape(),
                      y.mutable_data<int64_t>(), out_shape, ctx.pool, int_op);
      break;
    default:
      BroadcastBinary(a->data<int32_t>(), a->shape(), b->data<int32_t>(), b->shape(),
                      y.mutable_data<int32_t>(), out_shape, ctx.pool,
                      [&](int32_t x, int32_t z) { return static_cast<int32_t>(int_op(x, z)); });
      break;
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

template <typename F>
Status RunUnary(const OpContext& ctx, const Inputs& inputs, std::vector<Value>* outputs, F f) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kFp32}));
  (*outputs)[0] = MapElements<float, float>(ctx, *x, DataType::kFp32, f);
  return absl::OkStatus();
}

}  // namespace

Status RunAdd(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  return RunBinary(
      ctx, inputs, outputs, [](float a, float b) { return a + b; },
      [](int64_t a, int64_t b) { return a + b; });
}

Status RunSub(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  return RunBinary(
      ctx, inputs, outputs, [](float a, float b) { return a - b; },
      [](int64_t a, int64_t b) { return a - b; });
}

Status RunMul(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  return RunBinary(
      ctx, inputs, outputs, [](float a, float b) { return a * b; },
      [](int64_t a, int64_t b) { return a * b; });
}

Status RunDiv(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  // Integer division by zero is undefined behaviour in C++; ONNX leaves it undefined too, so
  // return 0 rather than trap on bad input.
  return RunBinary(
      ctx, inputs, outputs, [](float a, float b) { return a / b; },
      [](int64_t a, int64_t b) { return b == 0 ? int64_t{0} : a / b; });
}

Status RunRelu(const OpContext& ctx, const Node&, const Inputs& inputs,
               std::vector<Value>* outputs) {
  return RunUnary(ctx, inputs, outputs, [](float x) { return x > 0.0f ? x : 0.0f; });
}

Status RunSigmoid(const OpContext& ctx, const Node&, const Inputs& inputs,
                  std::vector<Value>* outputs) {
  // Split by sign so exp never overflows.
  return RunUnary(ctx, inputs, outputs, [](float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
    float e = std::exp(x);
    return e / (1.0f + e);
  });
}

Status RunTanh(const OpContext& ctx, const Node&, const Inputs& inputs,
               std::vector<Value>* outputs) {
  // FastTanh, not std::tanh (a scalar library call): a standalone Tanh is the GELU of
  // dynamically quantized GPT-2s, whose MatMuls no longer fuse it (0.36 -> 0.04 ms a node).
  return RunUnary(ctx, inputs, outputs, [](float x) { return FastTanh(x); });
}

Status RunClip(const OpContext& ctx, const Node& node, const Inputs& inputs,
               std::vector<Value>* outputs) {
  // Opset >= 11 passes min/max as optional scalar inputs; older opsets as attributes.
  float lo = node.attributes.GetFloat("min", -std::numeric_limits<float>::infinity());
  float hi = node.attributes.GetFloat("max", std::numeric_limits<float>::infinity());
  for (size_t i = 1; i < 3 && i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) continue;
    const Value& bound = *inputs[i];
    if (bound.dtype() != DataType::kFp32 || bound.num_elements() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(i == 1 ? "min " : "max ",
                                                     DescribeValue(bound),
                                                     " must be an FP32 scalar"));
    }
    (i == 1 ? lo : hi) = bound.data<float>()[0];
  }
  return RunUnary(ctx, inputs, outputs, [lo, hi](float x) { return std::min(std::max(x, lo), hi); });
}

}  // namespace tessera::engine::cpu
