// CUDA ops on integers and booleans, prefix sums and Split (see cuda_ops.h for the plan/launch
// split): what PyTorch exports compute on the device from token ids (RoBERTa's position ids:
// Equal -> Not -> Cast -> CumSum -> Mul -> Add) and GPT-2's fused-QKV Split. Shape rules follow
// the CPU kernels (src/engine/cpu/logic_ops.cc, reduce_ops.cc, slice_ops.cc).
#include <map>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"
#include "engine/cuda/cuda_op_util.h"
#include "engine/cuda/cuda_ops.h"

namespace tessera::engine::cuda {
namespace {

// Storage type of a value of `dtype` on the device; UNIMPLEMENTED for types the kernels lack.
StatusOr<CastType> StorageOf(DataType dtype, const Device& device, const char* what) {
  switch (dtype) {
    case DataType::kFp32:
      return device.fp16 ? CastType::kF16 : CastType::kF32;
    case DataType::kInt64:
      return CastType::kI64;
    case DataType::kInt32:
      return CastType::kI32;
    case DataType::kUint8:
      return CastType::kU8;
    case DataType::kBool:
      return CastType::kBool;
    default:
      return absl::UnimplementedError(
          absl::StrCat(what, " has data type ", TypeName(dtype), ", which the CUDA kernel lacks"));
  }
}

// ---- Comparisons and logic: BOOL out, broadcasting ---------------------------------------------
// ints = {storage type of the operands}.

template <CompareOp kOp>
Status PlanCompare(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* a, Input(ctx, 0, "A"));
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* b, Input(ctx, 1, "B"));
  if (a->dtype != b->dtype) {
    return Invalid(absl::StrCat("A is ", TypeName(a->dtype), " and B is ", TypeName(b->dtype),
                                "; they must match"));
  }
  constexpr bool kLogical =
      kOp == CompareOp::kAnd || kOp == CompareOp::kOr || kOp == CompareOp::kXor;
  if (kLogical && a->dtype != DataType::kBool) {
    return Invalid(absl::StrCat("A is ", TypeName(a->dtype), "; logical ops take BOOL"));
  }
  TESSERA_ASSIGN_OR_RETURN(CastType storage, StorageOf(a->dtype, ctx.device, "A"));
  TESSERA_ASSIGN_OR_RETURN(Shape out, cpu::BroadcastShapes(a->shape, b->shape));
  TESSERA_ASSIGN_OR_RETURN(ctx.state->map, BroadcastMap(out, {&a->shape, &b->shape}));
  ctx.state->ints = {static_cast<int64_t>(storage)};
  (*ctx.out)[0] = ValueMeta{DataType::kBool, out, nullptr};
  return absl::OkStatus();
}

template <CompareOp kOp>
Status LaunchCompareOp(LaunchCtx& ctx) {
  return CudaStatus(
      LaunchCompare(kOp, static_cast<CastType>(ctx.state->ints[0]), ctx.in[0], ctx.in[1],
                    static_cast<uint8_t*>(ctx.out[0]), ElementCount(ctx.out_meta[0]->shape),
                    ctx.state->map, ctx.device.stream),
      "compare kernel");
}

Status PlanNot(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "X"));
  if (x->dtype != DataType::kBool) {
    return Invalid(absl::StrCat("X is ", TypeName(x->dtype), "; Not takes BOOL"));
  }
  (*ctx.out)[0] = ValueMeta{DataType::kBool, x->shape, nullptr};
  return absl::OkStatus();
}

Status LaunchNotOp(LaunchCtx& ctx) {
  return CudaStatus(
      LaunchNot(static_cast<const uint8_t*>(ctx.in[0]), static_cast<uint8_t*>(ctx.out[0]),
                ElementCount(ctx.out_meta[0]->shape), ctx.device.stream),
      "not kernel");
}

// ---- CumSum -------------------------------------------------------------------------------------
// ints = {storage type, outer, len, inner, exclusive, reverse}.

Status PlanCumSum(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "x"));
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* axis_meta, Input(ctx, 1, "axis"));
  if (x->dtype != DataType::kFp32 && x->dtype != DataType::kInt64 && x->dtype != DataType::kInt32) {
    return absl::UnimplementedError(
        absl::StrCat("x has data type ", TypeName(x->dtype), "; CumSum takes FP32, INT32, INT64"));
  }
  const Value* axis_value = axis_meta->host;
  if (axis_value == nullptr) {
    return absl::UnimplementedError("axis must be known on the host (a constant)");
  }
  if (axis_value->num_elements() != 1 ||
      (axis_value->dtype() != DataType::kInt64 && axis_value->dtype() != DataType::kInt32)) {
    return Invalid("axis must be an INT32 or INT64 scalar");
  }
  const int64_t raw = axis_value->dtype() == DataType::kInt64 ? axis_value->data<int64_t>()[0]
                                                              : axis_value->data<int32_t>()[0];
  const int rank = static_cast<int>(x->shape.size());
  if (rank == 0) return Invalid("CumSum of a scalar");
  TESSERA_ASSIGN_OR_RETURN(int axis, cpu::NormalizeAxis(raw, rank));
  TESSERA_ASSIGN_OR_RETURN(CastType storage, StorageOf(x->dtype, ctx.device, "x"));
  ctx.state->ints = {static_cast<int64_t>(storage),
                     Product(x->shape, 0, axis),
                     x->shape[axis],
                     Product(x->shape, axis + 1, rank),
                     ctx.node.attributes.GetInt("exclusive", 0) != 0,
                     ctx.node.attributes.GetInt("reverse", 0) != 0};
  (*ctx.out)[0] = ValueMeta{x->dtype, x->shape, nullptr};
  return absl::OkStatus();
}

Status LaunchCumSumOp(LaunchCtx& ctx) {
  const auto& s = ctx.state->ints;
  return CudaStatus(LaunchCumSum(static_cast<CastType>(s[0]), ctx.in[0], ctx.out[0], s[1], s[2],
                                 s[3], s[4] != 0, s[5] != 0, ctx.device.stream),
                    "cumsum kernel");
}

// ---- Split: the inverse of Concat, one 2-D copy per output --------------------------------------
// ints = {axis, sizes...}.

Status PlanSplit(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "input"));
  const int rank = static_cast<int>(x->shape.size());
  if (rank == 0) return Invalid("Split of a scalar");
  TESSERA_ASSIGN_OR_RETURN(int axis,
                           cpu::NormalizeAxis(ctx.node.attributes.GetInt("axis", 0), rank));
  const int64_t dim = x->shape[axis];
  const int64_t parts = static_cast<int64_t>(ctx.node.outputs.size());
  std::vector<int64_t> split;
  if (ctx.in.size() > 1 && ctx.in[1] != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(split, HostInts(ctx, 1, "split"));
  } else {
    split = ctx.node.attributes.GetInts("split");
  }
  if (split.empty()) {
    // Equal parts; opset 18's num_outputs allows a smaller last part (ceil division).
    const int64_t part = (dim + parts - 1) / parts;
    if (ctx.node.opset < 18 && dim % parts != 0) {
      return Invalid(absl::StrCat("dim ", dim, " does not split into ", parts, " equal parts"));
    }
    for (int64_t i = 0; i < parts; ++i) split.push_back(std::min(part, dim - i * part));
  }
  if (static_cast<int64_t>(split.size()) != parts) {
    return Invalid(absl::StrCat("split has ", split.size(), " entries for ", parts, " outputs"));
  }
  int64_t sum = 0;
  for (int64_t s : split) {
    if (s < 0) return Invalid("negative split size");
    sum += s;
  }
  if (sum != dim) return Invalid(absl::StrCat("split sizes sum to ", sum, ", not dim ", dim));
  ctx.state->ints = {axis};
  for (int64_t p = 0; p < parts; ++p) {
    Shape shape = x->shape;
    shape[axis] = split[p];
    (*ctx.out)[p] = ValueMeta{x->dtype, shape, nullptr};
    ctx.state->ints.push_back(split[p]);
  }
  return absl::OkStatus();
}

Status LaunchSplit(LaunchCtx& ctx) {
  const Shape& in = ctx.in_meta[0]->shape;
  const size_t axis = static_cast<size_t>(ctx.state->ints[0]);
  const size_t esize = static_cast<size_t>(ctx.device.StorageBytes(ctx.in_meta[0]->dtype));
  const size_t outer = static_cast<size_t>(Product(in, 0, axis));
  const size_t inner = static_cast<size_t>(Product(in, axis + 1, in.size())) * esize;
  const size_t src_pitch = static_cast<size_t>(in[axis]) * inner;
  size_t offset = 0;
  for (size_t p = 0; p < ctx.out.size(); ++p) {
    const size_t width = static_cast<size_t>(ctx.state->ints[p + 1]) * inner;
    TESSERA_RETURN_IF_ERROR(CopyRows(ctx.out[p], width,
                                     static_cast<const char*>(ctx.in[0]) + offset, src_pitch, width,
                                     outer, ctx.device.stream, "split copy"));
    offset += width;
  }
  return absl::OkStatus();
}

std::string CheckCumSum(const CheckCtx& ctx) { return CheckHostInputs(ctx, {1}); }
std::string CheckSplit(const CheckCtx& ctx) { return CheckHostInputs(ctx, {1}); }

}  // namespace

const CudaOpDef* FindIndexOp(const std::string& op_type) {
  static const auto* const kOps = new std::map<std::string, CudaOpDef>{
      {"Equal", {PlanCompare<CompareOp::kEqual>, LaunchCompareOp<CompareOp::kEqual>}},
      {"Less", {PlanCompare<CompareOp::kLess>, LaunchCompareOp<CompareOp::kLess>}},
      {"LessOrEqual",
       {PlanCompare<CompareOp::kLessOrEqual>, LaunchCompareOp<CompareOp::kLessOrEqual>}},
      {"Greater", {PlanCompare<CompareOp::kGreater>, LaunchCompareOp<CompareOp::kGreater>}},
      {"GreaterOrEqual",
       {PlanCompare<CompareOp::kGreaterOrEqual>, LaunchCompareOp<CompareOp::kGreaterOrEqual>}},
      {"And", {PlanCompare<CompareOp::kAnd>, LaunchCompareOp<CompareOp::kAnd>}},
      {"Or", {PlanCompare<CompareOp::kOr>, LaunchCompareOp<CompareOp::kOr>}},
      {"Xor", {PlanCompare<CompareOp::kXor>, LaunchCompareOp<CompareOp::kXor>}},
      {"Not", {PlanNot, LaunchNotOp}},
      {"CumSum", {PlanCumSum, LaunchCumSumOp, CheckCumSum}},
      {"Split", {PlanSplit, LaunchSplit, CheckSplit}},
  };
  auto it = kOps->find(op_type);
  return it == kOps->end() ? nullptr : &it->second;
}

}  // namespace tessera::engine::cuda
