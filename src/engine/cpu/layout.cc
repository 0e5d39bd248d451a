// Conversions between row-major (NCHW) and channels-last (NHWC) 4-D values; see value.h Layout.
#include <algorithm>

#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

// dst[n][j][i] = src[n][i][j] for `batch` matrices of rows x cols elements of `bytes` each,
// in tiles so both sides stay in cache.
template <typename T>
void TransposeBatched(const T* src, T* dst, int64_t batch, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t n = 0; n < batch; ++n) {
    const T* s = src + n * rows * cols;
    T* d = dst + n * rows * cols;
    for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
      const int64_t i1 = std::min(rows, i0 + kTile);
      for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
        const int64_t j1 = std::min(cols, j0 + kTile);
        for (int64_t i = i0; i < i1; ++i) {
          for (int64_t j = j0; j < j1; ++j) d[j * rows + i] = s[i * cols + j];
        }
      }
    }
  }
}

void Transpose(const Value& src, Value* dst, int64_t batch, int64_t rows, int64_t cols) {
  switch (ElementSize(src.dtype())) {
    case 1:
      TransposeBatched(src.data<uint8_t>(), dst->mutable_data<uint8_t>(), batch, rows, cols);
      break;
    case 2:
      TransposeBatched(src.data<uint16_t>(), dst->mutable_data<uint16_t>(), batch, rows, cols);
      break;
    case 4:
      TransposeBatched(src.data<uint32_t>(), dst->mutable_data<uint32_t>(), batch, rows, cols);
      break;
    default:
      TransposeBatched(src.data<uint64_t>(), dst->mutable_data<uint64_t>(), batch, rows, cols);
      break;
  }
}

}  // namespace

Value ToRowMajor(const Value& v) {
  if (!v.channels_last()) return v;
  const int64_t n = v.dim(0), c = v.dim(1), hw = v.dim(2) * v.dim(3);
  if (hw == 1 || c == 1) return v.WithLayout(Layout::kRowMajor);  // same bytes either way
  Value out = Value::Allocate(v.dtype(), v.shape());
  Transpose(v, &out, n, hw, c);  // [n][hw][c] -> [n][c][hw]
  return out;
}

Value ToChannelsLast(const Value& v) {
  if (v.channels_last()) return v;
  const int64_t n = v.dim(0), c = v.dim(1), hw = v.dim(2) * v.dim(3);
  if (hw == 1 || c == 1) return v.WithLayout(Layout::kChannelsLast);
  Value out = Value::Allocate(v.dtype(), v.shape());
  Transpose(v, &out, n, c, hw);  // [n][c][hw] -> [n][hw][c]
  return out.WithLayout(Layout::kChannelsLast);
}

Value PhysicalView(const Value& v) {
  if (!v.channels_last()) return v;
  return v.WithLayout(Layout::kRowMajor).Reshaped({v.dim(0), v.dim(2), v.dim(3), v.dim(1)});
}

#ifndef TESSERA_HAVE_ONEDNN
bool UsingOneDnn() { return false; }
std::string OneDnnIsa() { return "none"; }
#endif

}  // namespace tessera::engine::cpu
