#include "engine/cpu/shifted_conv_sums.h"

#include <algorithm>
#include <vector>

#include "engine/cpu/dnnl_util.h"

namespace tessera::engine::cpu {
namespace {

// The loops below vectorise; compiled for AVX-512 and AVX2 as well as the baseline.
#if defined(__x86_64__) && defined(__GNUC__)
#define TESSERA_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TESSERA_VECTOR_CLONES
#endif

// The sums and their corrections in 32-bit two's complement, as the INT32 sum of their products
// would be: a deep layer's shifted sum and its correction may each pass 2^31 where their total,
// the real sum, does not.
inline int32_t WrappingSum(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
inline int32_t WrappingProduct(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}

// Each group's sum of x - zX at each of a row's `w` pixels (`row`: channels-last bytes of `cin`
// channels a pixel): sums[x * groups + g].
TESSERA_VECTOR_CLONES
void PixelGroupSums(const uint8_t* row, int64_t w, int64_t cin, int64_t groups, bool is_signed,
                    int32_t x_zero, int32_t* sums) {
  const int64_t per_group = cin / groups;
  if (per_group == 1) {  // depthwise: each group is one channel
    const int64_t n = w * cin;
    if (is_signed) {
      for (int64_t i = 0; i < n; ++i) sums[i] = static_cast<int8_t>(row[i]) - x_zero;
    } else {
      for (int64_t i = 0; i < n; ++i) sums[i] = static_cast<int32_t>(row[i]) - x_zero;
    }
    return;
  }
  const auto zero_sum = static_cast<int32_t>(per_group * x_zero);
  for (int64_t i = 0; i < w * groups; ++i) {
    const uint8_t* group = row + i * per_group;
    int32_t sum = 0;
    if (per_group >= 64) {
      sum = EightBitRowSum(group, per_group, is_signed);
    } else if (is_signed) {
      for (int64_t c = 0; c < per_group; ++c) sum += static_cast<int8_t>(group[c]);
    } else {
      for (int64_t c = 0; c < per_group; ++c) sum += group[c];
    }
    sums[i] = sum - zero_sum;
  }
}

// One input row's sums over each output column's window columns, from its pixels' group sums:
// across[ox * groups + g].
TESSERA_VECTOR_CLONES
void WindowColumnSums(const int32_t* pixels, int64_t w, int64_t groups, int64_t kw,
                      const Window2d& win, int64_t ow, int32_t* across) {
  for (int64_t ox = 0; ox < ow; ++ox) {
    int32_t* sums = across + ox * groups;
    std::fill(sums, sums + groups, 0);
    for (int64_t kj = 0; kj < kw; ++kj) {
      const int64_t ix = ox * win.stride_w - win.pad_left + kj * win.dilation_w;
      if (ix < 0 || ix >= w) continue;
      const int32_t* pixel = pixels + ix * groups;
      for (int64_t g = 0; g < groups; ++g) sums[g] += pixel[g];
    }
  }
}

// One output row's `values` corrections: `w_shift` times the sums of the `count` rows of column
// sums in `rows` (null for rows in the padding).
TESSERA_VECTOR_CLONES
void WindowRowSums(const int32_t* const* rows, int64_t count, int64_t values, int32_t w_shift,
                   int32_t* out) {
  std::fill(out, out + values, 0);
  for (int64_t r = 0; r < count; ++r) {
    if (rows[r] == nullptr) continue;
    const int32_t* row = rows[r];
    for (int64_t i = 0; i < values; ++i) out[i] += row[i];
  }
  for (int64_t i = 0; i < values; ++i) out[i] = WrappingProduct(out[i], w_shift);
}

// Tasks for `rows` rows of each of `batch` images: enough blocks of rows for every thread.
int64_t RowBlocks(int64_t batch, int64_t rows, int threads) {
  return std::clamp<int64_t>((4 * threads + batch - 1) / batch, 1, std::max<int64_t>(rows, 1));
}

}  // namespace

// A window's sums are taken in two passes, each over rows in parallel: along each input row the
// sums over the window's columns, then down each output column the sums of those over the
// window's rows. Each is at most 255 times the window's size in values: no overflow in 32 bits.
std::unique_ptr<int32_t[]> WindowCorrections(const Value& x, int64_t groups, int64_t kh, int64_t kw,
                                             const Window2d& win, int64_t oh, int64_t ow,
                                             int32_t x_zero, int32_t w_shift, ThreadPool* pool) {
  const int64_t batch = x.dim(0), cin = x.dim(1), h = x.dim(2), w = x.dim(3);
  const bool is_signed = x.dtype() == DataType::kInt8;
  const uint8_t* bytes = x.data<uint8_t>();
  const int threads = pool != nullptr ? pool->usable_threads() : 1;
  // The input rows some window reads.
  std::vector<char> read(static_cast<size_t>(h), 0);
  for (int64_t oy = 0; oy < oh; ++oy) {
    for (int64_t ki = 0; ki < kh; ++ki) {
      const int64_t iy = oy * win.stride_h - win.pad_top + ki * win.dilation_h;
      if (iy >= 0 && iy < h) read[iy] = 1;
    }
  }
  // A window of one column at each pixel: the column sums are the pixels' group sums.
  const bool pixelwise =
      kw == 1 && win.stride_w == 1 && win.pad_left == 0 && win.pad_right == 0 && ow == w;
  // across[((n * h + y) * ow + ox) * groups + g]: the sums over output column ox's window columns.
  const int64_t row_values = ow * groups;
  std::unique_ptr<int32_t[]> across(new int32_t[batch * h * row_values]);
  const int64_t in_blocks = RowBlocks(batch, h, threads);
  ParallelFor(pool, batch * in_blocks, [&](int64_t task) {
    const int64_t n = task / in_blocks, block = task % in_blocks;
    std::vector<int32_t> pixels(pixelwise ? 0 : static_cast<size_t>(w * groups));
    for (int64_t y = h * block / in_blocks; y < h * (block + 1) / in_blocks; ++y) {
      if (!read[y]) continue;
      int32_t* row = &across[(n * h + y) * row_values];
      const uint8_t* row_bytes = bytes + (n * h + y) * w * cin;
      if (pixelwise) {
        PixelGroupSums(row_bytes, w, cin, groups, is_signed, x_zero, row);
      } else {
        PixelGroupSums(row_bytes, w, cin, groups, is_signed, x_zero, pixels.data());
        WindowColumnSums(pixels.data(), w, groups, kw, win, ow, row);
      }
    }
  });
  std::unique_ptr<int32_t[]> out(new int32_t[batch * oh * row_values]);
  const int64_t out_blocks = RowBlocks(batch, oh, threads);
  ParallelFor(pool, batch * out_blocks, [&](int64_t task) {
    const int64_t n = task / out_blocks, block = task % out_blocks;
    std::vector<const int32_t*> rows(static_cast<size_t>(kh));
    for (int64_t oy = oh * block / out_blocks; oy < oh * (block + 1) / out_blocks; ++oy) {
      for (int64_t ki = 0; ki < kh; ++ki) {
        const int64_t iy = oy * win.stride_h - win.pad_top + ki * win.dilation_h;
        rows[ki] = iy >= 0 && iy < h ? &across[(n * h + iy) * row_values] : nullptr;
      }
      WindowRowSums(rows.data(), kh, row_values, w_shift, &out[(n * oh + oy) * row_values]);
    }
  });
  return out;
}

// Pass by pass over each pixel's channels, so that each loop vectorises.
TESSERA_VECTOR_CLONES
void FinishShiftedSums(int32_t* sums, const int32_t* corrections, int64_t pixels, int64_t channels,
                       int64_t groups, const float* scales, const float* biases,
                       const float* residual, bool clamp, float lo, float hi) {
  const int64_t per_group = channels / groups;
  for (int64_t p = 0; p < pixels; ++p) {
    const int32_t* sum = sums + p * channels;
    float* out = reinterpret_cast<float*>(sums) + p * channels;
    const int32_t* correction = corrections + p * groups;
    if (groups == 1) {
      for (int64_t m = 0; m < channels; ++m) {
        out[m] = static_cast<float>(WrappingSum(sum[m], correction[0])) * scales[m];
      }
    } else if (per_group == 1) {
      for (int64_t m = 0; m < channels; ++m) {
        out[m] = static_cast<float>(WrappingSum(sum[m], correction[m])) * scales[m];
      }
    } else {
      for (int64_t m = 0; m < channels; ++m) {
        out[m] = static_cast<float>(WrappingSum(sum[m], correction[m / per_group])) * scales[m];
      }
    }
    if (biases != nullptr) {
      for (int64_t m = 0; m < channels; ++m) out[m] += biases[m];
    }
    if (residual != nullptr) {
      const float* r = residual + p * channels;
      for (int64_t m = 0; m < channels; ++m) out[m] += r[m];
    }
    if (clamp) {
      for (int64_t m = 0; m < channels; ++m) out[m] = std::min(std::max(out[m], lo), hi);
    }
  }
}

}  // namespace tessera::engine::cpu
