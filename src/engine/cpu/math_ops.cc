// Element-wise math beyond the basic arithmetic: unary functions (Erf for GELU, Sqrt/Pow for
// decomposed LayerNorm, the MobileNetV3 hard activations), Pow, PRelu, Mod, variadic Max/Min,
// Sum and Mean, and inference Dropout.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "engine/cpu/broadcast.h"
#include "engine/cpu/fast_math.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/wrapping_math.h"

namespace tessera::engine::cpu {
namespace {

constexpr std::initializer_list<DataType> kTypes = {DataType::kFp32, DataType::kInt64,
                                                    DataType::kInt32};

template <typename F>
Status RunFloatUnary(const OpContext& ctx, const Inputs& inputs, std::vector<Value>* outputs, F f) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kFp32}));
  (*outputs)[0] = MapElements<float, float>(ctx, *x, x->dtype(), f);
  return absl::OkStatus();
}

// Max/Min/Sum/Mean: a pairwise fold with broadcasting; the last step writes the node's output.
// One input is returned as is (sharing its storage).
template <typename T, typename F>
StatusOr<Value> FoldVariadic(const OpContext& ctx, const Inputs& inputs, F f) {
  Value acc = *inputs[0];
  for (size_t i = 1; i < inputs.size(); ++i) {
    const Value& next = *inputs[i];
    TESSERA_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(acc.shape(), next.shape()));
    Value out = i + 1 == inputs.size() ? ctx.NewOutput(0, acc.dtype(), shape)
                                       : Value::Allocate(acc.dtype(), shape);
    BroadcastBinary(acc.data<T>(), acc.shape(), next.data<T>(), next.shape(), out.mutable_data<T>(),
                    shape, ctx.pool, f);
    acc = std::move(out);
  }
  return acc;
}

template <bool kMax>
Status RunMaxMin(const OpContext& ctx, const Inputs& inputs, std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(
      const Value* first,
      RequireInput(inputs, 0, "data_0", {DataType::kFp32, DataType::kInt64, DataType::kInt32}));
  for (size_t i = 1; i < inputs.size(); ++i) {
    TESSERA_RETURN_IF_ERROR(RequireInput(inputs, i, "data", {first->dtype()}).status());
  }
  auto pick = [](auto a, auto b) {
    // NaN propagates, as in numpy.maximum/minimum.
    if (a != a) return a;
    return kMax ? (a < b ? b : a) : (b < a ? b : a);
  };
  StatusOr<Value> result;
  switch (first->dtype()) {
    case DataType::kFp32:
      result = FoldVariadic<float>(ctx, inputs, pick);
      break;
    case DataType::kInt64:
      result = FoldVariadic<int64_t>(ctx, inputs, pick);
      break;
    default:
      result = FoldVariadic<int32_t>(ctx, inputs, pick);
      break;
  }
  if (!result.ok()) return result.status();
  (*outputs)[0] = *std::move(result);
  return absl::OkStatus();
}

// ONNX Mod on integers: Python's % (the sign of the divisor) unless `c_fmod`, then C's % (the
// sign of the dividend). A zero divisor gives 0, as integer Div does: ONNX leaves it undefined and
// C++ would trap. x % -1 is 0 either way; computing it could trap on INT_MIN.
template <typename T>
T IntMod(T a, T b, bool c_fmod) {
  if (b == 0 || b == -1) return 0;
  T r = a % b;
  if (!c_fmod && r != 0 && (r < 0) != (b < 0)) r += b;
  return r;
}

template <typename T>
T IntPow(T base, int64_t exp) {
  if (exp < 0) return base == 1 ? 1 : (base == -1 ? (exp % 2 == 0 ? 1 : -1) : 0);
  T result = 1;
  while (exp > 0) {
    if (exp & 1) result *= base;
    base *= base;
    exp >>= 1;
  }
  return result;
}

}  // namespace

Status RunErf(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  return RunFloatUnary(ctx, inputs, outputs, [](float x) { return FastErf(x); });
}

Status RunSqrt(const OpContext& ctx, const Node&, const Inputs& inputs,
               std::vector<Value>* outputs) {
  return RunFloatUnary(ctx, inputs, outputs, [](float x) { return std::sqrt(x); });
}

Status RunExp(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  return RunFloatUnary(ctx, inputs, outputs, [](float x) { return std::exp(x); });
}

Status RunReciprocal(const OpContext& ctx, const Node&, const Inputs& inputs,
                     std::vector<Value>* outputs) {
  return RunFloatUnary(ctx, inputs, outputs, [](float x) { return 1.0f / x; });
}

Status RunNeg(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(
      const Value* x,
      RequireInput(inputs, 0, "X", {DataType::kFp32, DataType::kInt64, DataType::kInt32}));
  switch (x->dtype()) {
    case DataType::kFp32:
      (*outputs)[0] = MapElements<float, float>(ctx, *x, x->dtype(), [](float v) { return -v; });
      break;
    case DataType::kInt64:
      // Through unsigned so negating INT64_MIN wraps instead of being undefined.
      (*outputs)[0] = MapElements<int64_t, int64_t>(ctx, *x, x->dtype(), [](int64_t v) {
        return static_cast<int64_t>(0 - static_cast<uint64_t>(v));
      });
      break;
    default:
      (*outputs)[0] = MapElements<int32_t, int32_t>(ctx, *x, x->dtype(), [](int32_t v) {
        return static_cast<int32_t>(0 - static_cast<uint32_t>(v));
      });
      break;
  }
  return absl::OkStatus();
}

Status RunLeakyRelu(const OpContext& ctx, const Node& node, const Inputs& inputs,
                    std::vector<Value>* outputs) {
  const float alpha = node.attributes.GetFloat("alpha", 0.01f);
  return RunFloatUnary(ctx, inputs, outputs,
                       [alpha](float x) { return std::max(x, 0.0f) + alpha * std::min(x, 0.0f); });
}

Status RunHardSigmoid(const OpContext& ctx, const Node& node, const Inputs& inputs,
                      std::vector<Value>* outputs) {
  const float alpha = node.attributes.GetFloat("alpha", 0.2f);
  const float beta = node.attributes.GetFloat("beta", 0.5f);
  return RunFloatUnary(ctx, inputs, outputs, [alpha, beta](float x) {
    return std::min(1.0f, std::max(0.0f, alpha * x + beta));
  });
}

Status RunHardSwish(const OpContext& ctx, const Node&, const Inputs& inputs,
                    std::vector<Value>* outputs) {
  return RunFloatUnary(ctx, inputs, outputs,
                       [](float x) { return x * std::min(1.0f, std::max(0.0f, x / 6.0f + 0.5f)); });
}

Status RunPow(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", kTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* y, RequireInput(inputs, 1, "Y", kTypes));
  TESSERA_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(x->shape(), y->shape()));
  Value z = ctx.NewOutput(0, x->dtype(), shape);
  // The output has the base's type; a float exponent with an integer base truncates the result
  // as the ONNX reference (numpy power then astype) does.
  auto dispatch = [&](auto* out, auto compute) {
    using Out = std::remove_pointer_t<decltype(out)>;
    switch (y->dtype()) {
      case DataType::kFp32:
        compute(out, y->data<float>(), Out{});
        break;
      case DataType::kInt64:
        compute(out, y->data<int64_t>(), Out{});
        break;
      default:
        compute(out, y->data<int32_t>(), Out{});
        break;
    }
  };
  auto compute = [&](auto* out, auto* exp_data, auto) {
    using Out = std::remove_pointer_t<decltype(out)>;
    using Exp = std::remove_const_t<std::remove_pointer_t<decltype(exp_data)>>;
    const Out* base = x->data<Out>();
    BroadcastBinary(base, x->shape(), exp_data, y->shape(), out, shape, ctx.pool,
                    [](Out b, Exp e) -> Out {
                      if constexpr (std::is_floating_point_v<Out>) {
                        // x^2 (decomposed LayerNorm variance) is exact and fast as a multiply.
                        if (e == Exp(2)) return b * b;
                        return std::pow(b, static_cast<float>(e));
                      } else if constexpr (std::is_floating_point_v<Exp>) {
                        return static_cast<Out>(std::pow(static_cast<double>(b), e));
                      } else {
                        return IntPow<Out>(b, static_cast<int64_t>(e));
                      }
                    });
  };
  switch (x->dtype()) {
    case DataType::kFp32:
      dispatch(z.mutable_data<float>(), compute);
      break;
    case DataType::kInt64:
      dispatch(z.mutable_data<int64_t>(), compute);
      break;
    default:
      dispatch(z.mutable_data<int32_t>(), compute);
      break;
  }
  (*outputs)[0] = std::move(z);
  return absl::OkStatus();
}

Status RunMax(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  return RunMaxMin<true>(ctx, inputs, outputs);
}

Status RunMin(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  return RunMaxMin<false>(ctx, inputs, outputs);
}

Status RunPRelu(const OpContext& ctx, const Node&, const Inputs& inputs,
                std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* slope, RequireInput(inputs, 1, "slope", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(x->shape(), slope->shape()));
  Value y = ctx.NewOutput(0, DataType::kFp32, shape);
  BroadcastBinary(x->data<float>(), x->shape(), slope->data<float>(), slope->shape(),
                  y.mutable_data<float>(), shape, ctx.pool,
                  [](float v, float s) { return std::max(v, 0.0f) + s * std::min(v, 0.0f); });
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunMod(const OpContext& ctx, const Node& node, const Inputs& inputs,
              std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* a, RequireInput(inputs, 0, "A", kTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* b, RequireInput(inputs, 1, "B", {a->dtype()}));
  const bool c_fmod = node.attributes.GetInt("fmod", 0) != 0;
  if (a->dtype() == DataType::kFp32 && !c_fmod) {
    return absl::InvalidArgumentError("Mod of FP32 inputs requires fmod=1");
  }
  TESSERA_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(a->shape(), b->shape()));
  Value y = ctx.NewOutput(0, a->dtype(), shape);
  switch (a->dtype()) {
    case DataType::kFp32:
      BroadcastBinary(a->data<float>(), a->shape(), b->data<float>(), b->shape(),
                      y.mutable_data<float>(), shape, ctx.pool,
                      [](float p, float q) { return std::fmod(p, q); });
      break;
    case DataType::kInt64:
      BroadcastBinary(a->data<int64_t>(), a->shape(), b->data<int64_t>(), b->shape(),
                      y.mutable_data<int64_t>(), shape, ctx.pool,
                      [c_fmod](int64_t p, int64_t q) { return IntMod(p, q, c_fmod); });
      break;
    default:
      BroadcastBinary(a->data<int32_t>(), a->shape(), b->data<int32_t>(), b->shape(),
                      y.mutable_data<int32_t>(), shape, ctx.pool,
                      [c_fmod](int32_t p, int32_t q) { return IntMod(p, q, c_fmod); });
      break;
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunSum(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* first, RequireInput(inputs, 0, "data_0", kTypes));
  for (size_t i = 1; i < inputs.size(); ++i) {
    TESSERA_RETURN_IF_ERROR(RequireInput(inputs, i, "data", {first->dtype()}).status());
  }
  auto add = [](auto a, auto b) { return WrappingAdd(a, b); };
  StatusOr<Value> result;
  switch (first->dtype()) {
    case DataType::kFp32:
      result = FoldVariadic<float>(ctx, inputs, add);
      break;
    case DataType::kInt64:
      result = FoldVariadic<int64_t>(ctx, inputs, add);
      break;
    default:
      result = FoldVariadic<int32_t>(ctx, inputs, add);
      break;
  }
  if (!result.ok()) return result.status();
  (*outputs)[0] = *std::move(result);
  return absl::OkStatus();
}

Status RunMean(const OpContext& ctx, const Node&, const Inputs& inputs,
               std::vector<Value>* outputs) {
  for (size_t i = 0; i < std::max<size_t>(1, inputs.size()); ++i) {
    TESSERA_RETURN_IF_ERROR(RequireInput(inputs, i, "data", {DataType::kFp32}).status());
  }
  TESSERA_ASSIGN_OR_RETURN(
      Value sum, FoldVariadic<float>(ctx, inputs, [](float a, float b) { return a + b; }));
  if (inputs.size() > 1) {  // else `sum` is input 0 itself, and already the mean
    float* y = sum.mutable_data<float>();
    const auto count = static_cast<float>(inputs.size());
    ParallelChunks(ctx.pool, sum.num_elements(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) y[i] /= count;
    });
  }
  (*outputs)[0] = std::move(sum);
  return absl::OkStatus();
}

Status CheckDropout(const Node& node, const Graph& graph) {
  if (node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
    const int id = node.inputs[2];
    if (!graph.IsConstant(id)) {
      return absl::UnimplementedError("training_mode must be a constant (inference only)");
    }
    const Value& mode = *graph.constants[id];
    if (mode.dtype() != DataType::kBool || mode.num_elements() != 1 ||
        mode.data<uint8_t>()[0] != 0) {
      return absl::UnimplementedError("training_mode = true is not supported (inference only)");
    }
  }
  return absl::OkStatus();
}

Status RunDropout(const OpContext& ctx, const Node&, const Inputs& inputs,
                  std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "data", {DataType::kFp32}));
  (*outputs)[0] = *x;  // inference: the identity, sharing storage
  if (outputs->size() > 1) {
    // The mask keeps everything.
    Value mask = ctx.NewOutput(1, DataType::kBool, x->shape());
    std::memset(mask.mutable_data<uint8_t>(), 1, mask.byte_size());
    (*outputs)[1] = std::move(mask);
  }
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
