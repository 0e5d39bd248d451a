// ConvTranspose over any number of spatial dims: per (image, group) one Sgemm gives every
// (output channel, kernel offset) row's contributions, cols = W_g^T X_g, and a col2im pass adds
// them into the output at i * stride - pad + k * dilation. The pass runs in parallel over output
// channels, whose planes no two tasks share.
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

}  // namespace

StatusOr<TransposeGeometry> ResolveConvTransposeGeometry(const Node& node, const Shape& x_shape,
                                                         const Shape& w_shape) {
  const Attributes& attrs = node.attributes;
  const size_t s = x_shape.size() - 2;
  TransposeGeometry g;
  g.in.assign(x_shape.begin() + 2, x_shape.end());
  g.kernel =
      attrs.GetInts("kernel_shape", std::vector<int64_t>(w_shape.begin() + 2, w_shape.end()));
  g.stride = attrs.GetInts("strides", std::vector<int64_t>(s, 1));
  g.dilation = attrs.GetInts("dilations", std::vector<int64_t>(s, 1));
  std::vector<int64_t> pads = attrs.GetInts("pads", std::vector<int64_t>(2 * s, 0));
  std::vector<int64_t> output_padding = attrs.GetInts("output_padding", std::vector<int64_t>(s, 0));
  std::vector<int64_t> output_shape = attrs.GetInts("output_shape");
  if (output_shape.size() == s + 2)
    output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  if (g.kernel != std::vector<int64_t>(w_shape.begin() + 2, w_shape.end())) {
    return absl::InvalidArgumentError(absl::StrCat("kernel_shape [", absl::StrJoin(g.kernel, ","),
                                                   "] does not match W ", ShapeToString(w_shape)));
  }
  if (g.stride.size() != s || g.dilation.size() != s || pads.size() != 2 * s ||
      output_padding.size() != s || (!output_shape.empty() && output_shape.size() != s)) {
    return absl::InvalidArgumentError(
        absl::StrCat("strides, dilations, output_padding and output_shape need ", s,
                     " entries and pads ", 2 * s, " for X ", ShapeToString(x_shape)));
  }
  const std::string auto_pad = attrs.GetString("auto_pad", "NOTSET");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  g.pad_begin.resize(s);
  g.out.resize(s);
  for (size_t d = 0; d < s; ++d) {
    // Bounded so that the size arithmetic below cannot overflow on a hostile file.
    constexpr int64_t kMaxAttribute = int64_t{1} << 20;
    auto in_range = [&](int64_t v, int64_t lo) { return v >= lo && v <= kMaxAttribute; };
    if (!in_range(g.stride[d], 1) || !in_range(g.dilation[d], 1) || !in_range(g.kernel[d], 1) ||
        !in_range(output_padding[d], 0) || !in_range(pads[d], 0) || !in_range(pads[s + d], 0) ||
        !in_range(g.in[d], 0) || (!output_shape.empty() && !in_range(output_shape[d], 1))) {
      return absl::InvalidArgumentError(
          absl::StrCat("strides, dilations and kernel dims must be in [1, ", kMaxAttribute,
                       "], pads, output_padding and input dims in [0, ", kMaxAttribute, "]"));
    }
    const int64_t natural =
        g.stride[d] * (g.in[d] - 1) + output_padding[d] + (g.kernel[d] - 1) * g.dilation[d] + 1;
    if (!output_shape.empty() || same) {
      const int64_t wanted = !output_shape.empty() ? output_shape[d] : g.in[d] * g.stride[d];
      // The total is negative when output_shape asks for more than the natural size; the spec's
      // halves are then floored, as the reference's Python does, so the extra goes at the end.
      const int64_t total = natural - wanted;
      const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
      g.pad_begin[d] = auto_pad == "SAME_UPPER" ? half : total - half;
      g.out[d] = wanted;
    } else {
      g.pad_begin[d] = auto_pad == "VALID" ? 0 : pads[d];
      g.out[d] = natural - (auto_pad == "VALID" ? 0 : pads[d] + pads[s + d]);
    }
    if (g.out[d] < 1 || g.out[d] > (int64_t{1} << 31)) {
      return absl::InvalidArgumentError(
          absl::StrCat("output size ", g.out[d], " along spatial dim ", d, " is out of range"));
    }
  }
  return g;
}

namespace {

// Adds cols [channels * K, P] (K kernel offsets, P input positions) into out [channels, Q].
void Col2Im(const float* cols, int64_t channels, const TransposeGeometry& g, float* out,
            ThreadPool* pool) {
  const size_t s = g.in.size();
  const int64_t k_count = Product(g.kernel), p_count = Product(g.in), q_count = Product(g.out);
  const int64_t in_last = g.in[s - 1], out_last = g.out[s - 1];
  const int64_t prefixes = p_count / std::max<int64_t>(1, in_last);
  ParallelFor(pool, channels, [&](int64_t c) {
    float* plane = out + c * q_count;
    std::vector<int64_t> k(s), i(s);
    for (int64_t kf = 0; kf < k_count; ++kf) {
      for (size_t d = s, rest = static_cast<size_t>(kf); d-- > 0;) {
        k[d] = static_cast<int64_t>(rest % static_cast<size_t>(g.kernel[d]));
        rest /= static_cast<size_t>(g.kernel[d]);
      }
      const float* row = cols + (c * k_count + kf) * p_count;
      const int64_t shift_last = k[s - 1] * g.dilation[s - 1] - g.pad_begin[s - 1];
      for (int64_t pf = 0; pf < prefixes; ++pf) {
        // The output row this input row lands on, or none when it falls outside the output.
        int64_t out_offset = 0;
        bool inside = true;
        for (size_t d = s - 1, rest = static_cast<size_t>(pf); d-- > 0;) {
          i[d] = static_cast<int64_t>(rest % static_cast<size_t>(g.in[d]));
          rest /= static_cast<size_t>(g.in[d]);
        }
        for (size_t d = 0; d + 1 < s; ++d) {
          const int64_t o = i[d] * g.stride[d] - g.pad_begin[d] + k[d] * g.dilation[d];
          inside = inside && o >= 0 && o < g.out[d];
          out_offset = out_offset * g.out[d] + o;
        }
        if (!inside) continue;
        float* out_row = plane + out_offset * out_last;
        const float* in_row = row + pf * in_last;
        const int64_t stride = g.stride[s - 1];
        for (int64_t x = 0; x < in_last; ++x) {
          const int64_t o = x * stride + shift_last;
          if (o >= 0 && o < out_last) out_row[o] += in_row[x];
        }
      }
    }
  });
}

}  // namespace

Status CheckConvTranspose(const Node& node, const Graph&) {
  if (node.inputs.size() < 2 || node.inputs.size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConvTranspose takes 2 or 3 inputs, the node has ", node.inputs.size()));
  }
  const std::string auto_pad = node.attributes.GetString("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER") {
    return absl::InvalidArgumentError(absl::StrCat("unknown auto_pad ", auto_pad));
  }
  return absl::OkStatus();
}

Status RunConvTranspose(const OpContext& ctx, const Node& node, const Inputs& inputs,
                        std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* w, RequireInput(inputs, 1, "W", {DataType::kFp32}));
  const Value* bias = inputs.size() > 2 ? inputs[2] : nullptr;
  if (x->rank() < 3 || w->rank() != x->rank()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "X ", DescribeValue(*x), " and W ", DescribeValue(*w), " must have one rank, at least 3"));
  }
  const int64_t batch = x->dim(0), channels = x->dim(1);
  const int64_t groups = node.attributes.GetInt("group", 1);
  if (groups < 1 || channels % groups != 0 || w->dim(0) != channels) {
    return absl::InvalidArgumentError(absl::StrCat(
        "X ", DescribeValue(*x), " and W ", DescribeValue(*w), " do not fit group=", groups));
  }
  const int64_t out_per_group = w->dim(1), out_channels = out_per_group * groups;
  if (bias != nullptr &&
      (bias->dtype() != DataType::kFp32 || bias->rank() != 1 || bias->dim(0) != out_channels)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bias ", DescribeValue(*bias), " must be FP32[", out_channels, "]"));
  }
  TESSERA_ASSIGN_OR_RETURN(TransposeGeometry g,
                           ResolveConvTransposeGeometry(node, x->shape(), w->shape()));
  Shape out_shape{batch, out_channels};
  out_shape.insert(out_shape.end(), g.out.begin(), g.out.end());
  double out_elements = 1;
  for (int64_t d : out_shape) out_elements *= static_cast<double>(d);
  if (out_elements > static_cast<double>(int64_t{1} << 36)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the output ", ShapeToString(out_shape), " is too large"));
  }
  Value y = ctx.NewOutput(0, DataType::kFp32, out_shape);
  const int64_t in_per_group = channels / groups;
  const int64_t k_count = Product(g.kernel), p_count = Product(g.in), q_count = Product(g.out);
  float* out = y.mutable_data<float>();
  for (int64_t c = 0; c < batch * out_channels; ++c) {
    std::fill_n(out + c * q_count, q_count,
                bias != nullptr ? bias->data<float>()[c % out_channels] : 0.0f);
  }
  std::vector<float> cols(static_cast<size_t>(out_per_group * k_count * p_count));
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t grp = 0; grp < groups; ++grp) {
      const float* w_g = w->data<float>() + grp * in_per_group * out_per_group * k_count;
      const float* x_g = x->data<float>() + (n * channels + grp * in_per_group) * p_count;
      Sgemm(true, false, out_per_group * k_count, p_count, in_per_group, 1.0f, w_g,
            out_per_group * k_count, x_g, p_count, 0.0f, cols.data(), p_count, ctx.pool,
            ctx.onednn);
      Col2Im(cols.data(), out_per_group, g,
             out + (n * out_channels + grp * out_per_group) * q_count, ctx.pool);
    }
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
