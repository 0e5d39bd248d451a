// Elementwise kernels of the CUDA backend: binary ops with broadcasting, unary ops, the
// bias/residual/activation epilogue, and strided copies (Transpose, Slice).
//
// These are memory-bound, so what matters is bytes per instruction:
//   - the IndexMap is compacted on the host first (size-1 dims dropped, dims contiguous for every
//     operand merged), so a bias add over [b, s, h] walks 2 dims and a same-shape op 1;
//   - index arithmetic is 32-bit whenever every index fits (64-bit division is many times dearer
//     on the GPU);
//   - when the innermost dim allows it, each thread moves 16 bytes (8 FP16 or 4 FP32 values) with
//     one vector load per operand; an operand broadcast along that dim is one scalar load.
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
using detail::Store;

constexpr int kVectorBytes = 16;

__device__ __forceinline__ float ApplyBinary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a / b;
    case BinaryOp::kPow:
      return powf(a, b);
  }
  return 0.f;
}

__device__ __forceinline__ float ApplyUnary(UnaryOp op, float x, float lo, float hi) {
  switch (op) {
    case UnaryOp::kIdentity:
      return x;
    case UnaryOp::kRelu:
      return x > 0.f ? x : 0.f;
    case UnaryOp::kClip:
      return fminf(fmaxf(x, lo), hi);
    case UnaryOp::kSigmoid:
      return 1.f / (1.f + expf(-x));
    case UnaryOp::kTanh:
      return tanhf(x);
    case UnaryOp::kErf:
      return erff(x);
    case UnaryOp::kSqrt:
      return sqrtf(x);
    case UnaryOp::kExp:
      return expf(x);
    case UnaryOp::kNeg:
      return -x;
    case UnaryOp::kGelu:
      return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case UnaryOp::kGeluTanh: {
      const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);  // sqrt(2/pi)
      return 0.5f * x * (1.f + tanhf(inner));
    }
    case UnaryOp::kLeakyRelu:
      return x >= 0.f ? x : lo * x;
    case UnaryOp::kAbs:
      return fabsf(x);
    case UnaryOp::kReciprocal:
      return 1.f / x;
    case UnaryOp::kLog:
      return logf(x);
    case UnaryOp::kSin:
      return sinf(x);
    case UnaryOp::kCos:
      return cosf(x);
    case UnaryOp::kSoftplus:  // for x > 0, x + log(1 + e^-x), so e^x never overflows (as the CPU)
      return x > 0.f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    case UnaryOp::kHardSigmoid:
      return fminf(1.f, fmaxf(0.f, lo * x + hi));
    case UnaryOp::kHardSwish:
      return x * fminf(1.f, fmaxf(0.f, x / 6.f + 0.5f));
    case UnaryOp::kElu:
      return x < 0.f ? lo * expm1f(x) : x;
    case UnaryOp::kFloor:
      return floorf(x);
    case UnaryOp::kCeil:
      return ceilf(x);
    case UnaryOp::kRound:
      return rintf(x);  // the default rounding mode: to nearest, ties to even
    case UnaryOp::kSign:
      return x > 0.f ? 1.f : (x < 0.f ? -1.f : x);  // NaN stays NaN
    case UnaryOp::kTan:
      return tanf(x);
    case UnaryOp::kAsin:
      return asinf(x);
    case UnaryOp::kAcos:
      return acosf(x);
    case UnaryOp::kAtan:
      return atanf(x);
    case UnaryOp::kSinh:
      return sinhf(x);
    case UnaryOp::kCosh:
      return coshf(x);
    case UnaryOp::kAsinh:
      return asinhf(x);
    case UnaryOp::kAcosh:
      return acoshf(x);
    case UnaryOp::kAtanh:
      return atanhf(x);
    case UnaryOp::kSoftsign:
      return x / (1.f + fabsf(x));
    case UnaryOp::kSelu:
      return hi * (x > 0.f ? x : lo * expm1f(x));
    case UnaryOp::kCelu:
      return fmaxf(0.f, x) + fminf(0.f, lo * expm1f(x / lo));
    case UnaryOp::kThresholdedRelu:
      return x > lo ? x : 0.f;
    case UnaryOp::kShrink:
      return x < -lo ? x + hi : (x > lo ? x - hi : 0.f);
  }
  return x;
}

// V consecutive values at p[offset] (one 16-byte load when V > 1; p + offset is then aligned), or
// p[offset] repeated when `broadcast`.
template <int V, typename T, typename Idx>
__device__ __forceinline__ void LoadValues(const T* p, Idx offset, bool broadcast, float (&v)[V]) {
  if (V == 1 || broadcast) {
    const float x = Load(p, offset);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = x;
    return;
  }
  const uint4 raw = *reinterpret_cast<const uint4*>(p + offset);
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = Load(e, j);
}

template <int V, typename T, typename Idx>
__device__ __forceinline__ void StoreValues(T* p, Idx offset, const float (&v)[V]) {
  if (V == 1) {
    Store(p, offset, v[0]);
    return;
  }
  uint4 raw;
  T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int j = 0; j < V; ++j) Store(e, j, v[j]);
  *reinterpret_cast<uint4*>(p + offset) = raw;
}

// Offsets of K operands for linear output index i over a compacted map.
template <int K, typename Idx>
__device__ __forceinline__ void Offsets(const IndexMap& m, Idx i, Idx (&off)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) off[k] = static_cast<Idx>(m.base[k]);
  for (int d = m.rank - 1; d >= 0; --d) {
    const Idx dim = static_cast<Idx>(m.dims[d]);
    const Idx coord = i % dim;
    i /= dim;
#pragma unroll
    for (int k = 0; k < K; ++k) off[k] += coord * static_cast<Idx>(m.stride[k][d]);
  }
}

template <typename T, typename Idx, int V>
__global__ void BinaryKernel(BinaryOp op, const T* a, const T* b, T* out, Idx vectors, IndexMap m,
                             float scale_b) {
  const bool a_repeat = m.stride[0][m.rank - 1] == 0, b_repeat = m.stride[1][m.rank - 1] == 0;
  for (Idx v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += gridDim.x * blockDim.x) {
    const Idx i = v * V;
    Idx off[2];
    Offsets<2>(m, i, off);
    float x[V], y[V];
    LoadValues<V>(a, off[0], a_repeat, x);
    LoadValues<V>(b, off[1], b_repeat, y);
#pragma unroll
    for (int j = 0; j < V; ++j) x[j] = ApplyBinary(op, x[j], scale_b * y[j]);
    StoreValues<V>(out, i, x);
  }
}

template <typename T, typename Idx, int V>
__global__ void UnaryKernel(UnaryOp op, const T* x, T* y, Idx vectors, float lo, float hi) {
  for (Idx v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += gridDim.x * blockDim.x) {
    float r[V];
    LoadValues<V>(x, v * V, false, r);
#pragma unroll
    for (int j = 0; j < V; ++j) r[j] = ApplyUnary(op, r[j], lo, hi);
    StoreValues<V>(y, v * V, r);
  }
}

// y = act(x + bias + residual). kColumns: bias[i % channels] (a MatMul's bias over the last dim);
// otherwise bias[(i / inner) % channels] (NCHW), and V divides `inner` so a vector shares it.
template <typename T, typename Idx, int V, bool kColumns>
__global__ void EpilogueKernel(const T* x, const T* bias, const T* residual, T* y, Idx vectors,
                               Idx channels, Idx inner, UnaryOp act, float lo, float hi) {
  for (Idx v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += gridDim.x * blockDim.x) {
    const Idx i = v * V;
    float r[V];
    LoadValues<V>(x, i, false, r);
    if (bias != nullptr) {
      float b[V];
      if (kColumns) {
        LoadValues<V>(bias, i % channels, false, b);
      } else {
        LoadValues<V>(bias, (i / inner) % channels, true, b);
      }
#pragma unroll
      for (int j = 0; j < V; ++j) r[j] += b[j];
    }
    if (residual != nullptr) {
      float z[V];
      LoadValues<V>(residual, i, false, z);
#pragma unroll
      for (int j = 0; j < V; ++j) r[j] += z[j];
    }
#pragma unroll
    for (int j = 0; j < V; ++j) r[j] = ApplyUnary(act, r[j], lo, hi);
    StoreValues<V>(y, i, r);
  }
}

template <typename E, typename Idx>
__global__ void StridedCopyKernel(const E* in, E* out, Idx n, IndexMap m) {
  for (Idx i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    Idx off[1];
    Offsets<1>(m, i, off);
    out[i] = in[off[0]];
  }
}

// ---- host side ----------------------------------------------------------------------------------

// Drops size-1 dims and merges each dim into the next inner one when that is contiguous for all
// `operands` (outer stride == inner stride * inner size); a broadcast (stride 0) pair merges too.
IndexMap Compact(const IndexMap& m, int operands) {
  IndexMap c;
  for (int k = 0; k < operands; ++k) c.base[k] = m.base[k];
  for (int d = 0; d < m.rank; ++d) {
    if (m.dims[d] == 1) continue;
    bool merge = c.rank > 0;
    for (int k = 0; k < operands && merge; ++k) {
      merge = c.stride[k][c.rank - 1] == m.stride[k][d] * m.dims[d];
    }
    if (merge) {
      c.dims[c.rank - 1] *= m.dims[d];
      for (int k = 0; k < operands; ++k) c.stride[k][c.rank - 1] = m.stride[k][d];
    } else {
      c.dims[c.rank] = m.dims[d];
      for (int k = 0; k < operands; ++k) c.stride[k][c.rank] = m.stride[k][d];
      ++c.rank;
    }
  }
  if (c.rank == 0) {  // a single element
    c.rank = 1;
    c.dims[0] = 1;
  }
  return c;
}

// The map of n elements all operands read in order.
IndexMap Flat(int64_t n, int operands) {
  IndexMap m;
  m.rank = 1;
  m.dims[0] = n;
  for (int k = 0; k < operands; ++k) m.stride[k][0] = 1;
  return m;
}

// Whether every index (output and operand offsets) fits in 31 bits.
bool Fits32(const IndexMap& m, int operands, int64_t n) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  if (n >= kLimit) return false;
  for (int k = 0; k < operands; ++k) {
    int64_t last = m.base[k];
    for (int d = 0; d < m.rank; ++d) last += (m.dims[d] - 1) * m.stride[k][d];
    if (last >= kLimit) return false;
  }
  return true;
}

// p is 16-byte aligned and element `offset` starts a whole vector.
bool Aligned(const void* p, int64_t offset, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % kVectorBytes == 0 && offset % (kVectorBytes / bytes) == 0;
}

// Whether 16-byte vectors of `bytes`-byte elements fit the compacted map: the innermost dim is a
// whole number of vectors and every operand either reads it contiguously from an aligned start
// (all its strides whole vectors) or repeats one value along it.
bool Vectorizable(const IndexMap& m, const void* const* operands, int count, const void* out,
                  int bytes) {
  const int v = kVectorBytes / bytes;
  if (m.dims[m.rank - 1] % v != 0 || !Aligned(out, 0, bytes)) return false;
  for (int k = 0; k < count; ++k) {
    const int64_t inner = m.stride[k][m.rank - 1];
    if (inner == 0) continue;
    if (inner != 1 || !Aligned(operands[k], m.base[k], bytes)) return false;
    for (int d = 0; d + 1 < m.rank; ++d) {
      if (m.stride[k][d] % v != 0) return false;
    }
  }
  return true;
}

// Runs launch(Idx{}, std::integral_constant<int, V>{}) with 32- or 64-bit indices and 16-byte
// vectors or single elements.
template <typename T, typename F>
void Dispatch(bool fits32, bool vectorize, F launch) {
  constexpr int kV = kVectorBytes / sizeof(T);
  if (fits32) {
    vectorize ? launch(uint32_t{}, std::integral_constant<int, kV>{})
              : launch(uint32_t{}, std::integral_constant<int, 1>{});
  } else {
    vectorize ? launch(int64_t{}, std::integral_constant<int, kV>{})
              : launch(int64_t{}, std::integral_constant<int, 1>{});
  }
}

}  // namespace

cudaError_t LaunchBinary(BinaryOp op, Elem t, const void* a, const void* b, void* out, int64_t n,
                         const IndexMap* map, float scale_b, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const IndexMap m = map != nullptr ? Compact(*map, 2) : Flat(n, 2);
  return ForElem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const void* operands[2] = {a, b};
    Dispatch<T>(Fits32(m, 2, n), Vectorizable(m, operands, 2, out, sizeof(T)),
                [&](auto idx, auto vec) {
                  using Idx = decltype(idx);
                  constexpr int kV = decltype(vec)::value;
                  BinaryKernel<T, Idx, kV><<<Blocks(n / kV), kThreads, 0, stream>>>(
                      op, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out),
                      static_cast<Idx>(n / kV), m, scale_b);
                });
  });
}

cudaError_t LaunchUnary(UnaryOp op, Elem t, const void* x, void* y, int64_t n, float lo, float hi,
                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ForElem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const IndexMap m = Flat(n, 1);
    Dispatch<T>(Fits32(m, 1, n), Vectorizable(m, &x, 1, y, sizeof(T)), [&](auto idx, auto vec) {
      using Idx = decltype(idx);
      constexpr int kV = decltype(vec)::value;
      UnaryKernel<T, Idx, kV><<<Blocks(n / kV), kThreads, 0, stream>>>(
          op, static_cast<const T*>(x), static_cast<T*>(y), static_cast<Idx>(n / kV), lo, hi);
    });
  });
}

cudaError_t LaunchBiasActivation(Elem t, const void* x, const void* bias, const void* residual,
                                 void* y, int64_t n, int64_t channels, int64_t inner, UnaryOp act,
                                 float lo, float hi, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const bool columns = inner == 1;
  // As a map over [n / row, row] (row = channels for column bias, else inner): vectors must not
  // straddle a channel, and a column bias is read as vectors too.
  const int64_t row = columns ? channels : inner;
  IndexMap m;
  m.rank = 2;
  m.dims[0] = n / row;
  m.dims[1] = row;
  for (int k = 0; k < 3; ++k) {
    m.stride[k][0] = row;
    m.stride[k][1] = 1;
  }
  m.stride[2][0] = 0;  // the bias repeats per row
  if (!columns) m.stride[2][1] = 0;
  const void* operands[3] = {x, residual != nullptr ? residual : x, bias != nullptr ? bias : x};
  return ForElem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    Dispatch<T>(
        Fits32(m, 3, n), Vectorizable(m, operands, 3, y, sizeof(T)), [&](auto idx, auto vec) {
          using Idx = decltype(idx);
          constexpr int kV = decltype(vec)::value;
          const auto kernel =
              columns ? EpilogueKernel<T, Idx, kV, true> : EpilogueKernel<T, Idx, kV, false>;
          kernel<<<Blocks(n / kV), kThreads, 0, stream>>>(
              static_cast<const T*>(x), static_cast<const T*>(bias),
              static_cast<const T*>(residual), static_cast<T*>(y), static_cast<Idx>(n / kV),
              static_cast<Idx>(channels), static_cast<Idx>(inner), act, lo, hi);
        });
  });
}

cudaError_t LaunchStridedCopy(int elem_bytes, const void* in, void* out, int64_t n,
                              const IndexMap& map, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  IndexMap m = Compact(map, 1);
  // A contiguous innermost run of whole 16-byte vectors is copied as 16-byte elements.
  const int per_vector = kVectorBytes / elem_bytes;
  if (elem_bytes <= kVectorBytes && Vectorizable(m, &in, 1, out, elem_bytes) &&
      m.stride[0][m.rank - 1] == 1) {
    m.dims[m.rank - 1] /= per_vector;
    for (int d = 0; d + 1 < m.rank; ++d) m.stride[0][d] /= per_vector;
    m.base[0] /= per_vector;
    n /= per_vector;
    elem_bytes = kVectorBytes;
  }
  const bool fits32 = Fits32(m, 1, n);
  const auto launch = [&](auto* tag) {
    using E = std::remove_pointer_t<decltype(tag)>;
    if (fits32) {
      StridedCopyKernel<E, uint32_t><<<Blocks(n), kThreads, 0, stream>>>(
          static_cast<const E*>(in), static_cast<E*>(out), static_cast<uint32_t>(n), m);
    } else {
      StridedCopyKernel<E, int64_t><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const E*>(in),
                                                                        static_cast<E*>(out), n, m);
    }
  };
  if (elem_bytes == kVectorBytes) {
    launch(static_cast<uint4*>(nullptr));
    return cudaGetLastError();
  }
  return ForBytes(elem_bytes, launch);
}

}  // namespace tessera::engine::cuda
