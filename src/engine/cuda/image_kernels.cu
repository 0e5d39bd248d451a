// Own CUDA kernels of the image-to-image ops (see image_kernels.h for the contracts): grid-stride
// loops with one output element per iteration for Pad and Resize, one block per plane for
// InstanceNormalization (the row-reduction pattern of kernels.cu). FP16 storage is converted to
// FP32 on load and back on store.
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "engine/cuda/image_kernels.h"
#include "engine/cuda/kernel_util.cuh"

namespace tessera::engine::cuda {
namespace {

using detail::Blocks;
using detail::ForElem;
using detail::kThreads;
using detail::Load;
using detail::Store;

// ---- Pad ----------------------------------------------------------------------------------------

template <typename T>
__global__ void PadKernel(const T* x, T* y, int64_t n, PadGeometry g) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, offset = 0, stride = 1;
    bool inside = true;
    for (int d = g.rank - 1; d >= 0 && inside; --d) {
      const int64_t len = g.in[d];
      int64_t c = rest % g.out[d] - g.pad_begin[d];
      rest /= g.out[d];
      if (c < 0 || c >= len) {
        if (g.mode == PadMode::kConstant) {
          inside = false;
        } else if (g.mode == PadMode::kEdge) {
          c = c < 0 ? 0 : len - 1;
        } else {  // reflect about the edge element, which is not repeated
          c = c < 0 ? -c : 2 * (len - 1) - c;
        }
      }
      offset += c * stride;
      stride *= len;
    }
    Store(y, i, inside ? Load(x, offset) : g.value);
  }
}

// ---- Resize -------------------------------------------------------------------------------------

// The source coordinate of output index x along an axis of in_len, by the ONNX Resize spec
// (coordinate_transformation_mode) and in the CPU kernel's operation order (cpu/resize.cc
// SourceCoordinate): length_resized is in_len * scale, unrounded. The _rn intrinsics keep nvcc
// from contracting a product and a sum into an FMA, which the host does not do either, so that
// both backends get the same bits (nearest rounding is discontinuous at ties).
__device__ __forceinline__ double SourceCoordinate(ResizeTransform t, int64_t x, double scale,
                                                   int64_t in_len) {
  const double xd = static_cast<double>(x);
  const double out_len = __dmul_rn(static_cast<double>(in_len), scale);
  switch (t) {
    case ResizeTransform::kHalfPixel:
      return __dsub_rn(__ddiv_rn(__dadd_rn(xd, 0.5), scale), 0.5);
    case ResizeTransform::kPytorchHalfPixel:
      return out_len > 1 ? __dsub_rn(__ddiv_rn(__dadd_rn(xd, 0.5), scale), 0.5) : 0.0;
    case ResizeTransform::kAlignCorners:
      return out_len == 1 ? 0.0
                          : __ddiv_rn(__dmul_rn(xd, static_cast<double>(in_len - 1)),
                                      __dsub_rn(out_len, 1.0));
    case ResizeTransform::kTfHalfPixelForNn:
      return __ddiv_rn(__dadd_rn(xd, 0.5), scale);
    case ResizeTransform::kAsymmetric:
    default:
      return __ddiv_rn(xd, scale);
  }
}

__device__ __forceinline__ int64_t Clamp(int64_t i, int64_t len) {
  return i < 0 ? 0 : (i >= len ? len - 1 : i);
}

// The ONNX nearest_mode rounding of source coordinate x (cpu/resize.cc NearestIndex), clamped.
__device__ __forceinline__ int64_t NearestSource(NearestMode m, double x, double scale,
                                                 int64_t in_len) {
  const double below = floor(x);
  double r;
  switch (m) {
    case NearestMode::kLegacy:
      r = scale < 1.0 ? ceil(x) : below;
      break;
    case NearestMode::kFloor:
      r = below;
      break;
    case NearestMode::kCeil:
      r = ceil(x);
      break;
    default:
      if (__dsub_rn(x, below) == 0.5) {
        r = m == NearestMode::kRoundPreferFloor ? below : below + 1;
      } else {
        r = round(x);  // not a tie, so the direction of round's ties does not matter
      }
  }
  return Clamp(static_cast<int64_t>(r), in_len);
}

// Linear taps at floor(x) and floor(x) + 1, clamped to the input (the spec's edge padding), with
// weights 1 - ratio and ratio rounded to FP32 as the CPU kernel does.
struct LinearTaps {
  int64_t i0, i1;
  float w0, w1;
};

__device__ __forceinline__ LinearTaps LinearSource(double x, int64_t in_len) {
  const double below = floor(x);
  const double ratio = __dsub_rn(x, below);
  const int64_t base = static_cast<int64_t>(below);
  return {Clamp(base, in_len), Clamp(base + 1, in_len), static_cast<float>(1.0 - ratio),
          static_cast<float>(ratio)};
}

template <typename T>
__global__ void ResizeNearestKernel(const T* x, T* y, ResizeGeometry g) {
  const int64_t n = g.planes * g.oh * g.ow;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, plane = i / (g.ow * g.oh);
    const int64_t sy =
        NearestSource(g.nearest, SourceCoordinate(g.transform, oy, g.scale_h, g.h), g.scale_h, g.h);
    const int64_t sx =
        NearestSource(g.nearest, SourceCoordinate(g.transform, ox, g.scale_w, g.w), g.scale_w, g.w);
    Store(y, i, Load(x, (plane * g.h + sy) * g.w + sx));
  }
}

template <typename T>
__global__ void ResizeLinearKernel(const T* x, T* y, ResizeGeometry g) {
  const int64_t n = g.planes * g.oh * g.ow;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, plane = i / (g.ow * g.oh);
    const LinearTaps ty = LinearSource(SourceCoordinate(g.transform, oy, g.scale_h, g.h), g.h);
    const LinearTaps tx = LinearSource(SourceCoordinate(g.transform, ox, g.scale_w, g.w), g.w);
    const T* in = x + plane * g.h * g.w;
    // Along W first, then H: the CPU's pass order, so the roundings match up to FMA contraction.
    const float top = tx.w0 * Load(in, ty.i0 * g.w + tx.i0) + tx.w1 * Load(in, ty.i0 * g.w + tx.i1);
    const float bottom =
        tx.w0 * Load(in, ty.i1 * g.w + tx.i0) + tx.w1 * Load(in, ty.i1 * g.w + tx.i1);
    Store(y, i, ty.w0 * top + ty.w1 * bottom);
  }
}

// ---- InstanceNormalization ----------------------------------------------------------------------

// Sum of `v` over the block (kernels.cu's BlockReduce, sum only); every thread gets the result.
// blockDim.x is a multiple of 32 and at most 1024.
__device__ float BlockSum(float v, float* shared) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  __syncthreads();  // `shared` may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : 0.f;
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename T>
__global__ void InstanceNormKernel(const T* x, const T* scale, const T* bias, T* y, int64_t cols,
                                   int64_t channels, float eps) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const int64_t c = row % channels;
  const T* in = x + row * cols;
  T* out = y + row * cols;
  float sum = 0.f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) sum += Load(in, i);
  const float mean = BlockSum(sum, shared) / static_cast<float>(cols);
  // Two passes (mean, then squared deviations), as the CPU: no cancellation for large means.
  float sq = 0.f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    const float d = Load(in, i) - mean;
    sq += d * d;
  }
  const float var = BlockSum(sq, shared) / static_cast<float>(cols);
  // y = x * s + (B - mean * s): the CPU kernel's affine form.
  const float s = Load(scale, c) * rsqrtf(var + eps);
  const float shift = Load(bias, c) - mean * s;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) Store(out, i, Load(in, i) * s + shift);
}

// Threads per plane: enough to cover small planes, at most 1024, a multiple of 32.
unsigned int RowThreads(int64_t cols) {
  int64_t t = 32;
  while (t < cols && t < 1024) t *= 2;
  return static_cast<unsigned int>(t);
}

}  // namespace

cudaError_t LaunchPad(Elem t, const void* x, void* y, const PadGeometry& g, cudaStream_t stream) {
  int64_t n = 1;
  for (int d = 0; d < g.rank; ++d) n *= g.out[d];
  if (n == 0) return cudaSuccess;
  return ForElem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    PadKernel<T>
        <<<Blocks(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n, g);
  });
}

cudaError_t LaunchResize2d(Elem t, const void* x, void* y, const ResizeGeometry& g,
                           cudaStream_t stream) {
  const int64_t n = g.planes * g.oh * g.ow;
  if (n == 0 || g.h == 0 || g.w == 0) return cudaSuccess;
  return ForElem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (g.linear) {
      ResizeLinearKernel<T>
          <<<Blocks(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), g);
    } else {
      ResizeNearestKernel<T>
          <<<Blocks(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), g);
    }
  });
}

cudaError_t LaunchInstanceNorm(Elem t, const void* x, const void* scale, const void* bias, void* y,
                               int64_t rows, int64_t cols, int64_t channels, float eps,
                               cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return ForElem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    InstanceNormKernel<T><<<static_cast<unsigned int>(rows), RowThreads(cols), 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const T*>(bias),
        static_cast<T*>(y), cols, channels, eps);
  });
}

}  // namespace tessera::engine::cuda
