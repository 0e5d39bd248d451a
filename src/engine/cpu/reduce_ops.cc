// The Reduce* ops (Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp), ArgMax and
// ArgMin, and CumSum (RoBERTa's position ids). Axes come from the `axes` attribute (opset <= 17,
// except ReduceSum from 13) or from the optional second input (ReduceSum 13+, all of them at 18).
//
// When the reduced axes are one contiguous block the input is viewed as [outer, reduced, inner]
// and reduced with tight loops (the usual cases: the last axis, or H and W of NCHW); other axis
// sets take a general strided walk.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "engine/cpu/broadcast.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/wrapping_math.h"

namespace tessera::engine::cpu {
namespace {

// kSumExp is only LogSumExp's inner step (ReduceLogSumExp).
enum class ReduceKind {
  kSum,
  kMean,
  kMax,
  kMin,
  kProd,
  kL1,
  kL2,
  kSumSquare,
  kLogSum,
  kLogSumExp,
  kSumExp
};

template <ReduceKind kKind, typename T>
T Identity() {
  if constexpr (kKind == ReduceKind::kMax) {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  } else if constexpr (kKind == ReduceKind::kMin) {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::max();
  } else if constexpr (kKind == ReduceKind::kProd) {
    return T(1);
  } else {
    return T(0);
  }
}

template <ReduceKind kKind, typename T>
T Combine(T acc, T v) {
  if constexpr (kKind == ReduceKind::kMax) {
    return v > acc ? v : acc;
  } else if constexpr (kKind == ReduceKind::kMin) {
    return v < acc ? v : acc;
  } else if constexpr (kKind == ReduceKind::kProd) {
    return WrappingMul(acc, v);
  } else if constexpr (kKind == ReduceKind::kL1) {
    return v < T(0) ? WrappingAdd(acc, WrappingMul(v, T(-1))) : WrappingAdd(acc, v);
  } else if constexpr (kKind == ReduceKind::kL2 || kKind == ReduceKind::kSumSquare) {
    return WrappingAdd(acc, WrappingMul(v, v));
  } else if constexpr (kKind == ReduceKind::kSumExp) {
    return acc + std::exp(v);
  } else {
    return WrappingAdd(acc, v);
  }
}

// The output element from the accumulator over `count` inputs. Integer L2 truncates the root,
// as the ONNX reference's cast back to the input type does.
template <ReduceKind kKind, typename T>
T Finish(T acc, int64_t count) {
  if constexpr (kKind == ReduceKind::kMean) {
    return count > 0 ? static_cast<T>(acc / static_cast<T>(count)) : acc;
  } else if constexpr (kKind == ReduceKind::kL2) {
    return static_cast<T>(std::sqrt(static_cast<double>(acc)));
  } else if constexpr (kKind == ReduceKind::kLogSum) {
    return std::log(acc);
  } else {
    return acc;
  }
}

template <ReduceKind kKind, typename T>
void Reduce(const Value& x, const std::vector<bool>& reduced, const Value& y, ThreadPool* pool) {
  const T* in = x.data<T>();
  T* out = y.mutable_data<T>();
  const int rank = x.rank();
  const int64_t out_count = y.num_elements();
  const int64_t reduce_count = out_count == 0 ? 0 : x.num_elements() / out_count;
  int first = -1, last = -1;
  for (int d = 0; d < rank; ++d) {
    if (reduced[d] && x.dim(d) != 1) {
      if (first < 0) first = d;
      last = d;
    }
  }
  bool contiguous = true;
  for (int d = first; first >= 0 && d <= last; ++d)
    contiguous = contiguous && (reduced[d] || x.dim(d) == 1);
  // Lambdas, not function pointers, so that the loops below inline them and vectorise.
  auto identity = [] { return Identity<kKind, T>(); };
  auto combine = [](T acc, T v) { return Combine<kKind, T>(acc, v); };
  auto finish = [reduce_count](T acc) { return Finish<kKind, T>(acc, reduce_count); };
  if (first < 0 || contiguous) {
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < first; ++d) outer *= x.dim(d);
    for (int d = last + 1; first >= 0 && d < rank; ++d) inner *= x.dim(d);
    if (first < 0) inner = x.num_elements();  // nothing of size > 1 reduced: a copy
    const int64_t len = reduce_count;
    const int64_t per_task =
        std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, len * inner));
    const int64_t tasks = (outer + per_task - 1) / per_task;
    ParallelFor(pool, tasks, [&](int64_t t) {
      const int64_t end = std::min(outer, (t + 1) * per_task);
      for (int64_t o = t * per_task; o < end; ++o) {
        const T* src = in + o * len * inner;
        T* dst = out + o * inner;
        if (inner == 1) {
          T acc = identity();
          for (int64_t r = 0; r < len; ++r) acc = combine(acc, src[r]);
          dst[0] = finish(acc);
          continue;
        }
        for (int64_t i = 0; i < inner; ++i) dst[i] = identity();
        for (int64_t r = 0; r < len; ++r) {
          const T* row = src + r * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] = combine(dst[i], row[i]);
        }
        for (int64_t i = 0; i < inner; ++i) dst[i] = finish(dst[i]);
      }
    });
    return;
  }
  // General: walk the input once, accumulating into the output element each position maps to.
  Shape kept(x.shape());
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) kept[d] = 1;
  }
  const std::vector<int64_t> out_strides = BroadcastStrides(kept, x.shape());
  for (int64_t i = 0; i < out_count; ++i) out[i] = identity();
  std::vector<int64_t> coord(rank, 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    out[offset] = combine(out[offset], in[i]);
    for (int d = rank - 1; d >= 0; --d) {
      offset += out_strides[d];
      if (++coord[d] < x.dim(d)) break;
      offset -= out_strides[d] * x.dim(d);
      coord[d] = 0;
    }
  }
  for (int64_t i = 0; i < out_count; ++i) out[i] = finish(out[i]);
}

// LogSumExp as max + log(sum(e^(x - max))) so that e^ stays in range; a non-finite max (an
// all -inf or empty slice, or +inf) is not subtracted, which leaves numpy's naive result.
void ReduceLogSumExp(const Value& x, const std::vector<bool>& reduced, const Value& y,
                     ThreadPool* pool) {
  Shape kept_shape(x.shape());
  for (int d = 0; d < x.rank(); ++d) {
    if (reduced[d]) kept_shape[d] = 1;
  }
  Value max = Value::Allocate(DataType::kFp32, kept_shape);
  Reduce<ReduceKind::kMax, float>(x, reduced, max, pool);
  float* m = max.mutable_data<float>();
  for (int64_t i = 0; i < max.num_elements(); ++i) {
    if (!std::isfinite(m[i])) m[i] = 0.0f;
  }
  Value shifted = Value::Allocate(DataType::kFp32, x.shape());
  BroadcastBinary(x.data<float>(), x.shape(), m, kept_shape, shifted.mutable_data<float>(),
                  x.shape(), pool, [](float v, float shift) { return v - shift; });
  Reduce<ReduceKind::kSumExp, float>(shifted, reduced, y, pool);
  // y has max's elements in the same order (keepdims only inserts 1s).
  float* out = y.mutable_data<float>();
  for (int64_t i = 0; i < y.num_elements(); ++i) out[i] = std::log(out[i]) + m[i];
}

template <typename T>
void ReduceAs(ReduceKind kind, const Value& x, const std::vector<bool>& reduced, const Value& y,
              ThreadPool* pool) {
  switch (kind) {
    case ReduceKind::kSum:
      return Reduce<ReduceKind::kSum, T>(x, reduced, y, pool);
    case ReduceKind::kMean:
      return Reduce<ReduceKind::kMean, T>(x, reduced, y, pool);
    case ReduceKind::kMax:
      return Reduce<ReduceKind::kMax, T>(x, reduced, y, pool);
    case ReduceKind::kMin:
      return Reduce<ReduceKind::kMin, T>(x, reduced, y, pool);
    case ReduceKind::kProd:
      return Reduce<ReduceKind::kProd, T>(x, reduced, y, pool);
    case ReduceKind::kL1:
      return Reduce<ReduceKind::kL1, T>(x, reduced, y, pool);
    case ReduceKind::kL2:
      return Reduce<ReduceKind::kL2, T>(x, reduced, y, pool);
    case ReduceKind::kSumSquare:
      return Reduce<ReduceKind::kSumSquare, T>(x, reduced, y, pool);
    default:
      break;
  }
  // The logarithmic ones take FP32 only (RunReduce checked).
  if constexpr (std::is_same_v<T, float>) {
    if (kind == ReduceKind::kLogSum) return Reduce<ReduceKind::kLogSum, T>(x, reduced, y, pool);
    if (kind == ReduceKind::kLogSumExp) return ReduceLogSumExp(x, reduced, y, pool);
  }
}

Status RunReduce(ReduceKind kind, const OpContext& ctx, const Node& node, const Inputs& inputs,
                 std::vector<Value>* outputs) {
  const bool float_only = kind == ReduceKind::kLogSum || kind == ReduceKind::kLogSumExp;
  TESSERA_ASSIGN_OR_RETURN(
      const Value* x,
      float_only
          ? RequireInput(inputs, 0, "data", {DataType::kFp32})
          : RequireInput(inputs, 0, "data", {DataType::kFp32, DataType::kInt64, DataType::kInt32}));
  std::vector<int64_t> axes;
  const bool axes_input = inputs.size() > 1 && inputs[1] != nullptr;
  if (axes_input) {
    const Value& a = *inputs[1];
    if (a.dtype() != DataType::kInt64 || a.rank() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("axes ", DescribeValue(a), " must be a 1-D INT64 tensor"));
    }
    axes.assign(a.data<int64_t>(), a.data<int64_t>() + a.num_elements());
  } else {
    axes = node.attributes.GetInts("axes");
  }
  const bool keepdims = node.attributes.GetInt("keepdims", 1) != 0;
  if (axes.empty() && node.attributes.GetInt("noop_with_empty_axes", 0) != 0) {
    (*outputs)[0] = *x;  // reduces nothing: the identity
    return absl::OkStatus();
  }
  const int rank = x->rank();
  std::vector<bool> reduced(rank, axes.empty());  // no axes: reduce all
  for (int64_t axis : axes) {
    TESSERA_ASSIGN_OR_RETURN(int a, NormalizeAxis(axis, rank));
    reduced[a] = true;
  }
  Shape out_shape;
  for (int d = 0; d < rank; ++d) {
    if (!reduced[d]) {
      out_shape.push_back(x->dim(d));
    } else if (keepdims) {
      out_shape.push_back(1);
    }
    if (reduced[d] && x->dim(d) == 0 && (kind == ReduceKind::kMax || kind == ReduceKind::kMin)) {
      return absl::InvalidArgumentError(
          absl::StrCat("max/min over an empty axis of ", DescribeValue(*x)));
    }
  }
  // A channels-last value is reduced as stored, [N, H, W, C], when the axes it keeps come in the
  // same order there (C reduced, or H and W both): the result's bytes are then the row-major
  // output's. MobileNet-style heads average [N, C, H, W] over H and W this way, with no
  // conversion of the whole value first.
  Value physical;
  if (x->channels_last()) {
    static constexpr int kPhysical[4] = {0, 3, 1, 2};
    std::vector<bool> physical_reduced(4);
    for (int d = 0; d < 4; ++d) physical_reduced[kPhysical[d]] = reduced[d];
    if (reduced[1] || (reduced[2] && reduced[3])) {
      physical = PhysicalView(*x);
      x = &physical;
      reduced = physical_reduced;
    } else {
      physical = ToRowMajor(*x);
      x = &physical;
    }
  }
  Value y = ctx.NewOutput(0, x->dtype(), out_shape);
  switch (x->dtype()) {
    case DataType::kFp32:
      ReduceAs<float>(kind, *x, reduced, y, ctx.pool);
      break;
    case DataType::kInt64:
      ReduceAs<int64_t>(kind, *x, reduced, y, ctx.pool);
      break;
    default:
      ReduceAs<int32_t>(kind, *x, reduced, y, ctx.pool);
      break;
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace

Status RunReduceSum(const OpContext& ctx, const Node& node, const Inputs& inputs,
                    std::vector<Value>* outputs) {
  return RunReduce(ReduceKind::kSum, ctx, node, inputs, outputs);
}

void ReduceMeanFp32(const Value& x, const std::vector<bool>& reduced, const Value& y,
                    ThreadPool* pool) {
  Reduce<ReduceKind::kMean, float>(x, reduced, y, pool);
}

Status RunReduceMean(const OpContext& ctx, const Node& node, const Inputs& inputs,
                     std::vector<Value>* outputs) {
  return RunReduce(ReduceKind::kMean, ctx, node, inputs, outputs);
}

Status RunReduceMax(const OpContext& ctx, const Node& node, const Inputs& inputs,
                    std::vector<Value>* outputs) {
  return RunReduce(ReduceKind::kMax, ctx, node, inputs, outputs);
}

Status RunReduceMin(const OpContext& ctx, const Node& node, const Inputs& inputs,
                    std::vector<Value>* outputs) {
  return RunReduce(ReduceKind::kMin, ctx, node, inputs, outputs);
}

Status RunReduceProd(const OpContext& ctx, const Node& node, const Inputs& inputs,
                     std::vector<Value>* outputs) {
  return RunReduce(ReduceKind::kProd, ctx, node, inputs, outputs);
}

Status RunReduceL1(const OpContext& ctx, const Node& node, const Inputs& inputs,
                   std::vector<Value>* outputs) {
  return RunReduce(ReduceKind::kL1, ctx, node, inputs, outputs);
}

Status RunReduceL2(const OpContext& ctx, const Node& node, const Inputs& inputs,
                   std::vector<Value>* outputs) {
  return RunReduce(ReduceKind::kL2, ctx, node, inputs, outputs);
}

Status RunReduceSumSquare(const OpContext& ctx, const Node& node, const Inputs& inputs,
                          std::vector<Value>* outputs) {
  return RunReduce(ReduceKind::kSumSquare, ctx, node, inputs, outputs);
}

Status RunReduceLogSum(const OpContext& ctx, const Node& node, const Inputs& inputs,
                       std::vector<Value>* outputs) {
  return RunReduce(ReduceKind::kLogSum, ctx, node, inputs, outputs);
}

Status RunReduceLogSumExp(const OpContext& ctx, const Node& node, const Inputs& inputs,
                          std::vector<Value>* outputs) {
  return RunReduce(ReduceKind::kLogSumExp, ctx, node, inputs, outputs);
}

namespace {

// The index of the max (kMax) or min along the middle dim of [outer, len, inner], len >= 1. NaN
// beats every number, as numpy.argmax/argmin (the ONNX reference) have it. Ties go to the first
// index, or the last with `last` (select_last_index).
template <bool kMax, typename T>
void ArgReduce(const T* in, int64_t outer, int64_t len, int64_t inner, bool last, int64_t* out,
               ThreadPool* pool) {
  auto beats = [](T v, T best) {
    if constexpr (std::is_floating_point_v<T>) {
      if (v != v) return best == best;
      if (best != best) return false;
    }
    return kMax ? v > best : v < best;
  };
  auto ties = [](T v, T best) { return v == best || (v != v && best != best); };
  const int64_t per_task =
      std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, len * inner));
  ParallelFor(pool, (outer + per_task - 1) / per_task, [&](int64_t t) {
    const int64_t end = std::min(outer, (t + 1) * per_task);
    for (int64_t o = t * per_task; o < end; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* x = in + o * len * inner + i;
        int64_t best = 0;
        for (int64_t r = 1; r < len; ++r) {
          const T v = x[r * inner], b = x[best * inner];
          if (beats(v, b) || (last && ties(v, b))) best = r;
        }
        out[o * inner + i] = best;
      }
    }
  });
}

template <bool kMax>
Status RunArgReduce(const OpContext& ctx, const Node& node, const Inputs& inputs,
                    std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(
      const Value* x,
      RequireInput(inputs, 0, "data", {DataType::kFp32, DataType::kInt64, DataType::kInt32}));
  TESSERA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attributes.GetInt("axis", 0), x->rank()));
  const bool keepdims = node.attributes.GetInt("keepdims", 1) != 0;
  const bool last = node.attributes.GetInt("select_last_index", 0) != 0;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x->dim(d);
  for (int d = axis + 1; d < x->rank(); ++d) inner *= x->dim(d);
  const int64_t len = x->dim(axis);
  if (len == 0 && outer * inner > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis, " of ", DescribeValue(*x), " is empty: no index to return"));
  }
  Shape out_shape(x->shape());
  if (keepdims) {
    out_shape[axis] = 1;
  } else {
    out_shape.erase(out_shape.begin() + axis);
  }
  Value y = ctx.NewOutput(0, DataType::kInt64, out_shape);
  if (len == 0) {  // and no output elements
    (*outputs)[0] = std::move(y);
    return absl::OkStatus();
  }
  int64_t* out = y.mutable_data<int64_t>();
  switch (x->dtype()) {
    case DataType::kFp32:
      ArgReduce<kMax>(x->data<float>(), outer, len, inner, last, out, ctx.pool);
      break;
    case DataType::kInt64:
      ArgReduce<kMax>(x->data<int64_t>(), outer, len, inner, last, out, ctx.pool);
      break;
    default:
      ArgReduce<kMax>(x->data<int32_t>(), outer, len, inner, last, out, ctx.pool);
      break;
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

template <typename T>
void CumSumLoop(const T* in, T* out, int64_t outer, int64_t len, int64_t inner, bool exclusive,
                bool reverse) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T* src = in + o * len * inner + i;
      T* dst = out + o * len * inner + i;
      T acc = 0;
      for (int64_t step = 0; step < len; ++step) {
        const int64_t r = reverse ? len - 1 - step : step;
        if (exclusive) {
          dst[r * inner] = acc;
          acc += src[r * inner];
        } else {
          acc += src[r * inner];
          dst[r * inner] = acc;
        }
      }
    }
  }
}

}  // namespace

Status RunArgMax(const OpContext& ctx, const Node& node, const Inputs& inputs,
                 std::vector<Value>* outputs) {
  return RunArgReduce<true>(ctx, node, inputs, outputs);
}

Status RunArgMin(const OpContext& ctx, const Node& node, const Inputs& inputs,
                 std::vector<Value>* outputs) {
  return RunArgReduce<false>(ctx, node, inputs, outputs);
}

Status RunCumSum(const OpContext& ctx, const Node& node, const Inputs& inputs,
                 std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(
      const Value* x,
      RequireInput(inputs, 0, "x", {DataType::kFp32, DataType::kInt64, DataType::kInt32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* axis_value,
                           RequireInput(inputs, 1, "axis", {DataType::kInt64, DataType::kInt32}));
  if (axis_value->num_elements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", DescribeValue(*axis_value), " must be a scalar"));
  }
  const int64_t raw_axis = axis_value->dtype() == DataType::kInt64 ? axis_value->data<int64_t>()[0]
                                                                   : axis_value->data<int32_t>()[0];
  if (x->rank() == 0) return absl::InvalidArgumentError("CumSum of a scalar");
  TESSERA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(raw_axis, x->rank()));
  const bool exclusive = node.attributes.GetInt("exclusive", 0) != 0;
  const bool reverse = node.attributes.GetInt("reverse", 0) != 0;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x->dim(d);
  for (int d = axis + 1; d < x->rank(); ++d) inner *= x->dim(d);
  Value y = ctx.NewOutput(0, x->dtype(), x->shape());
  switch (x->dtype()) {
    case DataType::kFp32:
      CumSumLoop(x->data<float>(), y.mutable_data<float>(), outer, x->dim(axis), inner, exclusive,
                 reverse);
      break;
    case DataType::kInt64:
      CumSumLoop(x->data<int64_t>(), y.mutable_data<int64_t>(), outer, x->dim(axis), inner,
                 exclusive, reverse);
      break;
    default:
      CumSumLoop(x->data<int32_t>(), y.mutable_data<int32_t>(), outer, x->dim(axis), inner,
                 exclusive, reverse);
      break;
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
