// Integer convolutions through oneDNN: 8-bit activations (UINT8 or INT8, with a zero point) times
// INT8 weights (zero point 0), summed in INT32, for two nodes.
// - QLinearConv: with the INT32 bias, then requantized to 8 bits by oneDNN's output scales and
//   destination zero point. On the dev VM's AVX-512 VNNI cores this runs a QDQ-quantized ResNet-18
//   at about 3x the speed of its FP32 convolutions (docs/engine.md, "Quantized models (QDQ)").
// - kConvIntegerToFloat (graph.h; quantize_dynamic's ConvInteger with its Cast, scales, bias and
//   Relu): x's zero point is DynamicQuantizeLinear's, known only at run time, and the FP32 result
//   gets the scales, bias and Relu as post-ops (binary multiply and add by per-channel operands,
//   passed at run time too) while each tile is in registers.
//
// Only where the CPU has 8-bit dot products that sum into 32 bits (AVX-VNNI, AVX-512 VNNI, AMX):
// without them oneDNN multiplies UINT8 by INT8 pairwise into saturating 16-bit sums, which can
// clip for full-range values, so the node runs the own kernel there (exact), as it does for
// weights with a zero point (oneDNN takes none) and, for QLinearConv, for scales or zero points
// computed at run time. FastQLinearConv tells the graph passes whether to make QLinearConv nodes.
//
// kConvIntegerToFloat with UINT8 weights W (quantize_dynamic's QUInt8) and one zero point zW: the
// primitive takes W - 128 and writes INT32 sums, each output pixel of which lacks (128 - zW) times
// the sum of x - zX over its window in its group's channels (padding is x's zero point, adding
// nothing); a depthwise convolution's groups are single channels (shifted_conv_sums.h). That is
// added in INT32 and the scales, bias, residual and Relu or Clip applied after the primitive, as
// the own kernel does: in FP32 post-ops the sums of deep layers (past 2^24) round, and one
// rounding apart, a later DynamicQuantizeLinear may put a value on the next step of its grid.
//
// Activations are channels-last, as the FP32 Convs' are (dnnl_ops.cc), and the work is cut into
// single-threaded parts by images or rows the same way (conv_slices.h).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/conv_slices.h"
#include "engine/cpu/dnnl_util.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/qlinear_conv.h"
#include "engine/cpu/shifted_conv_sums.h"

namespace tessera::engine::cpu {
namespace {

bool HasEightBitDotProducts() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2_vnni:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
      return true;
    default:
      return false;
  }
}

memory::data_type EightBitType(DataType t) {
  return t == DataType::kInt8 ? memory::data_type::s8 : memory::data_type::u8;
}

// One part (conv_slices.h): a primitive over some of the images or output rows.
struct QConvPart {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward primitive;
  memory weights;
  int64_t src_offset = 0, dst_offset = 0;  // in elements (bytes)
  int64_t dst_pixels = 0;
};

struct QConvEntry {
  std::vector<QConvPart> parts;
};

class QConvState final : public KernelState {
 public:
  explicit QConvState(bool constant_params) : constant_params(constant_params) {}

  // Every input but x is a constant, so primitives can be made with the node's scales and zero
  // points and the weights reordered once.
  const bool constant_params;
  PrimitiveCache<QConvEntry> cache;
  ReorderedWeights weights;
  ShiftedWeights shifted_weights;  // UINT8 weights as INT8
};

dnnl::primitive_attr IntegerConvAttr(const Node& node, const QLinearConvParams& p) {
  dnnl::primitive_attr attr;
  std::vector<float> scales = p.Multipliers();
  bool per_channel = false;
  for (float s : scales) per_channel |= s != scales[0];
  if (!per_channel) scales.resize(1);
  attr.set_output_scales(per_channel ? 1 << 1 : 0, scales);  // dst dim 1: output channels
  if (p.x_zero != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {p.x_zero});
  if (p.y_zero != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {p.y_zero});
  // A Relu between the Conv and its QuantizeLinear (graph_passes.h FuseQdqConv): applied to the
  // scaled sum before the zero point is added, which is Relu of the real value, requantized.
  if (node.attributes.GetString("tessera_activation", "") == "Relu") {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  return WithUserScratchpad(attr);
}

// FP32 [1, C, 1, 1]: a post-op operand of one value per output channel.
memory::desc ChannelVectorDesc(int64_t channels) {
  return memory::desc(Dims({1, channels, 1, 1}), memory::data_type::f32, Tag::nchw);
}

// One node's integer convolution, as both kernels describe it.
struct IntegerConv {
  const Value* x = nullptr;
  const Value* w = nullptr;  // INT8 [M, C / group, kH, kW]
  std::vector<int64_t> key;  // beyond x's shape and the thread count, for the cache
  memory::data_type y_type = memory::data_type::u8;
  DataType y_dtype = DataType::kUint8;
  bool s32_bias = false;  // the primitive takes an INT32 bias (DNNL_ARG_BIAS)
  // The primitive's attributes for a part whose destination is `dst`.
  std::function<dnnl::primitive_attr(const memory::desc& dst)> attr;
  // Arguments beyond source, weights, bias, destination and scratchpad, per execution.
  std::unordered_map<int, memory> extra_args;
  const int32_t* bias = nullptr;  // with s32_bias
  // A channels-last FP32 value of the output's shape whose part each part's post-op `residual_arg`
  // adds (DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1); null for none.
  const float* residual = nullptr;
  Shape residual_shape;
  int residual_arg = 0;
  // UINT8 weights given as w - 128, with w_shift = 128 - zW (0 for zW = 128) and x's zero point.
  // The primitive then writes INT32 sums (y_type s32), and `finish` makes the output of a part's
  // `pixels` pixels from `first_pixel` in place, from their sums and each pixel's corrections
  // (one per group).
  bool shifted = false;
  int32_t w_shift = 0;
  int32_t x_zero = 0;
  std::function<void(int32_t* sums, const int32_t* corrections, int64_t first_pixel,
                     int64_t pixels)>
      finish;
};

// Runs `conv` as oneDNN's integer convolution; UNIMPLEMENTED where oneDNN cannot (the caller runs
// its own kernel then).
Status RunIntegerConv(const OpContext& ctx, const Node& node, QConvState* state,
                      const IntegerConv& conv, std::vector<Value>* outputs) {
  const Value& x_in = *conv.x;
  const Value& wt = *conv.w;
  if (x_in.rank() != 4 || wt.rank() != 4 || wt.dtype() != DataType::kInt8) {
    return absl::UnimplementedError("not a 2-D convolution with INT8 weights");
  }
  const int64_t batch = x_in.dim(0), cin = x_in.dim(1), h = x_in.dim(2), w = x_in.dim(3);
  const int64_t cout = wt.dim(0), kh = wt.dim(2), kw = wt.dim(3);
  const int64_t groups = node.attributes.GetInt("group", 1);
  const std::vector<int64_t> kernel_shape = node.attributes.GetInts("kernel_shape");
  if (groups < 1 || cin % groups != 0 || cout % groups != 0 || wt.dim(1) * groups != cin ||
      (!kernel_shape.empty() && kernel_shape != std::vector<int64_t>{kh, kw})) {
    return absl::UnimplementedError("the own kernel reports the shapes");
  }
  TESSERA_ASSIGN_OR_RETURN(Window2d win, ResolveWindow(node, 2, h, w, kh, kw));
  TESSERA_ASSIGN_OR_RETURN(int64_t oh, WindowOutputSize(h, kh, win.stride_h, win.dilation_h,
                                                        win.pad_top, win.pad_bottom, false));
  TESSERA_ASSIGN_OR_RETURN(int64_t ow, WindowOutputSize(w, kw, win.stride_w, win.dilation_w,
                                                        win.pad_left, win.pad_right, false));
  if (conv.residual != nullptr && conv.residual_shape != Shape{batch, cout, oh, ow}) {
    return absl::UnimplementedError("the own kernel reports the residual's shape");
  }
  const memory::dims weight_dims =
      groups == 1 ? Dims({cout, cin, kh, kw}) : Dims({groups, cout / groups, cin / groups, kh, kw});
  const Tag weight_tag = groups == 1 ? Tag::oihw : Tag::goihw;
  const memory::data_type x_type = EightBitType(x_in.dtype());
  const int threads = ctx.pool != nullptr ? ctx.pool->usable_threads() : 1;
  const ConvGeometry geometry = GeometryOf(batch, h, w, oh, ow, win);

  // UNIMPLEMENTED when oneDNN has no kernel for the combination.
  auto build = [&]() -> StatusOr<std::shared_ptr<const QConvEntry>> {
    try {
      auto entry = std::make_shared<QConvEntry>();
      const std::vector<ConvSlice> slices = SliceConv(geometry, threads);
      // A primitive splits its work for the OpenMP team there is when it is made.
      omp_set_num_threads(slices.size() > 1 ? 1 : threads);
      memory user_weights(memory::desc(weight_dims, memory::data_type::s8, weight_tag), CpuEngine(),
                          const_cast<int8_t*>(wt.data<int8_t>()));
      for (const ConvSlice& s : slices) {
        memory::desc src_md(Dims({s.images, cin, s.in_rows, s.w}), x_type, Tag::nhwc);
        memory::desc weights_md(weight_dims, memory::data_type::s8, Tag::any);
        memory::desc bias_md = conv.s32_bias
                                   ? memory::desc(Dims({cout}), memory::data_type::s32, Tag::x)
                                   : memory::desc();
        memory::desc dst_md(Dims({s.images, cout, s.out_rows, s.ow}), conv.y_type, Tag::nhwc);
        const dnnl::primitive_attr attr = conv.attr(dst_md);
        dnnl::convolution_forward::desc desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md,
            weights_md, bias_md, dst_md, Dims({win.stride_h, win.stride_w}),
            Dims({win.dilation_h - 1, win.dilation_w - 1}), Dims({s.pad_top, win.pad_left}),
            Dims({s.pad_bottom, win.pad_right}));
        QConvPart part;
        part.pd = dnnl::convolution_forward::primitive_desc(desc, attr, CpuEngine());
        part.primitive = dnnl::convolution_forward(part.pd);
        part.weights = state->weights.Get(part.pd.weights_desc(), user_weights);
        part.src_offset = (s.image * s.h + s.in_row) * s.w * cin;
        part.dst_offset = (s.image * s.oh + s.out_row) * s.ow * cout;
        part.dst_pixels = s.images * s.out_rows * s.ow;
        entry->parts.push_back(std::move(part));
      }
      return std::shared_ptr<const QConvEntry>(std::move(entry));
    } catch (const dnnl::error& e) {
      return absl::UnimplementedError(e.what());
    }
  };

  std::vector<int64_t> key = x_in.shape();
  key.push_back(threads);
  key.insert(key.end(), conv.key.begin(), conv.key.end());
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const QConvEntry> entry, state->cache.Get(key, build));
  try {
    const Value x = ToChannelsLast(x_in, ctx.pool);
    Value y = ctx.NewOutput(0, conv.y_dtype, {batch, cout, oh, ow});
    const std::unique_ptr<int32_t[]> corrections =
        conv.shifted
            ? WindowCorrections(x, groups, kh, kw, win, oh, ow, conv.x_zero, conv.w_shift, ctx.pool)
            : nullptr;
    char* y_bytes = static_cast<char*>(y.mutable_data<void>());
    const auto y_size = static_cast<int64_t>(ElementSize(conv.y_dtype));
    const std::string error = RunParts(ctx, entry->parts.size(), threads, [&](size_t i) {
      const QConvPart& part = entry->parts[i];
      dnnl::stream& stream = ThreadStream();
      std::unordered_map<int, memory> args = conv.extra_args;
      args[DNNL_ARG_SRC] = memory(part.pd.src_desc(), CpuEngine(),
                                  const_cast<uint8_t*>(x.data<uint8_t>()) + part.src_offset);
      args[DNNL_ARG_WEIGHTS] = part.weights;
      if (conv.s32_bias) {
        args[DNNL_ARG_BIAS] =
            memory(part.pd.bias_desc(), CpuEngine(), const_cast<int32_t*>(conv.bias));
      }
      args[DNNL_ARG_DST] =
          memory(part.pd.dst_desc(), CpuEngine(), y_bytes + part.dst_offset * y_size);
      if (conv.residual != nullptr && !conv.shifted) {
        // The part's destination shape and layout, over the residual's bytes.
        args[conv.residual_arg] = memory(part.pd.dst_desc(), CpuEngine(),
                                         const_cast<float*>(conv.residual) + part.dst_offset);
      }
      args[DNNL_ARG_SCRATCHPAD] = ThreadScratchpad(part.pd.scratchpad_desc());
      part.primitive.execute(stream, args);
      stream.wait();
      if (conv.shifted) {
        const int64_t first_pixel = part.dst_offset / cout;
        conv.finish(reinterpret_cast<int32_t*>(y_bytes) + part.dst_offset,
                    corrections.get() + first_pixel * groups, first_pixel, part.dst_pixels);
      }
    });
    if (!error.empty()) {
      return absl::InternalError(absl::StrCat("oneDNN integer convolution failed: ", error));
    }
    (*outputs)[0] = y.WithLayout(Layout::kChannelsLast);
    return absl::OkStatus();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN integer convolution failed: ", e.what()));
  }
}

// Whether a kConvIntegerToFloat node's operands are the form RunIntegerConv takes, with its
// post-ops: x's zero point one value, weights PrimitiveWeights takes, FP32 scales and bias of one
// value or one per output channel.
bool FloatConvCovered(const Inputs& inputs) {
  if (inputs.size() < 4 || inputs[0] == nullptr || inputs[1] == nullptr || inputs[2] == nullptr ||
      inputs[3] == nullptr || inputs[1]->rank() != 4) {
    return false;
  }
  const int64_t cout = inputs[1]->dim(0);
  const Value* x_zero = inputs.size() > 4 ? inputs[4] : nullptr;
  const Value* w_zero = inputs.size() > 5 ? inputs[5] : nullptr;
  const Value* bias = inputs.size() > 6 ? inputs[6] : nullptr;
  const Value* residual = inputs.size() > 7 ? inputs[7] : nullptr;
  if (residual != nullptr && (residual->dtype() != DataType::kFp32 || residual->rank() != 4 ||
                              residual->dim(0) != inputs[0]->dim(0) || residual->dim(1) != cout)) {
    return false;  // the own kernel checks the rest of the shape
  }
  auto per_channel = [&](const Value* v) {
    return v == nullptr ||
           (v->dtype() == DataType::kFp32 && (v->num_elements() == 1 || v->num_elements() == cout));
  };
  if (inputs[2]->dtype() != DataType::kFp32 || inputs[2]->num_elements() != 1 ||
      !per_channel(inputs[3]) || !per_channel(bias) ||
      (x_zero != nullptr &&
       (x_zero->dtype() != inputs[0]->dtype() || x_zero->num_elements() != 1))) {
    return false;
  }
  return PrimitiveWeights(*inputs[1], w_zero);
}

}  // namespace

bool FastQLinearConv() {
  static const bool fast = HasEightBitDotProducts();
  return fast;
}

std::unique_ptr<KernelState> MakeDnnlQLinearConvState(const Node& node, const Graph& graph) {
  bool constant = node.inputs.size() >= 8;
  for (size_t i = 1; i < node.inputs.size(); ++i) {
    if (node.inputs[i] != kNoValue && !graph.IsConstant(node.inputs[i])) constant = false;
  }
  return std::make_unique<QConvState>(constant);
}

Status RunDnnlQLinearConv(const OpContext& ctx, const Node& node, const Inputs& inputs,
                          std::vector<Value>* outputs) {
  auto* state = static_cast<QConvState*>(ctx.state);
  StatusOr<QLinearConvParams> params = ReadQLinearConvParams(inputs);
  if (!params.ok() || state == nullptr || !state->constant_params || !FastQLinearConv()) {
    return RunReference(RunQLinearConv, ctx, node, inputs, outputs);  // it reports what is wrong
  }
  const QLinearConvParams& p = *params;
  for (int32_t z : p.w_zero) {
    if (z != 0) return RunReference(RunQLinearConv, ctx, node, inputs, outputs);
  }
  IntegerConv conv;
  conv.x = p.x;
  conv.w = p.w;
  conv.y_type = EightBitType(p.y_type);
  conv.y_dtype = p.y_type;
  conv.s32_bias = true;
  conv.attr = [&](const memory::desc&) { return IntegerConvAttr(node, p); };
  std::vector<int32_t> zero_bias;
  if (p.bias == nullptr) zero_bias.assign(p.w->rank() > 0 ? p.w->dim(0) : 0, 0);
  conv.bias = p.bias != nullptr ? p.bias->data<int32_t>() : zero_bias.data();
  Status status = RunIntegerConv(ctx, node, state, conv, outputs);
  if (absl::IsUnimplemented(status)) {
    return RunReference(RunQLinearConv, ctx, node, inputs, outputs);
  }
  return status;
}

std::unique_ptr<KernelState> MakeDnnlConvIntegerToFloatState(const Node& node, const Graph& graph) {
  // The weights and their zero point constant: the weights are reordered once.
  bool constant = node.inputs.size() > 1 && graph.IsConstant(node.inputs[1]);
  if (node.inputs.size() > 5 && node.inputs[5] != kNoValue && !graph.IsConstant(node.inputs[5])) {
    constant = false;
  }
  return std::make_unique<QConvState>(constant);
}

Status RunDnnlConvIntegerToFloat(const OpContext& ctx, const Node& node, const Inputs& inputs,
                                 std::vector<Value>* outputs) {
  auto* state = static_cast<QConvState*>(ctx.state);
  float lo = 0.0f, hi = 0.0f;
  const bool clamp = FusedClamp(node, &lo, &hi);
  if (state == nullptr || !state->constant_params || !FastQLinearConv() ||
      !FloatConvCovered(inputs) || (!clamp && node.attributes.Has("tessera_activation"))) {
    return RunReference(RunConvIntegerToFloat, ctx, node, inputs, outputs);
  }
  const int64_t cout = inputs[1]->dim(0);
  const Value* w_scale = inputs[3];
  const Value* bias = inputs.size() > 6 ? inputs[6] : nullptr;
  // The post-ops' operands, one value per channel: x_scale * w_scale as the fused Mul computed
  // it, and the bias.
  std::vector<float> scales(cout), biases;
  for (int64_t m = 0; m < cout; ++m) {
    scales[m] =
        inputs[2]->data<float>()[0] * w_scale->data<float>()[w_scale->num_elements() == 1 ? 0 : m];
  }
  if (bias != nullptr) {
    biases.resize(cout);
    for (int64_t m = 0; m < cout; ++m) {
      biases[m] = bias->data<float>()[bias->num_elements() == 1 ? 0 : m];
    }
  }
  int32_t x_zero = inputs.size() > 4 && inputs[4] != nullptr ? EightBitElement(*inputs[4], 0) : 0;
  IntegerConv conv;
  conv.x = inputs[0];
  conv.w = inputs[1];
  // UINT8 weights: run as w - 128 into INT32 sums, finished here (see the top of the file).
  const bool shifted = inputs[1]->dtype() == DataType::kUint8;
  const int64_t groups = node.attributes.GetInt("group", 1);
  // The residual in the output's layout; its shape is checked against the output's below.
  const Value* residual_in = inputs.size() > 7 ? inputs[7] : nullptr;
  Value residual;
  if (residual_in != nullptr) {
    residual = ToChannelsLast(*residual_in, ctx.pool);
    conv.residual = residual.data<float>();
    conv.residual_shape = residual.shape();
    conv.residual_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(bias != nullptr ? 2 : 1) | DNNL_ARG_SRC_1;
  }
  conv.key = {bias != nullptr, residual_in != nullptr, clamp, shifted};
  conv.y_type = shifted ? memory::data_type::s32 : memory::data_type::f32;
  conv.y_dtype = DataType::kFp32;
  conv.attr = [&](const memory::desc& residual_md) {
    dnnl::primitive_attr attr;
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (shifted) return WithUserScratchpad(attr);
    dnnl::post_ops ops;
    ops.append_binary(dnnl::algorithm::binary_mul, ChannelVectorDesc(cout));
    if (bias != nullptr) ops.append_binary(dnnl::algorithm::binary_add, ChannelVectorDesc(cout));
    if (residual_in != nullptr) {
      // Each part's slice of it, as its destination is.
      ops.append_binary(dnnl::algorithm::binary_add, residual_md);
    }
    if (clamp && lo == 0.0f && std::isinf(hi)) {
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    } else if (clamp) {  // a Clip, its infinite bounds as the largest floats
      const float max = std::numeric_limits<float>::max();
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, std::max(lo, -max),
                         std::min(hi, max));
    }
    attr.set_post_ops(ops);
    return WithUserScratchpad(attr);
  };
  conv.extra_args = {
      {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC,
       memory(memory::desc(Dims({1}), memory::data_type::s32, Tag::x), CpuEngine(), &x_zero)}};
  if (!shifted) {  // the post-ops' operands
    conv.extra_args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] =
        memory(ChannelVectorDesc(cout), CpuEngine(), scales.data());
    if (bias != nullptr) {
      conv.extra_args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1] =
          memory(ChannelVectorDesc(cout), CpuEngine(), biases.data());
    }
  }
  if (shifted) {
    conv.w = &state->shifted_weights.Of(*inputs[1]);
    const Value* w_zero = inputs.size() > 5 ? inputs[5] : nullptr;
    conv.shifted = true;
    conv.w_shift = 128 - (w_zero != nullptr ? EightBitElement(*w_zero, 0) : 0);
    conv.x_zero = x_zero;
    conv.finish = [&](int32_t* sums, const int32_t* corrections, int64_t first_pixel,
                      int64_t pixels) {
      FinishShiftedSums(sums, corrections, pixels, cout, groups, scales.data(),
                        bias != nullptr ? biases.data() : nullptr,
                        conv.residual != nullptr ? conv.residual + first_pixel * cout : nullptr,
                        clamp, lo, hi);
    };
  }
  Status status = RunIntegerConv(ctx, node, state, conv, outputs);
  if (absl::IsUnimplemented(status)) {
    return RunReference(RunConvIntegerToFloat, ctx, node, inputs, outputs);
  }
  return status;
}

}  // namespace tessera::engine::cpu
