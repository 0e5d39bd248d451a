#include "engine/cpu/conv_slices.h"

#include <algorithm>
#include <cstring>

namespace tessera::engine::cpu {
namespace {

// The rows of one image a run of output rows [out_row, out_row + out_rows) reads, in a view of
// `h` input rows: clipped to the image, with the padding the clipped-off rows become.
ConvSlice RowSlice(const ConvGeometry& g, int64_t h, int64_t oh, int64_t w, int64_t ow,
                   int64_t out_row, int64_t out_rows) {
  ConvSlice s;
  s.h = h;
  s.w = w;
  s.oh = oh;
  s.ow = ow;
  s.out_row = out_row;
  s.out_rows = out_rows;
  const int64_t first = out_row * g.stride_h - g.pad_top;
  const int64_t end =
      (out_row + out_rows - 1) * g.stride_h - g.pad_top + (g.kernel_h - 1) * g.dilation_h + 1;
  s.in_row = std::max<int64_t>(first, 0);
  s.in_rows = std::min(end, h) - s.in_row;
  s.pad_top = s.in_row - first;
  s.pad_bottom = end - std::min(end, h);
  return s;
}

// A 1x1 stride-1 unpadded convolution: its pixels can be cut anywhere.
bool Pointwise(const ConvGeometry& g) {
  return g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 &&
         g.pad_top == 0 && g.pad_bottom == 0 && g.pad_left == 0 && g.pad_right == 0;
}

}  // namespace

std::vector<ConvSlice> SliceConv(const ConvGeometry& g, int threads) {
  const bool pixels = Pointwise(g);
  // The view parts are cut from: rows of pixels for a pointwise convolution.
  const int64_t h = pixels ? g.h * g.w : g.h, w = pixels ? 1 : g.w;
  const int64_t oh = pixels ? g.oh * g.ow : g.oh, ow = pixels ? 1 : g.ow;
  ConvSlice whole;
  whole.images = g.batch;
  whole.in_rows = h;
  whole.pad_top = pixels ? 0 : g.pad_top;
  whole.pad_bottom = pixels ? 0 : g.pad_bottom;
  whole.out_rows = oh;
  whole.h = h;
  whole.w = w;
  whole.oh = oh;
  whole.ow = ow;
  if (threads < 2) return {whole};
  std::vector<ConvSlice> slices;
  if (g.batch % threads == 0) {
    const int64_t per = g.batch / threads;
    for (int t = 0; t < threads; ++t) {
      ConvSlice s = whole;
      s.image = t * per;
      s.images = per;
      slices.push_back(s);
    }
    return slices;
  }
  if (oh < threads) return {whole};
  for (int64_t image = 0; image < g.batch; ++image) {
    for (int t = 0; t < threads; ++t) {
      const int64_t begin = oh * t / threads, end = oh * (t + 1) / threads;
      ConvSlice s = RowSlice(g, h, oh, w, ow, begin, end - begin);
      if (s.in_rows <= 0) return {whole};  // rows that read only padding: not worth a case
      s.image = image;
      slices.push_back(s);
    }
  }
  return slices;
}

std::vector<ConvSlice> SliceResidualPointwiseConv(const ConvGeometry& g, int64_t out_channels,
                                                  int threads, int64_t chunk_bytes) {
  threads = std::max(threads, 1);
  const int64_t pixels = g.batch * g.oh * g.ow;  // NHWC images lie one after the other
  const int64_t bytes = pixels * out_channels * static_cast<int64_t>(sizeof(float));
  if (!Pointwise(g) || chunk_bytes <= 0 || bytes <= threads * chunk_bytes) return {};
  int64_t parts = (bytes + chunk_bytes - 1) / chunk_bytes;
  parts = (parts + threads - 1) / threads * threads;
  std::vector<ConvSlice> slices;
  for (int64_t i = 0; i < parts; ++i) {
    const int64_t begin = pixels * i / parts, end = pixels * (i + 1) / parts;
    ConvSlice s;
    s.h = s.oh = pixels;
    s.w = s.ow = 1;
    s.in_row = s.out_row = begin;
    s.in_rows = s.out_rows = end - begin;
    slices.push_back(s);
  }
  return slices;
}

std::vector<ChannelSlice> SliceConvChannels(const ConvGeometry& g, int64_t in_channels,
                                            int64_t out_channels, int threads) {
  constexpr int64_t kBlock = 16;
  if (threads < 2 || out_channels < threads * kBlock) return {};
  // Floats moved with T threads: image or row parts each read all weights W and their share of
  // the input X and output Y (T*W + X + Y); channel parts each read all of X, their share of W,
  // and write their Y share twice, to the temporary and into place (W + T*X + 3*Y). Channels
  // win when W > X + 2*Y / (T - 1).
  const int64_t weights = out_channels * in_channels * g.kernel_h * g.kernel_w;
  const int64_t input = g.batch * g.h * g.w * in_channels;
  const int64_t output = g.batch * g.oh * g.ow * out_channels;
  // Below 1 MiB of weights the parts' duplicated reads come from the shared cache and cost less
  // than copying each part's output into place: mobilenetv2 at batch 1 took 2.35 ms against
  // 2.14 ms on 2 threads with its 14 pointwise Convs whose weights (0.09-1.56 MiB) outnumber
  // their outputs cut by channels rather than pixels.
  constexpr int64_t kMinWeights = 256 * 1024;
  if (weights < kMinWeights || weights <= input + 2 * output / (threads - 1)) return {};
  const int64_t blocks = (out_channels + kBlock - 1) / kBlock;
  std::vector<ChannelSlice> slices;
  for (int t = 0; t < threads; ++t) {
    const int64_t begin = std::min(out_channels, blocks * t / threads * kBlock);
    const int64_t end = std::min(out_channels, blocks * (t + 1) / threads * kBlock);
    if (end > begin) slices.push_back({begin, end - begin});
  }
  return slices;
}

void ScatterChannels(const float* part, int64_t pixels, int64_t count, float* whole,
                     int64_t channels, int64_t begin) {
  for (int64_t p = 0; p < pixels; ++p) {
    std::memcpy(whole + p * channels + begin, part + p * count, count * sizeof(float));
  }
}

void GatherChannels(const float* whole, int64_t pixels, int64_t channels, int64_t begin,
                    int64_t count, float* part) {
  for (int64_t p = 0; p < pixels; ++p) {
    std::memcpy(part + p * count, whole + p * channels + begin, count * sizeof(float));
  }
}

}  // namespace tessera::engine::cpu
