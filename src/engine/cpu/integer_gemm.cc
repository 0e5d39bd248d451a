// Int16RowDots: blocks of rows of a against blocks of rows of b, each block pair one task; inside
// a block, two rows of a against four of b at a time so that each loaded vector feeds several
// multiply-adds (_mm256_madd_epi16: sixteen INT16 products summed pairwise into eight INT32).
#include "engine/cpu/integer_gemm.h"

#include <immintrin.h>

#include <algorithm>

#include "engine/cpu/broadcast.h"

namespace tessera::engine::cpu {
namespace {

constexpr int64_t kRowsA = 16;   // rows of a per task
constexpr int64_t kRowsB = 128;  // rows of b per task

int32_t DotScalar(const int16_t* a, const int16_t* b, int64_t depth) {
  int32_t sum = 0;
  for (int64_t k = 0; k < depth; ++k) sum += static_cast<int32_t>(a[k]) * b[k];
  return sum;
}

void BlockScalar(const Int16RowSpan& a, int64_t i0, int64_t i1, const Int16RowSpan& b, int64_t j0,
                 int64_t j1, int32_t* c, int64_t ldc) {
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t j = j0; j < j1; ++j) c[i * ldc + j] = DotScalar(a.row(i), b.row(j), a.depth);
  }
}

__attribute__((target("avx2"))) inline int32_t HorizontalSum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

__attribute__((target("avx2"))) int32_t DotAvx2(const int16_t* a, const int16_t* b,
                                                int64_t stride) {
  __m256i acc = _mm256_setzero_si256();
  for (int64_t k = 0; k < stride; k += 16) {
    const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + k));
    const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + k));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(va, vb));
  }
  return HorizontalSum(acc);
}

// Rows i, i + 1 of a against rows j .. j + 3 of b.
__attribute__((target("avx2"))) void Dots2x4(const int16_t* a0, const int16_t* a1,
                                             const int16_t* const b[4], int64_t stride, int32_t* c0,
                                             int32_t* c1) {
  __m256i acc0[4], acc1[4];
  for (int q = 0; q < 4; ++q) acc0[q] = acc1[q] = _mm256_setzero_si256();
  for (int64_t k = 0; k < stride; k += 16) {
    const __m256i va0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a0 + k));
    const __m256i va1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a1 + k));
    for (int q = 0; q < 4; ++q) {
      const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[q] + k));
      acc0[q] = _mm256_add_epi32(acc0[q], _mm256_madd_epi16(va0, vb));
      acc1[q] = _mm256_add_epi32(acc1[q], _mm256_madd_epi16(va1, vb));
    }
  }
  for (int q = 0; q < 4; ++q) {
    c0[q] = HorizontalSum(acc0[q]);
    c1[q] = HorizontalSum(acc1[q]);
  }
}

__attribute__((target("avx2"))) void BlockAvx2(const Int16RowSpan& a, int64_t i0, int64_t i1,
                                               const Int16RowSpan& b, int64_t j0, int64_t j1,
                                               int32_t* c, int64_t ldc) {
  const int64_t stride = a.stride;
  int64_t i = i0;
  for (; i + 2 <= i1; i += 2) {
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4) {
      const int16_t* rows_b[4] = {b.row(j), b.row(j + 1), b.row(j + 2), b.row(j + 3)};
      Dots2x4(a.row(i), a.row(i + 1), rows_b, stride, c + i * ldc + j, c + (i + 1) * ldc + j);
    }
    for (; j < j1; ++j) {
      c[i * ldc + j] = DotAvx2(a.row(i), b.row(j), stride);
      c[(i + 1) * ldc + j] = DotAvx2(a.row(i + 1), b.row(j), stride);
    }
  }
  for (; i < i1; ++i) {
    for (int64_t j = j0; j < j1; ++j) c[i * ldc + j] = DotAvx2(a.row(i), b.row(j), stride);
  }
}

}  // namespace

bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

void Int16RowDots(const Int16RowSpan& a, const Int16RowSpan& b, int32_t* c, int64_t ldc,
                  ThreadPool* pool) {
  const int64_t blocks_a = (a.count + kRowsA - 1) / kRowsA;
  const int64_t blocks_b = (b.count + kRowsB - 1) / kRowsB;
  const bool avx2 = CpuHasAvx2();
  ParallelFor(pool, blocks_a * blocks_b, [&](int64_t t) {
    const int64_t i0 = t / blocks_b * kRowsA, j0 = t % blocks_b * kRowsB;
    const int64_t i1 = std::min(a.count, i0 + kRowsA), j1 = std::min(b.count, j0 + kRowsB);
    if (avx2) {
      BlockAvx2(a, i0, i1, b, j0, j1, c, ldc);
    } else {
      BlockScalar(a, i0, i1, b, j0, j1, c, ldc);
    }
  });
}

}  // namespace tessera::engine::cpu
