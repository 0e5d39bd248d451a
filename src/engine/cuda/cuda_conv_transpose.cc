// CUDA op ConvTranspose (1-D and 2-D, NCHW; groups, strides, dilations, pads, output_padding,
// output_shape and auto_pad where cuDNN's symmetric padding expresses them; optional bias), one of
// the image ops of cuda_image_ops.cc (see cuda_ops.h for the plan/launch split). The transposed
// convolution of X by W is the backward-data pass (cudnnConvolutionBackwardData) of the forward
// convolution whose filter is W, whose dy is X and whose dx is the output; the bias is added after
// by the Conv epilogue kernel. Shape rules follow cpu/conv_transpose.cc.
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_op_util.h"
#include "engine/cuda/cuda_ops.h"

namespace tessera::engine::cuda {
namespace {

// The static shape import inferred for input `index`, or null.
const Shape* KnownShape(const CheckCtx& ctx, size_t index) {
  if (index >= ctx.node.inputs.size() || ctx.node.inputs[index] == kNoValue) return nullptr;
  const size_t id = static_cast<size_t>(ctx.node.inputs[index]);
  if (id >= ctx.graph.shapes.size() || !ctx.graph.shapes[id].has_value()) return nullptr;
  return &*ctx.graph.shapes[id];
}

// One spatial dim of a ConvTranspose: the output is the full transposed convolution
// (stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1 long) less pad_begin at the
// start and pad_end at the end, per the spec (cpu/conv_transpose.cc ResolveGeometry).
struct TransposeAxis {
  int64_t in = 0, kernel = 1, stride = 1, dilation = 1, pad_begin = 0, pad_end = 0, out = 0;
};

// The CPU kernel's geometry rules for spatial dims of sizes `in` and a kernel of `kernel`.
StatusOr<std::vector<TransposeAxis>> ResolveTranspose(const Node& node,
                                                      const std::vector<int64_t>& in,
                                                      const std::vector<int64_t>& kernel) {
  const Attributes& attrs = node.attributes;
  const size_t s = in.size();
  const std::vector<int64_t> kernel_shape = attrs.GetInts("kernel_shape", kernel);
  const std::vector<int64_t> stride = attrs.GetInts("strides", std::vector<int64_t>(s, 1));
  const std::vector<int64_t> dilation = attrs.GetInts("dilations", std::vector<int64_t>(s, 1));
  const std::vector<int64_t> pads = attrs.GetInts("pads", std::vector<int64_t>(2 * s, 0));
  const std::vector<int64_t> output_padding =
      attrs.GetInts("output_padding", std::vector<int64_t>(s, 0));
  std::vector<int64_t> output_shape = attrs.GetInts("output_shape");
  if (output_shape.size() == s + 2) {  // [N, C, spatial...] is allowed too
    output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  }
  if (kernel_shape != kernel) return Invalid("kernel_shape does not match W");
  if (stride.size() != s || dilation.size() != s || pads.size() != 2 * s ||
      output_padding.size() != s || (!output_shape.empty() && output_shape.size() != s)) {
    return Invalid(absl::StrCat("strides, dilations, output_padding and output_shape need ", s,
                                " entries and pads ", 2 * s));
  }
  const std::string auto_pad = attrs.GetString("auto_pad", "NOTSET");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  std::vector<TransposeAxis> axes(s);
  for (size_t d = 0; d < s; ++d) {
    constexpr int64_t kMax = int64_t{1} << 20;
    auto in_range = [&](int64_t v, int64_t lo) { return v >= lo && v <= kMax; };
    if (!in_range(stride[d], 1) || !in_range(dilation[d], 1) || !in_range(kernel[d], 1) ||
        !in_range(output_padding[d], 0) || !in_range(pads[d], 0) || !in_range(pads[s + d], 0) ||
        !in_range(in[d], 0) || (!output_shape.empty() && !in_range(output_shape[d], 1))) {
      return Invalid(absl::StrCat("strides, dilations and kernel dims must be in [1, ", kMax,
                                  "], pads, output_padding and input dims in [0, ", kMax, "]"));
    }
    TransposeAxis& a = axes[d];
    a.in = in[d], a.kernel = kernel[d], a.stride = stride[d], a.dilation = dilation[d];
    const int64_t natural =
        stride[d] * (in[d] - 1) + output_padding[d] + (kernel[d] - 1) * dilation[d] + 1;
    if (!output_shape.empty() || same) {
      a.out = !output_shape.empty() ? output_shape[d] : in[d] * stride[d];
      const int64_t total = natural - a.out;
      const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
      a.pad_begin = auto_pad == "SAME_UPPER" ? half : total - half;
    } else {
      const bool valid = auto_pad == "VALID";
      a.pad_begin = valid ? 0 : pads[d];
      a.out = natural - (valid ? 0 : pads[d] + pads[s + d]);
    }
    a.pad_end = natural - a.out - a.pad_begin;
    if (a.out < 1 || a.out > (int64_t{1} << 31)) {
      return Invalid(
          absl::StrCat("output size ", a.out, " along spatial dim ", d, " is out of range"));
    }
  }
  return axes;
}

// cuDNN computes output element i from the full transposed convolution's element i + pad, one pad
// for both ends, and accepts an output length only when the forward convolution of it (same pad)
// gives back the input length. With pad = pad_begin that holds iff
// 0 <= output_padding + pad_begin - pad_end < stride, which covers symmetric pads with
// output_padding < stride, and SAME/output_shape splits that happen to fit.
Status CheckCudnnTranspose(const std::vector<TransposeAxis>& axes) {
  for (size_t d = 0; d < axes.size(); ++d) {
    const TransposeAxis& a = axes[d];
    const int64_t span = a.out + 2 * a.pad_begin - ((a.kernel - 1) * a.dilation + 1);
    if (a.pad_begin < 0 || span < 0 || span / a.stride + 1 != a.in) {
      return Unimplemented(absl::StrCat(
          "ConvTranspose whose pads (begin ", a.pad_begin, ", end ", a.pad_end,
          ") and output size ", a.out, " along spatial dim ", d,
          " do not fit cuDNN's symmetric padding (output_padding + begin - end must be in "
          "[0, stride))"));
    }
  }
  return absl::OkStatus();
}

// cuDNN descriptors of one ConvTranspose node at one input shape: X is cuDNN's dy, the output its
// dx, W the filter of the forward convolution from dx to dy ([C_in, C_out / group, kH, kW] is
// exactly cuDNN's [K, C / group, R, S]).
struct ConvTransposeState {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionBwdDataAlgo_t algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  int64_t channels = 0, inner = 0;  // of the output, for the bias kernel
  ~ConvTransposeState() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

// Largest cuDNN workspace an algorithm may ask for (as for Conv, cuda_dnn_ops.cc).
constexpr size_t kMaxWorkspace = size_t{256} << 20;

Status PlanConvTranspose(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, FloatInput(ctx, 0, "X"));
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* wt, FloatInput(ctx, 1, "W"));
  const bool has_bias = Present(ctx, 2);
  const int rank = static_cast<int>(x->shape.size());
  if ((rank != 3 && rank != 4) || wt->shape.size() != x->shape.size()) {
    return Unimplemented(absl::StrCat("ConvTranspose of X ", ShapeToString(x->shape), " and W ",
                                      ShapeToString(wt->shape),
                                      "; the CUDA kernel takes 1-D and 2-D (3-D or 4-D X)"));
  }
  const int64_t n = x->shape[0], cin = x->shape[1];
  const int64_t groups = ctx.node.attributes.GetInt("group", 1);
  if (groups < 1 || cin % groups != 0 || wt->shape[0] != cin) {
    return Invalid(absl::StrCat("X ", ShapeToString(x->shape), " and W ", ShapeToString(wt->shape),
                                " do not fit group=", groups));
  }
  const int64_t cout = wt->shape[1] * groups;
  if (has_bias) {
    TESSERA_ASSIGN_OR_RETURN(const ValueMeta* bias, FloatInput(ctx, 2, "B"));
    if (bias->shape.size() != 1 || bias->shape[0] != cout) {
      return Invalid(absl::StrCat("bias ", ShapeToString(bias->shape), " must be [", cout, "]"));
    }
  }
  const std::vector<int64_t> in(x->shape.begin() + 2, x->shape.end());
  const std::vector<int64_t> kernel(wt->shape.begin() + 2, wt->shape.end());
  TESSERA_ASSIGN_OR_RETURN(std::vector<TransposeAxis> axes, ResolveTranspose(ctx.node, in, kernel));
  TESSERA_RETURN_IF_ERROR(CheckCudnnTranspose(axes));
  // 1-D runs as 2-D with a height of 1.
  if (axes.size() == 1) axes.insert(axes.begin(), TransposeAxis{1, 1, 1, 1, 0, 0, 1});
  const TransposeAxis& ah = axes[0];
  const TransposeAxis& aw = axes[1];
  Shape out = {n, cout};
  for (size_t d = axes.size() + 2 - rank; d < axes.size(); ++d) out.push_back(axes[d].out);
  double out_elements = 1;
  for (int64_t d : out) out_elements *= static_cast<double>(d);
  if (out_elements > static_cast<double>(int64_t{1} << 36)) {
    return Invalid(absl::StrCat("the output ", ShapeToString(out), " is too large"));
  }
  if (ctx.device.shapes_only) {  // no cuDNN handle to choose an algorithm with
    (*ctx.out)[0] = ValueMeta{DataType::kFp32, out, nullptr};
    return absl::OkStatus();
  }

  auto state = std::make_shared<ConvTransposeState>();
  state->channels = cout;
  state->inner = ah.out * aw.out;
  const cudnnDataType_t type = ctx.device.fp16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
  const auto i32 = [](int64_t v) { return static_cast<int>(v); };
  TESSERA_RETURN_IF_ERROR(CudnnStatus(cudnnCreateTensorDescriptor(&state->x), "x descriptor"));
  TESSERA_RETURN_IF_ERROR(CudnnStatus(cudnnCreateTensorDescriptor(&state->y), "y descriptor"));
  TESSERA_RETURN_IF_ERROR(CudnnStatus(cudnnCreateFilterDescriptor(&state->w), "w descriptor"));
  TESSERA_RETURN_IF_ERROR(
      CudnnStatus(cudnnCreateConvolutionDescriptor(&state->conv), "conv descriptor"));
  TESSERA_RETURN_IF_ERROR(
      CudnnStatus(cudnnSetTensor4dDescriptor(state->x, CUDNN_TENSOR_NCHW, type, i32(n), i32(cin),
                                             i32(ah.in), i32(aw.in)),
                  "x descriptor"));
  TESSERA_RETURN_IF_ERROR(
      CudnnStatus(cudnnSetTensor4dDescriptor(state->y, CUDNN_TENSOR_NCHW, type, i32(n), i32(cout),
                                             i32(ah.out), i32(aw.out)),
                  "y descriptor"));
  TESSERA_RETURN_IF_ERROR(
      CudnnStatus(cudnnSetFilter4dDescriptor(state->w, type, CUDNN_TENSOR_NCHW, i32(cin),
                                             i32(cout / groups), i32(ah.kernel), i32(aw.kernel)),
                  "w descriptor"));
  // FP32 accumulation in both precisions, as for Conv.
  TESSERA_RETURN_IF_ERROR(CudnnStatus(
      cudnnSetConvolution2dDescriptor(state->conv, i32(ah.pad_begin), i32(aw.pad_begin),
                                      i32(ah.stride), i32(aw.stride), i32(ah.dilation),
                                      i32(aw.dilation), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
      "conv descriptor"));
  TESSERA_RETURN_IF_ERROR(
      CudnnStatus(cudnnSetConvolutionGroupCount(state->conv, i32(groups)), "conv group count"));
  // FP32 must stay FP32: FMA math keeps TF32 tensor cores out.
  const cudnnMathType_t math = ctx.device.fp16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  TESSERA_RETURN_IF_ERROR(
      CudnnStatus(cudnnSetConvolutionMathType(state->conv, math), "conv math type"));

  // Algorithm: cuDNN's heuristic ranking (no trial runs), the first it accepts within the
  // workspace cap, as PlanConv does for the forward convolution.
  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  int returned = 0;
  TESSERA_RETURN_IF_ERROR(CudnnStatus(
      cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.device.cudnn, state->w, state->x, state->conv,
                                                  state->y, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                  &returned, perf),
      "cudnnGetConvolutionBackwardDataAlgorithm_v7"));
  bool found = false;
  for (int i = 0; i < returned && !found; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (!ctx.device.fp16 && perf[i].mathType != CUDNN_FMA_MATH &&
        perf[i].mathType != CUDNN_DEFAULT_MATH) {
      continue;
    }
    // FP16: the math type the heuristic ranked this algorithm with, set before the workspace
    // query (the size depends on it).
    if (ctx.device.fp16) {
      TESSERA_RETURN_IF_ERROR(CudnnStatus(
          cudnnSetConvolutionMathType(state->conv, perf[i].mathType), "conv math type"));
    }
    size_t bytes = 0;
    if (cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.device.cudnn, state->w, state->x,
                                                     state->conv, state->y, perf[i].algo,
                                                     &bytes) != CUDNN_STATUS_SUCCESS ||
        bytes > kMaxWorkspace || perf[i].memory > kMaxWorkspace) {
      continue;
    }
    state->algo = perf[i].algo;
    ctx.state->workspace_bytes = std::max<uint64_t>(bytes, perf[i].memory);
    found = true;
  }
  if (!found) {
    return Unimplemented(
        absl::StrCat("cuDNN has no backward-data algorithm for ConvTranspose of X ",
                     ShapeToString(x->shape), " W ", ShapeToString(wt->shape)));
  }
  ctx.state->extra = state;
  (*ctx.out)[0] = ValueMeta{DataType::kFp32, out, nullptr};
  return absl::OkStatus();
}

Status LaunchConvTranspose(LaunchCtx& ctx) {
  auto* s = static_cast<ConvTransposeState*>(ctx.state->extra.get());
  const float one = 1.0f, zero = 0.0f;
  TESSERA_RETURN_IF_ERROR(
      CudnnStatus(cudnnConvolutionBackwardData(ctx.device.cudnn, &one, s->w, ctx.in[1], s->x,
                                               ctx.in[0], s->conv, s->algo, ctx.workspace,
                                               ctx.state->workspace_bytes, &zero, s->y, ctx.out[0]),
                  "cudnnConvolutionBackwardData"));
  if (ctx.in.size() < 3 || ctx.in[2] == nullptr) return absl::OkStatus();
  return CudaStatus(
      LaunchBiasActivation(ctx.device.elem(), ctx.out[0], ctx.in[2], nullptr, ctx.out[0],
                           ElementCount(ctx.out_meta[0]->shape), s->channels, s->inner,
                           UnaryOp::kIdentity, 0.f, 0.f, ctx.device.stream),
      "ConvTranspose bias kernel");
}

// Refuses at load a rank other than 3 or 4 and, when import knows X's spatial size and W's
// kernel, pads that cuDNN's symmetric padding cannot express.
std::string CheckConvTranspose(const CheckCtx& ctx) {
  if (std::string why = CheckFloatInputs(ctx); !why.empty()) return why;
  const Shape* x = KnownShape(ctx, 0);
  const Shape* w = KnownShape(ctx, 1);
  if (x != nullptr && x->size() != 3 && x->size() != 4) {
    return absl::StrCat("ConvTranspose of a rank-", x->size(),
                        " X; the CUDA kernel takes 1-D and 2-D (3-D or 4-D X)");
  }
  if (x == nullptr || w == nullptr || w->size() != x->size()) return "";
  const std::vector<int64_t> in(x->begin() + 2, x->end()), kernel(w->begin() + 2, w->end());
  for (int64_t d : in) {
    if (d < 0) return "";
  }
  for (int64_t d : kernel) {
    if (d < 0) return "";
  }
  StatusOr<std::vector<TransposeAxis>> axes = ResolveTranspose(ctx.node, in, kernel);
  if (!axes.ok()) return "";  // invalid: the plan step reports it
  const Status fits = CheckCudnnTranspose(*axes);
  return fits.ok() ? "" : std::string(fits.message());
}

}  // namespace

const CudaOpDef& ConvTransposeOp() {
  static const CudaOpDef kOp{PlanConvTranspose, LaunchConvTranspose, CheckConvTranspose};
  return kOp;
}

}  // namespace tessera::engine::cuda
