// CUDA ops: image-to-image ops: Pad, Resize (and Upsample), InstanceNormalization and
// ConvTranspose (see cuda_ops.h for the plan/launch split). Shape rules and the forms accepted
// follow the CPU kernels (cpu/slice_ops.cc RunPad, cpu/resize.cc, cpu/norm_ops.cc,
// cpu/conv_transpose.cc), so both backends agree on every output shape; what the CUDA kernels lack
// is refused with UNIMPLEMENTED, at load where the graph alone tells (the check steps), else at
// plan. Pad, Resize and InstanceNormalization are own kernels (image_kernels.cu); ConvTranspose,
// cuDNN's backward-data convolution, is in cuda_conv_transpose.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"
#include "engine/cuda/cuda_op_util.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/image_kernels.h"

namespace tessera::engine::cuda {
namespace {

// The contents of a host-known input of `dtype` (pads, scales, sizes), or why not.
StatusOr<const Value*> HostValue(const PlanCtx& ctx, size_t index, const char* what,
                                 DataType dtype) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* meta, Input(ctx, index, what));
  if (meta->host == nullptr) {
    return Unimplemented(absl::StrCat(
        what,
        " must be known on the host (a constant or computed from shapes); it is computed "
        "on the device"));
  }
  if (meta->dtype != dtype) {
    return Invalid(
        absl::StrCat(what, " is ", TypeName(meta->dtype), "; it must be ", TypeName(dtype)));
  }
  return meta->host;
}

// Load check: input `index`, when import knows its dtype, is FP32. (CheckFloatInputs looks at
// every input, which would refuse Pad's and Resize's INT64 operands computed on the host.)
std::string CheckFloatInput(const CheckCtx& ctx, size_t index) {
  if (index >= ctx.node.inputs.size() || ctx.node.inputs[index] == kNoValue) return "";
  const int id = ctx.node.inputs[index];
  const DataType t =
      static_cast<size_t>(id) < ctx.graph.dtypes.size() ? ctx.graph.dtypes[id] : DataType::kInvalid;
  if (t == DataType::kInvalid || t == DataType::kFp32) return "";
  return absl::StrCat("input \"", ctx.graph.value_names[id], "\" is ", TypeName(t),
                      "; the CUDA kernel takes FP32 only");
}

// The static shape import inferred for input `index`, or null.
const Shape* KnownShape(const CheckCtx& ctx, size_t index) {
  if (index >= ctx.node.inputs.size() || ctx.node.inputs[index] == kNoValue) return nullptr;
  const size_t id = static_cast<size_t>(ctx.node.inputs[index]);
  if (id >= ctx.graph.shapes.size() || !ctx.graph.shapes[id].has_value()) return nullptr;
  return &*ctx.graph.shapes[id];
}

// A constant input's contents, or null.
const Value* ConstantInput(const CheckCtx& ctx, size_t index) {
  if (index >= ctx.node.inputs.size()) return nullptr;
  const int id = ctx.node.inputs[index];
  return ctx.graph.IsConstant(id) ? &*ctx.graph.constants[id] : nullptr;
}

// ---- Pad ----------------------------------------------------------------------------------------

// Opset < 11 reads pads and value from attributes; from 11 they are inputs 1 and 2, read here on
// the host; opset 18's axes (input 3) is refused, as the CPU kernel refuses it.
Status PlanPad(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, FloatInput(ctx, 0, "data"));
  const int rank = static_cast<int>(x->shape.size());
  if (rank > kMaxRank) return Unimplemented(absl::StrCat("Pad of rank ", rank, " > ", kMaxRank));
  std::vector<int64_t> pads;
  float value = 0.0f;
  if (ctx.node.opset < 11) {
    pads = ctx.node.attributes.GetInts("pads");
    value = ctx.node.attributes.GetFloat("value", 0.0f);
  } else {
    TESSERA_ASSIGN_OR_RETURN(pads, HostInts(ctx, 1, "pads"));
    if (Present(ctx, 2)) {
      TESSERA_ASSIGN_OR_RETURN(const Value* v,
                               HostValue(ctx, 2, "constant_value", DataType::kFp32));
      if (v->num_elements() != 1) {
        return Invalid(
            absl::StrCat("constant_value ", ShapeToString(v->shape()), " must be one FP32"));
      }
      value = v->data<float>()[0];
    }
    if (Present(ctx, 3)) return Unimplemented("Pad with an axes input (opset 18)");
  }
  if (static_cast<int>(pads.size()) != 2 * rank) {
    return Invalid(
        absl::StrCat("pads has ", pads.size(), " values for data ", ShapeToString(x->shape)));
  }
  const std::string mode = ctx.node.attributes.GetString("mode", "constant");
  PadGeometry g;
  if (mode == "constant") {
    g.mode = PadMode::kConstant;
  } else if (mode == "edge") {
    g.mode = PadMode::kEdge;
  } else if (mode == "reflect") {
    g.mode = PadMode::kReflect;
  } else {
    return Unimplemented(absl::StrCat("Pad mode \"", mode, "\""));
  }
  g.value = value;
  Shape out(rank);
  bool previous_unpadded = false;
  for (int d = 0; d < rank; ++d) {
    const int64_t in = x->shape[d], begin = pads[d], end = pads[d + rank];
    out[d] = in + begin + end;
    // The CPU kernel's rules (cpu/slice_ops.cc RunPad).
    if (out[d] < 0) return Invalid("pads crop below zero");
    if (g.mode != PadMode::kConstant && (begin < 0 || end < 0)) {
      return Invalid("negative pads are only valid in constant mode");
    }
    if (out[d] > 0 && in == 0 && g.mode != PadMode::kConstant) {
      return Invalid(absl::StrCat(mode, " padding of an empty dim"));
    }
    if (g.mode == PadMode::kReflect && in > 0 && (begin > in - 1 || end > in - 1)) {
      return Invalid("reflect pads must be smaller than the dim");
    }
    // Neighbouring unpadded dims are one dim to the kernel: fewer divisions per element.
    const bool unpadded = begin == 0 && end == 0;
    if (unpadded && previous_unpadded) {
      g.in[g.rank - 1] *= in;
      g.out[g.rank - 1] *= in;
    } else {
      g.in[g.rank] = in;
      g.out[g.rank] = out[d];
      g.pad_begin[g.rank] = begin;
      ++g.rank;
    }
    previous_unpadded = unpadded;
  }
  ctx.state->extra = std::make_shared<PadGeometry>(g);
  (*ctx.out)[0] = ValueMeta{DataType::kFp32, out, nullptr};
  return absl::OkStatus();
}

Status LaunchPadOp(LaunchCtx& ctx) {
  return CudaStatus(
      LaunchPad(ctx.device.elem(), ctx.in[0], ctx.out[0],
                *static_cast<const PadGeometry*>(ctx.state->extra.get()), ctx.device.stream),
      "pad kernel");
}

std::string CheckPad(const CheckCtx& ctx) {
  if (std::string why = CheckFloatInput(ctx, 0); !why.empty()) return why;
  if (ctx.node.opset < 11) return "";
  if (ctx.node.inputs.size() > 3 && ctx.node.inputs[3] != kNoValue) {
    return "Pad with an axes input (opset 18)";
  }
  return CheckHostInputs(ctx, {1, 2});
}

// ---- Resize -------------------------------------------------------------------------------------

// What the CUDA kernel makes of a Resize or Upsample node's attributes, or why it cannot run it
// (UNIMPLEMENTED; the spec's invalid values were refused by the CPU's load check already).
struct ResizeConfig {
  bool linear = false;
  ResizeTransform transform = ResizeTransform::kAsymmetric;
  NearestMode nearest = NearestMode::kLegacy;
  std::vector<int64_t> axes;  // opset 18's subset of the axes scales/sizes speak of; empty = all
  bool from_11 = false;       // inputs X, roi, scales, sizes (else X, scales; or the attribute)
};

StatusOr<ResizeConfig> ReadResize(const Node& node) {
  const Attributes& attrs = node.attributes;
  ResizeConfig r;
  // Upsample and Resize-10: asymmetric coordinates and the legacy rounding (cpu/resize.cc).
  const bool legacy = node.op_type == "Upsample" || node.opset < 11;
  r.from_11 = !legacy;
  const std::string mode = attrs.GetString("mode", "nearest");
  if (mode == "linear" || (node.op_type == "Upsample" && mode == "bilinear")) {
    r.linear = true;
  } else if (mode != "nearest") {
    return Unimplemented(
        absl::StrCat("Resize mode \"", mode, "\"; the CUDA kernel does nearest and linear only"));
  }
  if (attrs.GetInt("antialias", 0) != 0) return Unimplemented("Resize with antialias=1");
  if (attrs.GetString("keep_aspect_ratio_policy", "stretch") != "stretch") {
    return Unimplemented("Resize with a keep_aspect_ratio_policy other than stretch");
  }
  r.axes = attrs.GetInts("axes");
  if (legacy) return r;
  static const auto* const kTransforms = new std::map<std::string, ResizeTransform>{
      {"half_pixel", ResizeTransform::kHalfPixel},
      {"pytorch_half_pixel", ResizeTransform::kPytorchHalfPixel},
      {"align_corners", ResizeTransform::kAlignCorners},
      {"asymmetric", ResizeTransform::kAsymmetric},
      {"tf_half_pixel_for_nn", ResizeTransform::kTfHalfPixelForNn}};
  const std::string transform = attrs.GetString("coordinate_transformation_mode", "half_pixel");
  auto t = kTransforms->find(transform);
  if (t == kTransforms->end()) {
    return Unimplemented(
        absl::StrCat("Resize with coordinate_transformation_mode \"", transform, "\""));
  }
  r.transform = t->second;
  static const auto* const kNearest =
      new std::map<std::string, NearestMode>{{"round_prefer_floor", NearestMode::kRoundPreferFloor},
                                             {"round_prefer_ceil", NearestMode::kRoundPreferCeil},
                                             {"floor", NearestMode::kFloor},
                                             {"ceil", NearestMode::kCeil}};
  const std::string nearest = attrs.GetString("nearest_mode", "round_prefer_floor");
  auto n = kNearest->find(nearest);
  if (n == kNearest->end()) {
    return Unimplemented(absl::StrCat("Resize with nearest_mode \"", nearest, "\""));
  }
  r.nearest = n->second;
  return r;
}

// The input index of scales; SIZE_MAX for Upsample-7, whose scales are an attribute.
size_t ScalesIndex(const Node& node, const ResizeConfig& r) {
  if (r.from_11) return 2;
  return node.op_type == "Upsample" && node.opset < 9 ? SIZE_MAX : 1;
}

// The dims that scales/sizes entries i speak of.
StatusOr<std::vector<int>> ResizedAxes(const ResizeConfig& r, int rank) {
  std::vector<int> axes;
  if (r.axes.empty()) {
    for (int d = 0; d < rank; ++d) axes.push_back(d);
    return axes;
  }
  for (int64_t a : r.axes) {
    TESSERA_ASSIGN_OR_RETURN(int axis, cpu::NormalizeAxis(a, rank));
    if (std::find(axes.begin(), axes.end(), axis) != axes.end()) {
      return Invalid(absl::StrCat("axis ", a, " is listed twice in axes"));
    }
    axes.push_back(axis);
  }
  return axes;
}

// Scale 1 maps every index to itself in every mode but tf_half_pixel_for_nn, whose source
// coordinate x + 0.5 rounds up to x + 1 under ceil and round_prefer_ceil and mixes x and x + 1 in
// linear mode: the spec (and the CPU kernel) then shifts N and C too.
bool ScaleOneMoves(const ResizeConfig& r) {
  return r.transform == ResizeTransform::kTfHalfPixelForNn &&
         (r.linear || r.nearest == NearestMode::kCeil ||
          r.nearest == NearestMode::kRoundPreferCeil);
}

// Whether resizing an axis of `in_len` to `out_len` with `scale` maps every index to itself, so
// that the 2-D kernel may leave it alone.
bool IdentityAxis(const ResizeConfig& r, int64_t in_len, int64_t out_len, double scale) {
  if (in_len != out_len) return false;
  if (in_len <= 1) return true;  // every tap is clamped to index 0
  return scale == 1.0 && !ScaleOneMoves(r);
}

constexpr char kResizeForm[] =
    "; the CUDA kernel resizes the two trailing dims of a 4-D NCHW tensor only";

Status PlanResize(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(ResizeConfig r, ReadResize(ctx.node));
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, FloatInput(ctx, 0, "X"));
  const int rank = static_cast<int>(x->shape.size());
  if (rank != 4) {
    return Unimplemented(absl::StrCat("Resize of X ", ShapeToString(x->shape), kResizeForm));
  }
  // Scales (FP32) and sizes (INT64) as doubles; an absent or empty input gives none.
  std::vector<double> scales, sizes;
  const size_t scales_index = ScalesIndex(ctx.node, r);
  if (scales_index == SIZE_MAX) {
    if (const Attribute* a = ctx.node.attributes.Find("scales"); a != nullptr) {
      scales.assign(a->floats.begin(), a->floats.end());
    }
  } else if (Present(ctx, scales_index)) {
    TESSERA_ASSIGN_OR_RETURN(const Value* v,
                             HostValue(ctx, scales_index, "scales", DataType::kFp32));
    scales.assign(v->data<float>(), v->data<float>() + v->num_elements());
  }
  if (r.from_11 && Present(ctx, 3)) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> s, HostInts(ctx, 3, "sizes"));
    sizes.assign(s.begin(), s.end());
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<int> axes, ResizedAxes(r, rank));
  if (scales.empty() == sizes.empty()) {
    return Invalid("exactly one of scales and sizes must be given");
  }
  const std::vector<double>& given = scales.empty() ? sizes : scales;
  if (given.size() != axes.size()) {
    return Invalid(absl::StrCat(scales.empty() ? "sizes" : "scales", " has ", given.size(),
                                " entries for the ", axes.size(), " resized axes of X ",
                                ShapeToString(x->shape)));
  }
  // Output sizes and scales as cpu/resize.cc computes them: from sizes, scale = size / in; from
  // scales, size = floor(scale * in).
  Shape out = x->shape;
  double scale[4] = {1, 1, 1, 1};
  for (size_t i = 0; i < axes.size(); ++i) {
    const int axis = axes[i];
    const int64_t in_len = x->shape[axis];
    if (!(given[i] > 0) || !std::isfinite(given[i])) {
      return Invalid(absl::StrCat(scales.empty() ? "size " : "scale ", given[i], " for axis ", axis,
                                  " must be positive"));
    }
    if (scales.empty()) {
      out[axis] = static_cast<int64_t>(given[i]);
      scale[axis] = in_len > 0 ? given[i] / static_cast<double>(in_len) : 1.0;
    } else {
      scale[axis] = given[i];
      const double len = std::floor(given[i] * static_cast<double>(in_len));
      if (len > static_cast<double>(int64_t{1} << 40)) {
        return Invalid(absl::StrCat("scale ", given[i], " is too large"));
      }
      out[axis] = static_cast<int64_t>(len);
    }
  }
  double out_elements = 1;
  for (int64_t d : out) out_elements *= static_cast<double>(d);
  if (out_elements > static_cast<double>(int64_t{1} << 40)) {
    return Invalid(absl::StrCat("the output ", ShapeToString(out), " is too large"));
  }
  for (int d = 0; d < 2; ++d) {
    if (!IdentityAxis(r, x->shape[d], out[d], scale[d])) {
      return Unimplemented(absl::StrCat("Resize of X ", ShapeToString(x->shape), " to ",
                                        ShapeToString(out), " (scale ", scale[d], " on dim ", d,
                                        ")", kResizeForm));
    }
  }
  ResizeGeometry g;
  g.planes = x->shape[0] * x->shape[1];
  g.h = x->shape[2], g.w = x->shape[3], g.oh = out[2], g.ow = out[3];
  g.scale_h = scale[2], g.scale_w = scale[3];
  g.transform = r.transform;
  g.nearest = r.nearest;
  g.linear = r.linear;
  ctx.state->extra = std::make_shared<ResizeGeometry>(g);
  (*ctx.out)[0] = ValueMeta{DataType::kFp32, out, nullptr};
  return absl::OkStatus();
}

Status LaunchResizeOp(LaunchCtx& ctx) {
  return CudaStatus(LaunchResize2d(ctx.device.elem(), ctx.in[0], ctx.out[0],
                                   *static_cast<const ResizeGeometry*>(ctx.state->extra.get()),
                                   ctx.device.stream),
                    "resize kernel");
}

// Refuses at load what PlanResize would: the modes the kernel lacks, scales or sizes computed on
// the device, and, when import knows them, a rank other than 4 or constant scales/sizes that
// resize N or C.
std::string CheckResize(const CheckCtx& ctx) {
  StatusOr<ResizeConfig> config = ReadResize(ctx.node);
  if (!config.ok()) return std::string(config.status().message());
  const ResizeConfig& r = *config;
  if (std::string why = CheckFloatInput(ctx, 0); !why.empty()) return why;
  const size_t scales_index = ScalesIndex(ctx.node, r);
  if (r.from_11) {
    if (std::string why = CheckHostInputs(ctx, {2, 3}); !why.empty()) return why;
  } else if (scales_index != SIZE_MAX) {
    if (std::string why = CheckHostInputs(ctx, {scales_index}); !why.empty()) return why;
  }
  const Shape* shape = KnownShape(ctx, 0);
  if (shape != nullptr && shape->size() != 4) {
    return absl::StrCat("Resize of a rank-", shape->size(), " X", kResizeForm);
  }
  if (ScaleOneMoves(r) && (shape == nullptr || (*shape)[0] != 1 || (*shape)[1] != 1)) {
    return absl::StrCat("Resize with tf_half_pixel_for_nn and ",
                        r.linear ? "linear mode" : "a nearest_mode that rounds up",
                        " moves N and C even at scale 1 (the coordinate is x + 0.5)", kResizeForm);
  }
  const Value* scales = scales_index == SIZE_MAX ? nullptr : ConstantInput(ctx, scales_index);
  const Value* sizes = r.from_11 ? ConstantInput(ctx, 3) : nullptr;
  if (scales != nullptr && (scales->num_elements() == 0 || scales->dtype() != DataType::kFp32)) {
    scales = nullptr;
  }
  if (sizes != nullptr && (sizes->num_elements() == 0 || sizes->dtype() != DataType::kInt64)) {
    sizes = nullptr;
  }
  const Value* given = scales != nullptr ? scales : sizes;
  if (given == nullptr) return "";
  const int rank = shape != nullptr ? 4
                   : r.axes.empty() ? static_cast<int>(given->num_elements())
                                    : -1;
  if (rank != 4) return "";  // the plan step says what is wrong
  StatusOr<std::vector<int>> axes = ResizedAxes(r, rank);
  if (!axes.ok() || axes->size() != static_cast<size_t>(given->num_elements())) return "";
  for (size_t i = 0; i < axes->size(); ++i) {
    const int axis = (*axes)[i];
    if (axis >= 2) continue;
    // As PlanResize decides, where import knows the dim; else any scale but 1 resizes.
    const int64_t dim = shape != nullptr ? (*shape)[axis] : -1;
    const double value = scales != nullptr ? static_cast<double>(scales->data<float>()[i])
                                           : static_cast<double>(sizes->data<int64_t>()[i]);
    bool resized = scales != nullptr && value != 1.0;
    if (dim >= 0) {
      const int64_t out_len = static_cast<int64_t>(
          scales != nullptr ? std::floor(value * static_cast<double>(dim)) : value);
      const double scale =
          scales != nullptr ? value : (dim > 0 ? value / static_cast<double>(dim) : 1.0);
      resized = !IdentityAxis(r, dim, out_len, scale);
    }
    if (resized) {
      return absl::StrCat("Resize of dim ", axis, " (N or C)", kResizeForm);
    }
  }
  return "";
}

// ---- InstanceNormalization ----------------------------------------------------------------------

// ints = {rows (N * C), cols (the spatial size), channels}; floats = {epsilon}.
Status PlanInstanceNorm(PlanCtx& ctx) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* x, FloatInput(ctx, 0, "input"));
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* scale, FloatInput(ctx, 1, "scale"));
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* bias, FloatInput(ctx, 2, "B"));
  if (x->shape.size() < 3) {
    return Invalid(absl::StrCat("input ", ShapeToString(x->shape), " must be [N, C, D1, ...]"));
  }
  const int64_t channels = x->shape[1];
  for (const ValueMeta* p : {scale, bias}) {
    if (p->shape.size() != 1 || p->shape[0] != channels) {
      return Invalid(absl::StrCat(p == scale ? "scale " : "B ", ShapeToString(p->shape),
                                  " must be [", channels, "]"));
    }
  }
  ctx.state->ints = {x->shape[0] * channels, Product(x->shape, 2, x->shape.size()), channels};
  ctx.state->floats = {ctx.node.attributes.GetFloat("epsilon", 1e-5f)};
  (*ctx.out)[0] = ValueMeta{DataType::kFp32, x->shape, nullptr};
  return absl::OkStatus();
}

Status LaunchInstanceNormOp(LaunchCtx& ctx) {
  const auto& s = ctx.state->ints;
  return CudaStatus(
      LaunchInstanceNorm(ctx.device.elem(), ctx.in[0], ctx.in[1], ctx.in[2], ctx.out[0], s[0], s[1],
                         s[2], ctx.state->floats[0], ctx.device.stream),
      "instance norm kernel");
}

}  // namespace

const CudaOpDef* FindImageOp(const std::string& op_type) {
  constexpr CheckFn kFloat = CheckFloatInputs;
  static const auto* const kOps = new std::map<std::string, CudaOpDef>{
      {"Pad", {PlanPad, LaunchPadOp, CheckPad}},
      {"Resize", {PlanResize, LaunchResizeOp, CheckResize}},
      {"Upsample", {PlanResize, LaunchResizeOp, CheckResize}},
      {"InstanceNormalization", {PlanInstanceNorm, LaunchInstanceNormOp, kFloat}},
      {"ConvTranspose", ConvTransposeOp()},
  };
  auto it = kOps->find(op_type);
  return it == kOps->end() ? nullptr : &it->second;
}

}  // namespace tessera::engine::cuda
