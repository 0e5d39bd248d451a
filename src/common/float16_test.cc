#include "tessera/common/float16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

namespace tessera {
namespace {

// Bit patterns from IEEE 754 binary16: 1.0 = 0x3C00, 65504 (max) = 0x7BFF, 2^-24 (smallest
// subnormal) = 0x0001, inf = 0x7C00.
TEST(Float16Test, Fp16ConversionsRoundToNearestEvenAndOverflowToInfinity) {
  const float next_after_one = 1.0f + 1.0f / 1024;  // 0x3C01
  const std::vector<float> in = {
      1.0f,
      -2.0f,
      65504.0f,
      70000.0f,
      -1e6f,
      std::ldexp(1.0f, -24),
      0.0f,
      1.0f + 1.0f / 2048,                 // halfway between 0x3C00 and 0x3C01: to even
      next_after_one + 1.0f / 2048,       // halfway between 0x3C01 and 0x3C02: to even
      1.0f + 1.0f / 2048 + 1.0f / 65536,  // just above halfway: up
      std::numeric_limits<float>::quiet_NaN(),
      std::numeric_limits<float>::infinity()};
  // Longer than a vector of the x86-64-v3 clone, so both its body and its tail run.
  std::vector<float> many;
  for (int repeat = 0; repeat < 3; ++repeat) many.insert(many.end(), in.begin(), in.end());
  std::vector<uint16_t> half(many.size());
  FloatToFp16(many.data(), half.data(), many.size());
  const std::vector<uint16_t> expected = {0x3C00, 0xC000, 0x7BFF, 0x7C00, 0xFC00,
                                          0x0001, 0x0000, 0x3C00, 0x3C02, 0x3C01};
  for (size_t i = 0; i < many.size(); ++i) {
    const size_t k = i % in.size();
    if (k < expected.size()) {
      EXPECT_EQ(half[i], expected[k]) << "element " << i << " (" << many[i] << ")";
    }
  }
  EXPECT_EQ(half[10] & 0x7C00, 0x7C00);  // NaN: all-ones exponent and a non-zero mantissa
  EXPECT_NE(half[10] & 0x03FF, 0);
  EXPECT_EQ(half[11], 0x7C00);

  std::vector<float> back(half.size());
  Fp16ToFloat(half.data(), back.data(), half.size());
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[2], 65504.0f);
  EXPECT_TRUE(std::isinf(back[3]));
  EXPECT_EQ(back[5], std::ldexp(1.0f, -24));
  EXPECT_EQ(back[8], 1.0f + 2.0f / 1024);
  EXPECT_TRUE(std::isnan(back[10]));
  EXPECT_EQ(back[12 + 9], next_after_one);  // the second repeat went through the same path
}

TEST(Float16Test, Bf16ConversionsKeepTheHighHalfRoundedToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // halfway, even stays
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // halfway, odd goes up
  EXPECT_EQ(FloatToBf16(std::bit_cast<float>(0x3F808001u)), 0x3F81);  // above halfway
  const uint16_t nan = FloatToBf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(Bf16ToFloat(nan)));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::bit_cast<float>(0x7F800001u)))));
  EXPECT_EQ(Bf16ToFloat(0xC040), -3.0f);
}

}  // namespace
}  // namespace tessera
