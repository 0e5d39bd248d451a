// Data-movement and shape ops. Dtype-agnostic where possible (they copy bytes), so they serve
// both fp32 activations and the int64 shape tensors of PyTorch's dynamic-batch Reshape chains.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "engine/cpu/broadcast.h"
#include "engine/cpu/data_movement.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

// Every op here moves elements by size or only reads the shape, so strings too (OpDef::strings).
constexpr std::initializer_list<DataType> kAnyType = kMovableTypes;

Value Int64Vector(const std::vector<int64_t>& values) {
  Value v = Value::Allocate(DataType::kInt64, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), v.mutable_data<int64_t>());
  return v;
}

// Axes from input `index` (opset >= 13 style) or from the `axes` attribute (older opsets).
StatusOr<std::vector<int64_t>> AxesArgument(const Node& node, const Inputs& inputs, size_t index) {
  if (index < inputs.size() && inputs[index] != nullptr) {
    const Value& axes = *inputs[index];
    if (axes.dtype() != DataType::kInt64 || axes.rank() > 1) {
      return absl::InvalidArgumentError(absl::StrCat("axes ", DescribeValue(axes),
                                                     " must be a 1-D INT64 tensor"));
    }
    return std::vector<int64_t>(axes.data<int64_t>(), axes.data<int64_t>() + axes.num_elements());
  }
  return node.attributes.GetInts("axes");
}

}  // namespace

Status RunIdentity(const OpContext&, const Node&, const Inputs& inputs,
                   std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "input", kAnyType));
  (*outputs)[0] = *x;  // shares storage; kernels never write their inputs
  return absl::OkStatus();
}

Status CheckConstant(const Node& node, const Graph&) {
  for (const char* name : {"value", "value_float", "value_floats", "value_int", "value_ints"}) {
    if (node.attributes.Has(name)) return absl::OkStatus();
  }
  return absl::UnimplementedError("only value, value_float(s) and value_int(s) are supported");
}

Status RunConstant(const OpContext&, const Node& node, const Inputs&,
                   std::vector<Value>* outputs) {
  const Attributes& attrs = node.attributes;
  Value v;
  if (const Attribute* a = attrs.Find("value"); a != nullptr && a->kind == Attribute::Kind::kTensor) {
    v = a->tensor;
  } else if (const Attribute* a = attrs.Find("value_float"); a != nullptr) {
    v = Value::Allocate(DataType::kFp32, {});
    v.mutable_data<float>()[0] = a->f;
  } else if (const Attribute* a = attrs.Find("value_floats"); a != nullptr) {
    v = Value::Allocate(DataType::kFp32, {static_cast<int64_t>(a->floats.size())});
    std::copy(a->floats.begin(), a->floats.end(), v.mutable_data<float>());
  } else if (const Attribute* a = attrs.Find("value_int"); a != nullptr) {
    v = Value::Allocate(DataType::kInt64, {});
    v.mutable_data<int64_t>()[0] = a->i;
  } else if (const Attribute* a = attrs.Find("value_ints"); a != nullptr) {
    v = Int64Vector(a->ints);
  } else {
    return absl::InvalidArgumentError("Constant has no value");
  }
  (*outputs)[0] = std::move(v);
  return absl::OkStatus();
}

Status RunFlatten(const OpContext&, const Node& node, const Inputs& inputs,
                  std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "input", kAnyType));
  int64_t axis = node.attributes.GetInt("axis", 1);
  if (axis < -x->rank() || axis > x->rank()) {
    return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " out of range for ",
                                                   DescribeValue(*x)));
  }
  if (axis < 0) axis += x->rank();
  int64_t rows = 1, cols = 1;
  for (int d = 0; d < x->rank(); ++d) (d < axis ? rows : cols) *= x->dim(d);
  (*outputs)[0] = x->Reshaped({rows, cols});
  return absl::OkStatus();
}

Status RunReshape(const OpContext&, const Node& node, const Inputs& inputs,
                  std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "data", kAnyType));
  TESSERA_ASSIGN_OR_RETURN(const Value* shape_value,
                           RequireInput(inputs, 1, "shape", {DataType::kInt64}));
  if (shape_value->rank() != 1) return absl::InvalidArgumentError("shape must be 1-D");
  const bool allow_zero = node.attributes.GetInt("allowzero", 0) != 0;
  const int64_t* requested = shape_value->data<int64_t>();
  Shape shape(requested, requested + shape_value->num_elements());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allow_zero) {
      // 0 copies the input's dim at the same index.
      if (static_cast<int>(i) >= x->rank()) {
        return absl::InvalidArgumentError(absl::StrCat("shape[", i, "] = 0 but input ",
                                                       DescribeValue(*x), " has no such dim"));
      }
      shape[i] = x->dim(static_cast<int>(i));
    }
    if (shape[i] == -1) {
      if (infer >= 0) return absl::InvalidArgumentError("more than one -1 in shape");
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("invalid dim ", shape[i], " in shape"));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x->num_elements() % known != 0) {
      return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", DescribeValue(*x), " to ",
                                                     ShapeToString(shape)));
    }
    shape[infer] = x->num_elements() / known;
  }
  if (ElementCount(shape) != x->num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot reshape ", DescribeValue(*x), " to ",
                                                   ShapeToString(shape)));
  }
  (*outputs)[0] = x->Reshaped(shape);
  return absl::OkStatus();
}

Status RunShape(const OpContext&, const Node& node, const Inputs& inputs,
                std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "data", kAnyType));
  // Opset 15 start/end slice the shape; out-of-range values clamp.
  const int64_t rank = x->rank();
  int64_t start = node.attributes.GetInt("start", 0);
  int64_t end = node.attributes.GetInt("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  (*outputs)[0] = Int64Vector(std::vector<int64_t>(x->shape().begin() + start,
                                                   x->shape().begin() + end));
  return absl::OkStatus();
}

Status RunGather(const OpContext& ctx, const Node& node, const Inputs& inputs,
                 std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* data, RequireInput(inputs, 0, "data", kAnyType));
  TESSERA_ASSIGN_OR_RETURN(
      const Value* indices_arg,
      RequireInput(inputs, 1, "indices", {DataType::kInt64, DataType::kInt32}));
  // INT32 indices are widened once; the copy loop below reads INT64.
  Value widened;
  if (indices_arg->dtype() == DataType::kInt32) {
    widened = Value::Allocate(DataType::kInt64, indices_arg->shape());
    const int32_t* narrow = indices_arg->data<int32_t>();
    std::copy(narrow, narrow + indices_arg->num_elements(), widened.mutable_data<int64_t>());
  }
  const Value* indices = widened.defined() ? &widened : indices_arg;
  if (data->rank() == 0) return absl::InvalidArgumentError("Gather from a scalar");
  TESSERA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attributes.GetInt("axis", 0),
                                                   data->rank()));
  Shape out_shape(data->shape().begin(), data->shape().begin() + axis);
  out_shape.insert(out_shape.end(), indices->shape().begin(), indices->shape().end());
  out_shape.insert(out_shape.end(), data->shape().begin() + axis + 1, data->shape().end());
  const int64_t axis_len = data->dim(axis);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= data->dim(d);
  for (int d = axis + 1; d < data->rank(); ++d) inner *= data->dim(d);
  const size_t elem = ElementSize(data->dtype());
  const size_t slice = static_cast<size_t>(inner) * elem;
  Value y = ctx.NewOutput(0, data->dtype(), out_shape);
  const auto* src = static_cast<const std::byte*>(data->raw());
  auto* dst = y.mutable_data<std::byte>();
  const int64_t* idx = indices->data<int64_t>();
  const int64_t count = indices->num_elements();
  for (int64_t i = 0; i < count; ++i) {
    int64_t index = idx[i] < 0 ? idx[i] + axis_len : idx[i];
    if (index < 0 || index >= axis_len) {
      return absl::InvalidArgumentError(absl::StrCat("index ", idx[i], " is out of range for ",
                                                     axis_len, " elements on axis ", axis));
    }
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < count; ++i) {
      int64_t index = idx[i] < 0 ? idx[i] + axis_len : idx[i];
      std::memcpy(dst + (o * count + i) * slice, src + (o * axis_len + index) * slice, slice);
    }
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunUnsqueeze(const OpContext&, const Node& node, const Inputs& inputs,
                    std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "data", kAnyType));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesArgument(node, inputs, 1));
  const int out_rank = x->rank() + static_cast<int>(axes.size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t axis : axes) {
    TESSERA_ASSIGN_OR_RETURN(int a, NormalizeAxis(axis, out_rank));
    if (inserted[a]) return absl::InvalidArgumentError("repeated axis in Unsqueeze");
    inserted[a] = true;
  }
  Shape shape;
  int next = 0;
  for (int d = 0; d < out_rank; ++d) shape.push_back(inserted[d] ? 1 : x->dim(next++));
  (*outputs)[0] = x->Reshaped(shape);
  return absl::OkStatus();
}

Status RunSqueeze(const OpContext&, const Node& node, const Inputs& inputs,
                  std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "data", kAnyType));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesArgument(node, inputs, 1));
  std::vector<bool> drop(x->rank(), axes.empty());
  if (axes.empty()) {
    for (int d = 0; d < x->rank(); ++d) drop[d] = x->dim(d) == 1;
  }
  for (int64_t axis : axes) {
    TESSERA_ASSIGN_OR_RETURN(int a, NormalizeAxis(axis, x->rank()));
    if (x->dim(a) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("cannot squeeze dim ", a, " of ",
                                                     DescribeValue(*x)));
    }
    drop[a] = true;
  }
  Shape shape;
  for (int d = 0; d < x->rank(); ++d) {
    if (!drop[d]) shape.push_back(x->dim(d));
  }
  (*outputs)[0] = x->Reshaped(shape);
  return absl::OkStatus();
}

Status RunConcat(const OpContext& ctx, const Node& node, const Inputs& inputs,
                 std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* first, RequireInput(inputs, 0, "inputs", kAnyType));
  if (first->rank() == 0) return absl::InvalidArgumentError("Concat of scalars");
  TESSERA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attributes.GetInt("axis", 0),
                                                   first->rank()));
  Shape out_shape = first->shape();
  out_shape[axis] = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(const Value* v, RequireInput(inputs, i, "inputs", {first->dtype()}));
    bool fits = v->rank() == first->rank();
    for (int d = 0; fits && d < v->rank(); ++d) fits = d == axis || v->dim(d) == first->dim(d);
    if (!fits) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " ", DescribeValue(*v),
                                                     " does not fit ", DescribeValue(*first),
                                                     " on axis ", axis));
    }
    out_shape[axis] += v->dim(axis);
  }
  // Channels-last inputs (oneDNN Conv outputs: U-Net skips, FPN and YOLO necks) are joined as the
  // [N, H, W, C] arrays they are, on the physical axis, so the next Conv reads the result without
  // a transpose, unless most of the bytes are row-major: then those that are not are converted.
  const bool to_channels_last = MostlyChannelsLast(inputs);
  std::vector<Value> parts;
  parts.reserve(inputs.size());
  for (const Value* v : inputs) {
    if (to_channels_last) {
      parts.push_back(PhysicalView(ToChannelsLast(*v)));
    } else {
      parts.push_back(ToRowMajor(*v));
    }
  }
  Value y = ctx.NewOutput(0, first->dtype(), out_shape);
  Value y_bytes = y;
  if (to_channels_last) {
    y = y.WithLayout(Layout::kChannelsLast);
    y_bytes = PhysicalView(y);
    axis = PhysicalAxis(axis);
  }
  const Shape& bytes_shape = y_bytes.shape();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= bytes_shape[d];
  for (int d = axis + 1; d < y_bytes.rank(); ++d) inner *= bytes_shape[d];
  const size_t elem = ElementSize(first->dtype());
  auto* dst = y_bytes.mutable_data<std::byte>();
  const size_t out_row = static_cast<size_t>(bytes_shape[axis] * inner) * elem;
  // Output row o is each part's row o in turn. Written row by row, so every output row is
  // written once, front to back, however many parts there are (DenseNet joins dozens); rows are
  // split across the pool when the output is large.
  std::vector<size_t> part_row(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    part_row[i] = static_cast<size_t>(parts[i].dim(axis) * inner) * elem;
  }
  const int64_t rows_per_task =
      std::max<int64_t>(1, static_cast<int64_t>((size_t{1} << 16) / std::max<size_t>(1, out_row)));
  ParallelFor(ctx.pool, (outer + rows_per_task - 1) / rows_per_task, [&](int64_t task) {
    const int64_t end = std::min(outer, (task + 1) * rows_per_task);
    for (int64_t o = task * rows_per_task; o < end; ++o) {
      std::byte* d = dst + o * out_row;
      for (size_t i = 0; i < parts.size(); ++i) {
        const size_t row = part_row[i];
        CopyRow(d, static_cast<const std::byte*>(parts[i].raw()) + o * row, row);
        d += row;
      }
    }
  });
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

namespace {

// Output rows (the last output dim) are the unit: a memcpy when the permutation keeps the last dim
// last, else a strided gather; the coordinate odometer runs once per row, not per element. Rows
// are split across the pool for large tensors.
template <typename T>
void TransposeLoop(const T* src, const Shape& in_shape, const std::vector<int>& perm, T* dst,
                   ThreadPool* pool) {
  const int rank = static_cast<int>(in_shape.size());
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  std::vector<int64_t> in_strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * in_shape[d + 1];
  Shape out_shape(rank);
  std::vector<int64_t> strides(rank);  // input stride of each output dim
  for (int d = 0; d < rank; ++d) {
    out_shape[d] = in_shape[perm[d]];
    strides[d] = in_strides[perm[d]];
  }
  const int64_t total = ElementCount(out_shape);
  const int64_t row = out_shape[rank - 1];
  if (total == 0) return;
  const int64_t step = strides[rank - 1];
  const int64_t rows = total / row;
  const int64_t tasks = std::clamp<int64_t>(total / kElementwiseGrain, 1, rows);
  ParallelFor(pool, tasks, [&](int64_t t) {
    const int64_t first = rows * t / tasks, last = rows * (t + 1) / tasks;
    // The odometer's start: the output coordinate of row `first`, and its input offset.
    std::vector<int64_t> coord(rank, 0);
    int64_t offset = 0;
    for (int64_t d = rank - 2, rest = first; d >= 0; --d) {
      coord[d] = rest % out_shape[d];
      rest /= out_shape[d];
      offset += coord[d] * strides[d];
    }
    for (int64_t r = first; r < last; ++r) {
      T* out = dst + r * row;
      if (step == 1) {
        std::memcpy(out, src + offset, row * sizeof(T));
      } else {
        for (int64_t j = 0; j < row; ++j) out[j] = src[offset + j * step];
      }
      for (int d = rank - 2; d >= 0; --d) {
        offset += strides[d];
        if (++coord[d] < out_shape[d]) break;
        offset -= strides[d] * out_shape[d];
        coord[d] = 0;
      }
    }
  });
}

void TransposeValue(const Value& x, const std::vector<int>& perm, Value* y, ThreadPool* pool) {
  switch (ElementSize(x.dtype())) {
    case 1:
      TransposeLoop(x.data<uint8_t>(), x.shape(), perm, y->mutable_data<uint8_t>(), pool);
      break;
    case 4:
      TransposeLoop(x.data<uint32_t>(), x.shape(), perm, y->mutable_data<uint32_t>(), pool);
      break;
    default:
      TransposeLoop(x.data<uint64_t>(), x.shape(), perm, y->mutable_data<uint64_t>(), pool);
      break;
  }
}

}  // namespace

Status RunTranspose(const OpContext& ctx, const Node& node, const Inputs& inputs,
                    std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "data", kAnyType));
  const int rank = x->rank();
  std::vector<int64_t> perm64 = node.attributes.GetInts("perm");
  std::vector<int> perm(rank);
  if (perm64.empty()) {
    for (int d = 0; d < rank; ++d) perm[d] = rank - 1 - d;  // default: reverse the dims
  } else {
    if (static_cast<int>(perm64.size()) != rank) {
      return absl::InvalidArgumentError(absl::StrCat("perm has ", perm64.size(),
                                                     " entries for rank ", rank));
    }
    std::vector<bool> seen(rank, false);
    for (int d = 0; d < rank; ++d) {
      if (perm64[d] < 0 || perm64[d] >= rank || seen[perm64[d]]) {
        return absl::InvalidArgumentError("perm is not a permutation");
      }
      seen[perm64[d]] = true;
      perm[d] = static_cast<int>(perm64[d]);
    }
  }
  Shape out_shape(rank);
  for (int d = 0; d < rank; ++d) out_shape[d] = x->dim(perm[d]);
  if (x->channels_last()) {
    // Transpose the bytes as stored, [N, H, W, C]: logical axis a is physical axis kPhysical[a].
    // A detection head's NHWC Transpose of a Conv output is then its bytes as they are.
    static constexpr int kPhysical[4] = {0, 3, 1, 2};
    const Value physical = PhysicalView(*x);
    std::vector<int> physical_perm(rank);
    bool identity = true;
    for (int d = 0; d < rank; ++d) {
      physical_perm[d] = kPhysical[perm[d]];
      identity = identity && physical_perm[d] == d;
    }
    if (identity) {
      (*outputs)[0] = physical;
      return absl::OkStatus();
    }
    x = &physical;
    perm = physical_perm;
    Value y = ctx.NewOutput(0, x->dtype(), out_shape);
    if (x->num_elements() > 0) TransposeValue(*x, perm, &y, ctx.pool);
    (*outputs)[0] = std::move(y);
    return absl::OkStatus();
  }
  Value y = ctx.NewOutput(0, x->dtype(), out_shape);
  if (x->num_elements() > 0) TransposeValue(*x, perm, &y, ctx.pool);
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
