// Device helpers shared by the CUDA backend's kernel files (kernels.cu, elementwise_kernels.cu):
// FP32/FP16 loads and stores (math is FP32 in registers), grid sizing, the IndexMap walk and the
// storage-type dispatch of the launchers. Included by .cu files only.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "engine/cuda/kernels.h"

namespace tessera::engine::cuda::detail {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements (capped: the loop covers the rest).
inline unsigned int Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

__device__ __forceinline__ float Load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float Load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void Store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void Store(__half* p, int64_t i, float v) { p[i] = __float2half(v); }

// Offset of operand k for linear output index i (the general, 64-bit form).
__device__ __forceinline__ int64_t MapIndex(const IndexMap& m, int k, int64_t i) {
  int64_t offset = m.base[k];
  for (int d = m.rank - 1; d >= 0; --d) {
    const int64_t coord = i % m.dims[d];
    i /= m.dims[d];
    offset += coord * m.stride[k][d];
  }
  return offset;
}

// Runs `launch` with the storage type of `t` as its template argument.
template <typename F>
cudaError_t ForElem(Elem t, F launch) {
  if (t == Elem::kF16) {
    launch(static_cast<__half*>(nullptr));
  } else {
    launch(static_cast<float*>(nullptr));
  }
  return cudaGetLastError();
}

// Runs `launch` with an element type of `bytes` bytes.
template <typename F>
cudaError_t ForBytes(int bytes, F launch) {
  switch (bytes) {
    case 1:
      launch(static_cast<uint8_t*>(nullptr));
      break;
    case 2:
      launch(static_cast<uint16_t*>(nullptr));
      break;
    case 4:
      launch(static_cast<uint32_t*>(nullptr));
      break;
    case 8:
      launch(static_cast<uint64_t*>(nullptr));
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace tessera::engine::cuda::detail
