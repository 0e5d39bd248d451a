// QuantizeLinear and DequantizeLinear against the ONNX formulas computed here element by element,
// on tensors long enough for the vector paths (eight at a time) and their tails.
#include <cmath>
#include <limits>
#include <random>

#include "engine/cpu_op_runner_for_test.h"

namespace tessera::engine::cpu {
namespace {

template <typename Q>
Q Reference(float x, float scale, int zero_point) {
  const float q = std::nearbyint(x / scale) + static_cast<float>(zero_point);
  return static_cast<Q>(
      std::fmin(std::fmax(q, std::numeric_limits<Q>::min()), std::numeric_limits<Q>::max()));
}

// Values whose x / scale are exact halves (ties go to even), beyond the range (clamped), and
// random; 37 of them, so the vector loop and its tail both run.
std::vector<float> Inputs37(float scale) {
  std::vector<float> x = {0.5f * scale,  1.5f * scale,  2.5f * scale,    -0.5f * scale,
                          -1.5f * scale, -2.5f * scale, 1000.0f * scale, -1000.0f * scale};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-150.0f * scale, 150.0f * scale);
  while (x.size() < 37) x.push_back(dist(rng));
  return x;
}

template <typename Q>
void CheckPerTensor(DataType type, int zero_point) {
  const float scale = 0.25f;
  const std::vector<float> x = Inputs37(scale);
  Value xs = Floats({37}, x);
  Value s = Floats({}, {scale});
  Value z = Make<Q>(type, {}, {static_cast<Q>(zero_point)});
  auto q = RunOp("QuantizeLinear", {&xs, &s, &z});
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->dtype(), type);
  std::vector<Q> expected;
  for (float v : x) expected.push_back(Reference<Q>(v, scale, zero_point));
  EXPECT_EQ(Elements<Q>(*q), expected);
  // Ties to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2 (plus the zero point).
  EXPECT_EQ(static_cast<int>(Elements<Q>(*q)[0]), zero_point);
  EXPECT_EQ(static_cast<int>(Elements<Q>(*q)[1]), zero_point + 2);
  EXPECT_EQ(static_cast<int>(Elements<Q>(*q)[2]), zero_point + 2);
  EXPECT_EQ(Elements<Q>(*q)[6], std::numeric_limits<Q>::max());
  EXPECT_EQ(Elements<Q>(*q)[7], std::numeric_limits<Q>::min());

  auto back = RunOp("DequantizeLinear", {&*q, &s, &z});
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->dtype(), DataType::kFp32);
  for (int i = 0; i < 37; ++i) {
    EXPECT_EQ(back->data<float>()[i],
              static_cast<float>(static_cast<int>(expected[i]) - zero_point) * scale)
        << i;
  }
}

TEST(QuantizeOpsTest, PerTensorUint8AndInt8MatchTheFormulaOnLongTensors) {
  CheckPerTensor<uint8_t>(DataType::kUint8, 128);
  CheckPerTensor<int8_t>(DataType::kInt8, -3);
}

TEST(QuantizeOpsTest, WithoutAZeroPointQuantizeGivesUint8AroundZero) {
  Value x = Floats({9}, {-1.0f, 0.0f, 0.4f, 0.6f, 1.0f, 2.0f, 254.6f, 300.0f, 3.0f});
  Value s = Floats({}, {1.0f});
  auto q = RunOp("QuantizeLinear", {&x, &s});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->dtype(), DataType::kUint8);
  EXPECT_EQ(Elements<uint8_t>(*q), (std::vector<uint8_t>{0, 0, 0, 1, 1, 2, 255, 255, 3}));
}

TEST(QuantizeOpsTest, PerAxisScalesApplyAlongTheAxis) {
  // x [2, 3, 12]: axis 1 has three channels, each with its scale and zero point; 12 elements a
  // run, so each run has a vector part and a tail.
  std::vector<float> x(72);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (float& v : x) v = dist(rng);
  const std::vector<float> scales = {0.05f, 0.1f, 0.02f};
  const std::vector<int8_t> zeros = {0, 5, -7};
  Value xs = Floats({2, 3, 12}, x);
  Value s = Floats({3}, scales);
  Value z = Make<int8_t>(DataType::kInt8, {3}, zeros);
  Attributes attrs;
  attrs.Set("axis", IntAttr(1));
  auto q = RunOp("QuantizeLinear", {&xs, &s, &z}, attrs, nullptr, 13);
  ASSERT_TRUE(q.ok()) << q.status();
  auto back = RunOp("DequantizeLinear", {&*q, &s, &z}, attrs, nullptr, 13);
  ASSERT_TRUE(back.ok()) << back.status();
  for (int i = 0; i < 72; ++i) {
    const int c = (i / 12) % 3;
    const int8_t want = Reference<int8_t>(x[i], scales[c], zeros[c]);
    EXPECT_EQ(q->data<int8_t>()[i], want) << i;
    EXPECT_EQ(back->data<float>()[i], static_cast<float>(want - zeros[c]) * scales[c]) << i;
  }
}

TEST(QuantizeOpsTest, MismatchedScalesAndZeroPointsAreRefusedNamingThem) {
  Value x = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Value s2 = Floats({2}, {1.0f, 2.0f});
  Attributes attrs;
  attrs.Set("axis", IntAttr(1));
  ExpectInvalidArgument(RunOp("QuantizeLinear", {&x, &s2}, attrs, nullptr, 13),
                        "neither a scalar nor one value per slice");
  Value s = Floats({}, {1.0f});
  Value z3 = Make<uint8_t>(DataType::kUint8, {3}, {0, 0, 0});
  ExpectInvalidArgument(RunOp("QuantizeLinear", {&x, &s, &z3}), "does not match scale");
  Value q = Make<uint8_t>(DataType::kUint8, {2}, {1, 2});
  Value zi8 = Make<int8_t>(DataType::kInt8, {}, {0});
  ExpectInvalidArgument(RunOp("DequantizeLinear", {&q, &s, &zi8}), "is not of x's type");
  Value zf = Floats({}, {0.0f});
  EXPECT_EQ(RunOp("QuantizeLinear", {&x, &s, &zf}).status().code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace tessera::engine::cpu

namespace tessera::engine::cpu {
namespace {

// 8-bit values of type Q covering the range, 37 of them (vector loop and tail).
template <typename Q>
Value Bytes37(DataType type, int seed) {
  std::vector<Q> v;
  for (int i = 0; i < 37; ++i) v.push_back(static_cast<Q>((i * 73 + seed * 31) % 256));
  return Make<Q>(type, {37}, v);
}

// QLinearAdd against the three nodes it replaces, run one after the other: bit for bit.
template <typename A, typename B, typename C>
void CheckQLinearAdd(DataType a_type, DataType b_type, DataType c_type) {
  Value a = Bytes37<A>(a_type, 1), b = Bytes37<B>(b_type, 2);
  Value a_scale = Floats({}, {0.043f}), b_scale = Floats({}, {0.017f}),
        c_scale = Floats({}, {0.05f});
  Value a_zero = Make<A>(a_type, {}, {static_cast<A>(7)});
  Value b_zero = Make<B>(b_type, {}, {static_cast<B>(-5)});
  Value c_zero = Make<C>(c_type, {}, {static_cast<C>(12)});
  auto fa = RunOp("DequantizeLinear", {&a, &a_scale, &a_zero});
  auto fb = RunOp("DequantizeLinear", {&b, &b_scale, &b_zero});
  ASSERT_TRUE(fa.ok() && fb.ok());
  auto sum = RunOp("Add", {&*fa, &*fb});
  ASSERT_TRUE(sum.ok()) << sum.status();
  auto expected = RunOp("QuantizeLinear", {&*sum, &c_scale, &c_zero});
  ASSERT_TRUE(expected.ok()) << expected.status();
  auto c = RunOp("com.microsoft.QLinearAdd",
                 {&a, &a_scale, &a_zero, &b, &b_scale, &b_zero, &c_scale, &c_zero});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->dtype(), c_type);
  EXPECT_EQ(Elements<C>(*c), Elements<C>(*expected));
  // Not all clipped: the values test the arithmetic.
  int inside = 0;
  for (C v : Elements<C>(*c)) {
    inside += v != std::numeric_limits<C>::min() && v != std::numeric_limits<C>::max();
  }
  EXPECT_GT(inside, 20);
}

TEST(QuantizeOpsTest, QLinearAddIsQuantizeOfTheDequantizedSum) {
  CheckQLinearAdd<uint8_t, uint8_t, uint8_t>(DataType::kUint8, DataType::kUint8, DataType::kUint8);
  CheckQLinearAdd<uint8_t, int8_t, int8_t>(DataType::kUint8, DataType::kInt8, DataType::kInt8);
  CheckQLinearAdd<int8_t, int8_t, uint8_t>(DataType::kInt8, DataType::kInt8, DataType::kUint8);
}

TEST(QuantizeOpsTest, QLinearAddRefusesShapesThatDifferAndWrongZeroPoints) {
  Value a = Bytes37<uint8_t>(DataType::kUint8, 1);
  Value b = Make<uint8_t>(DataType::kUint8, {1}, {3});
  Value s = Floats({}, {0.1f});
  Value z = Make<uint8_t>(DataType::kUint8, {}, {0});
  Value z8 = Make<int8_t>(DataType::kInt8, {}, {0});
  ExpectInvalidArgument(RunOp("com.microsoft.QLinearAdd", {&a, &s, &z, &b, &s, &z, &s, &z}),
                        "one shape");
  ExpectInvalidArgument(RunOp("com.microsoft.QLinearAdd", {&a, &s, &z8, &a, &s, &z, &s, &z}),
                        "A_zero_point");
}

}  // namespace
}  // namespace tessera::engine::cpu
