// Exact integer products of 8-bit operands (MatMulInteger, QLinearMatMul, ConvInteger): each
// operand is first widened to INT16 rows with its zero point subtracted (a value in [-255, 255]),
// then rows are multiplied pairwise and summed in INT32, which no 8-bit product sum of a
// realistic depth can overflow (255 * 255 * 33000 < 2^31).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/thread_pool.h"

namespace tessera::engine::cpu {

// Rows are padded with zeros to a multiple of this many INT16 values, so the dot products run in
// whole vectors.
inline constexpr int64_t kInt16RowAlign = 16;
inline int64_t PaddedDepth(int64_t depth) {
  return (depth + kInt16RowAlign - 1) / kInt16RowAlign * kInt16RowAlign;
}

// Consecutive rows of an Int16Rows.
struct Int16RowSpan {
  const int16_t* data = nullptr;
  int64_t count = 0, depth = 0, stride = 0;
  const int16_t* row(int64_t r) const { return data + r * stride; }
};

// A block of INT16 rows, each `depth` values long padded to `stride` = PaddedDepth(depth).
struct Int16Rows {
  int64_t rows = 0, depth = 0, stride = 0;
  std::vector<int16_t> values;

  void Resize(int64_t row_count, int64_t row_depth) {
    rows = row_count;
    depth = row_depth;
    stride = PaddedDepth(row_depth);
    values.assign(static_cast<size_t>(rows * stride), 0);
  }
  int16_t* row(int64_t r) { return values.data() + r * stride; }
  const int16_t* row(int64_t r) const { return values.data() + r * stride; }
  Int16RowSpan Span(int64_t first, int64_t count) const {
    return {row(first), count, depth, stride};
  }
  Int16RowSpan All() const { return Span(0, rows); }
};

// Writes rows [first_row, first_row + count) of an 8-bit matrix (element (r, k) at
// src[r * row_step + k * depth_step]) into `out` from its row `out_row` on, less zero[r] (one per
// row of the source, indexed from first_row) or, when zero is null, less zero_all.
template <typename Q>
void WidenRows(const Q* src, int64_t first_row, int64_t count, int64_t row_step, int64_t depth_step,
               const int32_t* zero, int32_t zero_all, Int16Rows* out, int64_t out_row) {
  for (int64_t r = 0; r < count; ++r) {
    const Q* in = src + (first_row + r) * row_step;
    const int32_t z = zero != nullptr ? zero[first_row + r] : zero_all;
    int16_t* dst = out->row(out_row + r);
    for (int64_t k = 0; k < out->depth; ++k) {
      dst[k] = static_cast<int16_t>(static_cast<int32_t>(in[k * depth_step]) - z);
    }
  }
}

// Whether the CPU runs AVX2, which the 8-bit kernels' vector paths need.
bool CpuHasAvx2();

// c[i * ldc + j] = sum over k of a.row(i)[k] * b.row(j)[k], for every row i of a and j of b (a
// and b of one depth), split over `pool`. AVX2 where the CPU has it.
void Int16RowDots(const Int16RowSpan& a, const Int16RowSpan& b, int32_t* c, int64_t ldc,
                  ThreadPool* pool);

}  // namespace tessera::engine::cpu
