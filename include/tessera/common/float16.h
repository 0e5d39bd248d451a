// Conversions between FP32 and the two 16-bit float formats the protocol carries (FP16, BF16).
// FP32 → 16 bits rounds to nearest even, as an IEEE cast does: FP16 overflows to ±inf and a NaN
// stays a NaN. 16 bits → FP32 is exact.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

void Fp16ToFloat(const uint16_t* in, float* out, size_t count);
void FloatToFp16(const float* in, uint16_t* out, size_t count);
void Bf16ToFloat(const uint16_t* in, float* out, size_t count);
void FloatToBf16(const float* in, uint16_t* out, size_t count);

inline float Bf16ToFloat(uint16_t value) {
  float out;
  Bf16ToFloat(&value, &out, 1);
  return out;
}
inline uint16_t FloatToFp16(float value) {
  uint16_t out;
  FloatToFp16(&value, &out, 1);
  return out;
}
inline uint16_t FloatToBf16(float value) {
  uint16_t out;
  FloatToBf16(&value, &out, 1);
  return out;
}

}  // namespace tessera
