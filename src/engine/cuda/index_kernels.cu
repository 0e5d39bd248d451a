// Kernels on integers and booleans, and prefix sums (kernels.h, "index_kernels.cu"). These tensors
// are small (position ids and masks of [batch, sequence]), so the kernels are plain grid-stride
// loops with 64-bit index maps; the float elementwise kernels hold the tuned paths.
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "engine/cuda/kernel_util.cuh"
#include "engine/cuda/kernels.h"

namespace tessera::engine::cuda {
namespace {

using detail::Blocks;
using detail::kThreads;
using detail::MapIndex;

template <typename T>
__device__ __forceinline__ T IntApply(BinaryOp op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case BinaryOp::kAdd:
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    case BinaryOp::kSub:
      return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
    case BinaryOp::kMul:
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    case BinaryOp::kDiv:
      // 0 for a zero divisor (the CPU kernel's choice; ONNX leaves it undefined); -1 wraps so the
      // one overflowing quotient (MIN / -1) is defined.
      if (b == 0) return 0;
      if (b == -1) return static_cast<T>(U{0} - static_cast<U>(a));
      return a / b;
    case BinaryOp::kPow:
      break;
  }
  return 0;
}

template <typename T>
__global__ void IntBinaryKernel(BinaryOp op, const T* a, const T* b, T* out, int64_t n,
                                IndexMap m) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = IntApply(op, a[MapIndex(m, 0, i)], b[MapIndex(m, 1, i)]);
  }
}

// Comparable value of a stored element: FP16 compares as FP32, integers and bytes as themselves.
__device__ __forceinline__ float Comparable(const __half* p, int64_t i) {
  return __half2float(p[i]);
}
template <typename T>
__device__ __forceinline__ T Comparable(const T* p, int64_t i) {
  return p[i];
}

template <typename T>
__global__ void CompareKernel(CompareOp op, const T* a, const T* b, uint8_t* out, int64_t n,
                              IndexMap m) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const auto x = Comparable(a, MapIndex(m, 0, i));
    const auto y = Comparable(b, MapIndex(m, 1, i));
    bool r = false;
    switch (op) {
      case CompareOp::kEqual:
        r = x == y;
        break;
      case CompareOp::kLess:
        r = x < y;
        break;
      case CompareOp::kLessOrEqual:
        r = x <= y;
        break;
      case CompareOp::kGreater:
        r = x > y;
        break;
      case CompareOp::kGreaterOrEqual:
        r = x >= y;
        break;
      case CompareOp::kAnd:
        r = x != 0 && y != 0;
        break;
      case CompareOp::kOr:
        r = x != 0 || y != 0;
        break;
      case CompareOp::kXor:
        r = (x != 0) != (y != 0);
        break;
    }
    out[i] = r ? 1 : 0;
  }
}

__global__ void NotKernel(const uint8_t* x, uint8_t* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = x[i] == 0 ? 1 : 0;
  }
}

__device__ __forceinline__ float Accumulable(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float Accumulable(const __half* p, int64_t i) {
  return __half2float(p[i]);
}
__device__ __forceinline__ int64_t Accumulable(const int64_t* p, int64_t i) { return p[i]; }
__device__ __forceinline__ int32_t Accumulable(const int32_t* p, int64_t i) { return p[i]; }
template <typename T, typename A>
__device__ __forceinline__ void StoreSum(T* p, int64_t i, A v) {
  if constexpr (std::is_same_v<T, __half>) {
    p[i] = __float2half(v);
  } else {
    p[i] = static_cast<T>(v);
  }
}

// One thread per (outer, inner) line, walking it in order: the CPU's summation order, so FP32
// results match it exactly. Lines are short (sequence lengths), and there are many of them.
template <typename T>
__global__ void CumSumKernel(const T* x, T* y, int64_t outer, int64_t len, int64_t inner,
                             bool exclusive, bool reverse) {
  const int64_t lines = outer * inner;
  for (int64_t line = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; line < lines;
       line += int64_t{gridDim.x} * blockDim.x) {
    const int64_t base = (line / inner) * len * inner + line % inner;
    decltype(Accumulable(x, 0)) acc = 0;
    for (int64_t step = 0; step < len; ++step) {
      const int64_t at = base + (reverse ? len - 1 - step : step) * inner;
      const auto v = Accumulable(x, at);
      if (exclusive) {
        StoreSum(y, at, acc);
        acc += v;
      } else {
        acc += v;
        StoreSum(y, at, acc);
      }
    }
  }
}

// Runs `launch` with the storage type of `t` as its template argument (BOOL and UINT8 as bytes).
template <typename F>
cudaError_t ForStorage(CastType t, F launch) {
  switch (t) {
    case CastType::kF32:
      launch(static_cast<float*>(nullptr));
      break;
    case CastType::kF16:
      launch(static_cast<__half*>(nullptr));
      break;
    case CastType::kI64:
      launch(static_cast<int64_t*>(nullptr));
      break;
    case CastType::kI32:
      launch(static_cast<int32_t*>(nullptr));
      break;
    case CastType::kU8:
    case CastType::kBool:
      launch(static_cast<uint8_t*>(nullptr));
      break;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchIntBinary(BinaryOp op, bool int64, const void* a, const void* b, void* out,
                            int64_t n, const IndexMap& map, cudaStream_t stream) {
  if (op == BinaryOp::kPow) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (int64) {
    IntBinaryKernel<int64_t><<<Blocks(n), kThreads, 0, stream>>>(
        op, static_cast<const int64_t*>(a), static_cast<const int64_t*>(b),
        static_cast<int64_t*>(out), n, map);
  } else {
    IntBinaryKernel<int32_t><<<Blocks(n), kThreads, 0, stream>>>(
        op, static_cast<const int32_t*>(a), static_cast<const int32_t*>(b),
        static_cast<int32_t*>(out), n, map);
  }
  return cudaGetLastError();
}

cudaError_t LaunchCompare(CompareOp op, CastType t, const void* a, const void* b, uint8_t* out,
                          int64_t n, const IndexMap& map, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const auto launch = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    CompareKernel<T><<<Blocks(n), kThreads, 0, stream>>>(op, static_cast<const T*>(a),
                                                         static_cast<const T*>(b), out, n, map);
  };
  return ForStorage(t, launch);
}

cudaError_t LaunchNot(const uint8_t* x, uint8_t* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  NotKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchCumSum(CastType t, const void* x, void* y, int64_t outer, int64_t len,
                         int64_t inner, bool exclusive, bool reverse, cudaStream_t stream) {
  if (t == CastType::kU8 || t == CastType::kBool) return cudaErrorInvalidValue;
  const int64_t lines = outer * inner;
  if (lines == 0 || len == 0) return cudaSuccess;
  const auto launch = [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if constexpr (!std::is_same_v<T, uint8_t>) {  // bytes were refused above
      CumSumKernel<T><<<Blocks(lines), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), outer, len, inner, exclusive, reverse);
    }
  };
  return ForStorage(t, launch);
}

}  // namespace tessera::engine::cuda
