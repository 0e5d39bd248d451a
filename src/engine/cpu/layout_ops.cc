// Tensor construction and rearrangement: Tile, OneHot, NonZero, EyeLike, Size, DepthToSpace,
// SpaceToDepth and Compress. Data movement is by element size, so every dtype is served. Output
// sizes computed from tensor values (Tile's repeats, OneHot's depth) are checked against
// overflow before allocation.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/cpu/broadcast.h"
#include "engine/cpu/data_movement.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

constexpr std::initializer_list<DataType> kAnyType = {
    DataType::kFp32, DataType::kInt64, DataType::kInt32, DataType::kBool, DataType::kUint8};
constexpr std::initializer_list<DataType> kNumberTypes = {DataType::kFp32, DataType::kInt64,
                                                          DataType::kInt32};

// A float index or depth as an integer, truncated toward zero as a cast would; nullopt for NaN,
// infinities and magnitudes no tensor dim reaches.
std::optional<int64_t> FloatToIndex(float v) {
  if (!std::isfinite(v) || std::fabs(v) >= 0x1p62f) return std::nullopt;
  return static_cast<int64_t>(v);
}

// Element k of an FP32, INT64 or INT32 tensor as an integer (see FloatToIndex).
std::optional<int64_t> NumberAt(const Value& v, int64_t k) {
  switch (v.dtype()) {
    case DataType::kFp32:
      return FloatToIndex(v.data<float>()[k]);
    case DataType::kInt32:
      return v.data<int32_t>()[k];
    default:
      return v.data<int64_t>()[k];
  }
}

// Attribute `blocksize` of DepthToSpace/SpaceToDepth, and the [N, C, H, W] input it applies to.
StatusOr<int64_t> BlockSize(const Node& node, const Value& x) {
  const int64_t b = node.attributes.GetInt("blocksize", 0);
  if (b < 1) return absl::InvalidArgumentError(absl::StrCat("blocksize ", b, " must be >= 1"));
  if (x.rank() != 4) {
    return absl::InvalidArgumentError(absl::StrCat("input ", DescribeValue(x), " is not 4-D"));
  }
  return b;
}

}  // namespace

Status RunTile(const OpContext& ctx, const Node&, const Inputs& inputs,
               std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "input", kMovableTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* repeats_value,
                           RequireInput(inputs, 1, "repeats", {DataType::kInt64}));
  const int rank = x->rank();
  if (repeats_value->rank() != 1 || repeats_value->num_elements() != rank) {
    return absl::InvalidArgumentError(absl::StrCat("repeats ", DescribeValue(*repeats_value),
                                                   " must hold one value per dim of ",
                                                   DescribeValue(*x)));
  }
  const int64_t* repeats = repeats_value->data<int64_t>();
  Shape out_shape(rank);
  for (int d = 0; d < rank; ++d) {
    if (repeats[d] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("negative repeat ", repeats[d], " on dim ", d));
    }
    StatusOr<int64_t> dim = CheckedProduct(x->dim(d), repeats[d]);
    if (!dim.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("repeat ", repeats[d], " of dim ", d, " of ",
                                                     DescribeValue(*x), " overflows"));
    }
    out_shape[d] = *dim;
  }
  const size_t elem = ElementSize(x->dtype());
  TESSERA_RETURN_IF_ERROR(CheckAllocatable(out_shape, elem));
  Value y = ctx.NewOutput(0, x->dtype(), out_shape);
  const auto* src = static_cast<const std::byte*>(x->raw());
  auto* dst = y.mutable_data<std::byte>();
  if (rank == 0) {
    std::memcpy(dst, src, elem);
  } else if (y.num_elements() > 0) {
    // Each output row (last dim) is the matching input row repeated; the input row is found by
    // taking the row's coordinate modulo the input dims.
    const int64_t in_row = x->dim(rank - 1), out_row = out_shape[rank - 1];
    const size_t in_row_bytes = static_cast<size_t>(in_row) * elem;
    const int64_t rows = y.num_elements() / out_row;
    const std::vector<int64_t> in_strides = RowMajorStrides(x->shape());
    ParallelChunks(ctx.pool, rows, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        int64_t offset = 0, rest = r;
        for (int d = rank - 2; d >= 0; --d) {
          offset += (rest % out_shape[d]) % x->dim(d) * in_strides[d];
          rest /= out_shape[d];
        }
        std::byte* out = dst + r * out_row * static_cast<int64_t>(elem);
        for (int64_t t = 0; t < out_row / in_row; ++t) {
          std::memcpy(out + t * in_row_bytes, src + offset * static_cast<int64_t>(elem),
                      in_row_bytes);
        }
      }
    });
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunOneHot(const OpContext& ctx, const Node& node, const Inputs& inputs,
                 std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* indices, RequireInput(inputs, 0, "indices", kNumberTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* depth_value,
                           RequireInput(inputs, 1, "depth", kNumberTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* values, RequireInput(inputs, 2, "values", kAnyType));
  if (depth_value->rank() > 1 || depth_value->num_elements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("depth ", DescribeValue(*depth_value), " must hold exactly one element"));
  }
  if (values->rank() != 1 || values->num_elements() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("values ", DescribeValue(*values), " must be [off_value, on_value]"));
  }
  const std::optional<int64_t> depth = NumberAt(*depth_value, 0);
  if (!depth || *depth < 0) {
    return absl::InvalidArgumentError("depth must be a non-negative number");
  }
  const int rank = indices->rank();
  TESSERA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attributes.GetInt("axis", -1), rank + 1));
  Shape out_shape = indices->shape();
  out_shape.insert(out_shape.begin() + axis, *depth);
  const size_t elem = ElementSize(values->dtype());
  TESSERA_RETURN_IF_ERROR(CheckAllocatable(out_shape, elem));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= indices->dim(d);
  for (int d = axis; d < rank; ++d) inner *= indices->dim(d);
  Value y = ctx.NewOutput(0, values->dtype(), out_shape);
  ForElementSize(elem, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T off = values->data<T>()[0], on = values->data<T>()[1];
    T* out = y.mutable_data<T>();
    std::fill(out, out + y.num_elements(), off);
    if (indices->num_elements() == 0) return;
    // Indices outside [-depth, depth) leave their row all off_value, as the spec says.
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        std::optional<int64_t> index = NumberAt(*indices, o * inner + i);
        if (!index || *index < -*depth || *index >= *depth) continue;
        if (*index < 0) *index += *depth;
        out[(o * *depth + *index) * inner + i] = on;
      }
    }
  });
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunNonZero(const OpContext& ctx, const Node&, const Inputs& inputs,
                  std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", kAnyType));
  // A scalar is treated as a 1-element vector, as onnxruntime does.
  const Shape shape = x->rank() == 0 ? Shape{1} : x->shape();
  const int rank = static_cast<int>(shape.size());
  std::vector<int64_t> positions;
  ForArithmeticType(x->dtype(), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* in = x->data<T>();
    for (int64_t k = 0; k < x->num_elements(); ++k) {
      if (in[k] != T(0)) positions.push_back(k);
    }
  });
  const auto n = static_cast<int64_t>(positions.size());
  Value y = ctx.NewOutput(0, DataType::kInt64, {rank, n});
  int64_t* out = y.mutable_data<int64_t>();
  for (int64_t j = 0; j < n; ++j) {
    int64_t rest = positions[j];
    for (int d = rank - 1; d >= 0; --d) {
      out[d * n + j] = rest % shape[d];
      rest /= shape[d];
    }
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

namespace {

// EyeLike's output type: the `dtype` attribute (an ONNX TensorProto type) or the input's.
StatusOr<DataType> EyeLikeType(const Node& node, DataType input) {
  if (!node.attributes.Has("dtype")) return input;
  const int64_t onnx_type = node.attributes.GetInt("dtype", 0);
  const std::optional<DataType> type = DataTypeFromOnnxElementType(static_cast<int32_t>(onnx_type));
  if (!type || std::find(kAnyType.begin(), kAnyType.end(), *type) == kAnyType.end()) {
    return absl::UnimplementedError(
        absl::StrCat("EyeLike dtype ", onnx_type, " (only FLOAT, INT64, INT32, UINT8 and BOOL)"));
  }
  return *type;
}

}  // namespace

Status CheckEyeLike(const Node& node, const Graph&) {
  return EyeLikeType(node, DataType::kFp32).status();
}

Status RunEyeLike(const OpContext& ctx, const Node& node, const Inputs& inputs,
                  std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "input", kAnyType));
  if (x->rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("input ", DescribeValue(*x), " is not 2-D"));
  }
  StatusOr<DataType> dtype = EyeLikeType(node, x->dtype());
  if (!dtype.ok()) return absl::InvalidArgumentError(dtype.status().message());
  const int64_t k = node.attributes.GetInt("k", 0);
  Value y = ctx.NewOutput(0, *dtype, x->shape());
  if (y.byte_size() > 0) std::memset(y.mutable_data<void>(), 0, y.byte_size());
  const int64_t rows = x->dim(0), cols = x->dim(1);
  ForArithmeticType(*dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T* out = y.mutable_data<T>();
    // Row i holds its one at column i + k when that column exists (k may be any int64).
    // Written so that no sum with an extreme k can overflow.
    const int64_t first = k >= 0 ? 0 : (k <= -rows ? rows : -k);
    for (int64_t i = first; i < rows && k < cols - i; ++i) out[i * cols + i + k] = T(1);
  });
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunSize(const OpContext& ctx, const Node&, const Inputs& inputs,
               std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "data", kMovableTypes));
  Value y = ctx.NewOutput(0, DataType::kInt64, {});
  y.mutable_data<int64_t>()[0] = x->num_elements();
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status CheckDepthToSpace(const Node& node, const Graph&) {
  const std::string mode = node.attributes.GetString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") {
    return absl::InvalidArgumentError(absl::StrCat("unknown mode \"", mode, "\""));
  }
  return absl::OkStatus();
}

Status RunDepthToSpace(const OpContext& ctx, const Node& node, const Inputs& inputs,
                       std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "input", kAnyType));
  TESSERA_ASSIGN_OR_RETURN(int64_t b, BlockSize(node, *x));
  const bool crd = node.attributes.GetString("mode", "DCR") == "CRD";
  const int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3);
  StatusOr<int64_t> bb = CheckedProduct(b, b);
  if (!bb.ok() || c % *bb != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "channels of ", DescribeValue(*x), " are not a multiple of blocksize ", b, " squared"));
  }
  const int64_t oc = c / *bb;
  StatusOr<int64_t> out_h = CheckedProduct(h, b), out_w = CheckedProduct(w, b);
  if (!out_h.ok() || !out_w.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeValue(*x), " times blocksize ", b, " overflows"));
  }
  const Shape out_shape = {n, oc, *out_h, *out_w};
  TESSERA_RETURN_IF_ERROR(CheckAllocatable(out_shape, ElementSize(x->dtype())));
  Value y = ctx.NewOutput(0, x->dtype(), out_shape);
  if (y.num_elements() == 0) {
    (*outputs)[0] = std::move(y);
    return absl::OkStatus();
  }
  const int64_t rows = n * oc * *out_h, ow = *out_w;
  ForElementSize(ElementSize(x->dtype()), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* src = x->data<T>();
    T* dst = y.mutable_data<T>();
    ParallelChunks(ctx.pool, rows, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t oy = r % *out_h, plane = r / *out_h;  // plane = batch * oc + channel
        const int64_t ch = plane % oc, batch = plane / oc;
        const int64_t y0 = oy / b, by = oy % b;
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t x0 = ox / b, bx = ox % b;
          // DCR: the block offset is the outer part of the channel; CRD: the inner part.
          const int64_t in_ch = crd ? (ch * b + by) * b + bx : (by * b + bx) * oc + ch;
          dst[r * ow + ox] = src[((batch * c + in_ch) * h + y0) * w + x0];
        }
      }
    });
  });
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunSpaceToDepth(const OpContext& ctx, const Node& node, const Inputs& inputs,
                       std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "input", kAnyType));
  TESSERA_ASSIGN_OR_RETURN(int64_t b, BlockSize(node, *x));
  const int64_t n = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3);
  if (h % b != 0 || w % b != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("spatial dims of ", DescribeValue(*x), " are not multiples of blocksize ", b));
  }
  const int64_t oh = h / b, ow = w / b;
  StatusOr<int64_t> bb = CheckedProduct(b, b);
  StatusOr<int64_t> out_c = bb.ok() ? CheckedProduct(c, *bb) : bb;
  if (!out_c.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(DescribeValue(*x), " times blocksize ", b, " squared overflows"));
  }
  const Shape out_shape = {n, *out_c, oh, ow};
  TESSERA_RETURN_IF_ERROR(CheckAllocatable(out_shape, ElementSize(x->dtype())));
  Value y = ctx.NewOutput(0, x->dtype(), out_shape);
  if (y.num_elements() == 0) {
    (*outputs)[0] = std::move(y);
    return absl::OkStatus();
  }
  const int64_t rows = n * *out_c * oh;
  ForElementSize(ElementSize(x->dtype()), [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* src = x->data<T>();
    T* dst = y.mutable_data<T>();
    ParallelChunks(ctx.pool, rows, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t oy = r % oh, plane = r / oh;  // plane = batch * (c * b * b) + out channel
        const int64_t out_ch = plane % *out_c, batch = plane / *out_c;
        const int64_t block = out_ch / c, ch = out_ch % c;
        const int64_t by = block / b, bx = block % b;
        const T* in = src + ((batch * c + ch) * h + oy * b + by) * w + bx;
        for (int64_t ox = 0; ox < ow; ++ox) dst[r * ow + ox] = in[ox * b];
      }
    });
  });
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunCompress(const OpContext& ctx, const Node& node, const Inputs& inputs,
                   std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "input", kAnyType));
  TESSERA_ASSIGN_OR_RETURN(const Value* condition,
                           RequireInput(inputs, 1, "condition", {DataType::kBool}));
  if (condition->rank() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("condition ", DescribeValue(*condition), " is not 1-D"));
  }
  // Without an axis the input is compressed as a flat vector.
  const bool has_axis = node.attributes.Has("axis");
  int axis = 0;
  Shape shape = {x->num_elements()};
  if (has_axis) {
    if (x->rank() == 0) return absl::InvalidArgumentError("Compress of a scalar along an axis");
    TESSERA_ASSIGN_OR_RETURN(axis, NormalizeAxis(node.attributes.GetInt("axis", 0), x->rank()));
    shape = x->shape();
  }
  const int64_t len = shape[axis];
  const uint8_t* keep = condition->data<uint8_t>();
  std::vector<int64_t> selected;
  for (int64_t i = 0; i < condition->num_elements(); ++i) {
    if (keep[i] == 0) continue;
    // A shorter condition drops the tail; a true past the end would select nothing that exists.
    if (i >= len) {
      return absl::InvalidArgumentError(
          absl::StrCat("condition selects position ", i, " past the ", len, " along the axis"));
    }
    selected.push_back(i);
  }
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (int d = axis + 1; d < static_cast<int>(shape.size()); ++d) inner *= shape[d];
  Shape out_shape = shape;
  out_shape[axis] = static_cast<int64_t>(selected.size());
  Value y = ctx.NewOutput(0, x->dtype(), out_shape);
  const size_t slice = static_cast<size_t>(inner) * ElementSize(x->dtype());
  const auto* src = static_cast<const std::byte*>(x->raw());
  auto* dst = y.mutable_data<std::byte>();
  for (int64_t o = 0; o < outer && y.num_elements() > 0; ++o) {
    for (size_t s = 0; s < selected.size(); ++s) {
      std::memcpy(dst + (o * out_shape[axis] + static_cast<int64_t>(s)) * slice,
                  src + (o * len + selected[s]) * slice, slice);
    }
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
