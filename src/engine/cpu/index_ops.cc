// Index-driven data movement: GatherElements, GatherND, ScatterElements (and the deprecated
// Scatter), ScatterND and TopK. Indices come from the model's data, so every one is checked
// against its dim before any element moves; the copies themselves run unchecked.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/cpu/broadcast.h"
#include "engine/cpu/data_movement.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

constexpr std::initializer_list<DataType> kAnyType = {
    DataType::kFp32, DataType::kInt64, DataType::kInt32, DataType::kBool, DataType::kUint8};
constexpr std::initializer_list<DataType> kIndexTypes = {DataType::kInt64, DataType::kInt32};

// ---- Scatter reductions ------------------------------------------------------------------------

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

StatusOr<Reduction> ReductionOf(const Node& node) {
  const std::string r = node.attributes.GetString("reduction", "none");
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return absl::InvalidArgumentError(absl::StrCat("unknown reduction \"", r, "\""));
}

// dst[i] = reduce(dst[i], src[i]) for i < n. On BOOL (0/1 bytes) add is a logical or so the
// result stays a valid BOOL; mul, max and min already are and/or/and on 0 and 1.
template <typename T>
void Combine(Reduction reduction, bool is_bool, T* dst, const T* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    switch (reduction) {
      case Reduction::kNone:
        dst[i] = src[i];
        break;
      case Reduction::kAdd:
        dst[i] =
            is_bool ? static_cast<T>(dst[i] != 0 || src[i] != 0) : static_cast<T>(dst[i] + src[i]);
        break;
      case Reduction::kMul:
        dst[i] = static_cast<T>(dst[i] * src[i]);
        break;
      case Reduction::kMax:
        dst[i] = std::max(dst[i], src[i]);
        break;
      case Reduction::kMin:
        dst[i] = std::min(dst[i], src[i]);
        break;
    }
  }
}

// A fresh output 0 holding a copy of `data`: scatters write into a copy, never their input.
Value CopyOfData(const OpContext& ctx, const Value& data) {
  Value y = ctx.NewOutput(0, data.dtype(), data.shape());
  if (data.byte_size() > 0) std::memcpy(y.mutable_data<void>(), data.raw(), data.byte_size());
  return y;
}

// ---- TopK --------------------------------------------------------------------------------------

// A strict weak order that ranks NaN above every number (as numpy's sort does), so sorting a
// column with NaNs stays well defined.
template <typename T>
bool Greater(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}

StatusOr<int64_t> TopKCount(const Node& node, const Inputs& inputs) {
  if (node.opset < 10) {
    if (!node.attributes.Has("k")) return absl::InvalidArgumentError("TopK without a k attribute");
    return node.attributes.GetInt("k", 0);
  }
  TESSERA_ASSIGN_OR_RETURN(const Value* k, RequireInput(inputs, 1, "K", {DataType::kInt64}));
  if (k->rank() > 1 || k->num_elements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("K ", DescribeValue(*k), " must hold exactly one element"));
  }
  return k->data<int64_t>()[0];
}

template <typename T>
void TopKLoop(const Value& x, int64_t outer, int64_t len, int64_t inner, int64_t k, bool largest,
              Value* values, Value* indices, ThreadPool* pool) {
  const T* in = x.data<T>();
  T* out_values = values->mutable_data<T>();
  int64_t* out_indices = indices->mutable_data<int64_t>();
  const int64_t slices = outer * inner;
  const int64_t per_task = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, len));
  const int64_t tasks = (slices + per_task - 1) / per_task;
  ParallelFor(pool, tasks, [&](int64_t t) {
    std::vector<T> column(len);
    std::vector<int64_t> order(len);
    const int64_t end = std::min(slices, (t + 1) * per_task);
    for (int64_t s = t * per_task; s < end; ++s) {
      const int64_t o = s / inner, i = s % inner;
      const T* src = in + o * len * inner + i;
      for (int64_t j = 0; j < len; ++j) column[j] = src[j * inner];
      std::iota(order.begin(), order.end(), int64_t{0});
      // Equal values keep the lower index first, as the ONNX spec asks.
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
        if (Greater(column[a], column[b])) return largest;
        if (Greater(column[b], column[a])) return !largest;
        return a < b;
      });
      const int64_t base = o * k * inner + i;
      for (int64_t j = 0; j < k; ++j) {
        out_values[base + j * inner] = column[order[j]];
        out_indices[base + j * inner] = order[j];
      }
    }
  });
}

}  // namespace

Status RunGatherElements(const OpContext& ctx, const Node& node, const Inputs& inputs,
                         std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* data, RequireInput(inputs, 0, "data", kAnyType));
  TESSERA_ASSIGN_OR_RETURN(const Value* indices, RequireInput(inputs, 1, "indices", kIndexTypes));
  const int rank = data->rank();
  if (rank == 0) return absl::InvalidArgumentError("GatherElements from a scalar");
  if (indices->rank() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "indices ", DescribeValue(*indices), " must have the rank of data ", DescribeValue(*data)));
  }
  TESSERA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attributes.GetInt("axis", 0), rank));
  for (int d = 0; d < rank; ++d) {
    if (d != axis && indices->dim(d) > data->dim(d)) {
      return absl::InvalidArgumentError(absl::StrCat("indices ", DescribeValue(*indices),
                                                     " exceed data ", DescribeValue(*data),
                                                     " on dim ", d));
    }
  }
  const IndexView idx(*indices);
  const int64_t count = indices->num_elements();
  const int64_t axis_len = data->dim(axis);
  for (int64_t k = 0; k < count; ++k) {
    TESSERA_RETURN_IF_ERROR(WrapIndex(idx[k], axis_len, "GatherElements").status());
  }
  std::vector<int64_t> strides = RowMajorStrides(data->shape());
  const int64_t axis_stride = strides[axis];
  strides[axis] = 0;
  Value y = ctx.NewOutput(0, data->dtype(), indices->shape());
  ForElementSize(ElementSize(data->dtype()), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* src = data->data<T>();
    T* dst = y.mutable_data<T>();
    ParallelChunks(ctx.pool, count, [&](int64_t begin, int64_t end) {
      StridedWalk walk(indices->shape(), strides, begin);
      for (int64_t k = begin; k < end; ++k, walk.Next()) {
        const int64_t i = idx[k] < 0 ? idx[k] + axis_len : idx[k];
        dst[k] = src[walk.offset() + i * axis_stride];
      }
    });
  });
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunGatherND(const OpContext& ctx, const Node& node, const Inputs& inputs,
                   std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* data, RequireInput(inputs, 0, "data", kAnyType));
  TESSERA_ASSIGN_OR_RETURN(const Value* indices, RequireInput(inputs, 1, "indices", kIndexTypes));
  const int r = data->rank(), q = indices->rank();
  const int64_t b = node.attributes.GetInt("batch_dims", 0);
  if (b < 0 || b >= r || b >= q) {
    return absl::InvalidArgumentError(absl::StrCat("batch_dims ", b, " must be below the ranks of ",
                                                   DescribeValue(*data), " and ",
                                                   DescribeValue(*indices)));
  }
  const int64_t m = indices->dim(q - 1);
  if (m > r - b) {
    return absl::InvalidArgumentError(absl::StrCat("indices ", DescribeValue(*indices), " index ",
                                                   m, " dims of data ", DescribeValue(*data),
                                                   " past ", b, " batch dims"));
  }
  for (int d = 0; d < b; ++d) {
    if (indices->dim(d) != data->dim(d)) {
      return absl::InvalidArgumentError(absl::StrCat("batch dim ", d, " differs between data ",
                                                     DescribeValue(*data), " and indices ",
                                                     DescribeValue(*indices)));
    }
  }
  Shape out_shape(indices->shape().begin(), indices->shape().end() - 1);
  out_shape.insert(out_shape.end(), data->shape().begin() + b + m, data->shape().end());
  // With m = 0 the tuple count is not bounded by the (empty) indices, only by the output.
  const size_t elem = ElementSize(data->dtype());
  TESSERA_RETURN_IF_ERROR(CheckAllocatable(out_shape, elem));
  Value y = ctx.NewOutput(0, data->dtype(), out_shape);
  if (y.num_elements() == 0 && m == 0) {
    (*outputs)[0] = std::move(y);
    return absl::OkStatus();
  }
  int64_t batch = 1, per_batch = 1, slice = 1;
  for (int d = 0; d < b; ++d) batch *= data->dim(d);
  for (int d = static_cast<int>(b); d < q - 1; ++d) per_batch *= indices->dim(d);
  for (int d = static_cast<int>(b + m); d < r; ++d) slice *= data->dim(d);
  const std::vector<int64_t> strides = RowMajorStrides(data->shape());
  const int64_t batch_stride = b > 0 ? strides[b - 1] : 0;
  // One source offset per index tuple, checked as it is computed.
  const int64_t tuples = batch * per_batch;
  std::vector<int64_t> offsets(tuples);
  const IndexView idx(*indices);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = (t / per_batch) * batch_stride;
    for (int64_t j = 0; j < m; ++j) {
      TESSERA_ASSIGN_OR_RETURN(int64_t i, WrapIndex(idx[t * m + j], data->dim(b + j), "GatherND"));
      offset += i * strides[b + j];
    }
    offsets[t] = offset;
  }
  const size_t slice_bytes = static_cast<size_t>(slice) * elem;
  const auto* src = static_cast<const std::byte*>(data->raw());
  auto* dst = y.mutable_data<std::byte>();
  ParallelChunks(ctx.pool, tuples, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      std::memcpy(dst + t * slice_bytes, src + offsets[t] * elem, slice_bytes);
    }
  });
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status CheckScatter(const Node& node, const Graph&) { return ReductionOf(node).status(); }

// Also runs the deprecated Scatter, which is ScatterElements of opsets 9 and 10.
Status RunScatterElements(const OpContext& ctx, const Node& node, const Inputs& inputs,
                          std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* data, RequireInput(inputs, 0, "data", kAnyType));
  TESSERA_ASSIGN_OR_RETURN(const Value* indices, RequireInput(inputs, 1, "indices", kIndexTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* updates,
                           RequireInput(inputs, 2, "updates", {data->dtype()}));
  TESSERA_ASSIGN_OR_RETURN(Reduction reduction, ReductionOf(node));
  const int rank = data->rank();
  if (rank == 0) return absl::InvalidArgumentError("scatter into a scalar");
  if (indices->shape() != updates->shape() || indices->rank() != rank) {
    return absl::InvalidArgumentError(absl::StrCat("indices ", DescribeValue(*indices),
                                                   " and updates ", DescribeValue(*updates),
                                                   " must have one shape of data's rank ", rank));
  }
  TESSERA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attributes.GetInt("axis", 0), rank));
  for (int d = 0; d < rank; ++d) {
    if (d != axis && indices->dim(d) > data->dim(d)) {
      return absl::InvalidArgumentError(absl::StrCat("indices ", DescribeValue(*indices),
                                                     " exceed data ", DescribeValue(*data),
                                                     " on dim ", d));
    }
  }
  std::vector<int64_t> strides = RowMajorStrides(data->shape());
  const int64_t axis_stride = strides[axis];
  const int64_t axis_len = data->dim(axis);
  strides[axis] = 0;  // the walk gives the offset without the axis; the index supplies it
  Value y = CopyOfData(ctx, *data);
  const IndexView idx(*indices);
  const int64_t count = indices->num_elements();
  Status status;
  ForArithmeticType(data->dtype(), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* src = updates->data<T>();
    T* dst = y.mutable_data<T>();
    const bool is_bool = data->dtype() == DataType::kBool;
    StridedWalk walk(indices->shape(), strides, 0);
    for (int64_t k = 0; k < count; ++k, walk.Next()) {
      StatusOr<int64_t> i = WrapIndex(idx[k], axis_len, "scatter");
      if (!i.ok()) {
        status = i.status();
        return;
      }
      Combine(reduction, is_bool, dst + walk.offset() + *i * axis_stride, src + k, 1);
    }
  });
  TESSERA_RETURN_IF_ERROR(status);
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunScatterND(const OpContext& ctx, const Node& node, const Inputs& inputs,
                    std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* data, RequireInput(inputs, 0, "data", kAnyType));
  TESSERA_ASSIGN_OR_RETURN(const Value* indices, RequireInput(inputs, 1, "indices", kIndexTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* updates,
                           RequireInput(inputs, 2, "updates", {data->dtype()}));
  TESSERA_ASSIGN_OR_RETURN(Reduction reduction, ReductionOf(node));
  const int r = data->rank(), q = indices->rank();
  if (q < 1) return absl::InvalidArgumentError("ScatterND indices must have rank >= 1");
  const int64_t m = indices->dim(q - 1);
  if (m > r) {
    return absl::InvalidArgumentError(absl::StrCat("indices ", DescribeValue(*indices),
                                                   " index more dims than data ",
                                                   DescribeValue(*data), " has"));
  }
  Shape expected(indices->shape().begin(), indices->shape().end() - 1);
  expected.insert(expected.end(), data->shape().begin() + m, data->shape().end());
  if (updates->shape() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("updates ", DescribeValue(*updates),
                                                   " should have shape ", ShapeToString(expected)));
  }
  Value y = CopyOfData(ctx, *data);
  // Past this point the tuple count times the slice is the updates' element count.
  if (updates->num_elements() == 0) {
    (*outputs)[0] = std::move(y);
    return absl::OkStatus();
  }
  int64_t tuples = 1, slice = 1;
  for (int d = 0; d < q - 1; ++d) tuples *= indices->dim(d);
  for (int d = static_cast<int>(m); d < r; ++d) slice *= data->dim(d);
  const std::vector<int64_t> strides = RowMajorStrides(data->shape());
  const IndexView idx(*indices);
  Status status;
  ForArithmeticType(data->dtype(), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* src = updates->data<T>();
    T* dst = y.mutable_data<T>();
    const bool is_bool = data->dtype() == DataType::kBool;
    // In index order, so with duplicate indices and no reduction the last update wins.
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = 0;
      for (int64_t j = 0; j < m; ++j) {
        StatusOr<int64_t> i = WrapIndex(idx[t * m + j], data->dim(j), "ScatterND");
        if (!i.ok()) {
          status = i.status();
          return;
        }
        offset += *i * strides[j];
      }
      Combine(reduction, is_bool, dst + offset, src + t * slice, slice);
    }
  });
  TESSERA_RETURN_IF_ERROR(status);
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status CheckTopK(const Node& node, const Graph&) {
  if (node.opset < 10 && !node.attributes.Has("k")) {
    return absl::InvalidArgumentError("TopK before opset 10 needs the k attribute");
  }
  return absl::OkStatus();
}

Status RunTopK(const OpContext& ctx, const Node& node, const Inputs& inputs,
               std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X",
                                                        {DataType::kFp32, DataType::kInt64,
                                                         DataType::kInt32, DataType::kUint8}));
  if (x->rank() == 0) return absl::InvalidArgumentError("TopK of a scalar");
  TESSERA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attributes.GetInt("axis", -1), x->rank()));
  TESSERA_ASSIGN_OR_RETURN(int64_t k, TopKCount(node, inputs));
  const int64_t len = x->dim(axis);
  if (k < 0 || k > len) {
    return absl::InvalidArgumentError(absl::StrCat("K = ", k, " is outside [0, ", len,
                                                   "] for axis ", axis, " of ", DescribeValue(*x)));
  }
  const bool largest = node.attributes.GetInt("largest", 1) != 0;
  // sorted=0 leaves the order to the implementation; sorted output satisfies it too.
  Shape out_shape = x->shape();
  out_shape[axis] = k;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x->dim(d);
  for (int d = axis + 1; d < x->rank(); ++d) inner *= x->dim(d);
  Value values = ctx.NewOutput(0, x->dtype(), out_shape);
  Value indices = outputs->size() > 1 ? ctx.NewOutput(1, DataType::kInt64, out_shape)
                                      : Value::Allocate(DataType::kInt64, out_shape);
  if (values.num_elements() == 0) {
    (*outputs)[0] = std::move(values);
    if (outputs->size() > 1) (*outputs)[1] = std::move(indices);
    return absl::OkStatus();
  }
  ForArithmeticType(x->dtype(), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    TopKLoop<T>(*x, outer, len, inner, k, largest, &values, &indices, ctx.pool);
  });
  (*outputs)[0] = std::move(values);
  if (outputs->size() > 1) (*outputs)[1] = std::move(indices);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
