// Broadcasting binary ops (fp32 and int64, the latter for shape arithmetic) and unary activations.
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

// Elements per parallel task for cheap element-wise loops; below two of these we stay inline.
constexpr int64_t kElementwiseGrain = 1 << 15;

template <typename T, typename F>
void BinaryLoop(const Value& a, const Value& b, const Shape& out_shape, T* out, F f,
                ThreadPool* pool) {
  const T* ad = a.data<T>();
  const T* bd = b.data<T>();
  const int64_t total = ElementCount(out_shape);
  if (a.shape() == b.shape() || b.num_elements() == 1 || a.num_elements() == 1) {
    // Same shape or a scalar side: one flat loop, split into chunks.
    const bool a_scalar = a.num_elements() == 1 && a.shape() != out_shape;
    const bool b_scalar = b.num_elements() == 1 && b.shape() != out_shape;
    int64_t tasks = std::max<int64_t>(1, total / kElementwiseGrain);
    ParallelFor(pool, tasks, [&](int64_t t) {
      int64_t begin = total * t / tasks, end = total * (t + 1) / tasks;
      for (int64_t i = begin; i < end; ++i) out[i] = f(ad[a_scalar ? 0 : i], bd[b_scalar ? 0 : i]);
    });
    return;
  }
  // General case: per-operand strides over the output's dims (0 where broadcast), innermost dim
  // as the tight loop.
  const int rank = static_cast<int>(out_shape.size());
  std::vector<int64_t> sa(rank, 0), sb(rank, 0);
  auto fill_strides = [&](const Shape& s, std::vector<int64_t>* strides) {
    int64_t stride = 1;
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      int od = d + rank - static_cast<int>(s.size());
      (*strides)[od] = s[d] == 1 ? 0 : stride;
      stride *= s[d];
    }
  };
  fill_strides(a.shape(), &sa);
  fill_strides(b.shape(), &sb);
  const int64_t inner = out_shape[rank - 1];
  const int64_t ia = sa[rank - 1], ib = sb[rank - 1];
  const int64_t rows = inner > 0 ? total / inner : 0;
  std::vector<int64_t> coord(rank, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t oa = 0, ob = 0, rest = r;
    for (int d = rank - 2; d >= 0; --d) {
      int64_t c = rest % out_shape[d];
      rest /= out_shape[d];
      oa += c * sa[d];
      ob += c * sb[d];
    }
    T* dst = out + r * inner;
    for (int64_t i = 0; i < inner; ++i) dst[i] = f(ad[oa + i * ia], bd[ob + i * ib]);
  }
}

template <typename FloatOp, typename IntOp>
Status RunBinary(const OpContext& ctx, const Inputs& inputs, std::vector<Value>* outputs,
                 FloatOp float_op, IntOp int_op) {
  TESSERA_ASSIGN_OR_RETURN(const Value* a,
                           RequireInput(inputs, 0, "A", {DataType::kFp32, DataType::kInt64}));
  TESSERA_ASSIGN_OR_RETURN(const Value* b, RequireInput(inputs, 1, "B", {a->dtype()}));
  TESSERA_ASSIGN_OR_RETURN(Shape out_shape, BroadcastShapes(a->shape(), b->shape()));
  Value y = ctx.NewOutput(0, a->dtype(), out_shape);
  if (a->dtype() == DataType::kFp32) {
    BinaryLoop<float>(*a, *b, out_shape, y.mutable_data<float>(), float_op, ctx.pool);
  } else {
    BinaryLoop<int64_t>(*a, *b, out_shape, y.mutable_data<int64_t>(), int_op, ctx.pool);
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

template <typename F>
Status RunUnary(const OpContext& ctx, const Inputs& inputs, std::vector<Value>* outputs, F f) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kFp32}));
  Value y = ctx.NewOutput(0, DataType::kFp32, x->shape());
  const float* in = x->data<float>();
  float* out = y.mutable_data<float>();
  const int64_t total = x->num_elements();
  int64_t tasks = std::max<int64_t>(1, total / kElementwiseGrain);
  ParallelFor(ctx.pool, tasks, [&](int64_t t) {
    int64_t begin = total * t / tasks, end = total * (t + 1) / tasks;
    for (int64_t i = begin; i < end; ++i) out[i] = f(in[i]);
  });
  (*outputs)[0] = std::move(y);
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
  return RunUnary(ctx, inputs, outputs, [](float x) { return std::tanh(x); });
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
