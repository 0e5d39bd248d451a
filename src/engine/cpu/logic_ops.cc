// Comparisons, boolean logic, Where, Cast and CastLike: what PyTorch exports for attention masks
// (masked_fill becomes Where on a BOOL condition) and for dtype changes in shape arithmetic.
// BOOL is stored one byte per element, 0 or 1. Equal and Cast hand STRING operands to
// string_ops.cc and string_cast.cc; Where selects string handles like any 8-byte element.
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/cpu/broadcast.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

// Calls run(T*) (a null pointer tagging the element type) for the engine's element types; every
// 1-byte type (BOOL, UINT8) is handled as uint8_t.
template <typename Run>
void ForElementType(DataType dtype, Run&& run) {
  switch (dtype) {
    case DataType::kFp32:
      run(static_cast<float*>(nullptr));
      break;
    case DataType::kInt64:
      run(static_cast<int64_t*>(nullptr));
      break;
    case DataType::kInt32:
      run(static_cast<int32_t*>(nullptr));
      break;
    default:
      run(static_cast<uint8_t*>(nullptr));
      break;
  }
}

constexpr std::initializer_list<DataType> kComparable = {
    DataType::kFp32, DataType::kInt64, DataType::kInt32, DataType::kBool, DataType::kUint8};

template <typename F>
Status RunCompare(const OpContext& ctx, const Inputs& inputs, std::vector<Value>* outputs, F f) {
  TESSERA_ASSIGN_OR_RETURN(const Value* a, RequireInput(inputs, 0, "A", kComparable));
  TESSERA_ASSIGN_OR_RETURN(const Value* b, RequireInput(inputs, 1, "B", {a->dtype()}));
  TESSERA_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(a->shape(), b->shape()));
  Value c = ctx.NewOutput(0, DataType::kBool, shape);
  uint8_t* out = c.mutable_data<uint8_t>();
  auto run = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    BroadcastBinary(a->data<T>(), a->shape(), b->data<T>(), b->shape(), out, shape, ctx.pool,
                    [&](T x, T y) { return static_cast<uint8_t>(f(x, y)); });
  };
  ForElementType(a->dtype(), run);
  (*outputs)[0] = std::move(c);
  return absl::OkStatus();
}

template <typename F>
Status RunLogical(const OpContext& ctx, const Inputs& inputs, std::vector<Value>* outputs, F f) {
  TESSERA_ASSIGN_OR_RETURN(const Value* a, RequireInput(inputs, 0, "A", {DataType::kBool}));
  TESSERA_ASSIGN_OR_RETURN(const Value* b, RequireInput(inputs, 1, "B", {DataType::kBool}));
  TESSERA_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(a->shape(), b->shape()));
  Value c = ctx.NewOutput(0, DataType::kBool, shape);
  BroadcastBinary(a->data<uint8_t>(), a->shape(), b->data<uint8_t>(), b->shape(),
                  c.mutable_data<uint8_t>(), shape, ctx.pool,
                  [&](uint8_t x, uint8_t y) { return static_cast<uint8_t>(f(x != 0, y != 0)); });
  (*outputs)[0] = std::move(c);
  return absl::OkStatus();
}

// ONNX TensorProto.DataType numbers of the types Cast supports.
StatusOr<DataType> CastTarget(int64_t to) {
  switch (to) {
    case 1:
      return DataType::kFp32;
    case 6:
      return DataType::kInt32;
    case 7:
      return DataType::kInt64;
    case 9:
      return DataType::kBool;
    case 2:
      return DataType::kUint8;
    case 8:
      return DataType::kString;
    default:
      return absl::UnimplementedError(
          absl::StrCat("Cast to ONNX type ", to,
                       " is not supported (only FLOAT, INT32, INT64, UINT8, BOOL and STRING)"));
  }
}

// Float to integer: truncation toward zero as C does, with NaN -> 0 and saturation at the
// type's range instead of undefined behaviour.
template <typename To>
To FloatToInt(float v) {
  if (!(v == v)) return 0;
  if (v >= static_cast<float>(std::numeric_limits<To>::max())) {
    return std::numeric_limits<To>::max();
  }
  if (v <= static_cast<float>(std::numeric_limits<To>::min())) {
    return std::numeric_limits<To>::min();
  }
  return static_cast<To>(v);
}

// BOOL and UINT8 share uint8_t storage; kToBool picks BOOL's "non-zero is 1" rule.
template <typename From, typename To, bool kToBool = false>
void CastLoop(const From* in, To* out, int64_t n, ThreadPool* pool) {
  ParallelChunks(pool, n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if constexpr (kToBool) {
        out[i] = in[i] != From(0) ? 1 : 0;
      } else if constexpr (std::is_floating_point_v<From> && !std::is_floating_point_v<To>) {
        out[i] = FloatToInt<To>(in[i]);
      } else {
        out[i] = static_cast<To>(in[i]);
      }
    }
  });
}

template <typename From>
void CastFrom(const From* in, const Value& y, ThreadPool* pool) {
  const int64_t n = y.num_elements();
  switch (y.dtype()) {
    case DataType::kFp32:
      CastLoop(in, y.mutable_data<float>(), n, pool);
      break;
    case DataType::kInt64:
      CastLoop(in, y.mutable_data<int64_t>(), n, pool);
      break;
    case DataType::kInt32:
      CastLoop(in, y.mutable_data<int32_t>(), n, pool);
      break;
    case DataType::kUint8:
      CastLoop(in, y.mutable_data<uint8_t>(), n, pool);
      break;
    default:
      CastLoop<From, uint8_t, true>(in, y.mutable_data<uint8_t>(), n, pool);
      break;
  }
}

}  // namespace

Status RunEqual(const OpContext& ctx, const Node&, const Inputs& inputs,
                std::vector<Value>* outputs) {
  if (inputs.size() == 2 && inputs[0] != nullptr && inputs[0]->dtype() == DataType::kString) {
    TESSERA_ASSIGN_OR_RETURN(const Value* b, RequireInput(inputs, 1, "B", {DataType::kString}));
    return RunStringEqual(ctx, *inputs[0], *b, outputs);
  }
  return RunCompare(ctx, inputs, outputs, [](auto a, auto b) { return a == b; });
}

Status RunLess(const OpContext& ctx, const Node&, const Inputs& inputs,
               std::vector<Value>* outputs) {
  return RunCompare(ctx, inputs, outputs, [](auto a, auto b) { return a < b; });
}

Status RunLessOrEqual(const OpContext& ctx, const Node&, const Inputs& inputs,
                      std::vector<Value>* outputs) {
  return RunCompare(ctx, inputs, outputs, [](auto a, auto b) { return a <= b; });
}

Status RunGreater(const OpContext& ctx, const Node&, const Inputs& inputs,
                  std::vector<Value>* outputs) {
  return RunCompare(ctx, inputs, outputs, [](auto a, auto b) { return a > b; });
}

Status RunGreaterOrEqual(const OpContext& ctx, const Node&, const Inputs& inputs,
                         std::vector<Value>* outputs) {
  return RunCompare(ctx, inputs, outputs, [](auto a, auto b) { return a >= b; });
}

Status RunAnd(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  return RunLogical(ctx, inputs, outputs, [](bool a, bool b) { return a && b; });
}

Status RunOr(const OpContext& ctx, const Node&, const Inputs& inputs, std::vector<Value>* outputs) {
  return RunLogical(ctx, inputs, outputs, [](bool a, bool b) { return a || b; });
}

Status RunXor(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  return RunLogical(ctx, inputs, outputs, [](bool a, bool b) { return a != b; });
}

Status RunNot(const OpContext& ctx, const Node&, const Inputs& inputs,
              std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kBool}));
  Value y = ctx.NewOutput(0, DataType::kBool, x->shape());
  const uint8_t* in = x->data<uint8_t>();
  uint8_t* out = y.mutable_data<uint8_t>();
  for (int64_t i = 0; i < x->num_elements(); ++i) out[i] = in[i] == 0 ? 1 : 0;
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunWhere(const OpContext& ctx, const Node&, const Inputs& inputs,
                std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* cond,
                           RequireInput(inputs, 0, "condition", {DataType::kBool}));
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 1, "X", kMovableTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* y, RequireInput(inputs, 2, "Y", {x->dtype()}));
  TESSERA_ASSIGN_OR_RETURN(Shape xy, BroadcastShapes(x->shape(), y->shape()));
  TESSERA_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(cond->shape(), xy));
  Value out = ctx.NewOutput(0, x->dtype(), shape);
  const uint8_t* c = cond->data<uint8_t>();
  auto run = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* xd = x->data<T>();
    const T* yd = y->data<T>();
    T* od = out.mutable_data<T>();
    BroadcastRows<3>({&cond->shape(), &x->shape(), &y->shape()}, shape, ctx.pool,
                     [&](int64_t o, const std::array<int64_t, 3>& off,
                         const std::array<int64_t, 3>& st, int64_t len) {
                       const uint8_t* pc = c + off[0];
                       const T* px = xd + off[1];
                       const T* py = yd + off[2];
                       T* dst = od + o;
                       if (st[1] == 0 && st[2] == 1) {  // masked_fill: a scalar fill value
                         const T fill = px[0];
                         for (int64_t i = 0; i < len; ++i) {
                           dst[i] = pc[i * st[0]] != 0 ? fill : py[i];
                         }
                       } else {
                         for (int64_t i = 0; i < len; ++i) {
                           dst[i] = pc[i * st[0]] != 0 ? px[i * st[1]] : py[i * st[2]];
                         }
                       }
                     });
  };
  // Where only selects: string handles move as 8-byte elements.
  if (x->dtype() == DataType::kString) {
    run(static_cast<uint64_t*>(nullptr));
  } else {
    ForElementType(x->dtype(), run);
  }
  (*outputs)[0] = std::move(out);
  return absl::OkStatus();
}

Status CheckCast(const Node& node, const Graph&) {
  if (!node.attributes.Has("to")) return absl::UnimplementedError("Cast without a `to` type");
  return CastTarget(node.attributes.GetInt("to", 0)).status();
}

namespace {

// Output 0 = x converted to `to`; shared by Cast and CastLike.
Status CastTo(const OpContext& ctx, const Value* x, DataType to, std::vector<Value>* outputs) {
  if (to == x->dtype()) {
    (*outputs)[0] = *x;  // no-op cast: share storage
    return absl::OkStatus();
  }
  if (to == DataType::kString || x->dtype() == DataType::kString) {
    return CastStrings(ctx, *x, to, outputs);
  }
  Value y = ctx.NewOutput(0, to, x->shape());
  switch (x->dtype()) {
    case DataType::kFp32:
      CastFrom(x->data<float>(), y, ctx.pool);
      break;
    case DataType::kInt64:
      CastFrom(x->data<int64_t>(), y, ctx.pool);
      break;
    case DataType::kInt32:
      CastFrom(x->data<int32_t>(), y, ctx.pool);
      break;
    default:
      CastFrom(x->data<uint8_t>(), y, ctx.pool);
      break;
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace

Status RunCast(const OpContext& ctx, const Node& node, const Inputs& inputs,
               std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "input", kMovableTypes));
  StatusOr<DataType> to = CastTarget(node.attributes.GetInt("to", 0));
  if (!to.ok()) return absl::InvalidArgumentError(to.status().message());
  return CastTo(ctx, x, *to, outputs);
}

Status RunCastLike(const OpContext& ctx, const Node&, const Inputs& inputs,
                   std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "input", kMovableTypes));
  TESSERA_ASSIGN_OR_RETURN(const Value* like,
                           RequireInput(inputs, 1, "target_type", kMovableTypes));
  return CastTo(ctx, x, like->dtype(), outputs);
}

}  // namespace tessera::engine::cpu
