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
