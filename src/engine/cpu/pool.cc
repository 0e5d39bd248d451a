// MaxPool, AveragePool (1-D/2-D windows), GlobalAveragePool and GlobalMaxPool; parallel over
// planes.
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {

void Pool2d(PoolKind kind, const float* input, int64_t planes, int64_t h, int64_t w,
            const Window2d& win, float* out, int64_t oh, int64_t ow, ThreadPool* pool) {
  // Planes per task: enough work per task to amortise the hand-off.
  const int64_t per_task = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, oh * ow * 4));
  const int64_t tasks = (planes + per_task - 1) / per_task;
  ParallelFor(pool, tasks, [&](int64_t task) {
    int64_t end = std::min(planes, (task + 1) * per_task);
    for (int64_t p = task * per_task; p < end; ++p) {
      const float* in = input + p * h * w;
      float* dst = out + p * oh * ow;
      for (int64_t oy = 0; oy < oh; ++oy) {
        const int64_t y0 = oy * win.stride_h - win.pad_top;
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t x0 = ox * win.stride_w - win.pad_left;
          float max_value = -std::numeric_limits<float>::infinity();
          float sum = 0.0f;
          int64_t inside = 0, in_padded = 0;
          for (int64_t ki = 0; ki < win.kernel_h; ++ki) {
            int64_t iy = y0 + ki * win.dilation_h;
            bool row_in = iy >= 0 && iy < h;
            bool row_in_padded = iy >= -win.pad_top && iy < h + win.pad_bottom;
            for (int64_t kj = 0; kj < win.kernel_w; ++kj) {
              int64_t ix = x0 + kj * win.dilation_w;
              if (row_in_padded && ix >= -win.pad_left && ix < w + win.pad_right) ++in_padded;
              if (!row_in || ix < 0 || ix >= w) continue;
              float v = in[iy * w + ix];
              max_value = std::max(max_value, v);
              sum += v;
              ++inside;
            }
          }
          float result = 0.0f;
          switch (kind) {
            case PoolKind::kMax:
              result = max_value;
              break;
            case PoolKind::kAverageExcludePad:
              result = inside > 0 ? sum / static_cast<float>(inside) : 0.0f;
              break;
            case PoolKind::kAverageIncludePad:
              // Counts the explicit padding, not the extra cells ceil_mode reaches past it.
              result = in_padded > 0 ? sum / static_cast<float>(in_padded) : 0.0f;
              break;
          }
          dst[oy * ow + ox] = result;
        }
      }
    }
  });
}

Status CheckPool(const Node& node, const Graph& graph) {
  TESSERA_RETURN_IF_ERROR(CheckWindowAttributes(node));
  if (!node.attributes.Has("kernel_shape")) {
    return absl::InvalidArgumentError("kernel_shape is required");
  }
  if (node.outputs.size() > 1) {
    return absl::UnimplementedError("the Indices output is not supported");
  }
  if (node.attributes.GetInt("storage_order", 0) != 0) {
    return absl::UnimplementedError("storage_order=1 is not supported");
  }
  return absl::OkStatus();
}

namespace {

Status RunPool(PoolKind kind, const OpContext& ctx, const Node& node, const Inputs& inputs,
               std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kFp32}));
  std::vector<int64_t> kernel = node.attributes.GetInts("kernel_shape");
  const int spatial_rank = static_cast<int>(kernel.size());
  if (x->rank() != spatial_rank + 2) {
    return absl::InvalidArgumentError(absl::StrCat("X ", DescribeValue(*x), " does not fit a ",
                                                   spatial_rank, "-D window"));
  }
  const int64_t h = spatial_rank == 2 ? x->dim(2) : 1, w = x->dim(x->rank() - 1);
  const int64_t kh = spatial_rank == 2 ? kernel[0] : 1, kw = kernel.back();
  TESSERA_ASSIGN_OR_RETURN(Window2d win, ResolveWindow(node, spatial_rank, h, w, kh, kw));
  bool ceil_mode = node.attributes.GetInt("ceil_mode", 0) != 0;
  TESSERA_ASSIGN_OR_RETURN(int64_t oh, WindowOutputSize(h, kh, win.stride_h, win.dilation_h,
                                                        win.pad_top, win.pad_bottom, ceil_mode));
  TESSERA_ASSIGN_OR_RETURN(int64_t ow, WindowOutputSize(w, kw, win.stride_w, win.dilation_w,
                                                        win.pad_left, win.pad_right, ceil_mode));
  Shape out_shape = {x->dim(0), x->dim(1)};
  if (spatial_rank == 2) out_shape.push_back(oh);
  out_shape.push_back(ow);
  Value y = ctx.NewOutput(0, DataType::kFp32, out_shape);
  Pool2d(kind, x->data<float>(), x->dim(0) * x->dim(1), h, w, win, y.mutable_data<float>(), oh,
         ow, ctx.pool);
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace

Status RunMaxPool(const OpContext& ctx, const Node& node, const Inputs& inputs,
                  std::vector<Value>* outputs) {
  return RunPool(PoolKind::kMax, ctx, node, inputs, outputs);
}

Status RunAveragePool(const OpContext& ctx, const Node& node, const Inputs& inputs,
                      std::vector<Value>* outputs) {
  bool include_pad = node.attributes.GetInt("count_include_pad", 0) != 0;
  return RunPool(include_pad ? PoolKind::kAverageIncludePad : PoolKind::kAverageExcludePad, ctx,
                 node, inputs, outputs);
}

namespace {

// The input, output shape [N, C, 1, ...] and plane size of a global pool.
struct GlobalPoolShape {
  const Value* x;
  Shape out_shape;
  int64_t spatial;
};

StatusOr<GlobalPoolShape> ResolveGlobalPool(const Inputs& inputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kFp32}));
  if (x->rank() < 3) {
    return absl::InvalidArgumentError(absl::StrCat("X ", DescribeValue(*x), " has rank < 3"));
  }
  GlobalPoolShape g{x, Shape(x->shape().begin(), x->shape().begin() + 2), 1};
  for (int d = 2; d < x->rank(); ++d) {
    g.spatial *= x->dim(d);
    g.out_shape.push_back(1);
  }
  return g;
}

}  // namespace

Status RunGlobalAveragePool(const OpContext& ctx, const Node& node, const Inputs& inputs,
                            std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(GlobalPoolShape g, ResolveGlobalPool(inputs));
  const Value* x = g.x;
  const Shape& out_shape = g.out_shape;
  const int64_t spatial = g.spatial;
  Value y = ctx.NewOutput(0, DataType::kFp32, out_shape);
  const float* in = x->data<float>();
  float* out = y.mutable_data<float>();
  const int64_t planes = x->dim(0) * x->dim(1);
  for (int64_t p = 0; p < planes; ++p) {
    // Double accumulation: planes can be large and the result feeds a classifier.
    double sum = 0.0;
    for (int64_t i = 0; i < spatial; ++i) sum += in[p * spatial + i];
    out[p] = spatial > 0 ? static_cast<float>(sum / static_cast<double>(spatial)) : 0.0f;
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunGlobalMaxPool(const OpContext& ctx, const Node&, const Inputs& inputs,
                        std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(GlobalPoolShape g, ResolveGlobalPool(inputs));
  const Value* x = g.x;
  const Shape& out_shape = g.out_shape;
  const int64_t spatial = g.spatial;
  Value y = ctx.NewOutput(0, DataType::kFp32, out_shape);
  if (x->num_elements() == 0) {
    if (y.num_elements() > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("X ", DescribeValue(*x), " has no elements to take the maximum of"));
    }
    (*outputs)[0] = std::move(y);
    return absl::OkStatus();
  }
  const int64_t planes = x->dim(0) * x->dim(1);
  const float* in = x->data<float>();
  float* out = y.mutable_data<float>();
  const int64_t per_task = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, spatial));
  ParallelFor(ctx.pool, (planes + per_task - 1) / per_task, [&](int64_t task) {
    const int64_t end = std::min(planes, (task + 1) * per_task);
    for (int64_t p = task * per_task; p < end; ++p) {
      const float* plane = in + p * spatial;
      float m = plane[0];
      for (int64_t i = 1; i < spatial; ++i) m = std::max(m, plane[i]);
      out[p] = m;
    }
  });
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
