// Conv: im2col + Sgemm per (image, group); 1x1 stride-1 unpadded convolutions skip im2col and feed
// the input planes to Sgemm directly.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

// Unfolds one group's input [channels, h, w] into col[channels*kh*kw, oh*ow].
void Im2Col(const float* input, int64_t channels, int64_t h, int64_t w, const Window2d& win,
            int64_t oh, int64_t ow, float* col) {
  for (int64_t c = 0; c < channels; ++c) {
    const float* plane = input + c * h * w;
    for (int64_t ki = 0; ki < win.kernel_h; ++ki) {
      for (int64_t kj = 0; kj < win.kernel_w; ++kj) {
        for (int64_t oy = 0; oy < oh; ++oy) {
          int64_t iy = oy * win.stride_h - win.pad_top + ki * win.dilation_h;
          float* dst = col + oy * ow;
          if (iy < 0 || iy >= h) {
            std::fill(dst, dst + ow, 0.0f);
            continue;
          }
          const float* src_row = plane + iy * w;
          int64_t x0 = kj * win.dilation_w - win.pad_left;
          for (int64_t ox = 0; ox < ow; ++ox) {
            int64_t ix = ox * win.stride_w + x0;
            dst[ox] = (ix >= 0 && ix < w) ? src_row[ix] : 0.0f;
          }
        }
        col += oh * ow;
      }
    }
  }
}

}  // namespace

void Conv2d(const float* input, int64_t batch, int64_t in_channels, int64_t h, int64_t w,
            const float* weight, const float* bias, int64_t out_channels, int64_t groups,
            const Window2d& win, float* out, int64_t oh, int64_t ow, ThreadPool* pool) {
  const int64_t cin_g = in_channels / groups;
  const int64_t cout_g = out_channels / groups;
  const int64_t kdim = cin_g * win.kernel_h * win.kernel_w;
  const int64_t spatial = oh * ow;
  const bool direct = win.kernel_h == 1 && win.kernel_w == 1 && win.stride_h == 1 &&
                      win.stride_w == 1 && win.pad_top == 0 && win.pad_left == 0 &&
                      win.pad_bottom == 0 && win.pad_right == 0;
  if (bias != nullptr) {
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t c = 0; c < out_channels; ++c) {
        float* plane = out + (n * out_channels + c) * spatial;
        std::fill(plane, plane + spatial, bias[c]);
      }
    }
  }
  auto run_one = [&](int64_t task, std::vector<float>* col, ThreadPool* gemm_pool) {
    int64_t n = task / groups, g = task % groups;
    const float* in_g = input + (n * in_channels + g * cin_g) * h * w;
    const float* b = in_g;
    if (!direct) {
      col->resize(static_cast<size_t>(kdim * spatial));
      Im2Col(in_g, cin_g, h, w, win, oh, ow, col->data());
      b = col->data();
    }
    Sgemm(false, false, cout_g, spatial, kdim, 1.0f, weight + g * cout_g * kdim, kdim, b, spatial,
          bias != nullptr ? 1.0f : 0.0f, out + (n * out_channels + g * cout_g) * spatial, spatial,
          gemm_pool);
  };
  const int64_t tasks = batch * groups;
  const int threads = pool != nullptr ? pool->usable_threads() : 1;
  if (threads > 1 && tasks >= threads) {
    // Enough independent images/groups to keep every thread busy: parallelise there, so im2col
    // runs in parallel too, and keep each GEMM on its thread.
    ParallelFor(pool, tasks, [&](int64_t task) {
      thread_local std::vector<float> col;
      run_one(task, &col, nullptr);
    });
  } else {
    std::vector<float> col;
    for (int64_t task = 0; task < tasks; ++task) run_one(task, &col, pool);
  }
}

Status CheckWindowAttributes(const Node& node, int spatial_rank) {
  std::string auto_pad = node.attributes.GetString("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER") {
    return absl::UnimplementedError(absl::StrCat("auto_pad ", auto_pad, " is not supported"));
  }
  if (node.attributes.Has("kernel_shape")) {
    size_t rank = node.attributes.GetInts("kernel_shape").size();
    if (rank != 1 && rank != 2) {
      return absl::UnimplementedError(
          absl::StrCat(rank, "-D windows are not supported (only 1-D and 2-D)"));
    }
  }
  // Every attribute that gives the window's rank must give the same one (pads has two entries per
  // dim), so that a corrupt file fails here, at load, and not at its first request.
  std::string first;
  size_t rank = spatial_rank > 0 ? static_cast<size_t>(spatial_rank) : 0;
  if (rank != 0) first = "the weight's shape";
  for (const auto& [name, per_dim] : {std::pair<const char*, size_t>{"kernel_shape", 1},
                                      {"strides", 1}, {"dilations", 1}, {"pads", 2}}) {
    if (!node.attributes.Has(name)) continue;
    const size_t entries = node.attributes.GetInts(name).size();
    if (entries % per_dim == 0 && (rank == 0 || entries / per_dim == rank)) {
      if (rank == 0) first = absl::StrCat(name, " (", entries, " entries)");
      rank = entries / per_dim;
      continue;
    }
    if (rank == 0) {  // only pads, with an odd count
      return absl::InvalidArgumentError(
          absl::StrCat(name, " has ", entries, " entries; it needs two per spatial dim"));
    }
    return absl::InvalidArgumentError(absl::StrCat(name, " has ", entries, " entries, but ", first,
                                                   " gives a ", rank, "-D window"));
  }
  return absl::OkStatus();
}

StatusOr<Window2d> ResolveWindow(const Node& node, int spatial_rank, int64_t h, int64_t w,
                                 int64_t kernel_h, int64_t kernel_w) {
  const Attributes& attrs = node.attributes;
  const size_t r = static_cast<size_t>(spatial_rank);
  std::vector<int64_t> strides = attrs.GetInts("strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> dilations = attrs.GetInts("dilations", std::vector<int64_t>(r, 1));
  std::vector<int64_t> pads = attrs.GetInts("pads", std::vector<int64_t>(2 * r, 0));
  if (strides.size() != r || dilations.size() != r || pads.size() != 2 * r) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strides, dilations and pads must have ", r, ", ", r, " and ", 2 * r, " entries"));
  }
  Window2d win;
  win.kernel_h = kernel_h;
  win.kernel_w = kernel_w;
  // A 1-D window lives in the width; the height is a dummy dim of 1.
  const size_t x = r - 1;
  if (r == 2) {
    win.stride_h = strides[0];
    win.dilation_h = dilations[0];
    win.pad_top = pads[0];
    win.pad_bottom = pads[2];
  }
  win.stride_w = strides[x];
  win.dilation_w = dilations[x];
  win.pad_left = pads[x];
  win.pad_right = pads[r + x];
  if (win.stride_h < 1 || win.stride_w < 1 || win.dilation_h < 1 || win.dilation_w < 1) {
    return absl::InvalidArgumentError("strides and dilations must be >= 1");
  }
  std::string auto_pad = attrs.GetString("auto_pad", "NOTSET");
  if (auto_pad == "VALID") {
    win.pad_top = win.pad_bottom = win.pad_left = win.pad_right = 0;
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // Output = ceil(in / stride); the odd pad goes at the end for SAME_UPPER, the start for LOWER.
    auto same = [&](int64_t in, int64_t k, int64_t s, int64_t d, int64_t* begin, int64_t* end) {
      int64_t out = (in + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + (k - 1) * d + 1 - in);
      *begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      *end = total - *begin;
    };
    same(h, kernel_h, win.stride_h, win.dilation_h, &win.pad_top, &win.pad_bottom);
    same(w, kernel_w, win.stride_w, win.dilation_w, &win.pad_left, &win.pad_right);
  }
  return win;
}

Status CheckConv(const Node& node, const Graph& graph) {
  if (node.inputs.size() < 2 || node.inputs.size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("Conv takes 2 or 3 inputs, the node has ", node.inputs.size()));
  }
  if (node.attributes.Has("tessera_residual")) {
    return absl::InvalidArgumentError(
        "attribute tessera_residual is the engine's own, set by its graph passes");
  }
  return CheckConvWindow(node, graph, 1);
}

Status CheckConvWindow(const Node& node, const Graph& graph, size_t weight_input) {
  int spatial_rank = 0;  // unknown unless the weight is a constant
  if (node.inputs.size() > weight_input && graph.IsConstant(node.inputs[weight_input])) {
    const int rank = graph.constants[node.inputs[weight_input]]->rank();
    if (rank != 3 && rank != 4) {
      return absl::UnimplementedError(absl::StrCat(rank - 2, "-D convolution is not supported"));
    }
    spatial_rank = rank - 2;
  }
  return CheckWindowAttributes(node, spatial_rank);
}

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
}  // namespace

Status RunConv(const OpContext& ctx, const Node& node, const Inputs& inputs,
               std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* wt, RequireInput(inputs, 1, "W", {DataType::kFp32}));
  const Value* bias = inputs.size() > 2 ? inputs[2] : nullptr;
  if ((x->rank() != 3 && x->rank() != 4) || wt->rank() != x->rank()) {
    return absl::InvalidArgumentError(absl::StrCat("X ", DescribeValue(*x), " and W ",
                                                   DescribeValue(*wt),
                                                   " must both be 3-D or both 4-D"));
  }
  const int spatial_rank = x->rank() - 2;
  const int64_t batch = x->dim(0), cin = x->dim(1);
  const int64_t h = spatial_rank == 2 ? x->dim(2) : 1, w = x->dim(x->rank() - 1);
  const int64_t cout = wt->dim(0);
  const int64_t kh = spatial_rank == 2 ? wt->dim(2) : 1, kw = wt->dim(wt->rank() - 1);
  const int64_t groups = node.attributes.GetInt("group", 1);
  if (groups < 1 || cin % groups != 0 || cout % groups != 0 || wt->dim(1) * groups != cin) {
    return absl::InvalidArgumentError(absl::StrCat("X ", DescribeValue(*x), " and W ",
                                                   DescribeValue(*wt), " do not fit group=",
                                                   groups));
  }
  std::vector<int64_t> kernel_shape = node.attributes.GetInts("kernel_shape");
  if (!kernel_shape.empty() &&
      kernel_shape != std::vector<int64_t>(wt->shape().begin() + 2, wt->shape().end())) {
    return absl::InvalidArgumentError("kernel_shape does not match W");
  }
  if (bias != nullptr &&
      (bias->dtype() != DataType::kFp32 || bias->rank() != 1 || bias->dim(0) != cout)) {
    return absl::InvalidArgumentError(absl::StrCat("bias ", DescribeValue(*bias),
                                                   " must be FP32[", cout, "]"));
  }
  TESSERA_ASSIGN_OR_RETURN(Window2d win, ResolveWindow(node, spatial_rank, h, w, kh, kw));
  TESSERA_ASSIGN_OR_RETURN(int64_t oh, WindowOutputSize(h, kh, win.stride_h, win.dilation_h,
                                                        win.pad_top, win.pad_bottom, false));
  TESSERA_ASSIGN_OR_RETURN(int64_t ow, WindowOutputSize(w, kw, win.stride_w, win.dilation_w,
                                                        win.pad_left, win.pad_right, false));
  Shape out_shape = spatial_rank == 2 ? Shape{batch, cout, oh, ow} : Shape{batch, cout, ow};
  // A residual fused in by the graph passes (graph_passes.h FuseConvResidual), added before the
  // activation.
  const Value* residual = nullptr;
  if (node.attributes.Has("tessera_residual")) {
    residual = inputs.size() > 3 ? inputs[3] : nullptr;
    if (residual == nullptr || residual->dtype() != DataType::kFp32 ||
        residual->shape() != out_shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("residual ", residual != nullptr ? DescribeValue(*residual) : "missing",
                       " does not match the output ", ShapeToString(out_shape)));
    }
  }
  Value y = ctx.NewOutput(0, DataType::kFp32, out_shape);
  // The output may be planned into the residual's bytes (OpDef::in_place_input): the convolution
  // then goes to a temporary so that it does not overwrite the residual before adding it.
  const bool in_place = residual != nullptr && residual->raw() == y.raw();
  Value conv = in_place ? Value::Allocate(DataType::kFp32, out_shape) : y;
  Conv2d(x->data<float>(), batch, cin, h, w, wt->data<float>(),
         bias != nullptr ? bias->data<float>() : nullptr, cout, groups, win,
         conv.mutable_data<float>(), oh, ow, ctx.pool);
  if (residual != nullptr) {
    float* data = y.mutable_data<float>();
    const float* sum = conv.data<float>();
    const float* add = residual->data<float>();
    for (int64_t i = 0; i < y.num_elements(); ++i) data[i] = sum[i] + add[i];
  }
  // An activation fused in by the graph passes (graph_passes.h).
  if (const std::string act = node.attributes.GetString("tessera_activation"); !act.empty()) {
    float* data = y.mutable_data<float>();
    const int64_t total = y.num_elements();
    const int64_t tasks = std::max<int64_t>(1, total / 16384);
    auto each = [&](auto f) {
      ParallelFor(ctx.pool, tasks, [&](int64_t t) {
        const int64_t end = total * (t + 1) / tasks;
        for (int64_t i = total * t / tasks; i < end; ++i) data[i] = f(data[i]);
      });
    };
    if (act == "LeakyRelu") {
      const float alpha = node.attributes.GetFloat("tessera_alpha", 0.01f);
      each([alpha](float v) { return v < 0.0f ? alpha * v : v; });
    } else if (act == "Sigmoid") {
      each([](float v) { return 1.0f / (1.0f + std::exp(-v)); });
    } else if (act == "Tanh") {
      each([](float v) { return std::tanh(v); });
    } else if (act == "Swish") {
      each([](float v) { return v / (1.0f + std::exp(-v)); });
    } else {
      float lo = -kInf, hi = kInf;
      FusedClamp(node, &lo, &hi);
      each([lo, hi](float v) { return std::min(std::max(v, lo), hi); });
    }
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
