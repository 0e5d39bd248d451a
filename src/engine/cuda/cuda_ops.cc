// CUDA ops without cuDNN/cuBLAS: elementwise, normalisation, data movement and aliases (see
// cuda_ops.h for the plan/launch split). Shape rules follow the CPU kernels (src/engine/cpu/),
// whose helpers (broadcasting, axis normalisation) are reused so both backends agree.
#include "engine/cuda/cuda_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"
#include "engine/cuda/cuda_op_util.h"

namespace tessera::engine::cuda {
namespace {

// ---- Elementwise --------------------------------------------------------------------------------

// ints = {broadcast, integer}: integer 0 for float storage, 1 for INT32, 2 for INT64 (position
// ids and masks PyTorch exports compute on the device).
template <BinaryOp kOp>
Status PlanBinary(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* a, Input(ctx, 0, "A"));
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* b, Input(ctx, 1, "B"));
  const bool integer = a->dtype == DataType::kInt64 || a->dtype == DataType::kInt32;
  if (integer && kOp != BinaryOp::kPow) {
    if (b->dtype != a->dtype) {
      return Invalid(absl::StrCat("A is ", TypeName(a->dtype), " and B is ", TypeName(b->dtype),
                                  "; they must match"));
    }
  } else {
    TESSERA_RETURN_IF_ERROR(RequireFloat(*a, "A"));
    TESSERA_RETURN_IF_ERROR(RequireFloat(*b, "B"));
  }
  TESSERA_ASSIGN_OR_RETURN(Shape out, cpu::BroadcastShapes(a->shape, b->shape));
  const bool same = a->shape == out && b->shape == out;
  ctx.state->ints = {same ? 0 : 1, integer ? (a->dtype == DataType::kInt64 ? 2 : 1) : 0};
  if (!same || integer) {  // the integer kernel always walks a map
    TESSERA_ASSIGN_OR_RETURN(ctx.state->map, BroadcastMap(out, {&a->shape, &b->shape}));
  }
  (*ctx.out)[0] = ValueMeta{a->dtype, out, nullptr};
  return absl::OkStatus();
}

template <BinaryOp kOp>
Status LaunchBinaryOp(LaunchCtx& ctx) {
  const int64_t n = ElementCount(ctx.out_meta[0]->shape);
  if (ctx.state->ints[1] != 0) {
    return CudaStatus(LaunchIntBinary(kOp, ctx.state->ints[1] == 2, ctx.in[0], ctx.in[1],
                                      ctx.out[0], n, ctx.state->map, ctx.device.stream),
                      "integer binary kernel");
  }
  return CudaStatus(LaunchBinary(kOp, ctx.device.elem(), ctx.in[0], ctx.in[1], ctx.out[0], n,
                                 ctx.state->ints[0] != 0 ? &ctx.state->map : nullptr, 1.0f,
                                 ctx.device.stream),
                    "binary kernel");
}

// floats = {lo, hi} for Clip, {alpha, beta} for HardSigmoid, {alpha, unused} for LeakyRelu and
// Elu; unused otherwise.
template <UnaryOp kOp>
Status PlanUnary(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "X"));
  TESSERA_RETURN_IF_ERROR(RequireFloat(*x, "X"));
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (kOp == UnaryOp::kClip) {
    if (ctx.node.opset < 11) {
      lo = ctx.node.attributes.GetFloat("min", lo);
      hi = ctx.node.attributes.GetFloat("max", hi);
    } else {
      if (ctx.in.size() > 1 && ctx.in[1] != nullptr) {
        TESSERA_ASSIGN_OR_RETURN(lo, HostScalar(ctx, 1, "min"));
      }
      if (ctx.in.size() > 2 && ctx.in[2] != nullptr) {
        TESSERA_ASSIGN_OR_RETURN(hi, HostScalar(ctx, 2, "max"));
      }
    }
  }
  // The activations' attributes, with ONNX's defaults.
  if (kOp == UnaryOp::kLeakyRelu) lo = ctx.node.attributes.GetFloat("alpha", 0.01f);
  if (kOp == UnaryOp::kElu) lo = ctx.node.attributes.GetFloat("alpha", 1.0f);
  if (kOp == UnaryOp::kHardSigmoid) {
    lo = ctx.node.attributes.GetFloat("alpha", 0.2f);
    hi = ctx.node.attributes.GetFloat("beta", 0.5f);
  }
  if (kOp == UnaryOp::kSelu) {
    lo = ctx.node.attributes.GetFloat("alpha", 1.67326319217681884765625f);
    hi = ctx.node.attributes.GetFloat("gamma", 1.05070102214050292968750f);
  }
  if (kOp == UnaryOp::kCelu) {
    lo = ctx.node.attributes.GetFloat("alpha", 1.0f);
    if (lo == 0.f) return absl::InvalidArgumentError("Celu: alpha must not be 0");
  }
  if (kOp == UnaryOp::kThresholdedRelu) lo = ctx.node.attributes.GetFloat("alpha", 1.0f);
  if (kOp == UnaryOp::kShrink) {
    lo = ctx.node.attributes.GetFloat("lambd", 0.5f);
    hi = ctx.node.attributes.GetFloat("bias", 0.0f);
  }
  ctx.state->floats = {lo, hi};
  (*ctx.out)[0] = ValueMeta{DataType::kFp32, x->shape, nullptr};
  return absl::OkStatus();
}

template <UnaryOp kOp>
Status LaunchUnaryOp(LaunchCtx& ctx) {
  return CudaStatus(LaunchUnary(kOp, ctx.device.elem(), ctx.in[0], ctx.out[0],
                                ElementCount(ctx.out_meta[0]->shape), ctx.state->floats[0],
                                ctx.state->floats[1], ctx.device.stream),
                    "unary kernel");
}

// ---- Row ops: Softmax, LayerNormalization, ReduceMean ------------------------------------------
// ints = {rows, cols}.

Status PlanSoftmax(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "input"));
  TESSERA_RETURN_IF_ERROR(RequireFloat(*x, "input"));
  const int rank = static_cast<int>(x->shape.size());
  const bool legacy = ctx.node.opset < 13;  // opsets < 13 flatten to 2-D at `axis`
  TESSERA_ASSIGN_OR_RETURN(
      int axis, cpu::NormalizeAxis(ctx.node.attributes.GetInt("axis", legacy ? 1 : -1), rank));
  if (!legacy && Product(x->shape, axis + 1, rank) != 1) {
    return absl::UnimplementedError("Softmax over an axis other than the last");
  }
  ctx.state->ints = {Product(x->shape, 0, axis), Product(x->shape, axis, rank)};
  (*ctx.out)[0] = ValueMeta{DataType::kFp32, x->shape, nullptr};
  return absl::OkStatus();
}

Status LaunchSoftmax(LaunchCtx& ctx) {
  return CudaStatus(LaunchSoftmaxRows(ctx.device.elem(), ctx.in[0], ctx.out[0],
                                      ctx.state->ints[0], ctx.state->ints[1], ctx.device.stream),
                    "softmax kernel");
}

Status PlanLayerNorm(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "X"));
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* scale, Input(ctx, 1, "Scale"));
  TESSERA_RETURN_IF_ERROR(RequireFloat(*x, "X"));
  if (ctx.node.outputs.size() > 1) {
    return absl::UnimplementedError("the Mean and InvStdDev outputs are not supported");
  }
  const int rank = static_cast<int>(x->shape.size());
  TESSERA_ASSIGN_OR_RETURN(int axis,
                           cpu::NormalizeAxis(ctx.node.attributes.GetInt("axis", -1), rank));
  const int64_t cols = Product(x->shape, axis, rank);
  if (ElementCount(scale->shape) != cols) {
    return Invalid(absl::StrCat("Scale ", ShapeToString(scale->shape), " does not cover ", cols,
                                " normalised elements"));
  }
  if (ctx.in.size() > 2 && ctx.in[2] != nullptr && ElementCount(ctx.in[2]->shape) != cols) {
    return Invalid(absl::StrCat("B ", ShapeToString(ctx.in[2]->shape), " does not cover ", cols,
                                " normalised elements"));
  }
  ctx.state->ints = {Product(x->shape, 0, axis), cols};
  ctx.state->floats = {ctx.node.attributes.GetFloat("epsilon", 1e-5f)};
  (*ctx.out)[0] = ValueMeta{DataType::kFp32, x->shape, nullptr};
  return absl::OkStatus();
}

Status LaunchLayerNorm(LaunchCtx& ctx) {
  const void* beta = ctx.in.size() > 2 ? ctx.in[2] : nullptr;
  return CudaStatus(LaunchLayerNormRows(ctx.device.elem(), ctx.in[0], ctx.in[1], beta, ctx.out[0],
                                        ctx.state->ints[0], ctx.state->ints[1],
                                        ctx.state->floats[0], ctx.device.stream),
                    "layernorm kernel");
}

Status PlanReduceMean(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "data"));
  TESSERA_RETURN_IF_ERROR(RequireFloat(*x, "data"));
  const int rank = static_cast<int>(x->shape.size());
  std::vector<int64_t> axes;
  if (ctx.node.opset < 18) {
    axes = ctx.node.attributes.GetInts("axes");
  } else if (ctx.in.size() > 1 && ctx.in[1] != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(axes, HostInts(ctx, 1, "axes"));
  }
  if (axes.empty()) {
    if (ctx.node.attributes.GetInt("noop_with_empty_axes", 0) != 0) {
      return absl::UnimplementedError("noop_with_empty_axes=1");
    }
    for (int d = 0; d < rank; ++d) axes.push_back(d);
  }
  std::vector<int> normalized;
  for (int64_t a : axes) {
    TESSERA_ASSIGN_OR_RETURN(int axis, cpu::NormalizeAxis(a, rank));
    normalized.push_back(axis);
  }
  std::sort(normalized.begin(), normalized.end());
  normalized.erase(std::unique(normalized.begin(), normalized.end()), normalized.end());
  const int first = rank - static_cast<int>(normalized.size());
  for (size_t i = 0; i < normalized.size(); ++i) {
    if (normalized[i] != first + static_cast<int>(i)) {
      return absl::UnimplementedError("ReduceMean over axes that are not the trailing ones");
    }
  }
  const bool keep = ctx.node.attributes.GetInt("keepdims", 1) != 0;
  Shape out(x->shape.begin(), x->shape.begin() + first);
  if (keep) out.resize(rank, 1);
  ctx.state->ints = {Product(x->shape, 0, first), Product(x->shape, first, rank)};
  (*ctx.out)[0] = ValueMeta{DataType::kFp32, out, nullptr};
  return absl::OkStatus();
}

Status LaunchReduceMean(LaunchCtx& ctx) {
  return CudaStatus(LaunchRowMean(ctx.device.elem(), ctx.in[0], ctx.out[0], ctx.state->ints[0],
                                  ctx.state->ints[1], ctx.device.stream),
                    "reduce-mean kernel");
}

Status PlanBatchNorm(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "X"));
  TESSERA_RETURN_IF_ERROR(RequireFloat(*x, "X"));
  if (x->shape.size() < 2) return Invalid("X has rank < 2");
  for (size_t i = 1; i <= 4; ++i) {
    TESSERA_ASSIGN_OR_RETURN(const ValueMeta* p, Input(ctx, i, "scale/B/mean/var"));
    if (ElementCount(p->shape) != x->shape[1]) {
      return Invalid(absl::StrCat("parameter ", i, " has shape ", ShapeToString(p->shape),
                                  ", expected ", x->shape[1], " channels"));
    }
  }
  if (ctx.node.outputs.size() > 1) return absl::UnimplementedError("training-mode outputs");
  ctx.state->ints = {x->shape[1], Product(x->shape, 2, x->shape.size())};
  ctx.state->floats = {ctx.node.attributes.GetFloat("epsilon", 1e-5f)};
  (*ctx.out)[0] = ValueMeta{DataType::kFp32, x->shape, nullptr};
  return absl::OkStatus();
}

Status LaunchBatchNormOp(LaunchCtx& ctx) {
  return CudaStatus(
      LaunchBatchNorm(ctx.device.elem(), ctx.in[0], ctx.in[1], ctx.in[2], ctx.in[3], ctx.in[4],
                      ctx.state->floats[0], ctx.out[0], ElementCount(ctx.out_meta[0]->shape),
                      ctx.state->ints[0], ctx.state->ints[1], ctx.device.stream),
      "batchnorm kernel");
}

// ---- Data movement ------------------------------------------------------------------------------

Status PlanGather(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* data, Input(ctx, 0, "data"));
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* indices, Input(ctx, 1, "indices"));
  if (indices->dtype != DataType::kInt64) return Invalid("indices must be INT64");
  const int rank = static_cast<int>(data->shape.size());
  if (rank == 0) return Invalid("Gather from a scalar");
  TESSERA_ASSIGN_OR_RETURN(int axis,
                           cpu::NormalizeAxis(ctx.node.attributes.GetInt("axis", 0), rank));
  Shape out(data->shape.begin(), data->shape.begin() + axis);
  out.insert(out.end(), indices->shape.begin(), indices->shape.end());
  out.insert(out.end(), data->shape.begin() + axis + 1, data->shape.end());
  ctx.state->ints = {Product(data->shape, 0, axis), data->shape[axis],
                     ElementCount(indices->shape), Product(data->shape, axis + 1, rank)};
  (*ctx.out)[0] = ValueMeta{data->dtype, out, nullptr};
  return absl::OkStatus();
}

Status LaunchGatherOp(LaunchCtx& ctx) {
  const auto& s = ctx.state->ints;
  return CudaStatus(LaunchGather(ctx.device.StorageBytes(ctx.in_meta[0]->dtype), ctx.in[0],
                                 static_cast<const int64_t*>(ctx.in[1]), ctx.out[0], s[0], s[1],
                                 s[2], s[3], nullptr, ctx.device.stream),
                    "gather kernel");
}

Status PlanTranspose(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "data"));
  const int rank = static_cast<int>(x->shape.size());
  if (rank > kMaxRank) return absl::UnimplementedError(absl::StrCat("rank ", rank));
  std::vector<int64_t> perm = ctx.node.attributes.GetInts("perm");
  if (perm.empty()) {
    for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  if (static_cast<int>(perm.size()) != rank) return Invalid("perm does not match the rank");
  const Shape strides = Strides(x->shape);
  Shape out(rank);
  IndexMap& map = ctx.state->map;
  map = IndexMap{};
  map.rank = rank;
  std::vector<bool> used(rank, false);
  for (int d = 0; d < rank; ++d) {
    TESSERA_ASSIGN_OR_RETURN(int p, cpu::NormalizeAxis(perm[d], rank));
    if (used[p]) return Invalid("perm repeats an axis");
    used[p] = true;
    out[d] = x->shape[p];
    map.dims[d] = out[d];
    map.stride[0][d] = strides[p];
  }
  (*ctx.out)[0] = ValueMeta{x->dtype, out, nullptr};
  return absl::OkStatus();
}

Status LaunchStrided(LaunchCtx& ctx) {
  return CudaStatus(LaunchStridedCopy(ctx.device.StorageBytes(ctx.in_meta[0]->dtype), ctx.in[0],
                                      ctx.out[0], ElementCount(ctx.out_meta[0]->shape),
                                      ctx.state->map, ctx.device.stream),
                    "strided copy kernel");
}

Status PlanSlice(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "data"));
  const int rank = static_cast<int>(x->shape.size());
  if (rank > kMaxRank) return absl::UnimplementedError(absl::StrCat("rank ", rank));
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.node.opset < 10) {
    starts = ctx.node.attributes.GetInts("starts");
    ends = ctx.node.attributes.GetInts("ends");
    axes = ctx.node.attributes.GetInts("axes");
  } else {
    TESSERA_ASSIGN_OR_RETURN(starts, HostInts(ctx, 1, "starts"));
    TESSERA_ASSIGN_OR_RETURN(ends, HostInts(ctx, 2, "ends"));
    if (ctx.in.size() > 3 && ctx.in[3] != nullptr) {
      TESSERA_ASSIGN_OR_RETURN(axes, HostInts(ctx, 3, "axes"));
    }
    if (ctx.in.size() > 4 && ctx.in[4] != nullptr) {
      TESSERA_ASSIGN_OR_RETURN(steps, HostInts(ctx, 4, "steps"));
    }
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return Invalid("starts, ends, axes and steps differ in length");
  }
  std::vector<int64_t> begin(rank, 0), step(rank, 1);
  Shape out = x->shape;
  for (size_t i = 0; i < starts.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(int axis, cpu::NormalizeAxis(axes[i], rank));
    const int64_t dim = x->shape[axis];
    const int64_t st = steps[i];
    if (st == 0) return Invalid("a Slice step is 0");
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + dim : ends[i];
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      out[axis] = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      out[axis] = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    begin[axis] = s;
    step[axis] = st;
  }
  const Shape strides = Strides(x->shape);
  IndexMap& map = ctx.state->map;
  map = IndexMap{};
  map.rank = rank;
  for (int d = 0; d < rank; ++d) {
    map.dims[d] = out[d];
    map.stride[0][d] = step[d] * strides[d];
    map.base[0] += begin[d] * strides[d];
  }
  (*ctx.out)[0] = ValueMeta{x->dtype, out, nullptr};
  return absl::OkStatus();
}

Status PlanConcat(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* first, Input(ctx, 0, "inputs[0]"));
  const int rank = static_cast<int>(first->shape.size());
  TESSERA_ASSIGN_OR_RETURN(int axis, cpu::NormalizeAxis(ctx.node.attributes.GetInt("axis", 0),
                                                        rank));
  Shape out = first->shape;
  out[axis] = 0;
  for (size_t i = 0; i < ctx.in.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(const ValueMeta* in, Input(ctx, i, "inputs[i]"));
    bool ok = in->dtype == first->dtype && static_cast<int>(in->shape.size()) == rank;
    for (int d = 0; ok && d < rank; ++d) ok = d == axis || in->shape[d] == first->shape[d];
    if (!ok) {
      return Invalid(absl::StrCat("input ", i, " ", TypeName(in->dtype), ShapeToString(in->shape),
                                  " does not fit ", TypeName(first->dtype),
                                  ShapeToString(first->shape), " on axis ", axis));
    }
    out[axis] += in->shape[axis];
  }
  ctx.state->ints = {axis};
  (*ctx.out)[0] = ValueMeta{first->dtype, out, nullptr};
  return absl::OkStatus();
}

Status LaunchConcat(LaunchCtx& ctx) {
  const Shape& out = ctx.out_meta[0]->shape;
  const size_t axis = static_cast<size_t>(ctx.state->ints[0]);
  const size_t esize = static_cast<size_t>(ctx.device.StorageBytes(ctx.out_meta[0]->dtype));
  const size_t outer = static_cast<size_t>(Product(out, 0, axis));
  const size_t inner = static_cast<size_t>(Product(out, axis + 1, out.size())) * esize;
  const size_t dst_pitch = static_cast<size_t>(out[axis]) * inner;
  size_t offset = 0;
  for (size_t i = 0; i < ctx.in.size(); ++i) {
    const size_t width = static_cast<size_t>(ctx.in_meta[i]->shape[axis]) * inner;
    TESSERA_RETURN_IF_ERROR(CopyRows(static_cast<char*>(ctx.out[0]) + offset, dst_pitch, ctx.in[i],
                                     width, width, outer, ctx.device.stream, "concat copy"));
    offset += width;
  }
  return absl::OkStatus();
}

Status PlanWhere(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* cond, Input(ctx, 0, "condition"));
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 1, "X"));
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* y, Input(ctx, 2, "Y"));
  if (cond->dtype != DataType::kBool) return Invalid("condition must be BOOL");
  if (x->dtype != y->dtype) return Invalid("X and Y differ in data type");
  TESSERA_ASSIGN_OR_RETURN(Shape xy, cpu::BroadcastShapes(x->shape, y->shape));
  TESSERA_ASSIGN_OR_RETURN(Shape out, cpu::BroadcastShapes(cond->shape, xy));
  TESSERA_ASSIGN_OR_RETURN(ctx.state->map, BroadcastMap(out, {&cond->shape, &x->shape, &y->shape}));
  (*ctx.out)[0] = ValueMeta{x->dtype, out, nullptr};
  return absl::OkStatus();
}

Status LaunchWhereOp(LaunchCtx& ctx) {
  return CudaStatus(LaunchWhere(ctx.device.StorageBytes(ctx.in_meta[1]->dtype),
                                static_cast<const uint8_t*>(ctx.in[0]), ctx.in[1], ctx.in[2],
                                ctx.out[0], ElementCount(ctx.out_meta[0]->shape), ctx.state->map,
                                ctx.device.stream),
                    "where kernel");
}

// Cast between the dtypes the CPU Cast supports. BERT-style exports cast the INT64 attention mask
// (a graph input, so on the device) to FLOAT. ints = {from, to} (CastType).
StatusOr<CastType> CastTypeOf(DataType dtype, const Device& device) {
  switch (dtype) {
    case DataType::kFp32: return device.fp16 ? CastType::kF16 : CastType::kF32;
    case DataType::kInt64: return CastType::kI64;
    case DataType::kInt32: return CastType::kI32;
    case DataType::kUint8: return CastType::kU8;
    case DataType::kBool: return CastType::kBool;
    default:
      return absl::UnimplementedError(absl::StrCat("Cast of ", TypeName(dtype), " on the device"));
  }
}

Status PlanCast(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "input"));
  DataType to = DataType::kInvalid;
  switch (ctx.node.attributes.GetInt("to", 0)) {  // ONNX TensorProto.DataType
    case 1: to = DataType::kFp32; break;
    case 2: to = DataType::kUint8; break;
    case 6: to = DataType::kInt32; break;
    case 7: to = DataType::kInt64; break;
    case 9: to = DataType::kBool; break;
    default:
      return absl::UnimplementedError(absl::StrCat("Cast to ONNX type ",
                                                   ctx.node.attributes.GetInt("to", 0)));
  }
  TESSERA_ASSIGN_OR_RETURN(CastType from_type, CastTypeOf(x->dtype, ctx.device));
  TESSERA_ASSIGN_OR_RETURN(CastType to_type, CastTypeOf(to, ctx.device));
  ctx.state->ints = {static_cast<int64_t>(from_type), static_cast<int64_t>(to_type)};
  (*ctx.out)[0] = ValueMeta{to, x->shape, nullptr};
  return absl::OkStatus();
}

Status LaunchCastOp(LaunchCtx& ctx) {
  return CudaStatus(LaunchCast(static_cast<CastType>(ctx.state->ints[0]),
                               static_cast<CastType>(ctx.state->ints[1]), ctx.in[0], ctx.out[0],
                               ElementCount(ctx.out_meta[0]->shape), ctx.device.stream),
                    "cast kernel");
}

// ---- Aliases: output 0 is input 0's bytes with another shape ------------------------------------

Status PlanReshape(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "data"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> spec, HostInts(ctx, 1, "shape"));
  const bool allow_zero = ctx.node.attributes.GetInt("allowzero", 0) != 0;
  Shape out(spec.size());
  int infer = -1;
  int64_t known = 1;
  for (size_t d = 0; d < spec.size(); ++d) {
    if (spec[d] == -1) {
      if (infer >= 0) return Invalid("shape has two -1 dims");
      infer = static_cast<int>(d);
      continue;
    }
    if (spec[d] == 0 && !allow_zero) {
      if (d >= x->shape.size()) return Invalid("shape copies a dim the input lacks");
      out[d] = x->shape[d];
    } else if (spec[d] < 0) {
      return Invalid(absl::StrCat("shape has dim ", spec[d]));
    } else {
      out[d] = spec[d];
    }
    known *= out[d];
  }
  const int64_t count = ElementCount(x->shape);
  if (infer >= 0) {
    if (known == 0 || count % known != 0) {
      return Invalid(absl::StrCat("cannot reshape ", ShapeToString(x->shape), " to ",
                                  ShapeToString(Shape(spec.begin(), spec.end()))));
    }
    out[infer] = count / known;
  }
  if (ElementCount(out) != count) {
    return Invalid(absl::StrCat("cannot reshape ", ShapeToString(x->shape), " to ",
                                ShapeToString(out)));
  }
  (*ctx.out)[0] = ValueMeta{x->dtype, out, nullptr};
  return absl::OkStatus();
}

Status PlanFlatten(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "input"));
  const int rank = static_cast<int>(x->shape.size());
  int64_t axis = ctx.node.attributes.GetInt("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) return Invalid(absl::StrCat("axis out of range for rank ", rank));
  (*ctx.out)[0] = ValueMeta{
      x->dtype, {Product(x->shape, 0, axis), Product(x->shape, axis, rank)}, nullptr};
  return absl::OkStatus();
}

StatusOr<std::vector<int64_t>> AxesOf(const PlanCtx& ctx) {
  if (ctx.node.opset < 13) return ctx.node.attributes.GetInts("axes");
  if (ctx.in.size() > 1 && ctx.in[1] != nullptr) return HostInts(ctx, 1, "axes");
  return std::vector<int64_t>{};
}

Status PlanSqueeze(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "data"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesOf(ctx));
  const int rank = static_cast<int>(x->shape.size());
  std::vector<bool> drop(rank, false);
  for (int64_t a : axes) {
    TESSERA_ASSIGN_OR_RETURN(int axis, cpu::NormalizeAxis(a, rank));
    if (x->shape[axis] != 1) return Invalid(absl::StrCat("axis ", axis, " is not 1"));
    drop[axis] = true;
  }
  Shape out;
  for (int d = 0; d < rank; ++d) {
    if (axes.empty() ? x->shape[d] != 1 : !drop[d]) out.push_back(x->shape[d]);
  }
  (*ctx.out)[0] = ValueMeta{x->dtype, out, nullptr};
  return absl::OkStatus();
}

Status PlanUnsqueeze(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "data"));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesOf(ctx));
  const int rank = static_cast<int>(x->shape.size() + axes.size());
  std::vector<bool> insert(rank, false);
  for (int64_t a : axes) {
    TESSERA_ASSIGN_OR_RETURN(int axis, cpu::NormalizeAxis(a, rank));
    if (insert[axis]) return Invalid("axes repeat");
    insert[axis] = true;
  }
  Shape out;
  size_t next = 0;
  for (int d = 0; d < rank; ++d) out.push_back(insert[d] ? 1 : x->shape[next++]);
  (*ctx.out)[0] = ValueMeta{x->dtype, out, nullptr};
  return absl::OkStatus();
}

Status PlanIdentity(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "input"));
  (*ctx.out)[0] = ValueMeta{x->dtype, x->shape, nullptr};
  return absl::OkStatus();
}

}  // namespace

const CudaOpDef* FindBasicOp(const std::string& op_type) {
  // Load checks (cuda_op_checks.cc): FP32-only kernels, operands read on the host.
  constexpr CheckFn kFloat = CheckFloatInputs;
  constexpr CheckFn kArithmetic = CheckArithmeticInputs;
  constexpr CheckFn kHost1 = [](const CheckCtx& c) { return CheckHostInputs(c, {1}); };
  static const auto* const kOps = new std::map<std::string, CudaOpDef>{
      {"Add", {PlanBinary<BinaryOp::kAdd>, LaunchBinaryOp<BinaryOp::kAdd>, kArithmetic}},
      {"Sub", {PlanBinary<BinaryOp::kSub>, LaunchBinaryOp<BinaryOp::kSub>, kArithmetic}},
      {"Mul", {PlanBinary<BinaryOp::kMul>, LaunchBinaryOp<BinaryOp::kMul>, kArithmetic}},
      {"Div", {PlanBinary<BinaryOp::kDiv>, LaunchBinaryOp<BinaryOp::kDiv>, kArithmetic}},
      {"Pow", {PlanBinary<BinaryOp::kPow>, LaunchBinaryOp<BinaryOp::kPow>, kFloat}},
      {"Relu", {PlanUnary<UnaryOp::kRelu>, LaunchUnaryOp<UnaryOp::kRelu>, kFloat}},
      {"Clip",
       {PlanUnary<UnaryOp::kClip>, LaunchUnaryOp<UnaryOp::kClip>,
        [](const CheckCtx& c) {
          return CheckFloatAndHostInputs(c, {1, 2});
        }}},
      {"Sigmoid", {PlanUnary<UnaryOp::kSigmoid>, LaunchUnaryOp<UnaryOp::kSigmoid>, kFloat}},
      {"Tanh", {PlanUnary<UnaryOp::kTanh>, LaunchUnaryOp<UnaryOp::kTanh>, kFloat}},
      {"Erf", {PlanUnary<UnaryOp::kErf>, LaunchUnaryOp<UnaryOp::kErf>, kFloat}},
      {"Sqrt", {PlanUnary<UnaryOp::kSqrt>, LaunchUnaryOp<UnaryOp::kSqrt>, kFloat}},
      {"Exp", {PlanUnary<UnaryOp::kExp>, LaunchUnaryOp<UnaryOp::kExp>, kFloat}},
      {"Neg", {PlanUnary<UnaryOp::kNeg>, LaunchUnaryOp<UnaryOp::kNeg>, kFloat}},
      {"LeakyRelu", {PlanUnary<UnaryOp::kLeakyRelu>, LaunchUnaryOp<UnaryOp::kLeakyRelu>, kFloat}},
      {"Abs", {PlanUnary<UnaryOp::kAbs>, LaunchUnaryOp<UnaryOp::kAbs>, kFloat}},
      {"Reciprocal",
       {PlanUnary<UnaryOp::kReciprocal>, LaunchUnaryOp<UnaryOp::kReciprocal>, kFloat}},
      {"Log", {PlanUnary<UnaryOp::kLog>, LaunchUnaryOp<UnaryOp::kLog>, kFloat}},
      {"Sin", {PlanUnary<UnaryOp::kSin>, LaunchUnaryOp<UnaryOp::kSin>, kFloat}},
      {"Cos", {PlanUnary<UnaryOp::kCos>, LaunchUnaryOp<UnaryOp::kCos>, kFloat}},
      {"Softplus", {PlanUnary<UnaryOp::kSoftplus>, LaunchUnaryOp<UnaryOp::kSoftplus>, kFloat}},
      {"HardSigmoid",
       {PlanUnary<UnaryOp::kHardSigmoid>, LaunchUnaryOp<UnaryOp::kHardSigmoid>, kFloat}},
      {"HardSwish", {PlanUnary<UnaryOp::kHardSwish>, LaunchUnaryOp<UnaryOp::kHardSwish>, kFloat}},
      {"Elu", {PlanUnary<UnaryOp::kElu>, LaunchUnaryOp<UnaryOp::kElu>, kFloat}},
      {"Floor", {PlanUnary<UnaryOp::kFloor>, LaunchUnaryOp<UnaryOp::kFloor>, kFloat}},
      {"Ceil", {PlanUnary<UnaryOp::kCeil>, LaunchUnaryOp<UnaryOp::kCeil>, kFloat}},
      {"Round", {PlanUnary<UnaryOp::kRound>, LaunchUnaryOp<UnaryOp::kRound>, kFloat}},
      {"Sign", {PlanUnary<UnaryOp::kSign>, LaunchUnaryOp<UnaryOp::kSign>, kFloat}},
      {"Tan", {PlanUnary<UnaryOp::kTan>, LaunchUnaryOp<UnaryOp::kTan>, kFloat}},
      {"Asin", {PlanUnary<UnaryOp::kAsin>, LaunchUnaryOp<UnaryOp::kAsin>, kFloat}},
      {"Acos", {PlanUnary<UnaryOp::kAcos>, LaunchUnaryOp<UnaryOp::kAcos>, kFloat}},
      {"Atan", {PlanUnary<UnaryOp::kAtan>, LaunchUnaryOp<UnaryOp::kAtan>, kFloat}},
      {"Sinh", {PlanUnary<UnaryOp::kSinh>, LaunchUnaryOp<UnaryOp::kSinh>, kFloat}},
      {"Cosh", {PlanUnary<UnaryOp::kCosh>, LaunchUnaryOp<UnaryOp::kCosh>, kFloat}},
      {"Asinh", {PlanUnary<UnaryOp::kAsinh>, LaunchUnaryOp<UnaryOp::kAsinh>, kFloat}},
      {"Acosh", {PlanUnary<UnaryOp::kAcosh>, LaunchUnaryOp<UnaryOp::kAcosh>, kFloat}},
      {"Atanh", {PlanUnary<UnaryOp::kAtanh>, LaunchUnaryOp<UnaryOp::kAtanh>, kFloat}},
      {"Softsign", {PlanUnary<UnaryOp::kSoftsign>, LaunchUnaryOp<UnaryOp::kSoftsign>, kFloat}},
      {"Selu", {PlanUnary<UnaryOp::kSelu>, LaunchUnaryOp<UnaryOp::kSelu>, kFloat}},
      {"Celu", {PlanUnary<UnaryOp::kCelu>, LaunchUnaryOp<UnaryOp::kCelu>, kFloat}},
      {"ThresholdedRelu",
       {PlanUnary<UnaryOp::kThresholdedRelu>, LaunchUnaryOp<UnaryOp::kThresholdedRelu>, kFloat}},
      {"Shrink", {PlanUnary<UnaryOp::kShrink>, LaunchUnaryOp<UnaryOp::kShrink>, kFloat}},
      {"Softmax", {PlanSoftmax, LaunchSoftmax, CheckSoftmax}},
      {"LayerNormalization", {PlanLayerNorm, LaunchLayerNorm, CheckLayerNorm}},
      {"ReduceMean", {PlanReduceMean, LaunchReduceMean, CheckReduceMean}},
      {"BatchNormalization", {PlanBatchNorm, LaunchBatchNormOp}},
      {"Gather", {PlanGather, LaunchGatherOp}},
      {"Transpose", {PlanTranspose, LaunchStrided}},
      {"Slice",
       {PlanSlice, LaunchStrided,
        [](const CheckCtx& c) {
          return CheckHostInputs(c, {1, 2, 3, 4});
        }}},
      {"Concat", {PlanConcat, LaunchConcat}},
      {"Where", {PlanWhere, LaunchWhereOp}},
      {"Cast", {PlanCast, LaunchCastOp}},
      {"Reshape", {PlanReshape, nullptr, kHost1}},
      {"Flatten", {PlanFlatten, nullptr}},
      {"Squeeze", {PlanSqueeze, nullptr, kHost1}},
      {"Unsqueeze", {PlanUnsqueeze, nullptr, kHost1}},
      {"Identity", {PlanIdentity, nullptr}},
  };
  auto it = kOps->find(op_type);
  return it == kOps->end() ? nullptr : &it->second;
}

const CudaOpDef* FindCudaOp(const std::string& op_type) {
  if (const CudaOpDef* op = FindBasicOp(op_type)) return op;
  if (const CudaOpDef* op = FindDnnOp(op_type)) return op;
  if (const CudaOpDef* op = FindIndexOp(op_type)) return op;
  return FindImageOp(op_type);
}

}  // namespace tessera::engine::cuda
