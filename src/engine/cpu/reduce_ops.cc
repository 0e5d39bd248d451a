// ReduceSum/ReduceMean/ReduceMax/ReduceMin, and CumSum (RoBERTa's position ids). Axes come from the
// `axes` attribute (opset <= 17, except ReduceSum from 13) or from the optional second input
// (ReduceSum 13+, all of them at 18).
//
// When the reduced axes are one contiguous block the input is viewed as [outer, reduced, inner]
// and reduced with tight loops (the usual cases: the last axis, or H and W of NCHW); other axis
// sets take a general strided walk.
#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/cpu/broadcast.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

enum class ReduceKind { kSum, kMean, kMax, kMin };

template <typename T>
T Identity(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::kMax:
      return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::lowest();
    case ReduceKind::kMin:
      return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::max();
    default:
      return T(0);
  }
}

template <typename T>
T Combine(ReduceKind kind, T acc, T v) {
  switch (kind) {
    case ReduceKind::kMax:
      return v > acc ? v : acc;
    case ReduceKind::kMin:
      return v < acc ? v : acc;
    default:
      return acc + v;
  }
}

template <typename T>
void Reduce(ReduceKind kind, const Value& x, const std::vector<bool>& reduced, const Value& y,
            ThreadPool* pool) {
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
  auto finish = [&](T acc) {
    if (kind == ReduceKind::kMean && reduce_count > 0)
      return static_cast<T>(acc / static_cast<T>(reduce_count));
    return acc;
  };
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
          T acc = Identity<T>(kind);
          for (int64_t r = 0; r < len; ++r) acc = Combine(kind, acc, src[r]);
          dst[0] = finish(acc);
          continue;
        }
        for (int64_t i = 0; i < inner; ++i) dst[i] = Identity<T>(kind);
        for (int64_t r = 0; r < len; ++r) {
          const T* row = src + r * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] = Combine(kind, dst[i], row[i]);
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
  for (int64_t i = 0; i < out_count; ++i) out[i] = Identity<T>(kind);
  std::vector<int64_t> coord(rank, 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    out[offset] = Combine(kind, out[offset], in[i]);
    for (int d = rank - 1; d >= 0; --d) {
      offset += out_strides[d];
      if (++coord[d] < x.dim(d)) break;
      offset -= out_strides[d] * x.dim(d);
      coord[d] = 0;
    }
  }
  for (int64_t i = 0; i < out_count; ++i) out[i] = finish(out[i]);
}

Status RunReduce(ReduceKind kind, const OpContext& ctx, const Node& node, const Inputs& inputs,
                 std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(
      const Value* x,
      RequireInput(inputs, 0, "data", {DataType::kFp32, DataType::kInt64, DataType::kInt32}));
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
  Value y = ctx.NewOutput(0, x->dtype(), out_shape);
  switch (x->dtype()) {
    case DataType::kFp32:
      Reduce<float>(kind, *x, reduced, y, ctx.pool);
      break;
    case DataType::kInt64:
      Reduce<int64_t>(kind, *x, reduced, y, ctx.pool);
      break;
    default:
      Reduce<int32_t>(kind, *x, reduced, y, ctx.pool);
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

namespace {

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
