// How a channels-last convolution is cut into parts that run on the engine's threads at once,
// each as a single-threaded oneDNN primitive over its own images or output rows.
//
// oneDNN (Debian's build) threads with OpenMP, whose PASSIVE workers sleep between parallel
// regions; waking one costs 25-30 us on a VM, as much as a late MobileNet convolution takes.
// Running the parts on the engine's pool instead lets its workers spin for the next node while a
// model runs and sleep when it ends (ThreadPool::RunScope): mnasnet at batch 1 went from 3.2 to
// 1.8 ms on 2 threads (bench/results/2026-11-24-engine-cpu-pool-spin-and-sliced-conv.md).
//
// Every part is dense NHWC memory (oneDNN's fast kernels refuse strided views and fall back to
// its reference convolution): whole images, or a run of output rows of one image together with
// the input rows they read. A 1x1 stride-1 unpadded convolution is cut by pixels: its image is
// viewed as [H*W, 1], so the parts differ by at most one pixel.
//
// A convolution whose weights outnumber its activations (the late layers of a CNN) is cut by
// output channels instead: each part reads all of the input but only its own share of the
// weights, where image or row parts would each read all of them. Each part writes a dense
// temporary that is then copied to its channels of the output.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {

struct ConvGeometry {
  int64_t batch = 1, h = 1, w = 1;  // input
  int64_t oh = 1, ow = 1;           // output
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};

// A 2-D convolution's geometry: input [batch, *, h, w] to output [*, *, oh, ow] by `win`.
inline ConvGeometry GeometryOf(int64_t batch, int64_t h, int64_t w, int64_t oh, int64_t ow,
                               const Window2d& win) {
  return ConvGeometry{batch,
                      h,
                      w,
                      oh,
                      ow,
                      win.kernel_h,
                      win.kernel_w,
                      win.stride_h,
                      win.stride_w,
                      win.dilation_h,
                      win.dilation_w,
                      win.pad_top,
                      win.pad_bottom,
                      win.pad_left,
                      win.pad_right};
}

// One part: images [image, image + images), and of each the output rows
// [out_row, out_row + out_rows) computed from input rows [in_row, in_row + in_rows) with
// pad_top / pad_bottom rows of padding. `h`, `w`, `oh`, `ow` are the dims of the view the part
// is cut from (for a pixel cut, [H*W, 1] and [OH*OW, 1]), so offsets are in rows of that view.
struct ConvSlice {
  int64_t image = 0, images = 1;
  int64_t in_row = 0, in_rows = 0, pad_top = 0, pad_bottom = 0;
  int64_t out_row = 0, out_rows = 0;
  int64_t h = 0, w = 0, oh = 0, ow = 0;
};

// The parts for `threads` threads: one part per thread's share of the images when the batch
// divides evenly, else each image cut into `threads` runs of rows (the pool balances the parts).
// A single part covering everything when `threads` < 2 or the output has too few rows to cut.
std::vector<ConvSlice> SliceConv(const ConvGeometry& g, int threads);

// The parts of a pointwise (1x1, stride 1, unpadded) convolution that adds a residual into its
// output (oneDNN's sum post-op): runs of pixels across all images whose output takes at most
// `chunk_bytes`, a multiple of `threads` of them. Empty when the output is too small for it or the
// convolution is not pointwise: cut with SliceConv. The caller reads each part's residual into
// the cache just before the part runs: oneDNN's 1x1 kernel loads the residual as it stores each
// tile, stalling on every miss, where a plain read loop streams it in at the memory's speed
// (ResNet-50's first-stage residual Convs: 3.4 against 2.4 ms a part on 2 threads).
std::vector<ConvSlice> SliceResidualPointwiseConv(const ConvGeometry& g, int64_t out_channels,
                                                  int threads, int64_t chunk_bytes);

// Output channels [begin, begin + count) of a channel part.
struct ChannelSlice {
  int64_t begin = 0, count = 0;
};

// The channel parts for `threads` threads of an ungrouped convolution with `in_channels` inputs
// and `out_channels` outputs: parts of a multiple of 16 channels (oneDNN's AVX-512 block; the
// last takes the rest), when that moves fewer floats than image or row parts (its weights
// outnumber its input and twice its output, roughly), the weights take 1 MiB or more, and there
// are channels for every thread. Empty otherwise: cut with SliceConv.
std::vector<ChannelSlice> SliceConvChannels(const ConvGeometry& g, int64_t in_channels,
                                            int64_t out_channels, int threads);

// Copies between a part's dense [pixels, count] values and its channels [begin, begin + count)
// of a [pixels, channels] tensor.
void ScatterChannels(const float* part, int64_t pixels, int64_t count, float* whole,
                     int64_t channels, int64_t begin);
void GatherChannels(const float* whole, int64_t pixels, int64_t channels, int64_t begin,
                    int64_t count, float* part);

}  // namespace tessera::engine::cpu
