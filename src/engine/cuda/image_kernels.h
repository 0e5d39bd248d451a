// The CUDA backend's kernels for image-to-image ops (image_kernels.cu): Pad, Resize (2-D nearest
// and linear) and InstanceNormalization, behind plain C++ launchers like kernels.h's (enqueue on
// `stream`, return cudaGetLastError() of the launch, do nothing for empty tensors). Storage is FP32
// or FP16 (`Elem`); math is FP32 in registers, Resize's source coordinates FP64 (see below).
// Thread-safety: stateless; launches on one stream are ordered by it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/cuda/kernels.h"

namespace tessera::engine::cuda {

// ONNX Pad over up to kMaxRank dims: output coordinate o reads input coordinate o - pad_begin[d]
// along each dim; outside the input, kConstant writes `value`, kEdge clamps to the edge and
// kReflect mirrors without repeating the edge (the host checked pads < dim). Negative pads crop.
enum class PadMode { kConstant, kEdge, kReflect };
struct PadGeometry {
  int rank = 0;
  int64_t in[kMaxRank] = {}, out[kMaxRank] = {}, pad_begin[kMaxRank] = {};
  PadMode mode = PadMode::kConstant;
  float value = 0.0f;
};
cudaError_t LaunchPad(Elem t, const void* x, void* y, const PadGeometry& g, cudaStream_t stream);

// ONNX Resize of the two trailing dims of `planes` [h, w] planes into [oh, ow]. Source coordinates
// follow the spec's coordinate_transformation_mode formulas in FP64, as the CPU kernel computes
// them, so that nearest rounding ties land on the same pixel on both backends.
enum class ResizeTransform {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn
};
// kLegacy: Upsample and Resize-10, which round down when upsampling and up when downsampling.
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kLegacy };
struct ResizeGeometry {
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;
  double scale_h = 1, scale_w = 1;  // the spec's scales (output / input), not out / in rounded
  ResizeTransform transform = ResizeTransform::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  bool linear = false;  // bilinear; else nearest
};
cudaError_t LaunchResize2d(Elem t, const void* x, void* y, const ResizeGeometry& g,
                           cudaStream_t stream);

// InstanceNormalization over `rows` = N * C planes of `cols` elements each:
// y = scale[c] * (x - mean) / sqrt(var + eps) + bias[c] with c = row % channels.
cudaError_t LaunchInstanceNorm(Elem t, const void* x, const void* scale, const void* bias, void* y,
                               int64_t rows, int64_t cols, int64_t channels, float eps,
                               cudaStream_t stream);

}  // namespace tessera::engine::cuda
