// Slicing and tensor-construction ops: Slice, Split, Expand, ConstantOfShape, Range, Pad, Trilu.
// All are dtype-agnostic byte movers except Range and the pad value. Index-like inputs (starts,
// pads, shapes) may be INT64 or INT32 and are validated before any memory is touched.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/cpu/broadcast.h"
#include "engine/cpu/data_movement.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

constexpr std::initializer_list<DataType> kAnyType = {DataType::kFp32, DataType::kInt64,
                                                      DataType::kInt32, DataType::kBool,
                                                      DataType::kUint8};

// The values of a 1-D (or scalar) INT64/INT32 tensor.
StatusOr<std::vector<int64_t>> IndexValues(const Value& v, const char* what) {
  if (v.rank() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", DescribeValue(v), " must be 1-D"));
  }
  if (v.dtype() == DataType::kInt64) {
    return std::vector<int64_t>(v.data<int64_t>(), v.data<int64_t>() + v.num_elements());
  }
  if (v.dtype() == DataType::kInt32) {
    return std::vector<int64_t>(v.data<int32_t>(), v.data<int32_t>() + v.num_elements());
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " ", DescribeValue(v), " must be INT64 or INT32"));
}

// Copies an N-d strided view of `src` (element strides, may be 0 or negative) into contiguous
// `dst` of `shape`. A unit innermost stride copies whole rows with memcpy.
void StridedCopy(const std::byte* src, const Shape& shape, const std::vector<int64_t>& strides,
                 size_t elem, std::byte* dst, ThreadPool* pool) {
  const int rank = static_cast<int>(shape.size());
  const int64_t total = ElementCount(shape);
  if (total == 0) return;
  if (rank == 0) {
    std::memcpy(dst, src, elem);
    return;
  }
  const int64_t inner = shape[rank - 1];
  const int64_t inner_stride = strides[rank - 1];
  const int64_t rows = total / inner;
  const int64_t rows_per_task =
      std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, inner));
  const int64_t tasks = (rows + rows_per_task - 1) / rows_per_task;
  ParallelFor(pool, tasks, [&](int64_t t) {
    const int64_t end = std::min(rows, (t + 1) * rows_per_task);
    for (int64_t r = t * rows_per_task; r < end; ++r) {
      int64_t offset = 0, rest = r;
      for (int d = rank - 2; d >= 0; --d) {
        offset += (rest % shape[d]) * strides[d];
        rest /= shape[d];
      }
      const std::byte* s = src + offset * static_cast<int64_t>(elem);
      std::byte* o = dst + r * inner * static_cast<int64_t>(elem);
      if (inner_stride == 1) {
        std::memcpy(o, s, static_cast<size_t>(inner) * elem);
      } else {
        for (int64_t i = 0; i < inner; ++i) {
          std::memcpy(o + i * static_cast<int64_t>(elem),
                      s + i * inner_stride * static_cast<int64_t>(elem), elem);
        }
      }
    }
  });
}

std::vector<int64_t> ContiguousStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

}  // namespace

Status RunSlice(const OpContext& ctx, const Node& node, const Inputs& inputs,
                std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "data", kMovableTypes));
  std::vector<int64_t> starts, ends, axes, steps;
  if (node.opset < 10) {
    starts = node.attributes.GetInts("starts");
    ends = node.attributes.GetInts("ends");
    axes = node.attributes.GetInts("axes");
  } else {
    for (size_t i = 1; i < 3; ++i) {
      if (i >= inputs.size() || inputs[i] == nullptr) {
        return absl::InvalidArgumentError(i == 1 ? "missing starts" : "missing ends");
      }
    }
    TESSERA_ASSIGN_OR_RETURN(starts, IndexValues(*inputs[1], "starts"));
    TESSERA_ASSIGN_OR_RETURN(ends, IndexValues(*inputs[2], "ends"));
    if (inputs.size() > 3 && inputs[3] != nullptr) {
      TESSERA_ASSIGN_OR_RETURN(axes, IndexValues(*inputs[3], "axes"));
    }
    if (inputs.size() > 4 && inputs[4] != nullptr) {
      TESSERA_ASSIGN_OR_RETURN(steps, IndexValues(*inputs[4], "steps"));
    }
  }
  const size_t count = starts.size();
  if (ends.size() != count || (!axes.empty() && axes.size() != count) ||
      (!steps.empty() && steps.size() != count)) {
    return absl::InvalidArgumentError("starts, ends, axes and steps differ in length");
  }
  const int rank = x->rank();
  Shape out_shape = x->shape();
  std::vector<int64_t> begin(rank, 0), step(rank, 1);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < count; ++i) {
    TESSERA_ASSIGN_OR_RETURN(int axis,
                             NormalizeAxis(axes.empty() ? static_cast<int64_t>(i) : axes[i], rank));
    if (seen[axis]) return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " repeated"));
    seen[axis] = true;
    const int64_t dim = x->dim(axis);
    const int64_t s = steps.empty() ? 1 : steps[i];
    if (s == 0) return absl::InvalidArgumentError("slice step of 0");
    // Negative indices count from the end; then clamp (INT64_MAX ends mean "to the end").
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    int64_t len;
    if (s > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      len = end > start ? (end - start + s - 1) / s : 0;
    } else {
      start = std::clamp<int64_t>(start, -1, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      // -s may overflow only for INT64_MIN, for which any non-empty range has length 1.
      const int64_t magnitude =
          s == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -s;
      len = start > end ? (start - end + magnitude - 1) / magnitude : 0;
    }
    out_shape[axis] = len;
    begin[axis] = len > 0 ? start : 0;
    step[axis] = s;
  }
  const std::vector<int64_t> in_strides = ContiguousStrides(x->shape());
  std::vector<int64_t> strides(rank);
  int64_t offset = 0;
  for (int d = 0; d < rank; ++d) {
    offset += begin[d] * in_strides[d];
    strides[d] = step[d] * in_strides[d];
  }
  Value y = ctx.NewOutput(0, x->dtype(), out_shape);
  const size_t elem = ElementSize(x->dtype());
  StridedCopy(static_cast<const std::byte*>(x->raw()) + offset * static_cast<int64_t>(elem),
              out_shape, strides, elem, y.mutable_data<std::byte>(), ctx.pool);
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunSplit(const OpContext& ctx, const Node& node, const Inputs& inputs,
                std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "input", kMovableTypes));
  if (x->rank() == 0) return absl::InvalidArgumentError("Split of a scalar");
  TESSERA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attributes.GetInt("axis", 0), x->rank()));
  const int64_t dim = x->dim(axis);
  const int64_t parts = static_cast<int64_t>(outputs->size());
  std::vector<int64_t> split;
  if (inputs.size() > 1 && inputs[1] != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(split, IndexValues(*inputs[1], "split"));
  } else {
    split = node.attributes.GetInts("split");
  }
  if (split.empty()) {
    // Equal parts; opset 18's num_outputs allows a smaller last part (ceil division).
    const int64_t part = (dim + parts - 1) / parts;
    if (node.opset < 18 && dim % parts != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dim ", dim, " of ", DescribeValue(*x), " does not split into ", parts, " equal parts"));
    }
    for (int64_t i = 0; i < parts; ++i) split.push_back(std::min(part, dim - i * part));
  }
  if (static_cast<int64_t>(split.size()) != parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("split has ", split.size(), " entries for ", parts, " outputs"));
  }
  int64_t sum = 0;
  for (int64_t s : split) {
    if (s < 0) return absl::InvalidArgumentError("negative split size");
    sum += s;
  }
  if (sum != dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("split sizes sum to ", sum, ", not dim ", dim, " of ", DescribeValue(*x)));
  }
  // A channels-last X (YOLOv8's C2f blocks split a Conv's channels in two) is split as its
  // [N, H, W, C] bytes, and the parts stay channels-last for the Convs that read them.
  const Value x_bytes = PhysicalView(*x);
  const int bytes_axis = x->channels_last() ? PhysicalAxis(axis) : axis;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < bytes_axis; ++d) outer *= x_bytes.dim(d);
  for (int d = bytes_axis + 1; d < x_bytes.rank(); ++d) inner *= x_bytes.dim(d);
  const size_t elem = ElementSize(x->dtype());
  const auto* src = static_cast<const std::byte*>(x_bytes.raw());
  int64_t offset = 0;
  for (int64_t p = 0; p < parts; ++p) {
    Shape shape = x->shape();
    shape[axis] = split[p];
    Value y = ctx.NewOutput(static_cast<size_t>(p), x->dtype(), shape).WithLayout(x->layout());
    const size_t row = static_cast<size_t>(split[p] * inner) * elem;
    auto* dst = PhysicalView(y).mutable_data<std::byte>();
    for (int64_t o = 0; o < outer && row > 0; ++o) {
      CopyRow(dst + o * row, src + (o * dim + offset) * inner * static_cast<int64_t>(elem), row);
    }
    offset += split[p];
    (*outputs)[p] = std::move(y);
  }
  return absl::OkStatus();
}

Status RunExpand(const OpContext& ctx, const Node&, const Inputs& inputs,
                 std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "input", kMovableTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* shape_value,
                           RequireInput(inputs, 1, "shape", {DataType::kInt64}));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> requested, IndexValues(*shape_value, "shape"));
  for (int64_t d : requested) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dim ", d, " in shape"));
  }
  TESSERA_ASSIGN_OR_RETURN(Shape out_shape, BroadcastShapes(x->shape(), Shape(requested)));
  if (out_shape == x->shape()) {
    (*outputs)[0] = *x;  // nothing to expand: share storage
    return absl::OkStatus();
  }
  Value y = ctx.NewOutput(0, x->dtype(), out_shape);
  StridedCopy(static_cast<const std::byte*>(x->raw()), out_shape,
              BroadcastStrides(x->shape(), out_shape), ElementSize(x->dtype()),
              y.mutable_data<std::byte>(), ctx.pool);
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunConstantOfShape(const OpContext& ctx, const Node& node, const Inputs& inputs,
                          std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* shape_value,
                           RequireInput(inputs, 0, "input", {DataType::kInt64}));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> dims, IndexValues(*shape_value, "input"));
  for (int64_t d : dims) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dim ", d, " in shape"));
  }
  Value fill = Value::Zeros(DataType::kFp32, {1});  // default: FLOAT 0
  if (const Attribute* a = node.attributes.Find("value");
      a != nullptr && a->kind == Attribute::Kind::kTensor) {
    if (a->tensor.num_elements() != 1) {
      return absl::InvalidArgumentError("value must hold exactly one element");
    }
    fill = a->tensor;
  }
  Value y = ctx.NewOutput(0, fill.dtype(), Shape(dims));
  const size_t elem = ElementSize(fill.dtype());
  auto* dst = y.mutable_data<std::byte>();
  for (int64_t i = 0; i < y.num_elements(); ++i) std::memcpy(dst + i * elem, fill.raw(), elem);
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

namespace {

// Above this many elements a Range is treated as a mistake rather than allocated.
constexpr int64_t kMaxRangeElements = int64_t{1} << 31;

template <typename T>
Status FillRange(const OpContext& ctx, const Value& start, const Value& limit, const Value& delta,
                 std::vector<Value>* outputs) {
  const T s = start.data<T>()[0], l = limit.data<T>()[0], d = delta.data<T>()[0];
  if (d == T(0)) return absl::InvalidArgumentError("Range delta is 0");
  const double n =
      std::ceil((static_cast<double>(l) - static_cast<double>(s)) / static_cast<double>(d));
  if (!(n < static_cast<double>(kMaxRangeElements))) {
    return absl::InvalidArgumentError(absl::StrCat("Range of ", n, " elements is too large"));
  }
  const int64_t count = std::max<int64_t>(0, static_cast<int64_t>(n));
  Value y = ctx.NewOutput(0, start.dtype(), {count});
  T* out = y.mutable_data<T>();
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(s + static_cast<T>(i) * d);
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace

Status RunRange(const OpContext& ctx, const Node&, const Inputs& inputs,
                std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(
      const Value* start,
      RequireInput(inputs, 0, "start", {DataType::kFp32, DataType::kInt64, DataType::kInt32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* limit, RequireInput(inputs, 1, "limit", {start->dtype()}));
  TESSERA_ASSIGN_OR_RETURN(const Value* delta, RequireInput(inputs, 2, "delta", {start->dtype()}));
  for (const Value* v : {start, limit, delta}) {
    if (v->num_elements() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("Range argument ", DescribeValue(*v), " must be a scalar"));
    }
  }
  switch (start->dtype()) {
    case DataType::kFp32:
      return FillRange<float>(ctx, *start, *limit, *delta, outputs);
    case DataType::kInt64:
      return FillRange<int64_t>(ctx, *start, *limit, *delta, outputs);
    default:
      return FillRange<int32_t>(ctx, *start, *limit, *delta, outputs);
  }
}

Status CheckPad(const Node& node, const Graph&) {
  const std::string mode = node.attributes.GetString("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect") {
    return absl::UnimplementedError(absl::StrCat("Pad mode \"", mode, "\""));
  }
  if (node.inputs.size() > 3 && node.inputs[3] != kNoValue) {
    return absl::UnimplementedError("Pad with an axes input (opset 18)");
  }
  return absl::OkStatus();
}

Status RunPad(const OpContext& ctx, const Node& node, const Inputs& inputs,
              std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "data", kAnyType));
  const int rank = x->rank();
  std::vector<int64_t> pads;
  float attr_value = 0.0f;
  if (node.opset < 11) {
    pads = node.attributes.GetInts("pads");
    attr_value = node.attributes.GetFloat("value", 0.0f);
  } else {
    TESSERA_ASSIGN_OR_RETURN(const Value* p, RequireInput(inputs, 1, "pads", {DataType::kInt64}));
    TESSERA_ASSIGN_OR_RETURN(pads, IndexValues(*p, "pads"));
  }
  if (static_cast<int>(pads.size()) != 2 * rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("pads has ", pads.size(), " values for ", DescribeValue(*x)));
  }
  const std::string mode = node.attributes.GetString("mode", "constant");
  Shape out_shape(rank);
  for (int d = 0; d < rank; ++d) {
    out_shape[d] = x->dim(d) + pads[d] + pads[d + rank];
    if (out_shape[d] < 0) return absl::InvalidArgumentError("pads crop below zero");
    if (mode != "constant" && (pads[d] < 0 || pads[d + rank] < 0)) {
      return absl::InvalidArgumentError("negative pads are only valid in constant mode");
    }
    if (out_shape[d] > 0 && x->dim(d) == 0 && mode != "constant") {
      return absl::InvalidArgumentError(absl::StrCat(mode, " padding of an empty dim"));
    }
    if (mode == "reflect" && x->dim(d) > 0 &&
        (pads[d] > x->dim(d) - 1 || pads[d + rank] > x->dim(d) - 1)) {
      return absl::InvalidArgumentError("reflect pads must be smaller than the dim");
    }
  }
  const size_t elem = ElementSize(x->dtype());
  // The pad value as raw bytes of x's type.
  alignas(8) std::byte fill[8] = {};
  if (node.opset >= 11 && inputs.size() > 2 && inputs[2] != nullptr) {
    const Value& v = *inputs[2];
    if (v.dtype() != x->dtype() || v.num_elements() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("constant_value ", DescribeValue(v), " must be one ", TypeName(x->dtype())));
    }
    std::memcpy(fill, v.raw(), elem);
  } else if (x->dtype() == DataType::kFp32) {
    std::memcpy(fill, &attr_value, sizeof(float));
  }
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) {
    (*outputs)[0] = *x;  // nothing to pad (PyTorch exports some pools with a zero Pad first)
    return absl::OkStatus();
  }
  Value y = ctx.NewOutput(0, x->dtype(), out_shape).WithLayout(x->layout());
  // A channels-last X is padded as its [N, H, W, C] bytes, with the pads moved to those axes,
  // and Y stays channels-last for the convolution or pool after it.
  const Value x_bytes = PhysicalView(*x), y_bytes = PhysicalView(y);
  if (x->channels_last()) {
    std::vector<int64_t> moved(pads.size());
    for (int d = 0; d < rank; ++d) {
      moved[PhysicalAxis(d)] = pads[d];
      moved[PhysicalAxis(d) + rank] = pads[d + rank];
    }
    pads = std::move(moved);
  }
  const Shape& in_shape = x_bytes.shape();
  const Shape& bytes_shape = y_bytes.shape();
  // Where output coordinate `c` (before subtracting the begin pad) reads along a dim of length
  // n, or -1 for the fill value.
  const int pad_mode = mode == "constant" ? 0 : mode == "edge" ? 1 : 2;
  auto source = [pad_mode](int64_t c, int64_t n) -> int64_t {
    if (c >= 0 && c < n) return c;
    if (pad_mode == 0) return -1;
    if (pad_mode == 1) return std::clamp<int64_t>(c, 0, n - 1);
    return c < 0 ? -c : 2 * (n - 1) - c;  // reflect, without repeating the edge
  };
  const std::vector<int64_t> in_strides = ContiguousStrides(in_shape);
  const auto* src = static_cast<const std::byte*>(x_bytes.raw());
  auto* dst = y_bytes.mutable_data<std::byte>();
  const int last = rank - 1;
  const int64_t out_len = rank > 0 ? bytes_shape[last] : 1;
  const int64_t in_len = rank > 0 ? in_shape[last] : 1;
  const int64_t rows = out_len > 0 ? y.num_elements() / out_len : 0;
  const int64_t begin = rank > 0 ? pads[last] : 0;
  // Output j of a row reads input j - begin: the run [lo, hi) of j maps to a contiguous input run.
  const int64_t lo = std::clamp<int64_t>(begin, 0, out_len);
  const int64_t hi = std::clamp<int64_t>(begin + in_len, lo, out_len);
  const int64_t rows_per_task = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, out_len));
  ParallelFor(ctx.pool, (rows + rows_per_task - 1) / rows_per_task, [&](int64_t task) {
    const int64_t end = std::min(rows, (task + 1) * rows_per_task);
    for (int64_t r = task * rows_per_task; r < end; ++r) {
      std::byte* out_row = dst + r * out_len * static_cast<int64_t>(elem);
      // The input row this output row reads, from its coordinates over the dims before the last.
      int64_t offset = 0;
      bool inside = true;
      for (int64_t d = last - 1, rest = r; d >= 0; --d) {
        const int64_t c = source(rest % bytes_shape[d] - pads[d], in_shape[d]);
        rest /= bytes_shape[d];
        inside = inside && c >= 0;
        offset += c * in_strides[d];
      }
      const std::byte* in_row = src + offset * static_cast<int64_t>(elem);
      for (int64_t j = 0; j < out_len; ++j) {
        if (j == lo && inside && hi > lo) {
          std::memcpy(out_row + j * static_cast<int64_t>(elem),
                      in_row + (j - begin) * static_cast<int64_t>(elem),
                      static_cast<size_t>(hi - lo) * elem);
          j = hi - 1;
          continue;
        }
        const int64_t c = inside ? source(j - begin, in_len) : -1;
        std::memcpy(out_row + j * static_cast<int64_t>(elem),
                    c >= 0 ? in_row + c * static_cast<int64_t>(elem) : fill, elem);
      }
    }
  });
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunTrilu(const OpContext& ctx, const Node& node, const Inputs& inputs,
                std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "input", kAnyType));
  if (x->rank() < 2) return absl::InvalidArgumentError("Trilu needs rank >= 2");
  int64_t k = 0;
  if (inputs.size() > 1 && inputs[1] != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> kv, IndexValues(*inputs[1], "k"));
    if (kv.size() != 1) return absl::InvalidArgumentError("k must be a scalar");
    k = kv[0];
  }
  const bool upper = node.attributes.GetInt("upper", 1) != 0;
  const int64_t rows = x->dim(x->rank() - 2), cols = x->dim(x->rank() - 1);
  const int64_t matrices = rows * cols == 0 ? 0 : x->num_elements() / (rows * cols);
  const size_t elem = ElementSize(x->dtype());
  Value y = ctx.NewOutput(0, x->dtype(), x->shape());
  const auto* src = static_cast<const std::byte*>(x->raw());
  auto* dst = y.mutable_data<std::byte>();
  std::memset(dst, 0, y.byte_size());
  for (int64_t m = 0; m < matrices; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      // Kept columns: j >= i + k (upper) or j <= i + k (lower), clamped to [0, cols].
      const int64_t bound =
          std::clamp<int64_t>(k > 0 && i > std::numeric_limits<int64_t>::max() - k ? cols : i + k,
                              upper ? 0 : -1, cols);
      const int64_t begin = upper ? bound : 0;
      const int64_t end = upper ? cols : std::min(cols, bound + 1);
      if (end <= begin) continue;
      const int64_t base = (m * rows + i) * cols;
      std::memcpy(dst + (base + begin) * static_cast<int64_t>(elem),
                  src + (base + begin) * static_cast<int64_t>(elem),
                  static_cast<size_t>(end - begin) * elem);
    }
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
