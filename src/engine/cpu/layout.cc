// Conversions between row-major (NCHW) and channels-last (NHWC) 4-D values; see value.h Layout.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

// dst[j][i] = src[i][j] for i in [i0, i1), j in [j0, j1) of a rows x cols matrix.
template <typename T>
void TransposeTile(const T* src, T* dst, int64_t rows, int64_t cols, int64_t i0, int64_t i1,
                   int64_t j0, int64_t j1) {
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t j = j0; j < j1; ++j) dst[j * rows + i] = src[i * cols + j];
  }
}

// 4-byte elements: 8 x 8 blocks through registers (three rounds of shuffles), so each block is
// 8 vector loads and 8 vector stores instead of 64 of each; the rest element by element. The
// tiled loop moved 12544 x 48 floats in 170-235 us, the blocks in 132 us (one thread, -O3).
typedef uint32_t Lanes8 __attribute__((vector_size(32)));
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
void TransposeTile(const uint32_t* src, uint32_t* dst, int64_t rows, int64_t cols, int64_t i0,
                   int64_t i1, int64_t j0, int64_t j1) {
  int64_t i = i0;
  for (; i + 8 <= i1; i += 8) {
    int64_t j = j0;
    for (; j + 8 <= j1; j += 8) {
      Lanes8 r[8];
      for (int k = 0; k < 8; ++k) std::memcpy(&r[k], src + (i + k) * cols + j, sizeof(Lanes8));
      // Pairs of rows interleaved, then pairs of pairs, then the two halves of four.
      Lanes8 t[8], u[8];
      for (int k = 0; k < 8; k += 2) {
        t[k] = __builtin_shufflevector(r[k], r[k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[k + 1] = __builtin_shufflevector(r[k], r[k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
      }
      for (int k = 0; k < 8; k += 4) {
        u[k] = __builtin_shufflevector(t[k], t[k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[k + 1] = __builtin_shufflevector(t[k], t[k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[k + 2] = __builtin_shufflevector(t[k + 1], t[k + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[k + 3] = __builtin_shufflevector(t[k + 1], t[k + 3], 2, 3, 10, 11, 6, 7, 14, 15);
      }
      for (int k = 0; k < 4; ++k) {
        const Lanes8 low = __builtin_shufflevector(u[k], u[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        const Lanes8 high = __builtin_shufflevector(u[k], u[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
        std::memcpy(dst + (j + k) * rows + i, &low, sizeof(Lanes8));
        std::memcpy(dst + (j + k + 4) * rows + i, &high, sizeof(Lanes8));
      }
    }
    for (; j < j1; ++j) {
      for (int k = 0; k < 8; ++k) dst[j * rows + i + k] = src[(i + k) * cols + j];
    }
  }
  for (; i < i1; ++i) {
    for (int64_t j = j0; j < j1; ++j) dst[j * rows + i] = src[i * cols + j];
  }
}

// dst[n][j][i] = src[n][i][j] for `batch` matrices of rows x cols elements, in tiles so both
// sides stay in cache; the bands of kTile rows of all the matrices are spread over `pool`.
template <typename T>
void TransposeBatched(const T* src, T* dst, int64_t batch, int64_t rows, int64_t cols,
                      ThreadPool* pool) {
  constexpr int64_t kTile = 32;
  // Bands of kTile columns (of the source) when there are fewer row bands than threads: the first
  // Conv's input has 3 rows (channels) of 50176 columns (pixels).
  const bool by_columns = rows < 2 * kTile;
  const int64_t band = by_columns ? 16 * kTile : kTile;
  const int64_t bands = ((by_columns ? cols : rows) + band - 1) / band;
  ParallelFor(pool, batch * bands, [&](int64_t task) {
    const int64_t n = task / bands, b = task % bands;
    const T* s = src + n * rows * cols;
    T* d = dst + n * rows * cols;
    const int64_t i_begin = by_columns ? 0 : b * band,
                  i_end = by_columns ? rows : std::min(rows, i_begin + band);
    const int64_t j_begin = by_columns ? b * band : 0,
                  j_end = by_columns ? std::min(cols, j_begin + band) : cols;
    for (int64_t i0 = i_begin; i0 < i_end; i0 += kTile) {
      const int64_t i1 = std::min(i_end, i0 + kTile);
      for (int64_t j0 = j_begin; j0 < j_end; j0 += kTile) {
        TransposeTile(s, d, rows, cols, i0, i1, j0, std::min(j_end, j0 + kTile));
      }
    }
  });
}

// An image's few planes (C = 2..4 channels: RGB inputs, masks) to pixels, [C][hw] -> [hw][C], or
// back (`to_planes`), for pixels [begin, end). With C a constant GCC vectorises the interleave
// with shuffles; the tiled loop above moves one element at a time: 3 x 224 x 224 floats took 44
// instead of 9 us on one thread.
template <int C>
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
void InterleavePlanes(const uint32_t* __restrict src, uint32_t* __restrict dst, int64_t hw,
                      int64_t begin, int64_t end, bool to_planes) {
  if (to_planes) {
    for (int64_t j = begin; j < end; ++j) {
      for (int i = 0; i < C; ++i) dst[i * hw + j] = src[j * C + i];
    }
  } else {
    for (int64_t j = begin; j < end; ++j) {
      for (int i = 0; i < C; ++i) dst[j * C + i] = src[i * hw + j];
    }
  }
}

// TransposeBatched for 4-byte elements when one side has 2..4 rows; false when neither has.
bool TransposeFewPlanes(const uint32_t* src, uint32_t* dst, int64_t batch, int64_t rows,
                        int64_t cols, ThreadPool* pool) {
  const bool to_pixels = rows >= 2 && rows <= 4;
  if (!to_pixels && !(cols >= 2 && cols <= 4)) return false;
  const int channels = static_cast<int>(to_pixels ? rows : cols);
  const int64_t hw = to_pixels ? cols : rows;
  constexpr int64_t kChunk = 16384;  // pixels per task
  const int64_t chunks = (hw + kChunk - 1) / kChunk;
  ParallelFor(pool, batch * chunks, [&](int64_t task) {
    const int64_t n = task / chunks, begin = (task % chunks) * kChunk;
    const int64_t end = std::min(hw, begin + kChunk);
    const uint32_t* s = src + n * rows * cols;
    uint32_t* d = dst + n * rows * cols;
    switch (channels) {
      case 2:
        InterleavePlanes<2>(s, d, hw, begin, end, !to_pixels);
        break;
      case 3:
        InterleavePlanes<3>(s, d, hw, begin, end, !to_pixels);
        break;
      default:
        InterleavePlanes<4>(s, d, hw, begin, end, !to_pixels);
        break;
    }
  });
  return true;
}

void Transpose(const Value& src, Value* dst, int64_t batch, int64_t rows, int64_t cols,
               ThreadPool* pool) {
  if (ElementSize(src.dtype()) == 4 &&
      TransposeFewPlanes(src.data<uint32_t>(), dst->mutable_data<uint32_t>(), batch, rows, cols,
                         pool)) {
    return;
  }
  switch (ElementSize(src.dtype())) {
    case 1:
      TransposeBatched(src.data<uint8_t>(), dst->mutable_data<uint8_t>(), batch, rows, cols, pool);
      break;
    case 2:
      TransposeBatched(src.data<uint16_t>(), dst->mutable_data<uint16_t>(), batch, rows, cols,
                       pool);
      break;
    case 4:
      TransposeBatched(src.data<uint32_t>(), dst->mutable_data<uint32_t>(), batch, rows, cols,
                       pool);
      break;
    default:
      TransposeBatched(src.data<uint64_t>(), dst->mutable_data<uint64_t>(), batch, rows, cols,
                       pool);
      break;
  }
}

}  // namespace

Value ToRowMajor(const Value& v, ThreadPool* pool) {
  if (!v.channels_last()) return v;
  const int64_t n = v.dim(0), c = v.dim(1), hw = v.dim(2) * v.dim(3);
  if (hw == 1 || c == 1) return v.WithLayout(Layout::kRowMajor);  // same bytes either way
  Value out = Value::Allocate(v.dtype(), v.shape());
  Transpose(v, &out, n, hw, c, pool);  // [n][hw][c] -> [n][c][hw]
  return out;
}

Value ToChannelsLast(const Value& v, ThreadPool* pool) {
  if (v.channels_last()) return v;
  const int64_t n = v.dim(0), c = v.dim(1), hw = v.dim(2) * v.dim(3);
  if (hw == 1 || c == 1) return v.WithLayout(Layout::kChannelsLast);
  Value out = Value::Allocate(v.dtype(), v.shape());
  Transpose(v, &out, n, c, hw, pool);  // [n][c][hw] -> [n][hw][c]
  return out.WithLayout(Layout::kChannelsLast);
}

bool MostlyChannelsLast(const Inputs& values) {
  size_t channels_last_bytes = 0, total_bytes = 0;
  for (const Value* v : values) {
    total_bytes += v->byte_size();
    if (v->channels_last()) channels_last_bytes += v->byte_size();
  }
  return channels_last_bytes > 0 && 2 * channels_last_bytes >= total_bytes;
}

Value PhysicalView(const Value& v) {
  if (!v.channels_last()) return v;
  return v.WithLayout(Layout::kRowMajor).Reshaped({v.dim(0), v.dim(2), v.dim(3), v.dim(1)});
}

#ifndef TESSERA_HAVE_ONEDNN
bool UsingOneDnn() { return false; }
bool FastQLinearConv() { return false; }
std::string OneDnnIsa() { return "none"; }
#endif

}  // namespace tessera::engine::cpu
