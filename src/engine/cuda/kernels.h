// The CUDA backend's own kernels (kernels.cu), behind plain C++ launchers so the rest of the
// backend compiles with the host compiler. Every launcher enqueues on `stream` and returns
// cudaGetLastError() of the launch (configuration errors; faults surface at the next sync).
//
// Floating-point tensors are stored as FP32 or FP16 (`Elem`), one storage type per model; math is
// FP32 in registers either way. Data-movement kernels work on raw elements of 1, 2, 4 or 8 bytes.
// Indices and sizes are int64 (tensors may exceed 2^31 elements). Launchers with n == 0 do nothing.
// Thread-safety: stateless; launches on one stream are ordered by it.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace tessera::engine::cuda {

enum class Elem { kF32, kF16 };

inline constexpr int kMaxRank = 8;

// Maps a linear output index to the element offsets of up to three operands: the output index is
// decomposed over `dims` (row-major) and operand k reads at base[k] + sum(coord[d] * stride[k][d]).
// A broadcast dim has stride 0. Built on the host per node and shape (cuda_ops.cc).
struct IndexMap {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t stride[3][kMaxRank] = {};
  int64_t base[3] = {};
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kPow };
// kGelu: x * (1 + erf(x / sqrt 2)) / 2; kGeluTanh: PyTorch's GELU(approximate="tanh").
enum class UnaryOp {
  kIdentity,
  kRelu,
  kClip,
  kSigmoid,
  kTanh,
  kErf,
  kSqrt,
  kExp,
  kNeg,
  kGelu,
  kGeluTanh,
  kLeakyRelu,  // x >= 0 ? x : lo * x (lo carries alpha)
  kAbs,
  kReciprocal,
  kLog,
  kSin,
  kCos,
  kSoftplus,     // log(1 + e^x), without overflow
  kHardSigmoid,  // clamp(lo * x + hi, 0, 1) (lo, hi carry alpha, beta)
  kHardSwish,    // x * clamp(x / 6 + 1/2, 0, 1)
  kElu,          // x < 0 ? lo * (e^x - 1) : x (lo carries alpha)
  kFloor,
  kCeil,
  kRound,  // half to even, as ONNX Round
  kSign,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kSoftsign,         // x / (1 + |x|)
  kSelu,             // hi * (x > 0 ? x : lo * (e^x - 1)) (lo, hi carry alpha, gamma)
  kCelu,             // max(0, x) + min(0, lo * (e^(x / lo) - 1)) (lo carries alpha)
  kThresholdedRelu,  // x > lo ? x : 0 (lo carries alpha)
  kShrink            // x < -lo ? x + hi : x > lo ? x - hi : 0 (lo, hi carry lambd, bias)
};

// out[i] = op(a[map0(i)], scale_b * b[map1(i)]); `map` null = a, b and out all have n elements.
// out may alias a when a is not broadcast.
cudaError_t LaunchBinary(BinaryOp op, Elem t, const void* a, const void* b, void* out, int64_t n,
                         const IndexMap* map, float scale_b, cudaStream_t stream);

// y[i] = op(x[i]); kClip clamps to [lo, hi]. y may alias x.
cudaError_t LaunchUnary(UnaryOp op, Elem t, const void* x, void* y, int64_t n, float lo, float hi,
                        cudaStream_t stream);

// y[i] = act(x[i] + bias[c] + residual[i]) with c = (i / inner) % channels (a Conv's NCHW bias),
// or c = i % channels when inner == 1 (a MatMul's bias over the last dim); bias or residual null =
// 0. y may alias x.
cudaError_t LaunchBiasActivation(Elem t, const void* x, const void* bias, const void* residual,
                                 void* y, int64_t n, int64_t channels, int64_t inner, UnaryOp act,
                                 float lo, float hi, cudaStream_t stream);

// Inference BatchNormalization over [N, C, inner]: y = (x - mean[c]) * scale[c] /
// sqrt(var[c] + eps) + shift[c].
cudaError_t LaunchBatchNorm(Elem t, const void* x, const void* scale, const void* shift,
                            const void* mean, const void* var, float eps, void* y, int64_t n,
                            int64_t channels, int64_t inner, cudaStream_t stream);

// Row-wise ops over [rows, cols] (the reduced/normalised dims last and contiguous).
cudaError_t LaunchSoftmaxRows(Elem t, const void* x, void* y, int64_t rows, int64_t cols,
                              cudaStream_t stream);
// gamma, beta: `cols` elements each (beta may be null).
cudaError_t LaunchLayerNormRows(Elem t, const void* x, const void* gamma, const void* beta,
                                void* y, int64_t rows, int64_t cols, float eps,
                                cudaStream_t stream);
cudaError_t LaunchRowMean(Elem t, const void* x, void* y, int64_t rows, int64_t cols,
                          cudaStream_t stream);

// out[o, j, i] = data[o, idx[j] (wrapped when negative), i] for data [outer, axis_len, inner];
// an index outside [-axis_len, axis_len) writes zeros and sets *error_flag (device int, may be
// null) to 1.
cudaError_t LaunchGather(int elem_bytes, const void* data, const int64_t* indices, void* out,
                         int64_t outer, int64_t axis_len, int64_t num_indices, int64_t inner,
                         int* error_flag, cudaStream_t stream);

// out[i] = in[map0(i)] (Transpose, Slice, Expand): n output elements.
cudaError_t LaunchStridedCopy(int elem_bytes, const void* in, void* out, int64_t n,
                              const IndexMap& map, cudaStream_t stream);

// out[i] = cond[map0(i)] ? x[map1(i)] : y[map2(i)]; cond is one byte per element.
cudaError_t LaunchWhere(int elem_bytes, const uint8_t* cond, const void* x, const void* y,
                        void* out, int64_t n, const IndexMap& map, cudaStream_t stream);

// 2-D pooling over `planes` independent [h, w] planes into [oh, ow]; pads may be asymmetric
// (the window starts at -pad_top/-pad_left). kind: 0 max, 1 average excluding pads, 2 average
// including pads.
struct PoolGeometry {
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
};
cudaError_t LaunchPool2d(int kind, Elem t, const void* x, void* y, const PoolGeometry& g,
                         cudaStream_t stream);

// Storage types Cast converts between: FP32 (or FP16 in FP16 mode), INT64, INT32, UINT8 and
// BOOL (one byte, 0 or 1).
enum class CastType { kF32, kF16, kI64, kI32, kU8, kBool };
// y[i] = x[i] converted (float to integer truncates toward zero; to kBool: x[i] != 0).
cudaError_t LaunchCast(CastType from, CastType to, const void* x, void* y, int64_t n,
                       cudaStream_t stream);

// ---- index_kernels.cu: integers, booleans and prefix sums ---------------------------------------
// (PyTorch exports compute position ids and masks on the device: Equal, Not, Cast, CumSum, Mul.)

// out[i] = op(a[map0(i)], b[map1(i)]) over INT32 (int64 == false) or INT64 values, wrapping on
// overflow; kDiv truncates toward zero and gives 0 for a zero divisor (as the CPU kernel). kPow is
// not an integer op (INVALID_VALUE).
cudaError_t LaunchIntBinary(BinaryOp op, bool int64, const void* a, const void* b, void* out,
                            int64_t n, const IndexMap& map, cudaStream_t stream);

enum class CompareOp { kEqual, kLess, kLessOrEqual, kGreater, kGreaterOrEqual, kAnd, kOr, kXor };
// out[i] = a[map0(i)] op b[map1(i)] as BOOL (one byte, 0 or 1); a and b are stored as `t` (kAnd,
// kOr and kXor take kBool).
cudaError_t LaunchCompare(CompareOp op, CastType t, const void* a, const void* b, uint8_t* out,
                          int64_t n, const IndexMap& map, cudaStream_t stream);
// y[i] = !x[i] over BOOL.
cudaError_t LaunchNot(const uint8_t* x, uint8_t* y, int64_t n, cudaStream_t stream);

// Prefix sums along the middle dim of [outer, len, inner], values stored as `t` (kF32, kF16, kI32
// or kI64; float sums run in FP32): inclusive, or exclusive (element r gets the sum before it),
// from the front, or from the back when `reverse`.
cudaError_t LaunchCumSum(CastType t, const void* x, void* y, int64_t outer, int64_t len,
                         int64_t inner, bool exclusive, bool reverse, cudaStream_t stream);

// FP32 <-> FP16 conversion of n elements.
cudaError_t LaunchF32ToF16(const float* x, void* y, int64_t n, cudaStream_t stream);
cudaError_t LaunchF16ToF32(const void* x, float* y, int64_t n, cudaStream_t stream);

}  // namespace tessera::engine::cuda
