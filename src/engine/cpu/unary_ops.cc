// Element-wise unary ops beyond the activations of elementwise.cc and math_ops.cc: Abs, Sign,
// rounding, logarithm, trigonometric and hyperbolic functions, the exponential-family activations
// (Softplus, Elu, Selu, Celu, ...), Shrink, and the IsNaN/IsInf predicates.
//
// These go through the C library (std::sin, std::log1p, ...) rather than fast_math.h: they are
// rare in the models we serve, and matching the ONNX reference (numpy) closely matters more here
// than vectorising.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "engine/cpu/broadcast.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

template <typename F>
Status RunFloat(const OpContext& ctx, const Inputs& inputs, std::vector<Value>* outputs, F f) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kFp32}));
  (*outputs)[0] = MapElements<float, float>(ctx, *x, DataType::kFp32, f);
  return absl::OkStatus();
}

// `f` is generic: called with float, int64_t or int32_t.
template <typename F>
Status RunNumeric(const OpContext& ctx, const Inputs& inputs, std::vector<Value>* outputs, F f) {
  TESSERA_ASSIGN_OR_RETURN(
      const Value* x,
      RequireInput(inputs, 0, "X", {DataType::kFp32, DataType::kInt64, DataType::kInt32}));
  switch (x->dtype()) {
    case DataType::kFp32:
      (*outputs)[0] = MapElements<float, float>(ctx, *x, x->dtype(), f);
      break;
    case DataType::kInt64:
      (*outputs)[0] = MapElements<int64_t, int64_t>(ctx, *x, x->dtype(), f);
      break;
    default:
      (*outputs)[0] = MapElements<int32_t, int32_t>(ctx, *x, x->dtype(), f);
      break;
  }
  return absl::OkStatus();
}

template <typename F>
Status RunPredicate(const OpContext& ctx, const Inputs& inputs, std::vector<Value>* outputs, F f) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kFp32}));
  (*outputs)[0] = MapElements<float, uint8_t>(
      ctx, *x, DataType::kBool, [&](float v) { return static_cast<uint8_t>(f(v) ? 1 : 0); });
  return absl::OkStatus();
}

}  // namespace

Status RunAbs(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  return RunNumeric(ctx, inputs, outputs, [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T>) {
      return std::fabs(v);
    } else {
      // Through unsigned so |INT_MIN| wraps (to INT_MIN, as numpy gives) instead of being
      // undefined.
      using U = std::make_unsigned_t<T>;
      return v < 0 ? static_cast<T>(U{0} - static_cast<U>(v)) : v;
    }
  });
}

Status RunSign(const OpContext& ctx, const Node&, const Inputs& inputs,
               std::vector<Value>* outputs) {
  // Zero and NaN map to themselves, as numpy.sign does.
  return RunNumeric(ctx, inputs, outputs, [](auto v) {
    using T = decltype(v);
    return v > T(0) ? T(1) : (v < T(0) ? T(-1) : v);
  });
}

Status RunCeil(const OpContext& ctx, const Node&, const Inputs& inputs,
               std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::ceil(x); });
}

Status RunFloor(const OpContext& ctx, const Node&, const Inputs& inputs,
                std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::floor(x); });
}

Status RunRound(const OpContext& ctx, const Node&, const Inputs& inputs,
                std::vector<Value>* outputs) {
  // ONNX rounds halves to even; nearbyint does in the default rounding mode, which the engine
  // never changes (std::round would take 2.5 to 3).
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::nearbyint(x); });
}

Status RunLog(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::log(x); });
}

Status RunSin(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::sin(x); });
}

Status RunCos(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::cos(x); });
}

Status RunTan(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::tan(x); });
}

Status RunAsin(const OpContext& ctx, const Node&, const Inputs& inputs,
               std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::asin(x); });
}

Status RunAcos(const OpContext& ctx, const Node&, const Inputs& inputs,
               std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::acos(x); });
}

Status RunAtan(const OpContext& ctx, const Node&, const Inputs& inputs,
               std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::atan(x); });
}

Status RunSinh(const OpContext& ctx, const Node&, const Inputs& inputs,
               std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::sinh(x); });
}

Status RunCosh(const OpContext& ctx, const Node&, const Inputs& inputs,
               std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::cosh(x); });
}

Status RunAsinh(const OpContext& ctx, const Node&, const Inputs& inputs,
                std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::asinh(x); });
}

Status RunAcosh(const OpContext& ctx, const Node&, const Inputs& inputs,
                std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::acosh(x); });
}

Status RunAtanh(const OpContext& ctx, const Node&, const Inputs& inputs,
                std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return std::atanh(x); });
}

Status RunSoftplus(const OpContext& ctx, const Node&, const Inputs& inputs,
                   std::vector<Value>* outputs) {
  // log(1 + e^x), split by sign so e^x never overflows: for x > 0 it is x + log(1 + e^-x).
  return RunFloat(ctx, inputs, outputs, [](float x) {
    return x > 0.0f ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  });
}

Status RunSoftsign(const OpContext& ctx, const Node&, const Inputs& inputs,
                   std::vector<Value>* outputs) {
  return RunFloat(ctx, inputs, outputs, [](float x) { return x / (1.0f + std::fabs(x)); });
}

// expm1 rather than exp(x) - 1 in the exponential units below: near 0 the subtraction would lose
// most of the digits.
Status RunElu(const OpContext& ctx, const Node& node, const Inputs& inputs,
              std::vector<Value>* outputs) {
  const float alpha = node.attributes.GetFloat("alpha", 1.0f);
  return RunFloat(ctx, inputs, outputs,
                  [alpha](float x) { return x < 0.0f ? alpha * std::expm1(x) : x; });
}

Status RunSelu(const OpContext& ctx, const Node& node, const Inputs& inputs,
               std::vector<Value>* outputs) {
  // The defaults are the float values of the constants the SELU paper derives.
  const float alpha = node.attributes.GetFloat("alpha", 1.67326319217681884765625f);
  const float gamma = node.attributes.GetFloat("gamma", 1.05070102214813232421875f);
  return RunFloat(ctx, inputs, outputs, [alpha, gamma](float x) {
    return x > 0.0f ? gamma * x : gamma * alpha * std::expm1(x);
  });
}

Status RunCelu(const OpContext& ctx, const Node& node, const Inputs& inputs,
               std::vector<Value>* outputs) {
  const float alpha = node.attributes.GetFloat("alpha", 1.0f);
  if (alpha == 0.0f) return absl::InvalidArgumentError("Celu alpha must not be 0");
  return RunFloat(ctx, inputs, outputs,
                  [alpha](float x) { return x > 0.0f ? x : alpha * std::expm1(x / alpha); });
}

Status RunThresholdedRelu(const OpContext& ctx, const Node& node, const Inputs& inputs,
                          std::vector<Value>* outputs) {
  const float alpha = node.attributes.GetFloat("alpha", 1.0f);
  return RunFloat(ctx, inputs, outputs, [alpha](float x) { return x > alpha ? x : 0.0f; });
}

Status RunShrink(const OpContext& ctx, const Node& node, const Inputs& inputs,
                 std::vector<Value>* outputs) {
  const float bias = node.attributes.GetFloat("bias", 0.0f);
  const float lambd = node.attributes.GetFloat("lambd", 0.5f);
  return RunFloat(ctx, inputs, outputs, [bias, lambd](float x) {
    return x < -lambd ? x + bias : (x > lambd ? x - bias : 0.0f);
  });
}

Status RunIsNaN(const OpContext& ctx, const Node&, const Inputs& inputs,
                std::vector<Value>* outputs) {
  return RunPredicate(ctx, inputs, outputs, [](float x) { return std::isnan(x); });
}

Status RunIsInf(const OpContext& ctx, const Node& node, const Inputs& inputs,
                std::vector<Value>* outputs) {
  const bool negative = node.attributes.GetInt("detect_negative", 1) != 0;
  const bool positive = node.attributes.GetInt("detect_positive", 1) != 0;
  return RunPredicate(ctx, inputs, outputs, [negative, positive](float x) {
    return std::isinf(x) && (x > 0.0f ? positive : negative);
  });
}

}  // namespace tessera::engine::cpu
