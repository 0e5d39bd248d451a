// What an integer convolution with UINT8 weights W (zero point zW) needs when oneDNN multiplies
// by W - 128 instead (its weights are INT8): each output value lacks (128 - zW) times the sum of
// x - zX over its window in its group's channels. Used by dnnl_integer_conv.cc.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/cpu/ops.h"
#include "engine/value.h"

namespace tessera::engine::cpu {

// (128 - zW) = `w_shift` times the sum of x - zX over each output pixel's window in each group's
// channels, for channels-last 8-bit x [N, C, H, W] in `groups` groups: [N, oh, ow, groups].
std::unique_ptr<int32_t[]> WindowCorrections(const Value& x, int64_t groups, int64_t kh, int64_t kw,
                                             const Window2d& win, int64_t oh, int64_t ow,
                                             int32_t x_zero, int32_t w_shift, ThreadPool* pool);

// The FP32 output of `pixels` pixels of `channels` INT32 sums in `groups` groups, in place, as
// RunConvIntegerToFloat computes it: (the sum + the pixel's correction for the channel's group) as
// FP32, times the channel's scale, plus its bias and the residual (either may be null), then with
// `clamp` clamped to [lo, hi] (a fused Relu or Clip).
void FinishShiftedSums(int32_t* sums, const int32_t* corrections, int64_t pixels, int64_t channels,
                       int64_t groups, const float* scales, const float* biases,
                       const float* residual, bool clamp, float lo, float hi);

}  // namespace tessera::engine::cpu
