#include "tessera/common/float16.h"

#include <immintrin.h>

#include <bit>
#include <cstring>

namespace tessera {

namespace {

// F16C converts eight values an instruction; the portable loops below use libgcc's exact software
// conversion, which takes tens of cycles a value.
__attribute__((target("avx,f16c"))) void Fp16ToFloatF16c(const uint16_t* in, float* out,
                                                         size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(half));
  }
  for (; i < count; ++i) out[i] = _cvtsh_ss(in[i]);
}

__attribute__((target("avx,f16c"))) void FloatToFp16F16c(const float* in, uint16_t* out,
                                                         size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i half = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), half);
  }
  for (; i < count; ++i) out[i] = _cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT);
}

bool HasF16c() {
  static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return has;
}

}  // namespace

void Fp16ToFloat(const uint16_t* in, float* out, size_t count) {
  if (HasF16c()) return Fp16ToFloatF16c(in, out, count);
  for (size_t i = 0; i < count; ++i) {
    _Float16 half;
    std::memcpy(&half, &in[i], sizeof(half));
    out[i] = static_cast<float>(half);
  }
}

void FloatToFp16(const float* in, uint16_t* out, size_t count) {
  if (HasF16c()) return FloatToFp16F16c(in, out, count);
  for (size_t i = 0; i < count; ++i) {
    const _Float16 half = static_cast<_Float16>(in[i]);
    std::memcpy(&out[i], &half, sizeof(half));
  }
}

void Bf16ToFloat(const uint16_t* in, float* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = std::bit_cast<float>(uint32_t{in[i]} << 16);
}

void FloatToBf16(const float* in, uint16_t* out, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(in[i]);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
      out[i] = static_cast<uint16_t>((bits >> 16) | 0x40);  // a NaN stays quiet NaN
    } else {
      out[i] = static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1)) >> 16);
    }
  }
}

}  // namespace tessera
