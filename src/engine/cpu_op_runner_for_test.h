// Test helpers for the CPU op kernels: small tensors from literal data, attributes, and a runner
// that calls one kernel the way the CPU model does (no graph, no memory plan).
#pragma once

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/ops.h"
#include "gtest/gtest.h"

namespace tessera::engine::cpu {

template <typename T>
Value Make(DataType dtype, Shape shape, std::vector<T> data) {
  Value v = Value::Allocate(dtype, shape);
  EXPECT_EQ(static_cast<int64_t>(data.size()), v.num_elements());
  if (v.byte_size() > 0) std::memcpy(v.mutable_data<void>(), data.data(), v.byte_size());
  return v;
}
inline Value Floats(Shape s, std::vector<float> d) {
  return Make(DataType::kFp32, s, std::move(d));
}
inline Value Int64s(Shape s, std::vector<int64_t> d) {
  return Make(DataType::kInt64, s, std::move(d));
}
inline Value Int32s(Shape s, std::vector<int32_t> d) {
  return Make(DataType::kInt32, s, std::move(d));
}
inline Value Bools(Shape s, std::vector<uint8_t> d) {
  return Make(DataType::kBool, s, std::move(d));
}

inline Value RandomFloats(Shape shape, std::mt19937* rng) {
  Value v = Value::Allocate(DataType::kFp32, shape);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < v.num_elements(); ++i) v.mutable_data<float>()[i] = dist(*rng);
  return v;
}

template <typename T>
std::vector<T> Elements(const Value& v) {
  return std::vector<T>(v.data<T>(), v.data<T>() + v.num_elements());
}

inline Attribute IntAttr(int64_t i) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = i;
  return a;
}

inline Attribute FloatAttr(float f) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = f;
  return a;
}

inline Attribute IntsAttr(std::vector<int64_t> ints) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(ints);
  return a;
}

inline Attribute FloatsAttr(std::vector<float> floats) {
  Attribute a;
  a.kind = Attribute::Kind::kFloats;
  a.floats = std::move(floats);
  return a;
}

inline Attribute StringsAttr(std::vector<std::string> strings) {
  Attribute a;
  a.kind = Attribute::Kind::kStrings;
  a.strings = std::move(strings);
  return a;
}

inline Attribute StringAttr(std::string s) {
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.s = std::move(s);
  return a;
}

// Runs one op kernel with `num_outputs` outputs; returns them or the kernel's error.
inline StatusOr<std::vector<Value>> RunOpN(const std::string& op_type, const Inputs& inputs,
                                           Attributes attrs = {}, size_t num_outputs = 1,
                                           ThreadPool* pool = nullptr, int opset = 17) {
  const OpDef* def = FindOp(op_type);
  if (def == nullptr) return absl::NotFoundError(op_type);
  Node node;
  node.op_type = op_type;
  node.opset = opset;
  node.attributes = std::move(attrs);
  std::vector<Value> outputs(num_outputs);
  // Strings kernels make live as long as the test process: results may be checked at leisure.
  static StringArena* strings = new StringArena();
  OpContext ctx{pool};
  ctx.strings = strings;
  TESSERA_RETURN_IF_ERROR(RefuseStrings(*def, op_type, inputs));  // as the CPU model does
  TESSERA_RETURN_IF_ERROR(def->run(ctx, node, inputs, &outputs));
  return outputs;
}

inline StatusOr<Value> RunOp(const std::string& op_type, const Inputs& inputs,
                             Attributes attrs = {}, ThreadPool* pool = nullptr, int opset = 17) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> out,
                           RunOpN(op_type, inputs, std::move(attrs), 1, pool, opset));
  return out[0];
}

// Checks that `status` is INVALID_ARGUMENT with a message mentioning `fragment`.
inline void ExpectInvalidArgument(const Status& status, const std::string& fragment) {
  ASSERT_FALSE(status.ok()) << "expected an error mentioning " << fragment;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(std::string(status.message()).find(fragment), std::string::npos) << status;
}

template <typename T>
void ExpectInvalidArgument(const StatusOr<T>& result, const std::string& fragment) {
  ExpectInvalidArgument(result.status(), fragment);
}

}  // namespace tessera::engine::cpu
