// Resize (opsets 10-18) and the Upsample it replaced: nearest, linear and cubic interpolation over
// any axes, with the coordinate transformation modes of opsets 11-18 (half_pixel_symmetric, from
// opset 19, and antialiasing are refused at load).
//
// N-linear and N-cubic interpolation are separable, so every resized axis is one pass of 1-D
// interpolation over the previous pass's result. Each pass reads a per-output-index table of taps
// (source index and weight) made once per axis; axes whose table is the identity are skipped, which
// makes the usual NCHW case two passes over H and W. The 1-D rules follow the ONNX reference
// implementation of Resize: taps are clamped to the edge (the reference pads by edge replication),
// and with tf_crop_and_resize a coordinate outside the input gives extrapolation_value, which a
// later pass carries through because every pass's weights sum to 1.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cpu/data_movement.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

enum class Mode { kNearest, kLinear, kCubic };

struct ResizeAttributes {
  Mode mode = Mode::kNearest;
  std::string transform;
  std::string nearest_mode;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  float extrapolation_value = 0.0f;
  std::vector<int64_t> axes;  // empty = all
  // Upsample and Resize-10: asymmetric coordinates, nearest rounds down when upsampling and up
  // when downsampling (as onnxruntime, whose behaviour those opsets left unspecified).
  bool legacy = false;
};

StatusOr<ResizeAttributes> ReadAttributes(const Node& node) {
  const Attributes& attrs = node.attributes;
  ResizeAttributes r;
  r.legacy = node.op_type == "Upsample" || node.opset < 11;
  const std::string mode = attrs.GetString("mode", "nearest");
  if (mode == "nearest") {
    r.mode = Mode::kNearest;
  } else if (mode == "linear" || (node.op_type == "Upsample" && mode == "bilinear")) {
    r.mode = Mode::kLinear;
  } else if (mode == "cubic" && !r.legacy) {
    r.mode = Mode::kCubic;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("mode \"", mode, "\" is not a valid ",
                                                   node.op_type, " mode for opset ", node.opset));
  }
  r.transform =
      r.legacy ? "asymmetric" : attrs.GetString("coordinate_transformation_mode", "half_pixel");
  static const char* const kTransforms[] = {"half_pixel",         "pytorch_half_pixel",
                                            "align_corners",      "asymmetric",
                                            "tf_crop_and_resize", "tf_half_pixel_for_nn"};
  if (std::find(std::begin(kTransforms), std::end(kTransforms), r.transform) ==
      std::end(kTransforms)) {
    if (r.transform == "half_pixel_symmetric") {
      return absl::UnimplementedError("coordinate_transformation_mode half_pixel_symmetric");
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown coordinate_transformation_mode \"", r.transform, "\""));
  }
  r.nearest_mode = attrs.GetString("nearest_mode", "round_prefer_floor");
  if (r.nearest_mode != "round_prefer_floor" && r.nearest_mode != "round_prefer_ceil" &&
      r.nearest_mode != "floor" && r.nearest_mode != "ceil") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown nearest_mode \"", r.nearest_mode, "\""));
  }
  r.cubic_a = attrs.GetFloat("cubic_coeff_a", -0.75f);
  r.exclude_outside = attrs.GetInt("exclude_outside", 0) != 0;
  r.extrapolation_value = attrs.GetFloat("extrapolation_value", 0.0f);
  r.axes = attrs.GetInts("axes");
  if (attrs.GetInt("antialias", 0) != 0) {
    return absl::UnimplementedError("antialias=1 is not supported");
  }
  if (const std::string policy = attrs.GetString("keep_aspect_ratio_policy", "stretch");
      policy != "stretch") {
    return absl::UnimplementedError(
        absl::StrCat("keep_aspect_ratio_policy \"", policy, "\" is not supported"));
  }
  return r;
}

// The 1-D interpolation of one axis: out[j] = sum_t weight[j*taps+t] * in[index[j*taps+t]], or
// extrapolation_value where outside[j].
struct AxisTaps {
  int taps = 1;
  std::vector<int64_t> index;
  std::vector<float> weight;
  std::vector<char> outside;
  bool identity = true;
};

// `out_len` is the resized length as the reference computes it, in_len * scale, which is not a
// whole number when the output size was floored from a scale.
double SourceCoordinate(const ResizeAttributes& r, int64_t x, double scale, int64_t in_len,
                        double out_len, double roi_start, double roi_end) {
  const std::string& t = r.transform;
  if (t == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (t == "pytorch_half_pixel") return out_len > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (t == "align_corners") {
    return out_len == 1 ? 0.0 : x * static_cast<double>(in_len - 1) / (out_len - 1);
  }
  if (t == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (t == "tf_crop_and_resize") {
    return out_len > 1
               ? roi_start * (in_len - 1) + x * (roi_end - roi_start) * (in_len - 1) / (out_len - 1)
               : 0.5 * (roi_start + roi_end) * (in_len - 1);
  }
  return x / scale;  // asymmetric
}

int64_t NearestIndex(const ResizeAttributes& r, double x, double scale) {
  const double below = std::floor(x);
  if (r.legacy) return static_cast<int64_t>(scale < 1.0 ? std::ceil(x) : below);
  if (r.nearest_mode == "floor") return static_cast<int64_t>(below);
  if (r.nearest_mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  if (x - below == 0.5) {
    return static_cast<int64_t>(r.nearest_mode == "round_prefer_floor" ? below : below + 1);
  }
  return static_cast<int64_t>(std::round(x));
}

// Keys' cubic convolution weights for the taps at floor(x) - 1 .. floor(x) + 2, `ratio` being
// x - floor(x), with the reference's coefficient `a`.
void CubicWeights(double ratio, double a, double w[4]) {
  const double r1 = ratio + 1, r2 = 1 - ratio, r3 = 2 - ratio;
  w[0] = ((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a;
  w[1] = ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1;
  w[2] = ((a + 2) * r2 - (a + 3)) * r2 * r2 + 1;
  w[3] = ((a * r3 - 5 * a) * r3 + 8 * a) * r3 - 4 * a;
}

AxisTaps MakeAxisTaps(const ResizeAttributes& r, int64_t in_len, int64_t out_len, double scale,
                      double roi_start, double roi_end) {
  AxisTaps a;
  a.taps = r.mode == Mode::kNearest ? 1 : r.mode == Mode::kLinear ? 2 : 4;
  a.index.resize(static_cast<size_t>(out_len * a.taps));
  a.weight.resize(a.index.size());
  a.outside.assign(static_cast<size_t>(out_len), 0);
  a.identity = in_len == out_len;
  const bool crop = r.transform == "tf_crop_and_resize";
  auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in_len - 1); };
  for (int64_t j = 0; j < out_len; ++j) {
    const double x = SourceCoordinate(r, j, scale, in_len, static_cast<double>(in_len) * scale,
                                      roi_start, roi_end);
    int64_t* index = &a.index[static_cast<size_t>(j * a.taps)];
    float* weight = &a.weight[static_cast<size_t>(j * a.taps)];
    if (crop && (x < 0 || x > static_cast<double>(in_len - 1))) {
      a.outside[static_cast<size_t>(j)] = 1;
      a.identity = false;
      std::fill(index, index + a.taps, 0);
      std::fill(weight, weight + a.taps, 0.0f);
      continue;
    }
    const double below = std::floor(x);
    const double ratio = x - below;
    const int64_t base = static_cast<int64_t>(below);
    if (r.mode == Mode::kNearest) {
      index[0] = clamp(NearestIndex(r, x, scale));
      weight[0] = 1.0f;
      a.identity = a.identity && index[0] == j;
      continue;
    }
    double w[4];
    int64_t raw[4];
    if (r.mode == Mode::kLinear) {
      w[0] = 1 - ratio;
      w[1] = ratio;
      raw[0] = base;
      raw[1] = base + 1;
    } else {
      CubicWeights(ratio, r.cubic_a, w);
      for (int t = 0; t < 4; ++t) raw[t] = base - 1 + t;
    }
    if (r.exclude_outside) {
      double sum = 0;
      for (int t = 0; t < a.taps; ++t) {
        if (raw[t] < 0 || raw[t] >= in_len) w[t] = 0;
        sum += w[t];
      }
      for (int t = 0; t < a.taps; ++t) w[t] = sum != 0 ? w[t] / sum : 0;
    }
    // An unscaled axis is the identity when j's weights, clamped taps included, sum to 1 at j:
    // at the last j, linear's second tap clamps onto j itself with weight 0. Missing that made
    // every linear Resize copy N and C over in two extra passes.
    double on_j = 0;
    bool elsewhere = false;
    for (int t = 0; t < a.taps; ++t) {
      index[t] = clamp(raw[t]);
      weight[t] = static_cast<float>(w[t]);
      if (index[t] == j) {
        on_j += w[t];
      } else if (w[t] != 0.0) {
        elsewhere = true;
      }
    }
    a.identity = a.identity && !elsewhere && on_j == 1.0;
  }
  return a;
}

bool AnyOutside(const AxisTaps& taps) {
  return std::find(taps.outside.begin(), taps.outside.end(), 1) != taps.outside.end();
}

// One pass over `axis` of src viewed as [outer, in_len, inner] into dst [outer, out_len, inner].
void InterpolateAxis(const Value& src, int axis, const AxisTaps& taps, float extrapolation_value,
                     const Value& dst, ThreadPool* pool) {
  const Shape& in_shape = src.shape();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= in_shape[d];
  for (int d = axis + 1; d < src.rank(); ++d) inner *= in_shape[d];
  const int64_t in_len = in_shape[axis];
  const int64_t out_len = dst.dim(axis);
  const size_t elem = ElementSize(src.dtype());
  const auto* in = static_cast<const std::byte*>(src.raw());
  auto* out = dst.mutable_data<std::byte>();
  const bool fp32 = src.dtype() == DataType::kFp32;
  const bool any_outside = AnyOutside(taps);
  if (inner == 1 && taps.taps == 1 && !any_outside) {
    // Nearest along the innermost axis: a gather per row, by element width.
    auto gather = [&](auto* tag) {
      using E = std::remove_pointer_t<decltype(tag)>;
      const auto* x = static_cast<const E*>(src.raw());
      E* y = dst.mutable_data<E>();
      const int64_t per_task =
          std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, out_len));
      ParallelFor(pool, (outer + per_task - 1) / per_task, [&](int64_t task) {
        const int64_t end = std::min(outer, (task + 1) * per_task);
        for (int64_t o = task * per_task; o < end; ++o) {
          const E* row = x + o * in_len;
          E* out_row = y + o * out_len;
          for (int64_t j = 0; j < out_len; ++j)
            out_row[j] = row[taps.index[static_cast<size_t>(j)]];
        }
      });
    };
    ForElementSize(elem, gather);
    return;
  }
  if (inner == 1 && fp32 && taps.taps > 1) {
    // The innermost axis: one output element per (row, j), so walk whole rows instead.
    const auto* x = static_cast<const float*>(src.raw());
    float* y = dst.mutable_data<float>();
    const int64_t rows_per_task =
        std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, out_len));
    ParallelFor(pool, (outer + rows_per_task - 1) / rows_per_task, [&](int64_t task) {
      const int64_t end = std::min(outer, (task + 1) * rows_per_task);
      for (int64_t o = task * rows_per_task; o < end; ++o) {
        const float* row = x + o * in_len;
        float* out_row = y + o * out_len;
        for (int64_t j = 0; j < out_len; ++j) {
          if (taps.outside[static_cast<size_t>(j)]) {
            out_row[j] = extrapolation_value;
            continue;
          }
          const int64_t* index = &taps.index[static_cast<size_t>(j * taps.taps)];
          const float* weight = &taps.weight[static_cast<size_t>(j * taps.taps)];
          float acc = 0.0f;
          for (int t = 0; t < taps.taps; ++t) acc += weight[t] * row[index[t]];
          out_row[j] = acc;
        }
      }
    });
    return;
  }
  const int64_t rows = outer * out_len;
  const int64_t rows_per_task =
      std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, inner));
  ParallelFor(pool, (rows + rows_per_task - 1) / rows_per_task, [&](int64_t task) {
    const int64_t begin = task * rows_per_task;
    const int64_t end = std::min(rows, begin + rows_per_task);
    // Output row `row` is (o, j): walked with a carry rather than a division per row, which
    // counts when rows are short (a channels-last pass moves one pixel's C channels per row).
    int64_t o = begin / out_len, j = begin % out_len;
    for (int64_t row = begin; row < end; ++row, ++j) {
      if (j == out_len) {
        j = 0;
        ++o;
      }
      std::byte* dst_row = out + static_cast<size_t>(row * inner) * elem;
      if (taps.outside[static_cast<size_t>(j)]) {
        // Only FP32 reaches here: tf_crop_and_resize with nearest on other types is refused.
        std::fill_n(reinterpret_cast<float*>(dst_row), inner, extrapolation_value);
        continue;
      }
      const int64_t* index = &taps.index[static_cast<size_t>(j * taps.taps)];
      const float* weight = &taps.weight[static_cast<size_t>(j * taps.taps)];
      const std::byte* plane = in + static_cast<size_t>(o * in_len * inner) * elem;
      if (taps.taps == 1) {
        std::memcpy(dst_row, plane + static_cast<size_t>(index[0] * inner) * elem, inner * elem);
        continue;
      }
      if (!fp32) continue;  // refused by the caller
      float* y = reinterpret_cast<float*>(dst_row);
      const float* x0 = reinterpret_cast<const float*>(plane) + index[0] * inner;
      const float w0 = weight[0];
      if (taps.taps == 2) {  // linear: one pass over the row instead of two
        const float* x1 = reinterpret_cast<const float*>(plane) + index[1] * inner;
        const float w1 = weight[1];
        for (int64_t i = 0; i < inner; ++i) y[i] = w0 * x0[i] + w1 * x1[i];
        continue;
      }
      for (int64_t i = 0; i < inner; ++i) y[i] = w0 * x0[i];
      for (int t = 1; t < taps.taps; ++t) {
        const float* xt = reinterpret_cast<const float*>(plane) + index[t] * inner;
        const float wt = weight[t];
        for (int64_t i = 0; i < inner; ++i) y[i] += wt * xt[i];
      }
    }
  });
}

// H and W of a channels-last FP32 value, seen as its [N, H, W, C] bytes `x`, resized into `y` in
// one pass: per output row, the H taps are blended into a row buffer of W * C values (long
// vectorised loops), then each output pixel blends its W taps of C channels from that buffer.
// Two separate passes would write and reread an intermediate of N * H * W' * C values.
void ResizeChannelsLast2d(const Value& x, const AxisTaps& taps_h, const AxisTaps& taps_w,
                          const Value& y, ThreadPool* pool) {
  const int64_t batch = x.dim(0), in_h = x.dim(1), in_w = x.dim(2), channels = x.dim(3);
  const int64_t out_h = y.dim(1), out_w = y.dim(2);
  const int64_t row_len = in_w * channels;
  const float* in = x.data<float>();
  float* out = y.mutable_data<float>();
  ParallelFor(pool, batch * out_h, [&](int64_t task) {
    const int64_t n = task / out_h, oh = task % out_h;
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(row_len));
    const int64_t* h_index = &taps_h.index[static_cast<size_t>(oh * taps_h.taps)];
    const float* h_weight = &taps_h.weight[static_cast<size_t>(oh * taps_h.taps)];
    const float* plane = in + n * in_h * row_len;
    const float* x0 = plane + h_index[0] * row_len;
    for (int64_t i = 0; i < row_len; ++i) row[i] = h_weight[0] * x0[i];
    for (int t = 1; t < taps_h.taps; ++t) {
      const float* xt = plane + h_index[t] * row_len;
      const float wt = h_weight[t];
      for (int64_t i = 0; i < row_len; ++i) row[i] += wt * xt[i];
    }
    float* out_row = out + (n * out_h + oh) * out_w * channels;
    for (int64_t ow = 0; ow < out_w; ++ow) {
      const int64_t* w_index = &taps_w.index[static_cast<size_t>(ow * taps_w.taps)];
      const float* w_weight = &taps_w.weight[static_cast<size_t>(ow * taps_w.taps)];
      float* pixel = out_row + ow * channels;
      const float* p0 = row.data() + w_index[0] * channels;
      for (int64_t c = 0; c < channels; ++c) pixel[c] = w_weight[0] * p0[c];
      for (int t = 1; t < taps_w.taps; ++t) {
        const float* pt = row.data() + w_index[t] * channels;
        const float wt = w_weight[t];
        for (int64_t c = 0; c < channels; ++c) pixel[c] += wt * pt[c];
      }
    }
  });
}

// Reads a 1-D FP32 (scales, roi) or INT64 (sizes) input as doubles; an absent or empty one gives
// an empty vector.
StatusOr<std::vector<double>> ReadVector(const Inputs& inputs, size_t index, const char* what,
                                         DataType dtype) {
  if (index >= inputs.size() || inputs[index] == nullptr || inputs[index]->num_elements() == 0) {
    return std::vector<double>{};
  }
  const Value& v = *inputs[index];
  if (v.rank() != 1 || v.dtype() != dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", DescribeValue(v), " must be a 1-D ", TypeName(dtype), " tensor"));
  }
  std::vector<double> out(static_cast<size_t>(v.num_elements()));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = dtype == DataType::kInt64 ? static_cast<double>(v.data<int64_t>()[i])
                                       : static_cast<double>(v.data<float>()[i]);
  }
  return out;
}

}  // namespace

Status CheckResize(const Node& node, const Graph&) { return ReadAttributes(node).status(); }

Status RunResize(const OpContext& ctx, const Node& node, const Inputs& inputs,
                 std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(ResizeAttributes r, ReadAttributes(node));
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X",
                                                        {DataType::kFp32, DataType::kInt64,
                                                         DataType::kInt32, DataType::kUint8}));
  if (x->dtype() != DataType::kFp32 &&
      (r.mode != Mode::kNearest || r.transform == "tf_crop_and_resize")) {
    return absl::InvalidArgumentError(
        absl::StrCat("X is ", TypeName(x->dtype()),
                     ": only FP32 inputs take linear, cubic or tf_crop_and_resize"));
  }
  const int rank = x->rank();
  // Where each input sits: Upsample-7 has scales as an attribute, Upsample-9 and Resize-10 as
  // input 1, Resize-11+ as input 2 after roi (then sizes as input 3).
  const bool inputs_from_11 = node.op_type == "Resize" && node.opset >= 11;
  std::vector<double> scales, sizes, roi;
  if (node.op_type == "Upsample" && node.opset < 9) {
    if (const Attribute* a = node.attributes.Find("scales"); a != nullptr) {
      scales.assign(a->floats.begin(), a->floats.end());
    }
  } else {
    TESSERA_ASSIGN_OR_RETURN(scales,
                             ReadVector(inputs, inputs_from_11 ? 2 : 1, "scales", DataType::kFp32));
  }
  if (inputs_from_11) {
    TESSERA_ASSIGN_OR_RETURN(sizes, ReadVector(inputs, 3, "sizes", DataType::kInt64));
    if (r.transform == "tf_crop_and_resize") {
      TESSERA_ASSIGN_OR_RETURN(roi, ReadVector(inputs, 1, "roi", DataType::kFp32));
    }
  }
  // The axes scales/sizes/roi speak of (all by default; opset 18's `axes` names a subset).
  std::vector<int> axes;
  if (r.axes.empty()) {
    for (int d = 0; d < rank; ++d) axes.push_back(d);
  } else {
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (int64_t a : r.axes) {
      TESSERA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(a, rank));
      if (seen[static_cast<size_t>(axis)]) {
        return absl::InvalidArgumentError(absl::StrCat("axis ", a, " is listed twice in axes"));
      }
      seen[static_cast<size_t>(axis)] = true;
      axes.push_back(axis);
    }
  }
  const size_t n = axes.size();
  if (scales.empty() == sizes.empty()) {
    return absl::InvalidArgumentError("exactly one of scales and sizes must be given");
  }
  const std::vector<double>& given = scales.empty() ? sizes : scales;
  if (given.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(scales.empty() ? "sizes" : "scales", " has ",
                                                   given.size(), " entries for the ", n,
                                                   " resized axes of X ", DescribeValue(*x)));
  }
  if (r.transform == "tf_crop_and_resize" && roi.size() != 2 * n) {
    return absl::InvalidArgumentError(
        absl::StrCat("roi has ", roi.size(), " entries; ", "tf_crop_and_resize needs ", 2 * n));
  }
  if (!std::all_of(roi.begin(), roi.end(), [](double v) { return std::isfinite(v); })) {
    return absl::InvalidArgumentError("roi must be finite");
  }
  Shape out_shape = x->shape();
  std::vector<double> axis_scale(static_cast<size_t>(rank), 1.0);
  double out_elements = 1;
  for (size_t i = 0; i < n; ++i) {
    const int axis = axes[i];
    const int64_t in_len = x->dim(axis);
    if (!(given[i] > 0) || !std::isfinite(given[i])) {
      return absl::InvalidArgumentError(absl::StrCat(scales.empty() ? "size " : "scale ", given[i],
                                                     " for axis ", axis, " must be positive"));
    }
    if (scales.empty()) {
      out_shape[axis] = static_cast<int64_t>(given[i]);
      axis_scale[axis] = in_len > 0 ? given[i] / static_cast<double>(in_len) : 1.0;
    } else {
      axis_scale[axis] = given[i];
      const double len = std::floor(given[i] * static_cast<double>(in_len));
      if (len > static_cast<double>(int64_t{1} << 40)) {
        return absl::InvalidArgumentError(absl::StrCat("scale ", given[i], " is too large"));
      }
      out_shape[axis] = static_cast<int64_t>(len);
    }
  }
  for (int64_t d : out_shape) out_elements *= static_cast<double>(d);
  if (out_elements > static_cast<double>(int64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the output ", ShapeToString(out_shape), " is too large"));
  }
  if (ElementCount(out_shape) == 0 || x->num_elements() == 0) {
    (*outputs)[0] = ctx.NewOutput(0, x->dtype(), out_shape);
    return absl::OkStatus();
  }
  // One pass per resized axis, innermost first (the later, wider passes then move rows that the
  // first pass already laid out contiguously).
  std::vector<std::pair<int, AxisTaps>> passes;
  for (size_t i = n; i-- > 0;) {
    const int axis = axes[i];
    const double start = roi.empty() ? 0.0 : roi[i], end = roi.empty() ? 1.0 : roi[n + i];
    AxisTaps taps = MakeAxisTaps(r, x->dim(axis), out_shape[axis], axis_scale[axis], start, end);
    if (!taps.identity) passes.emplace_back(axis, std::move(taps));
  }
  Value y = ctx.NewOutput(0, x->dtype(), out_shape).WithLayout(x->layout());
  if (passes.empty()) {
    std::memcpy(y.mutable_data<void>(), x->raw(), x->byte_size());
    (*outputs)[0] = std::move(y);
    return absl::OkStatus();
  }
  // A channels-last X (a oneDNN Conv's output: U-Net decoders, FPN and YOLO upsampling) is
  // resized as the [N, H, W, C] array it is, and Y stays channels-last for the next Conv. Every
  // pass then moves whole pixels of C contiguous channels, which vectorise, where row-major
  // passes over W gather one element at a time.
  const Value y_bytes = PhysicalView(y);
  if (x->channels_last() && x->dtype() == DataType::kFp32 && passes.size() == 2 &&
      passes[0].first == 3 && passes[1].first == 2 && !AnyOutside(passes[0].second) &&
      !AnyOutside(passes[1].second)) {
    ResizeChannelsLast2d(PhysicalView(*x), passes[1].second, passes[0].second, y_bytes, ctx.pool);
    (*outputs)[0] = std::move(y);
    return absl::OkStatus();
  }
  Value current = PhysicalView(*x);
  Shape shape = current.shape();
  for (size_t p = 0; p < passes.size(); ++p) {
    const int axis = x->channels_last() ? PhysicalAxis(passes[p].first) : passes[p].first;
    shape[axis] = y_bytes.dim(axis);
    Value next = p + 1 == passes.size() ? y_bytes : Value::Allocate(x->dtype(), shape);
    InterpolateAxis(current, axis, passes[p].second, r.extrapolation_value, next, ctx.pool);
    current = std::move(next);
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
