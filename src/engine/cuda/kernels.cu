// Own CUDA kernels of the engine (see kernels.h for the contracts) other than the elementwise ones
// (elementwise_kernels.cu). Simple, memory-bound forms: grid-stride loops, one block per row for
// row reductions (warp shuffles, then shared memory across warps). FP16 storage is converted to
// FP32 on load and back on store.
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "engine/cuda/kernel_util.cuh"
#include "engine/cuda/kernels.h"

namespace tessera::engine::cuda {
namespace {

using detail::Blocks;
using detail::ForBytes;
using detail::ForElem;
using detail::kThreads;
using detail::Load;
using detail::MapIndex;
using detail::Store;

template <typename T>
__global__ void BatchNormKernel(const T* x, const T* scale, const T* shift, const T* mean,
                                const T* var, float eps, T* y, int64_t n, int64_t channels,
                                int64_t inner) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (i / inner) % channels;
    const float a = Load(scale, c) * rsqrtf(Load(var, c) + eps);
    Store(y, i, (Load(x, i) - Load(mean, c)) * a + Load(shift, c));
  }
}

// Sum (or max) of `v` over the block; every thread gets the result. blockDim.x is a multiple of
// 32 and at most 1024.
template <bool kMax>
__device__ float BlockReduce(float v, float* shared) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  __syncthreads();  // `shared` may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : (kMax ? -INFINITY : 0.f);
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  return v;
}

template <typename T>
__global__ void SoftmaxRowsKernel(const T* x, T* y, int64_t cols) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const T* in = x + row * cols;
  T* out = y + row * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, Load(in, c));
  m = BlockReduce<true>(m, shared);
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(Load(in, c) - m);
  sum = BlockReduce<false>(sum, shared);
  const float inv = 1.f / sum;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) Store(out, c, expf(Load(in, c) - m) * inv);
}

template <typename T>
__global__ void LayerNormRowsKernel(const T* x, const T* gamma, const T* beta, T* y, int64_t cols,
                                    float eps) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const T* in = x + row * cols;
  T* out = y + row * cols;
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += Load(in, c);
  const float mean = BlockReduce<false>(sum, shared) / static_cast<float>(cols);
  // Two passes (mean, then squared deviations): no cancellation for large means.
  float sq = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = Load(in, c) - mean;
    sq += d * d;
  }
  const float var = BlockReduce<false>(sq, shared) / static_cast<float>(cols);
  const float inv = rsqrtf(var + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = (Load(in, c) - mean) * inv * Load(gamma, c);
    if (beta != nullptr) v += Load(beta, c);
    Store(out, c, v);
  }
}

template <typename T>
__global__ void RowMeanKernel(const T* x, T* y, int64_t cols) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += Load(x + row * cols, c);
  sum = BlockReduce<false>(sum, shared);
  if (threadIdx.x == 0) Store(y, row, sum / static_cast<float>(cols));
}

template <typename E>
__global__ void GatherKernel(const E* data, const int64_t* indices, E* out, int64_t outer,
                             int64_t axis_len, int64_t num_indices, int64_t inner, int* error) {
  const int64_t n = outer * num_indices * inner;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t in_i = i % inner;
    const int64_t j = (i / inner) % num_indices;
    const int64_t o = i / (inner * num_indices);
    int64_t idx = indices[j];
    if (idx < 0) idx += axis_len;
    if (idx < 0 || idx >= axis_len) {
      out[i] = E{};
      if (error != nullptr) *error = 1;
      continue;
    }
    out[i] = data[(o * axis_len + idx) * inner + in_i];
  }
}

template <typename E>
__global__ void WhereKernel(const uint8_t* cond, const E* x, const E* y, E* out, int64_t n,
                            IndexMap map) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = cond[MapIndex(map, 0, i)] ? x[MapIndex(map, 1, i)] : y[MapIndex(map, 2, i)];
  }
}

template <typename T>
__global__ void Pool2dKernel(int kind, const T* x, T* y, PoolGeometry g) {
  const int64_t n = g.planes * g.oh * g.ow;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, plane = i / (g.ow * g.oh);
    const T* in = x + plane * g.h * g.w;
    float acc = kind == 0 ? -INFINITY : 0.f;
    int64_t count = 0;
    for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
      const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dilation_h;
      for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
        const int64_t ix = ox * g.stride_w - g.pad_left + kx * g.dilation_w;
        const bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
        if (kind == 2) {
          // Include-pad average counts window positions within the padded input only.
          if (iy < g.h + g.pad_bottom && ix < g.w + g.pad_right) ++count;
        }
        if (!inside) continue;
        const float v = Load(in, iy * g.w + ix);
        if (kind == 0) {
          acc = fmaxf(acc, v);
        } else {
          acc += v;
          if (kind == 1) ++count;
        }
      }
    }
    Store(y, i, kind == 0 ? acc : (count > 0 ? acc / static_cast<float>(count) : 0.f));
  }
}

__global__ void F32ToF16Kernel(const float* x, __half* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = __float2half(x[i]);
  }
}

__global__ void F16ToF32Kernel(const __half* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = __half2float(x[i]);
  }
}

// Cast: every source widened (float, or int64 for integers), then narrowed to the target.
__device__ __forceinline__ float Widen(float v) { return v; }
__device__ __forceinline__ float Widen(__half v) { return __half2float(v); }
__device__ __forceinline__ int64_t Widen(int64_t v) { return v; }
__device__ __forceinline__ int64_t Widen(int32_t v) { return v; }
__device__ __forceinline__ int64_t Widen(uint8_t v) { return v; }

template <typename From, typename To, bool kToBool>
__global__ void CastKernel(const From* x, To* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const auto v = Widen(x[i]);
    if constexpr (kToBool) {
      y[i] = static_cast<To>(v != 0 ? 1 : 0);
    } else if constexpr (std::is_same_v<To, __half>) {
      y[i] = __float2half(static_cast<float>(v));
    } else {
      y[i] = static_cast<To>(v);
    }
  }
}

// Runs `launch` with the storage type of a Cast operand.
template <typename F>
bool ForCastType(CastType t, F launch) {
  switch (t) {
    case CastType::kF32: launch(static_cast<float*>(nullptr)); return true;
    case CastType::kF16: launch(static_cast<__half*>(nullptr)); return true;
    case CastType::kI64: launch(static_cast<int64_t*>(nullptr)); return true;
    case CastType::kI32: launch(static_cast<int32_t*>(nullptr)); return true;
    case CastType::kU8:
    case CastType::kBool: launch(static_cast<uint8_t*>(nullptr)); return true;
  }
  return false;
}

// Threads per row for the row kernels: enough to cover short rows, at most 1024, multiple of 32.
unsigned int RowThreads(int64_t cols) {
  int64_t t = 32;
  while (t < cols && t < 1024) t *= 2;
  return static_cast<unsigned int>(t);
}

}  // namespace

cudaError_t LaunchBatchNorm(Elem t, const void* x, const void* scale, const void* shift,
                            const void* mean, const void* var, float eps, void* y, int64_t n,
                            int64_t channels, int64_t inner, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ForElem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    BatchNormKernel<T><<<Blocks(n), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const T*>(shift),
        static_cast<const T*>(mean), static_cast<const T*>(var), eps, static_cast<T*>(y), n,
        channels, inner);
  });
}

cudaError_t LaunchSoftmaxRows(Elem t, const void* x, void* y, int64_t rows, int64_t cols,
                              cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return ForElem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    SoftmaxRowsKernel<T><<<static_cast<unsigned int>(rows), RowThreads(cols), 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), cols);
  });
}

cudaError_t LaunchLayerNormRows(Elem t, const void* x, const void* gamma, const void* beta,
                                void* y, int64_t rows, int64_t cols, float eps,
                                cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return ForElem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    LayerNormRowsKernel<T><<<static_cast<unsigned int>(rows), RowThreads(cols), 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
        static_cast<T*>(y), cols, eps);
  });
}

cudaError_t LaunchRowMean(Elem t, const void* x, void* y, int64_t rows, int64_t cols,
                          cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  return ForElem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    RowMeanKernel<T><<<static_cast<unsigned int>(rows), RowThreads(cols), 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), cols);
  });
}

cudaError_t LaunchGather(int elem_bytes, const void* data, const int64_t* indices, void* out,
                         int64_t outer, int64_t axis_len, int64_t num_indices, int64_t inner,
                         int* error_flag, cudaStream_t stream) {
  const int64_t n = outer * num_indices * inner;
  if (n == 0) return cudaSuccess;
  return ForBytes(elem_bytes, [&](auto* tag) {
    using E = std::remove_pointer_t<decltype(tag)>;
    GatherKernel<E><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const E*>(data), indices,
                                                        static_cast<E*>(out), outer, axis_len,
                                                        num_indices, inner, error_flag);
  });
}

cudaError_t LaunchWhere(int elem_bytes, const uint8_t* cond, const void* x, const void* y,
                        void* out, int64_t n, const IndexMap& map, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ForBytes(elem_bytes, [&](auto* tag) {
    using E = std::remove_pointer_t<decltype(tag)>;
    WhereKernel<E><<<Blocks(n), kThreads, 0, stream>>>(cond, static_cast<const E*>(x),
                                                       static_cast<const E*>(y),
                                                       static_cast<E*>(out), n, map);
  });
}

cudaError_t LaunchPool2d(int kind, Elem t, const void* x, void* y, const PoolGeometry& g,
                         cudaStream_t stream) {
  const int64_t n = g.planes * g.oh * g.ow;
  if (n == 0) return cudaSuccess;
  return ForElem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    Pool2dKernel<T><<<Blocks(n), kThreads, 0, stream>>>(kind, static_cast<const T*>(x),
                                                        static_cast<T*>(y), g);
  });
}

cudaError_t LaunchCast(CastType from, CastType to, const void* x, void* y, int64_t n,
                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  bool known_to = false;
  const bool known_from = ForCastType(from, [&](auto* from_tag) {
    using From = std::remove_pointer_t<decltype(from_tag)>;
    known_to = ForCastType(to, [&](auto* to_tag) {
      using To = std::remove_pointer_t<decltype(to_tag)>;
      if constexpr (std::is_same_v<To, uint8_t>) {
        if (to == CastType::kBool) {
          CastKernel<From, To, true><<<Blocks(n), kThreads, 0, stream>>>(
              static_cast<const From*>(x), static_cast<To*>(y), n);
          return;
        }
      }
      CastKernel<From, To, false><<<Blocks(n), kThreads, 0, stream>>>(
          static_cast<const From*>(x), static_cast<To*>(y), n);
    });
  });
  return known_from && known_to ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t LaunchF32ToF16(const float* x, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  F32ToF16Kernel<<<Blocks(n), kThreads, 0, stream>>>(x, static_cast<__half*>(y), n);
  return cudaGetLastError();
}

cudaError_t LaunchF16ToF32(const void* x, float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  F16ToF32Kernel<<<Blocks(n), kThreads, 0, stream>>>(static_cast<const __half*>(x), y, n);
  return cudaGetLastError();
}

}  // namespace tessera::engine::cuda
