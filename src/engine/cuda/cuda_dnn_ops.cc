// CUDA ops on cuDNN and cuBLAS: Conv (cuDNN, with bias + Relu fused by
// cudnnConvolutionBiasActivationForward where it applies), MaxPool/AveragePool (cuDNN pooling when
// its geometry matches ONNX's, else an own kernel), GlobalAveragePool (a row mean), Gemm and MatMul
// (cublasGemmStridedBatchedEx, FP32 accumulation; FP16 inputs run on tensor cores).
//
// Row-major GEMM on column-major cuBLAS: Y = A·B (row-major) is Yᵀ = Bᵀ·Aᵀ (column-major), and a
// row-major [r, c] matrix read column-major is its transpose [c, r]; so every call passes B first.
#include <algorithm>
#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"
#include "engine/cuda/cuda_ops.h"

namespace tessera::engine::cuda {
namespace {

// Largest cuDNN workspace an algorithm may ask for (per conv, from the arena).
constexpr size_t kMaxConvWorkspace = size_t{256} << 20;

Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

StatusOr<const ValueMeta*> Input(const PlanCtx& ctx, size_t index, const char* what) {
  if (index >= ctx.in.size() || ctx.in[index] == nullptr) {
    return Invalid(absl::StrCat("input ", what, " is missing"));
  }
  if (ctx.in[index]->dtype != DataType::kFp32) {
    return absl::UnimplementedError(absl::StrCat("input ", what, " is ",
                                                 TypeName(ctx.in[index]->dtype),
                                                 "; the CUDA kernel takes FP32 only"));
  }
  return ctx.in[index];
}

cudnnDataType_t CudnnType(const Device& device) {
  return device.fp16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

cudaDataType_t CublasType(const Device& device) {
  return device.fp16 ? CUDA_R_16F : CUDA_R_32F;
}

// ---- Conv ---------------------------------------------------------------------------------------

// cuDNN descriptors of one Conv node at one input shape.
struct ConvState {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnActivationDescriptor_t relu = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  UnaryOp act = UnaryOp::kIdentity;
  float lo = 0, hi = 0;
  int64_t channels = 0, inner = 0;  // of the output, for the unfused bias/activation kernel
  bool try_fused = false;           // bias + Relu through cudnnConvolutionBiasActivationForward
  bool residual = false;            // input 3 is added before the activation (FuseConvResidual)
  ~ConvState() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (relu) cudnnDestroyActivationDescriptor(relu);
  }
};

Status PlanConv(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "X"));
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* wt, Input(ctx, 1, "W"));
  const bool has_bias = ctx.in.size() > 2 && ctx.in[2] != nullptr;
  const int rank = static_cast<int>(x->shape.size());
  if ((rank != 3 && rank != 4) || wt->shape.size() != x->shape.size()) {
    return Invalid(absl::StrCat("X ", ShapeToString(x->shape), " and W ",
                                ShapeToString(wt->shape), " must both be 3-D or both 4-D"));
  }
  const int spatial = rank - 2;
  const int64_t n = x->shape[0], cin = x->shape[1];
  const int64_t h = spatial == 2 ? x->shape[2] : 1, w = x->shape.back();
  const int64_t cout = wt->shape[0];
  const int64_t kh = spatial == 2 ? wt->shape[2] : 1, kw = wt->shape.back();
  const int64_t groups = ctx.node.attributes.GetInt("group", 1);
  if (groups < 1 || cin % groups != 0 || cout % groups != 0 || wt->shape[1] * groups != cin) {
    return Invalid(absl::StrCat("X ", ShapeToString(x->shape), " and W ",
                                ShapeToString(wt->shape), " do not fit group=", groups));
  }
  if (has_bias && ElementCount(ctx.in[2]->shape) != cout) {
    return Invalid(absl::StrCat("bias ", ShapeToString(ctx.in[2]->shape), " must have ", cout,
                                " elements"));
  }
  TESSERA_ASSIGN_OR_RETURN(cpu::Window2d win, cpu::ResolveWindow(ctx.node, spatial, h, w, kh, kw));
  if (win.pad_top != win.pad_bottom || win.pad_left != win.pad_right) {
    return absl::UnimplementedError("asymmetric Conv padding (cuDNN pads symmetrically)");
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t oh, cpu::WindowOutputSize(h, kh, win.stride_h, win.dilation_h,
                                                             win.pad_top, win.pad_bottom, false));
  TESSERA_ASSIGN_OR_RETURN(int64_t ow, cpu::WindowOutputSize(w, kw, win.stride_w, win.dilation_w,
                                                             win.pad_left, win.pad_right, false));

  auto state = std::make_shared<ConvState>();
  const std::string act = ctx.node.attributes.GetString("tessera_activation", "");
  if (act == "Relu") {
    state->act = UnaryOp::kRelu;
  } else if (act == "Clip") {
    state->act = UnaryOp::kClip;
    state->lo = ctx.node.attributes.GetFloat("tessera_clip_min", -3.402823466e38f);
    state->hi = ctx.node.attributes.GetFloat("tessera_clip_max", 3.402823466e38f);
  } else if (!act.empty()) {
    return absl::UnimplementedError(absl::StrCat("fused activation \"", act, "\""));
  }
  state->channels = cout;
  state->inner = oh * ow;
  const Shape out = spatial == 2 ? Shape{n, cout, oh, ow} : Shape{n, cout, ow};
  state->residual = ctx.node.attributes.GetInt("tessera_residual", 0) != 0;
  if (state->residual) {
    TESSERA_ASSIGN_OR_RETURN(const ValueMeta* z, Input(ctx, 3, "residual"));
    if (z->shape != out) {
      return Invalid(absl::StrCat("the fused residual ", ShapeToString(z->shape),
                                  " does not have the output's shape ", ShapeToString(out)));
    }
  }
  // cuDNN's fused call computes act(conv + alpha2 * z + bias), so it takes the residual as z.
  state->try_fused = has_bias && state->act == UnaryOp::kRelu;
  if (ctx.device.shapes_only) {
    (*ctx.out)[0] = ValueMeta{DataType::kFp32, out, nullptr};
    return absl::OkStatus();
  }

  const cudnnDataType_t type = CudnnType(ctx.device);
  const auto i32 = [](int64_t v) { return static_cast<int>(v); };
  TESSERA_RETURN_IF_ERROR(CudnnStatus(cudnnCreateTensorDescriptor(&state->x), "x descriptor"));
  TESSERA_RETURN_IF_ERROR(CudnnStatus(cudnnCreateTensorDescriptor(&state->y), "y descriptor"));
  TESSERA_RETURN_IF_ERROR(CudnnStatus(cudnnCreateFilterDescriptor(&state->w), "w descriptor"));
  TESSERA_RETURN_IF_ERROR(
      CudnnStatus(cudnnCreateConvolutionDescriptor(&state->conv), "conv descriptor"));
  TESSERA_RETURN_IF_ERROR(CudnnStatus(
      cudnnSetTensor4dDescriptor(state->x, CUDNN_TENSOR_NCHW, type, i32(n), i32(cin), i32(h),
                                 i32(w)),
      "x descriptor"));
  TESSERA_RETURN_IF_ERROR(CudnnStatus(
      cudnnSetTensor4dDescriptor(state->y, CUDNN_TENSOR_NCHW, type, i32(n), i32(cout), i32(oh),
                                 i32(ow)),
      "y descriptor"));
  TESSERA_RETURN_IF_ERROR(CudnnStatus(
      cudnnSetFilter4dDescriptor(state->w, type, CUDNN_TENSOR_NCHW, i32(cout), i32(cin / groups),
                                 i32(kh), i32(kw)),
      "w descriptor"));
  // FP32 accumulation in both precisions (PSEUDO_HALF for FP16 data).
  TESSERA_RETURN_IF_ERROR(CudnnStatus(
      cudnnSetConvolution2dDescriptor(state->conv, i32(win.pad_top), i32(win.pad_left),
                                      i32(win.stride_h), i32(win.stride_w), i32(win.dilation_h),
                                      i32(win.dilation_w), CUDNN_CROSS_CORRELATION,
                                      CUDNN_DATA_FLOAT),
      "conv descriptor"));
  TESSERA_RETURN_IF_ERROR(CudnnStatus(cudnnSetConvolutionGroupCount(state->conv, i32(groups)),
                                      "conv group count"));
  // FP32 must stay FP32: FMA math keeps TF32 tensor cores (10-bit mantissa) out.
  const cudnnMathType_t math = ctx.device.fp16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  TESSERA_RETURN_IF_ERROR(
      CudnnStatus(cudnnSetConvolutionMathType(state->conv, math), "conv math type"));
  if (has_bias) {
    TESSERA_RETURN_IF_ERROR(
        CudnnStatus(cudnnCreateTensorDescriptor(&state->bias), "bias descriptor"));
    TESSERA_RETURN_IF_ERROR(CudnnStatus(
        cudnnSetTensor4dDescriptor(state->bias, CUDNN_TENSOR_NCHW, type, 1, i32(cout), 1, 1),
        "bias descriptor"));
  }
  if (state->try_fused) {
    TESSERA_RETURN_IF_ERROR(
        CudnnStatus(cudnnCreateActivationDescriptor(&state->relu), "activation descriptor"));
    TESSERA_RETURN_IF_ERROR(CudnnStatus(
        cudnnSetActivationDescriptor(state->relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN,
                                     0.0),
        "activation descriptor"));
  }

  // Algorithm: cuDNN's heuristic ranking (no trial runs, so planning launches nothing); the first
  // that cuDNN accepts within the workspace cap. Timing the candidates (cudnnFind, PyTorch's
  // cudnn.benchmark) was measured worse on an H100 for ResNet-50 FP16 (bench/results/
  // 2026-11-22-engine-gpu-h100-vs-pytorch.md): 1.85 vs 0.90 ms at batch 1, 2.61 vs 1.86 at 8,
  // 62.5 vs 57.6 at 256. TESSERA_CUDNN_ALGO=find selects it anyway, for such comparisons.
  static const bool kFind = [] {
    const char* v = std::getenv("TESSERA_CUDNN_ALGO");
    return v != nullptr && std::string(v) == "find";
  }();
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  if (!kFind || cudnnFindConvolutionForwardAlgorithm(
                    ctx.device.cudnn, state->x, state->w, state->conv, state->y,
                    CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf) != CUDNN_STATUS_SUCCESS) {
    TESSERA_RETURN_IF_ERROR(CudnnStatus(
        cudnnGetConvolutionForwardAlgorithm_v7(ctx.device.cudnn, state->x, state->w, state->conv,
                                               state->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                               &returned, perf),
        "cudnnGetConvolutionForwardAlgorithm_v7"));
  }
  bool found = false;
  for (int i = 0; i < returned && !found; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (!ctx.device.fp16 && perf[i].mathType != CUDNN_FMA_MATH &&
        perf[i].mathType != CUDNN_DEFAULT_MATH) {
      continue;
    }
    // FP16: the math type the heuristic ranked this algorithm with, set before the workspace
    // query (the size depends on it). FP32 keeps FMA math.
    if (ctx.device.fp16) {
      TESSERA_RETURN_IF_ERROR(CudnnStatus(
          cudnnSetConvolutionMathType(state->conv, perf[i].mathType), "conv math type"));
    }
    size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(ctx.device.cudnn, state->x, state->w, state->conv,
                                                state->y, perf[i].algo,
                                                &bytes) != CUDNN_STATUS_SUCCESS ||
        bytes > kMaxConvWorkspace || perf[i].memory > kMaxConvWorkspace) {
      continue;
    }
    state->algo = perf[i].algo;
    ctx.state->workspace_bytes = std::max<uint64_t>(bytes, perf[i].memory);
    found = true;
  }
  if (!found) {
    return absl::UnimplementedError(absl::StrCat("cuDNN has no forward algorithm for X ",
                                                 ShapeToString(x->shape), " W ",
                                                 ShapeToString(wt->shape)));
  }
  ctx.state->ints = {0};  // 1 once the fused call was refused (then the unfused path runs)
  ctx.state->extra = state;
  (*ctx.out)[0] = ValueMeta{DataType::kFp32, out, nullptr};
  return absl::OkStatus();
}

Status LaunchConv(LaunchCtx& ctx) {
  auto* s = static_cast<ConvState*>(ctx.state->extra.get());
  const float one = 1.0f, zero = 0.0f;
  const void* bias = ctx.in.size() > 2 ? ctx.in[2] : nullptr;
  const void* residual = s->residual ? ctx.in[3] : nullptr;
  if (s->try_fused && ctx.state->ints[0] == 0) {
    // y = relu(conv(x, w) + alpha2 * z + bias): z is the residual (alpha2 = 1), or y itself with
    // alpha2 = 0 (its contents then do not matter).
    const float* alpha2 = residual != nullptr ? &one : &zero;
    cudnnStatus_t status = cudnnConvolutionBiasActivationForward(
        ctx.device.cudnn, &one, s->x, ctx.in[0], s->w, ctx.in[1], s->conv, s->algo, ctx.workspace,
        ctx.state->workspace_bytes, alpha2, s->y, residual != nullptr ? residual : ctx.out[0],
        s->bias, bias, s->relu, s->y, ctx.out[0]);
    if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
    // Refused for this configuration (checked before launching anything): use the unfused path
    // from now on. Only the first, eager Run of a shape can get here; graphs capture later.
    ctx.state->ints[0] = 1;
  }
  TESSERA_RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionForward(ctx.device.cudnn, &one, s->x, ctx.in[0], s->w, ctx.in[1], s->conv,
                              s->algo, ctx.workspace, ctx.state->workspace_bytes, &zero, s->y,
                              ctx.out[0]),
      "cudnnConvolutionForward"));
  if (bias == nullptr && residual == nullptr && s->act == UnaryOp::kIdentity) {
    return absl::OkStatus();
  }
  return CudaStatus(LaunchBiasActivation(ctx.device.elem(), ctx.out[0], bias, residual, ctx.out[0],
                                         ElementCount(ctx.out_meta[0]->shape), s->channels,
                                         s->inner, s->act, s->lo, s->hi, ctx.device.stream),
                    "bias/residual/activation kernel");
}

// ---- Pooling ------------------------------------------------------------------------------------

struct PoolState {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
  PoolGeometry geometry;
  int kind = 0;  // as LaunchPool2d
  ~PoolState() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (pool) cudnnDestroyPoolingDescriptor(pool);
  }
};

template <int kKind>  // 0 max, 1 average (count_include_pad decides 1 or 2)
Status PlanPool(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "X"));
  if (ctx.node.outputs.size() > 1) return absl::UnimplementedError("the Indices output");
  const std::vector<int64_t> kernel = ctx.node.attributes.GetInts("kernel_shape");
  const int spatial = static_cast<int>(kernel.size());
  if ((spatial != 1 && spatial != 2) || static_cast<int>(x->shape.size()) != spatial + 2) {
    return Invalid(absl::StrCat("X ", ShapeToString(x->shape), " does not fit a ", spatial,
                                "-D window"));
  }
  const int64_t h = spatial == 2 ? x->shape[2] : 1, w = x->shape.back();
  const int64_t kh = spatial == 2 ? kernel[0] : 1, kw = kernel.back();
  TESSERA_ASSIGN_OR_RETURN(cpu::Window2d win, cpu::ResolveWindow(ctx.node, spatial, h, w, kh, kw));
  const bool ceil_mode = ctx.node.attributes.GetInt("ceil_mode", 0) != 0;
  TESSERA_ASSIGN_OR_RETURN(int64_t oh, cpu::WindowOutputSize(h, kh, win.stride_h, win.dilation_h,
                                                             win.pad_top, win.pad_bottom,
                                                             ceil_mode));
  TESSERA_ASSIGN_OR_RETURN(int64_t ow, cpu::WindowOutputSize(w, kw, win.stride_w, win.dilation_w,
                                                             win.pad_left, win.pad_right,
                                                             ceil_mode));
  auto state = std::make_shared<PoolState>();
  state->kind = kKind == 0 ? 0 : (ctx.node.attributes.GetInt("count_include_pad", 0) ? 2 : 1);
  PoolGeometry& g = state->geometry;
  g.planes = x->shape[0] * x->shape[1];
  g.h = h, g.w = w, g.oh = oh, g.ow = ow;
  g.kernel_h = kh, g.kernel_w = kw, g.stride_h = win.stride_h, g.stride_w = win.stride_w;
  g.dilation_h = win.dilation_h, g.dilation_w = win.dilation_w;
  g.pad_top = win.pad_top, g.pad_left = win.pad_left;
  g.pad_bottom = win.pad_bottom, g.pad_right = win.pad_right;
  // cuDNN when its (symmetric, floor-mode, undilated) geometry yields exactly ONNX's output.
  const bool cudnn_fits = win.pad_top == win.pad_bottom && win.pad_left == win.pad_right &&
                          win.dilation_h == 1 && win.dilation_w == 1 &&
                          (h + 2 * win.pad_top - kh) / win.stride_h + 1 == oh &&
                          (w + 2 * win.pad_left - kw) / win.stride_w + 1 == ow;
  if (cudnn_fits && !ctx.device.shapes_only) {
    const auto i32 = [](int64_t v) { return static_cast<int>(v); };
    const cudnnDataType_t type = CudnnType(ctx.device);
    const cudnnPoolingMode_t mode = state->kind == 0   ? CUDNN_POOLING_MAX
                                    : state->kind == 1 ? CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
                                                       : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    TESSERA_RETURN_IF_ERROR(CudnnStatus(cudnnCreateTensorDescriptor(&state->x), "x descriptor"));
    TESSERA_RETURN_IF_ERROR(CudnnStatus(cudnnCreateTensorDescriptor(&state->y), "y descriptor"));
    TESSERA_RETURN_IF_ERROR(
        CudnnStatus(cudnnCreatePoolingDescriptor(&state->pool), "pooling descriptor"));
    TESSERA_RETURN_IF_ERROR(CudnnStatus(
        cudnnSetTensor4dDescriptor(state->x, CUDNN_TENSOR_NCHW, type, 1, i32(g.planes), i32(h),
                                   i32(w)),
        "x descriptor"));
    TESSERA_RETURN_IF_ERROR(CudnnStatus(
        cudnnSetTensor4dDescriptor(state->y, CUDNN_TENSOR_NCHW, type, 1, i32(g.planes), i32(oh),
                                   i32(ow)),
        "y descriptor"));
    TESSERA_RETURN_IF_ERROR(CudnnStatus(
        cudnnSetPooling2dDescriptor(state->pool, mode, CUDNN_NOT_PROPAGATE_NAN, i32(kh), i32(kw),
                                    i32(win.pad_top), i32(win.pad_left), i32(win.stride_h),
                                    i32(win.stride_w)),
        "pooling descriptor"));
  }
  ctx.state->extra = state;
  Shape out = {x->shape[0], x->shape[1]};
  if (spatial == 2) out.push_back(oh);
  out.push_back(ow);
  (*ctx.out)[0] = ValueMeta{DataType::kFp32, out, nullptr};
  return absl::OkStatus();
}

Status LaunchPool(LaunchCtx& ctx) {
  auto* s = static_cast<PoolState*>(ctx.state->extra.get());
  if (s->pool != nullptr) {
    const float one = 1.0f, zero = 0.0f;
    return CudnnStatus(cudnnPoolingForward(ctx.device.cudnn, s->pool, &one, s->x, ctx.in[0],
                                           &zero, s->y, ctx.out[0]),
                       "cudnnPoolingForward");
  }
  return CudaStatus(LaunchPool2d(s->kind, ctx.device.elem(), ctx.in[0], ctx.out[0], s->geometry,
                                 ctx.device.stream),
                    "pool kernel");
}

// The mean of each [N, C] plane: a row mean over [N*C, spatial]. ints = {rows, cols}.
Status PlanGlobalAveragePool(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, Input(ctx, 0, "X"));
  if (x->shape.size() < 3) return Invalid(absl::StrCat("X ", ShapeToString(x->shape), " rank < 3"));
  Shape out = {x->shape[0], x->shape[1]};
  int64_t spatial = 1;
  for (size_t d = 2; d < x->shape.size(); ++d) {
    spatial *= x->shape[d];
    out.push_back(1);
  }
  ctx.state->ints = {x->shape[0] * x->shape[1], spatial};
  (*ctx.out)[0] = ValueMeta{DataType::kFp32, out, nullptr};
  return absl::OkStatus();
}

Status LaunchGlobalAveragePool(LaunchCtx& ctx) {
  return CudaStatus(LaunchRowMean(ctx.device.elem(), ctx.in[0], ctx.out[0], ctx.state->ints[0],
                                  ctx.state->ints[1], ctx.device.stream),
                    "global average pool kernel");
}

// ---- Gemm / MatMul ------------------------------------------------------------------------------

// ints = {op_b_transposed, op_a_transposed, n, m, k, ldb, lda, batch, stride_b, stride_a,
//         has_c}; floats = {alpha, beta}. For Gemm with C, map broadcasts C onto Y.
Status Gemm(const LaunchCtx& ctx, const void* a, const void* b) {
  const auto& v = ctx.state->ints;
  const float alpha = ctx.state->floats[0], zero = 0.0f;
  const cudaDataType_t type = CublasType(ctx.device);
  const int n = static_cast<int>(v[2]), m = static_cast<int>(v[3]), k = static_cast<int>(v[4]);
  return CublasStatus(
      cublasGemmStridedBatchedEx(ctx.device.cublas, v[0] ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 v[1] ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, type,
                                 static_cast<int>(v[5]), v[8], a, type, static_cast<int>(v[6]),
                                 v[9], &zero, ctx.out[0], type, n, static_cast<long long>(m) * n,
                                 static_cast<int>(v[7]), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
}

Status CheckInt32(std::initializer_list<int64_t> values) {
  for (int64_t v : values) {
    if (v > 0x7fffffff) return absl::UnimplementedError("a GEMM dimension exceeds 2^31 - 1");
  }
  return absl::OkStatus();
}

Status PlanGemm(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* a, Input(ctx, 0, "A"));
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* b, Input(ctx, 1, "B"));
  if (a->shape.size() != 2 || b->shape.size() != 2) return Invalid("A and B must be 2-D");
  const bool ta = ctx.node.attributes.GetInt("transA", 0) != 0;
  const bool tb = ctx.node.attributes.GetInt("transB", 0) != 0;
  const int64_t m = ta ? a->shape[1] : a->shape[0], k = ta ? a->shape[0] : a->shape[1];
  const int64_t kb = tb ? b->shape[1] : b->shape[0], n = tb ? b->shape[0] : b->shape[1];
  if (k != kb) {
    return Invalid(absl::StrCat("A ", ShapeToString(a->shape), " and B ", ShapeToString(b->shape),
                                " do not multiply (transA=", ta, ", transB=", tb, ")"));
  }
  TESSERA_RETURN_IF_ERROR(CheckInt32({m, n, k}));
  const float alpha = ctx.node.attributes.GetFloat("alpha", 1.0f);
  const float beta = ctx.node.attributes.GetFloat("beta", 1.0f);
  const bool has_c = ctx.in.size() > 2 && ctx.in[2] != nullptr && beta != 0.0f;
  const Shape out = {m, n};
  if (has_c) {
    TESSERA_ASSIGN_OR_RETURN(const ValueMeta* c, Input(ctx, 2, "C"));
    TESSERA_ASSIGN_OR_RETURN(Shape broadcast, cpu::BroadcastShapes(c->shape, out));
    if (broadcast != out) {
      return Invalid(absl::StrCat("C ", ShapeToString(c->shape), " does not broadcast to ",
                                  ShapeToString(out)));
    }
    IndexMap& map = ctx.state->map;
    map = IndexMap{};
    map.rank = 2;
    map.dims[0] = m, map.dims[1] = n;
    map.stride[0][0] = n, map.stride[0][1] = 1;
    const Shape& cs = c->shape;
    const int64_t c_rows = cs.size() == 2 ? cs[0] : 1, c_cols = cs.empty() ? 1 : cs.back();
    map.stride[1][0] = c_rows == 1 ? 0 : c_cols;
    map.stride[1][1] = c_cols == 1 ? 0 : 1;
  }
  // Column-major: Yᵀ[n, m] = op(B)ᵀ · op(A)ᵀ. Row-major B [k, n] is already Bᵀ column-major (ld n);
  // a transposed B [n, k] needs OP_T (ld k). Likewise A: [m, k] → ld k; transposed [k, m] → OP_T, ld m.
  ctx.state->ints = {tb, ta, n, m, k, tb ? k : n, ta ? m : k, 1, 0, 0, has_c};
  ctx.state->floats = {alpha, beta};
  (*ctx.out)[0] = ValueMeta{DataType::kFp32, out, nullptr};
  return absl::OkStatus();
}

Status LaunchGemm(LaunchCtx& ctx) {
  TESSERA_RETURN_IF_ERROR(Gemm(ctx, ctx.in[0], ctx.in[1]));
  if (ctx.state->ints[10] == 0) return absl::OkStatus();
  // Y += beta * C (broadcast); Y is read at its own index, so in place is safe.
  return CudaStatus(LaunchBinary(BinaryOp::kAdd, ctx.device.elem(), ctx.out[0], ctx.in[2],
                                 ctx.out[0], ElementCount(ctx.out_meta[0]->shape),
                                 &ctx.state->map, ctx.state->floats[1], ctx.device.stream),
                    "gemm bias kernel");
}

Status PlanMatMul(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* a, Input(ctx, 0, "A"));
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* b, Input(ctx, 1, "B"));
  if (a->shape.empty() || b->shape.empty()) return Invalid("MatMul of a scalar");
  // 1-D operands become [1, k] / [k, 1]; the added dim is dropped from the output.
  Shape as = a->shape.size() == 1 ? Shape{1, a->shape[0]} : a->shape;
  Shape bs = b->shape.size() == 1 ? Shape{b->shape[0], 1} : b->shape;
  const int64_t m = as[as.size() - 2], k = as.back(), kb = bs[bs.size() - 2], n = bs.back();
  if (k != kb) {
    return Invalid(absl::StrCat("A ", ShapeToString(a->shape), " and B ", ShapeToString(b->shape),
                                " do not multiply"));
  }
  const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  TESSERA_ASSIGN_OR_RETURN(Shape batch, cpu::BroadcastShapes(a_batch, b_batch));
  const int64_t a_count = ElementCount(a_batch), b_count = ElementCount(b_batch);
  const int64_t count = ElementCount(batch);
  int64_t rows = m, batches = count, stride_a = m * k, stride_b = k * n;
  if (b_count == 1) {
    // B shared by every batch: fold A's (contiguous) batches into the rows of one GEMM.
    rows = a_count * m;
    batches = 1;
    stride_a = stride_b = 0;
    if (a_count != count) return absl::UnimplementedError("MatMul broadcasting A across batches");
  } else if (a_count == 1) {
    stride_a = 0;  // A shared by every batch
    if (b_count != count) return absl::UnimplementedError("MatMul broadcasting B across batches");
  } else if (a_batch != batch || b_batch != batch) {
    return absl::UnimplementedError(absl::StrCat("MatMul batch broadcasting of A ",
                                                 ShapeToString(a->shape), " and B ",
                                                 ShapeToString(b->shape)));
  }
  TESSERA_RETURN_IF_ERROR(CheckInt32({rows, n, k, batches}));
  // The epilogue FuseMatMulEpilogues gave this MatMul: bias (input 2) over the last dim, GELU.
  const bool has_bias = ctx.in.size() > 2 && ctx.in[2] != nullptr;
  if (has_bias) {
    TESSERA_ASSIGN_OR_RETURN(const ValueMeta* bias, Input(ctx, 2, "bias"));
    if (ElementCount(bias->shape) != n) {
      return Invalid(absl::StrCat("the fused bias ", ShapeToString(bias->shape), " does not have ",
                                  n, " elements"));
    }
  }
  const std::string act = ctx.node.attributes.GetString("tessera_activation", "");
  UnaryOp activation = UnaryOp::kIdentity;
  if (act == "Gelu") {
    activation = UnaryOp::kGelu;
  } else if (act == "GeluTanh") {
    activation = UnaryOp::kGeluTanh;
  } else if (!act.empty()) {
    return absl::UnimplementedError(absl::StrCat("MatMul activation \"", act, "\""));
  }
  ctx.state->ints = {0,
                     0,
                     n,
                     rows,
                     k,
                     n,
                     k,
                     batches,
                     stride_b,
                     stride_a,
                     0,
                     has_bias,
                     static_cast<int64_t>(activation)};
  ctx.state->floats = {1.0f, 0.0f};
  Shape out = batch;
  if (a->shape.size() > 1) out.push_back(m);
  if (b->shape.size() > 1) out.push_back(n);
  (*ctx.out)[0] = ValueMeta{DataType::kFp32, out, nullptr};
  return absl::OkStatus();
}

Status LaunchMatMul(LaunchCtx& ctx) {
  TESSERA_RETURN_IF_ERROR(Gemm(ctx, ctx.in[0], ctx.in[1]));
  const bool has_bias = ctx.state->ints[11] != 0;
  const auto activation = static_cast<UnaryOp>(ctx.state->ints[12]);
  if (!has_bias && activation == UnaryOp::kIdentity) return absl::OkStatus();
  // One pass over the product for the bias and GELU (up to ten elementwise nodes before fusion).
  return CudaStatus(
      LaunchBiasActivation(ctx.device.elem(), ctx.out[0], has_bias ? ctx.in[2] : nullptr, nullptr,
                           ctx.out[0], ElementCount(ctx.out_meta[0]->shape), ctx.state->ints[2], 1,
                           activation, 0.f, 0.f, ctx.device.stream),
      "MatMul epilogue kernel");
}

}  // namespace

const CudaOpDef* FindDnnOp(const std::string& op_type) {
  static const auto* const kOps = new std::map<std::string, CudaOpDef>{
      {"Conv", {PlanConv, LaunchConv}},
      {"MaxPool", {PlanPool<0>, LaunchPool}},
      {"AveragePool", {PlanPool<1>, LaunchPool}},
      {"GlobalAveragePool", {PlanGlobalAveragePool, LaunchGlobalAveragePool}},
      {"Gemm", {PlanGemm, LaunchGemm}},
      {"MatMul", {PlanMatMul, LaunchMatMul}},
  };
  auto it = kOps->find(op_type);
  return it == kOps->end() ? nullptr : &it->second;
}

Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(error), " (",
                                          cudaGetErrorString(error), ")"));
}

Status CudnnStatus(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudnnGetErrorString(status)));
}

Status CublasStatus(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cublasGetStatusName(status), " (",
                                          cublasGetStatusString(status), ")"));
}

}  // namespace tessera::engine::cuda
