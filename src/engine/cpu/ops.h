// CPU kernels: the raw math routines (unit-tested directly) and the ONNX op kernels built on them.
//
// Op kernels take their inputs as Values (nullptr for an omitted optional input) and fill
// `outputs` (already sized to the node's output count). They check every shape and dtype they
// rely on and return INVALID_ARGUMENT instead of reading out of bounds; the caller prefixes the
// node's name. Kernels are stateless and may run concurrently on different data.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/string_tensor.h"
#include "engine/thread_pool.h"
#include "engine/value.h"
#include "tessera/common/status.h"

namespace tessera::engine::cpu {

// ---- Raw routines (row-major fp32) -------------------------------------------------------------

// C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C. op(X) = X^T when trans_x. lda/ldb/ldc are
// the row strides of A, B, C as stored. beta == 0 overwrites C without reading it. Parallel over
// output tiles on `pool` (null = calling thread only).
// With `onednn` (only meaningful in builds with oneDNN) the product is oneDNN's sgemm, threaded
// with OpenMP over pool->usable_threads() threads (1 without a pool) instead of the pool itself.
void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
           ThreadPool* pool, bool onednn = false);

// The dims of a numpy-style matrix product A x B (MatMul and its integer forms): A's and B's
// batch dims (their dims but the last two, after a 1-D A became [1, K] and a 1-D B [K, 1]),
// their broadcast, and the result's shape (without the dims the 1-D operands gained).
struct MatMulDims {
  Shape batch_a, batch_b, batch, out;
  int64_t m = 0, k = 0, n = 0;
};
// INVALID_ARGUMENT for a scalar operand, inner dims that differ or batches that do not broadcast.
StatusOr<MatMulDims> MatMulDimsOf(const Value& a, const Value& b);
// Which of an operand's matrices (its batch dims `own`) the product's matrix `index` (of `batch`)
// reads, broadcast dims fixed at 0.
int64_t MatrixOffset(const Shape& batch, const Shape& own, int64_t index);

// Geometry of a 2-D convolution or pooling window, with pads already resolved.
struct Window2d {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
};

// out[n, cout, oh, ow] for input [n, cin, h, w], weight [cout, cin/groups, kh, kw], bias [cout]
// or null. The caller sizes `out` from the window; `oh`, `ow` are its spatial dims.
void Conv2d(const float* input, int64_t batch, int64_t in_channels, int64_t h, int64_t w,
            const float* weight, const float* bias, int64_t out_channels, int64_t groups,
            const Window2d& window, float* out, int64_t oh, int64_t ow, ThreadPool* pool);

enum class PoolKind { kMax, kAverageExcludePad, kAverageIncludePad };

// Pools each of `planes` independent [h, w] planes into [oh, ow].
void Pool2d(PoolKind kind, const float* input, int64_t planes, int64_t h, int64_t w,
            const Window2d& window, float* out, int64_t oh, int64_t ow, ThreadPool* pool);

// Softmax over the middle dim of [outer, axis_len, inner].
void Softmax(const float* input, int64_t outer, int64_t axis_len, int64_t inner, float* out);

// ---- Shared helpers ----------------------------------------------------------------------------

using Inputs = std::vector<const Value*>;

// Every dtype a Value may have: what the data-movement kernels that take strings accept.
inline constexpr std::initializer_list<DataType> kMovableTypes = {
    DataType::kFp32, DataType::kInt64, DataType::kInt32,
    DataType::kBool, DataType::kUint8, DataType::kString};

// The 8-bit integer types of quantized tensors.
inline constexpr std::initializer_list<DataType> kEightBitTypes = {DataType::kUint8,
                                                                   DataType::kInt8};
// Element i of a UINT8 or INT8 value (a quantized tensor or its zero point), widened.
inline int32_t EightBitElement(const Value& v, int64_t i) {
  return v.dtype() == DataType::kUint8 ? static_cast<int32_t>(v.data<uint8_t>()[i])
                                       : static_cast<int32_t>(v.data<int8_t>()[i]);
}

// Numpy broadcasting of two shapes, or INVALID_ARGUMENT.
StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b);
// Maps a possibly negative axis into [0, rank), or INVALID_ARGUMENT.
StatusOr<int> NormalizeAxis(int64_t axis, int rank);
// The required input `index`, present, with one of the given dtypes.
StatusOr<const Value*> RequireInput(const Inputs& inputs, size_t index, const char* what,
                                    std::initializer_list<DataType> dtypes);
// The bounds [lo, hi] of a node's fused Relu ([0, +inf)) or Clip (tessera_clip_min/max, infinite
// where absent), graph_passes.h's tessera_activation; false for none or another activation.
bool FusedClamp(const Node& node, float* lo, float* hi);
// Output size of a window along one dim: floor (or ceil) of the usual formula, checked >= 1.
StatusOr<int64_t> WindowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                                   int64_t pad_begin, int64_t pad_end, bool ceil_mode);

// Reads kernel_shape/strides/dilations/pads/auto_pad of a Conv or pooling node whose window has
// `spatial_rank` (1 or 2) dims; a 1-D window is mapped onto a height of 1. Pads are resolved
// against the input's spatial size (h, w), which auto_pad=SAME_* needs.
StatusOr<Window2d> ResolveWindow(const Node& node, int spatial_rank, int64_t h, int64_t w,
                                 int64_t kernel_h, int64_t kernel_w);
// Load-time check of the window attributes shared by Conv and the pools: supported auto_pad and
// rank, and kernel_shape, strides, dilations and pads agreeing on the rank (and with
// `spatial_rank` when it is known, > 0).
Status CheckWindowAttributes(const Node& node, int spatial_rank = 0);

// A row-major copy of a channels-last value (value.h Layout); `v` itself when already row-major.
// Channels-last values whose spatial size is 1 are relabelled without a copy. The copy is split
// over `pool` when there is one.
Value ToRowMajor(const Value& v, ThreadPool* pool = nullptr);
// A channels-last copy of a row-major 4-D value, split over `pool` when there is one.
Value ToChannelsLast(const Value& v, ThreadPool* pool = nullptr);
// Whether values read together (a Concat's inputs, or a fused normalisation's parts) are best
// worked on channels-last: when at least half of their bytes are. The others are converted.
bool MostlyChannelsLast(const Inputs& values);
// A channels-last value's bytes as the row-major [N, H, W, C] array they are, so that a kernel
// written for row-major data can work on them with axes mapped by PhysicalAxis; a row-major value
// is returned unchanged.
Value PhysicalView(const Value& v);
// How many pixels make one row when per-channel work on channels-last [pixels, C] values sees
// them as [pixels / k, k * C]: the largest k <= 256 / C that divides `pixels` (1 when none does),
// so that the inner loops run over k * C values, not over the 8 or 16 channels of a small network,
// and column w belongs to channel w % C.
inline int64_t PixelsPerRow(int64_t pixels, int64_t channels) {
  for (int64_t k = std::max<int64_t>(1, 256 / std::max<int64_t>(1, channels)); k > 1; --k) {
    if (pixels % k == 0) return k;
  }
  return 1;
}
// Where logical axis `axis` (of [N, C, H, W]) lies in a channels-last value's [N, H, W, C] bytes.
inline int PhysicalAxis(int axis) {
  constexpr int kPhysical[4] = {0, 3, 1, 2};
  return kPhysical[axis];
}

// ---- Op kernels --------------------------------------------------------------------------------

// Per-node state a kernel keeps across Runs (e.g. a oneDNN primitive and its reordered weights),
// made once when the model is built. Kernels must keep it safe for concurrent Runs of one model.
class KernelState {
 public:
  virtual ~KernelState() = default;
};

struct OpContext {
  ThreadPool* pool = nullptr;  // null = run on the calling thread
  KernelState* state = nullptr;  // the node's OpDef::make_state result; null when there is none
  bool onednn = false;  // GEMMs through oneDNN's sgemm (ModelOptions::onednn in a oneDNN build)
  // Where kernels put the strings they make (string_tensor.h); outlives every Value of the Run.
  // Set by every caller that may run a kernel on STRING values; kernels fail cleanly without it.
  StringArena* strings = nullptr;
  // Memory planner hooks, both optional (null = every output is a fresh allocation).
  // planned_outputs: per node output, a view of its planned arena bytes (undefined = none).
  const std::vector<Value>* planned_outputs = nullptr;
  // allocated_outputs: set to true for each output index NewOutput was called for, so the CPU
  // model learns which outputs are kernel-allocated (plannable) rather than aliases or constants.
  std::vector<bool>* allocated_outputs = nullptr;

  // Storage for output `index` of the running node: the planned arena bytes when a plan gives
  // exactly this many bytes, else a fresh 64-byte aligned allocation. Uninitialised either way.
  Value NewOutput(size_t index, DataType dtype, Shape shape) const;
};

using KernelFn = Status (*)(const OpContext& ctx, const Node& node, const Inputs& inputs,
                            std::vector<Value>* outputs);
// Load-time check of what the kernel supports (attributes, arity, constant inputs it needs);
// returns UNIMPLEMENTED with the reason when the node uses something the kernel lacks.
using CheckFn = Status (*)(const Node& node, const Graph& graph);

// What a kernel accepts of channels-last inputs.
enum class LayoutSupport {
  // Row-major inputs only; the CPU model converts channels-last inputs first (the default).
  kRowMajorOnly,
  // Element by element over its inputs' bytes: when every non-scalar input has one shape and is
  // channels-last, the model runs it on them unchanged and labels its outputs channels-last.
  kElementwise,
  // Reads each input's layout itself and labels its outputs (the oneDNN kernels).
  kAny,
};

// Makes a node's KernelState at model build time; `graph` says which inputs are constants.
using MakeStateFn = std::unique_ptr<KernelState> (*)(const Node& node, const Graph& graph);

struct OpDef {
  KernelFn run = nullptr;
  CheckFn check = nullptr;  // optional
  LayoutSupport layout = LayoutSupport::kRowMajorOnly;
  MakeStateFn make_state = nullptr;  // optional
  // Whether the kernel takes STRING inputs (checks where it does). Every other kernel is refused
  // them before it runs (RefuseStrings), so numeric kernels never see string handles.
  bool strings = false;
  // An input whose bytes output 0 may be planned into when no later node reads them and the
  // sizes match (cpu_model.cc BuildPlan), so the kernel skips copying it: a Conv's fused residual
  // (input 3), which the kernel adds to its output. -1: none. The kernel must be right whether
  // the two share bytes or not, since an unplanned Run gives the output bytes of its own.
  int in_place_input = -1;
};

// OK unless `op` does not take strings and one of `inputs` is STRING: INVALID_ARGUMENT naming the
// input and the op (the caller prefixes the node).
Status RefuseStrings(const OpDef& op, const std::string& op_type, const Inputs& inputs);
// The same at load, by the dtypes InferShapes found (graph.h Graph::dtypes): UNIMPLEMENTED listing
// every node that would get a STRING input its kernel does not take.
Status CheckStringUse(const Graph& graph);

// The kernel for an op type (graph.h Node::op_type, ai.onnx.ml ops prefixed), or null when the op
// is not supported. With `onednn` (and a build with oneDNN) the oneDNN kernels replace the own
// ones where they exist.
const OpDef* FindOp(const std::string& op_type, bool onednn = true);
// Every supported op type, sorted.
std::vector<std::string> SupportedOps();

// Kernel entry points, grouped by the file that defines them.
// gemm_ops.cc
Status RunGemm(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status CheckMatMul(const Node&, const Graph&);
// Also runs the bias (input 2) and GELU that graph_passes.h FuseMatMulEpilogues gives a MatMul.
Status RunMatMul(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// That epilogue on a product `y`: += bias (null: none; else FP32 of y's last dim) over the last
// dim, then the node's tessera_activation ("Gelu", "GeluTanh" or none), in one pass.
Status ApplyMatMulEpilogue(const OpContext& ctx, const Node& node, const Value* bias, Value* y);
// conv.cc
Status CheckConv(const Node&, const Graph&);
// The window attributes of a Conv-like node whose weights are input `weight_input`: as
// CheckWindowAttributes, with the spatial rank taken from constant weights (1-D or 2-D only).
Status CheckConvWindow(const Node& node, const Graph& graph, size_t weight_input);
Status RunConv(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// dnnl_ops.cc (only when built with oneDNN: TESSERA_HAVE_ONEDNN); fall back to the kernels above
// for what oneDNN does not cover.
std::unique_ptr<KernelState> MakeDnnlConvState(const Node&, const Graph&);
Status RunDnnlConv(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// 2-D ConvTranspose as a oneDNN deconvolution on channels-last activations; the own kernel runs
// what it cannot express (other ranks, an output larger than the natural size).
std::unique_ptr<KernelState> MakeDnnlConvTransposeState(const Node&, const Graph&);
Status RunDnnlConvTranspose(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
std::unique_ptr<KernelState> MakeDnnlPoolState(const Node&, const Graph&);
Status RunDnnlMaxPool(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunDnnlAveragePool(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunGlobalAveragePoolAnyLayout(const OpContext&, const Node&, const Inputs&,
                                     std::vector<Value>*);
// oneDNN's row-major sgemm (Sgemm with onednn=true) across `pool` (null: the calling thread
// alone): C's rows, or its columns when it has more of those, are cut into one part per usable
// thread, each a single-threaded sgemm, for the reason Convs are (conv_slices.h); a product of one
// or two rows with an untransposed B is cut along the inner dim instead, the parts' products
// summed.
void DnnlSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc, ThreadPool* pool);
// QLinearConv and kConvIntegerToFloat as oneDNN's integer convolution (dnnl_integer_conv.cc);
// the own kernels (qlinear_conv.cc, conv_integer.cc) run what it does not cover.
std::unique_ptr<KernelState> MakeDnnlQLinearConvState(const Node&, const Graph&);
Status RunDnnlQLinearConv(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
std::unique_ptr<KernelState> MakeDnnlConvIntegerToFloatState(const Node&, const Graph&);
Status RunDnnlConvIntegerToFloat(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// MatMulInteger as oneDNN's integer matrix product (dnnl_integer_matmul.cc) where FastQLinearConv
// holds; the own kernel (integer_matmul.cc) runs what it does not cover.
// The same state and kernel serve graph.h's kMatMulIntegerToFloat, whose output scales, bias and
// GELU become the primitive's own.
std::unique_ptr<KernelState> MakeDnnlMatMulIntegerState(const Node&, const Graph&);
Status RunDnnlMatMulInteger(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// Whether QLinearConv runs as an integer convolution here: a oneDNN build on a CPU with 8-bit
// dot products that sum into 32 bits (AVX-VNNI, AVX-512 VNNI, AMX).
bool FastQLinearConv();
// Whether this build runs kernels through oneDNN, and its CPU ISA ("avx512_core", ...).
bool UsingOneDnn();
std::string OneDnnIsa();
// quantize_ops.cc: onnxruntime's com.microsoft.QLinearAdd, C = Q(DQ(A) + DQ(B)) with per-tensor
// scales and zero points and A, B of one shape; made only by graph_passes.h FuseQdqAdd (the
// importer takes no com.microsoft ops).
Status RunQLinearAdd(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// qlinear_conv.cc: the own QLinearConv, through the own Conv on the zero-point-shifted integers.
Status CheckQLinearConv(const Node&, const Graph&);
Status RunQLinearConv(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// pool.cc
Status CheckPool(const Node&, const Graph&);
Status RunMaxPool(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunAveragePool(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunGlobalAveragePool(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunGlobalMaxPool(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// elementwise.cc
Status RunAdd(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunSub(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunMul(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunDiv(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunRelu(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunSigmoid(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunTanh(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunClip(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// nn_ops.cc
Status RunSoftmax(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunLogSoftmax(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunHardmax(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status CheckBatchNormalization(const Node&, const Graph&);
Status RunBatchNormalization(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// shape_ops.cc
Status RunIdentity(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status CheckConstant(const Node&, const Graph&);
Status RunConstant(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunFlatten(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunReshape(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunShape(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunGather(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunUnsqueeze(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunSqueeze(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunConcat(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunTranspose(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// math_ops.cc
Status RunErf(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunSqrt(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunExp(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunReciprocal(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunNeg(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunLeakyRelu(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunHardSigmoid(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunHardSwish(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunPow(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunMax(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunMin(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunPRelu(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunMod(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunSum(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunMean(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status CheckDropout(const Node&, const Graph&);
Status RunDropout(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// quantize_ops.cc
Status CheckQuantizeLinear(const Node&, const Graph&);
Status RunQuantizeLinear(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunDequantizeLinear(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunDynamicQuantizeLinear(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// integer_matmul.cc: MatMulInteger (INT32 result) and QLinearMatMul (8-bit result).
Status RunMatMulInteger(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunQLinearMatMul(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// graph.h kMatMulIntegerToFloat (inputs A, B, a_scale, b_scale, a_zero_point, b_zero_point,
// bias), with a_scale and a_zero_point one value each, b_scale one or one per column of B, and
// the tessera_activation FuseMatMulEpilogues may give it.
Status RunMatMulIntegerToFloat(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// Whether `v` holds one value, or `n` along its last dim (leading dims 1): a scale per column.
bool OneOrOnePerLastDim(const Value& v, int64_t n);
// conv_integer.cc
Status CheckConvInteger(const Node&, const Graph&);
Status RunConvInteger(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// graph.h kConvIntegerToFloat: ConvInteger, then per output channel m
// y = acc * (x_scale * w_scale[m]) + bias[m] + residual, then the node's Relu or Clip.
Status RunConvIntegerToFloat(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// unary_ops.cc
Status RunAbs(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunSign(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunCeil(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunFloor(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunRound(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunLog(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunSin(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunCos(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunTan(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunAsin(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunAcos(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunAtan(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunSinh(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunCosh(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunAsinh(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunAcosh(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunAtanh(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunSoftplus(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunSoftsign(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunElu(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunSelu(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunCelu(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunThresholdedRelu(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunShrink(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunIsNaN(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunIsInf(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// logic_ops.cc
Status RunEqual(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunLess(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunLessOrEqual(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunGreater(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunGreaterOrEqual(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunAnd(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunOr(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunXor(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunNot(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunWhere(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status CheckCast(const Node&, const Graph&);
Status RunCast(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunCastLike(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// reduce_ops.cc
Status RunReduceSum(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunReduceMean(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// The mean of FP32 `x` over its `reduced` axes into `y`, whose elements are x's with those axes
// collapsed, in order (GlobalAveragePool on a channels-last value's bytes uses it).
void ReduceMeanFp32(const Value& x, const std::vector<bool>& reduced, const Value& y,
                    ThreadPool* pool);
Status RunReduceMax(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunReduceMin(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunReduceProd(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunReduceL1(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunReduceL2(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunReduceSumSquare(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunReduceLogSum(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunReduceLogSumExp(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunArgMax(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunArgMin(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunCumSum(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// norm_ops.cc
Status CheckLayerNormalization(const Node&, const Graph&);
Status RunLayerNormalization(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunInstanceNormalization(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunMeanVarianceNormalization(const OpContext&, const Node&, const Inputs&,
                                    std::vector<Value>*);
Status CheckLrn(const Node&, const Graph&);
Status RunLrn(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// resize.cc: Resize, and Upsample (opsets 7-9)
Status CheckResize(const Node&, const Graph&);
Status RunResize(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// einsum.cc
Status CheckEinsum(const Node&, const Graph&);
Status RunEinsum(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// detection_ops.cc
Status RunNonMaxSuppression(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// conv_transpose.cc
// A ConvTranspose's spatial geometry: output sizes and begin pads by the spec, from `pads`, or
// from `output_shape` (or auto_pad SAME_*, which asks for in * stride) with the total padding
// split as the spec says; INVALID_ARGUMENT when the attributes do not fit X and W.
struct TransposeGeometry {
  std::vector<int64_t> in, kernel, stride, dilation, pad_begin, out;
};
StatusOr<TransposeGeometry> ResolveConvTransposeGeometry(const Node& node, const Shape& x_shape,
                                                         const Shape& w_shape);
Status CheckConvTranspose(const Node&, const Graph&);
Status RunConvTranspose(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// slice_ops.cc
Status RunSlice(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunSplit(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunExpand(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunConstantOfShape(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunRange(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status CheckPad(const Node&, const Graph&);
Status RunPad(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunTrilu(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// index_ops.cc
Status RunGatherElements(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunGatherND(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status CheckScatter(const Node&, const Graph&);
// Also the deprecated Scatter (opsets 9-10), which has the same semantics.
Status RunScatterElements(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunScatterND(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status CheckTopK(const Node&, const Graph&);
Status RunTopK(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// layout_ops.cc
Status RunTile(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunOneHot(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunNonZero(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status CheckEyeLike(const Node&, const Graph&);
Status RunEyeLike(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunSize(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status CheckDepthToSpace(const Node&, const Graph&);
Status RunDepthToSpace(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunSpaceToDepth(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
Status RunCompress(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// string_cast.cc: Cast to and from STRING (called by RunCast and RunCastLike for output 0)
Status CastStrings(const OpContext&, const Value& x, DataType to, std::vector<Value>* outputs);
// string_ops.cc: Equal on strings (called by RunEqual), StringNormalizer
Status RunStringEqual(const OpContext&, const Value& a, const Value& b,
                      std::vector<Value>* outputs);
Status CheckStringNormalizer(const Node&, const Graph&);
Status RunStringNormalizer(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);
// label_encoder.cc: ai.onnx.ml.LabelEncoder
Status CheckLabelEncoder(const Node&, const Graph&);
std::unique_ptr<KernelState> MakeLabelEncoderState(const Node&, const Graph&);
Status RunLabelEncoder(const OpContext&, const Node&, const Inputs&, std::vector<Value>*);

}  // namespace tessera::engine::cpu
