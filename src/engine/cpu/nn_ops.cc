// Softmax, LogSoftmax, Hardmax and inference-mode BatchNormalization.
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/cpu/fast_math.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {

namespace {

// Softmax of one contiguous row. The max and the sum are kept in kLanes partial results so that
// they vectorise (one float accumulator fixes the order of the additions); compiled for AVX-512
// and AVX2 as well as the baseline.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void SoftmaxRow(const float* x, int64_t n, float* y) {
  constexpr int64_t kLanes = 16;
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<float>::infinity());
  const int64_t whole = n - n % kLanes;
  for (int64_t i = 0; i < whole; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] = std::max(lanes[l], x[i + l]);
  }
  float max_value = *std::max_element(lanes, lanes + kLanes);
  for (int64_t i = whole; i < n; ++i) max_value = std::max(max_value, x[i]);
  // Subtracting the max keeps exp in range for large logits.
  for (int64_t i = 0; i < n; ++i) y[i] = FastExp(x[i] - max_value);
  std::fill(lanes, lanes + kLanes, 0.0f);
  for (int64_t i = 0; i < whole; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += y[i + l];
  }
  float sum = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l) sum += lanes[l];
  for (int64_t i = whole; i < n; ++i) sum += y[i];
  const float scale = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) y[i] *= scale;
}

}  // namespace

void Softmax(const float* input, int64_t outer, int64_t axis_len, int64_t inner, float* out) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) {
      SoftmaxRow(input + o * axis_len, axis_len, out + o * axis_len);
    }
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const float* x = input + o * axis_len * inner + in;
      float* y = out + o * axis_len * inner + in;
      // Subtracting the max keeps exp in range for large logits.
      float max_value = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < axis_len; ++i) max_value = std::max(max_value, x[i * inner]);
      for (int64_t i = 0; i < axis_len; ++i) y[i * inner] = FastExp(x[i * inner] - max_value);
      float sum = 0.0f;
      for (int64_t i = 0; i < axis_len; ++i) sum += y[i * inner];
      float scale = 1.0f / sum;
      for (int64_t i = 0; i < axis_len; ++i) y[i * inner] *= scale;
    }
  }
}

namespace {

// A Softmax-family input seen as [outer, axis_len, inner]: the op runs along the middle dim.
struct AxisView {
  int64_t outer = 1, axis_len = 1, inner = 1;
};

StatusOr<AxisView> SoftmaxAxisView(const Node& node, const Value& x) {
  const int rank = x.rank();
  if (rank == 0) return absl::InvalidArgumentError(absl::StrCat(node.op_type, " of a scalar"));
  // Opset 13 works along one axis (default -1); earlier opsets flatten to 2-D at `axis`
  // (default 1) and work on each row.
  const bool per_axis = node.opset >= 13;
  TESSERA_ASSIGN_OR_RETURN(int axis,
                           NormalizeAxis(node.attributes.GetInt("axis", per_axis ? -1 : 1), rank));
  AxisView view;
  for (int d = 0; d < axis; ++d) view.outer *= x.dim(d);
  if (per_axis) {
    view.axis_len = x.dim(axis);
    for (int d = axis + 1; d < rank; ++d) view.inner *= x.dim(d);
  } else {
    for (int d = axis; d < rank; ++d) view.axis_len *= x.dim(d);
  }
  return view;
}

// Runs fn(in, out, outer_count) on blocks of whole outer rows (each axis_len * inner elements),
// spread over the pool when there is enough work: rows are independent.
template <typename Fn>
void ForOuterBlocks(ThreadPool* pool, const AxisView& view, const float* in, float* out, Fn fn) {
  const int64_t stride = view.axis_len * view.inner;
  const int64_t per_task = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, stride));
  const int64_t tasks = (view.outer + per_task - 1) / per_task;
  ParallelFor(pool, tasks, [&](int64_t t) {
    const int64_t begin = t * per_task, end = std::min(view.outer, begin + per_task);
    fn(in + begin * stride, out + begin * stride, end - begin);
  });
}

// The FP32 input and a same-shaped FP32 output of a Softmax-family node, run block by block with
// fn(in, out, outer_count, view).
template <typename Fn>
Status RunAlongAxis(const OpContext& ctx, const Node& node, const Inputs& inputs,
                    std::vector<Value>* outputs, Fn fn) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "input", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(AxisView view, SoftmaxAxisView(node, *x));
  Value y = ctx.NewOutput(0, DataType::kFp32, x->shape());
  ForOuterBlocks(ctx.pool, view, x->data<float>(), y.mutable_data<float>(),
                 [&](const float* in, float* out, int64_t outer) { fn(in, out, outer, view); });
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

// x - max - log(sum(e^(x - max))) along the axis: shifting by the max keeps e^ in range, and the
// max's own term makes the sum >= 1, so the log never sees 0.
void LogSoftmaxBlock(const float* input, float* output, int64_t outer, const AxisView& view) {
  const int64_t len = view.axis_len, inner = view.inner;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const float* x = input + o * len * inner + in;
      float* y = output + o * len * inner + in;
      float max_value = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < len; ++i) max_value = std::max(max_value, x[i * inner]);
      float sum = 0.0f;
      for (int64_t i = 0; i < len; ++i) sum += FastExp(x[i * inner] - max_value);
      // (x - max) first: max + log(sum) would round to the ulp of large logits.
      const float log_sum = std::log(sum);
      for (int64_t i = 0; i < len; ++i) y[i * inner] = (x[i * inner] - max_value) - log_sum;
    }
  }
}

// 1 at the first maximum along the axis (numpy.argmax's tie rule, which the ONNX reference uses),
// 0 elsewhere.
void HardmaxBlock(const float* input, float* output, int64_t outer, const AxisView& view) {
  const int64_t len = view.axis_len, inner = view.inner;
  std::fill(output, output + outer * len * inner, 0.0f);
  if (len == 0) return;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const float* x = input + o * len * inner + in;
      int64_t best = 0;
      for (int64_t i = 1; i < len; ++i) {
        if (x[i * inner] > x[best * inner]) best = i;
      }
      output[(o * len + best) * inner + in] = 1.0f;
    }
  }
}

}  // namespace

Status RunSoftmax(const OpContext& ctx, const Node& node, const Inputs& inputs,
                  std::vector<Value>* outputs) {
  return RunAlongAxis(ctx, node, inputs, outputs,
                      [](const float* in, float* out, int64_t outer, const AxisView& view) {
                        Softmax(in, outer, view.axis_len, view.inner, out);
                      });
}

Status RunLogSoftmax(const OpContext& ctx, const Node& node, const Inputs& inputs,
                     std::vector<Value>* outputs) {
  return RunAlongAxis(ctx, node, inputs, outputs, LogSoftmaxBlock);
}

Status RunHardmax(const OpContext& ctx, const Node& node, const Inputs& inputs,
                  std::vector<Value>* outputs) {
  return RunAlongAxis(ctx, node, inputs, outputs, HardmaxBlock);
}

Status CheckBatchNormalization(const Node& node, const Graph& graph) {
  if (node.attributes.GetInt("training_mode", 0) != 0 || node.outputs.size() > 1) {
    return absl::UnimplementedError("training mode (running statistics outputs) is not supported");
  }
  if (node.attributes.GetInt("spatial", 1) != 1) {
    return absl::UnimplementedError("spatial=0 is not supported");
  }
  for (const char* own : {"tessera_activation", "tessera_concat"}) {
    if (node.attributes.Has(own)) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute ", own, " is the engine's own, set by its graph passes"));
    }
  }
  if (node.inputs.size() != 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchNormalization takes 5 inputs, the node has ", node.inputs.size()));
  }
  return absl::OkStatus();
}

namespace {

// y = max(x * scale + shift, floor) per channel over `parts` joined on axis 1 (one part, or a
// Concat's inputs fused in by FuseConcatBatchNorm), into `y` of `shape`. Every part is in the
// layout `channels_last` says. The joined tensor is never written: DenseNet normalises each of
// its growing concatenations once, so reading the parts saves writing and reading it again.
void NormaliseParts(const std::vector<const Value*>& parts, const Shape& shape, bool channels_last,
                    const std::vector<float>& scale, const std::vector<float>& shift, float floor,
                    float* out, ThreadPool* pool) {
  const int64_t channels = shape[1];
  const int64_t batch = shape[0];
  int64_t spatial = 1;
  for (size_t d = 2; d < shape.size(); ++d) spatial *= shape[d];
  if (channels_last) {
    // [N, H, W, C]: each pixel's channels are each part's channels for that pixel in turn.
    const int64_t pixels = batch * spatial;
    const int64_t per_task = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, channels));
    ParallelFor(pool, (pixels + per_task - 1) / per_task, [&](int64_t t) {
      const int64_t end = std::min(pixels, (t + 1) * per_task);
      for (int64_t p = t * per_task; p < end; ++p) {
        float* dst = out + p * channels;
        const float* s = scale.data();
        const float* b = shift.data();
        for (const Value* part : parts) {
          const int64_t count = part->dim(1);
          const float* src = part->data<float>() + p * count;
          for (int64_t c = 0; c < count; ++c) dst[c] = std::max(src[c] * s[c] + b[c], floor);
          dst += count;
          s += count;
          b += count;
        }
      }
    });
    return;
  }
  // Row-major: planes of `spatial` values, plane (n, c) of the output from its part's plane.
  std::vector<int> part_of(static_cast<size_t>(channels));
  std::vector<int64_t> first_channel(parts.size());
  for (size_t i = 0, c = 0; i < parts.size(); ++i) {
    first_channel[i] = static_cast<int64_t>(c);
    for (int64_t k = 0; k < parts[i]->dim(1); ++k) part_of[c++] = static_cast<int>(i);
  }
  const int64_t planes = batch * channels;
  const int64_t per_task = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, spatial));
  ParallelFor(pool, (planes + per_task - 1) / per_task, [&](int64_t t) {
    const int64_t end = std::min(planes, (t + 1) * per_task);
    for (int64_t q = t * per_task; q < end; ++q) {
      const int64_t n = q / channels, c = q % channels;
      const Value& part = *parts[part_of[c]];
      const int64_t local = c - first_channel[part_of[c]];
      const float* src = part.data<float>() + (n * part.dim(1) + local) * spatial;
      float* dst = out + q * spatial;
      const float sc = scale[c], b = shift[c];
      for (int64_t i = 0; i < spatial; ++i) dst[i] = std::max(src[i] * sc + b, floor);
    }
  });
}

}  // namespace

Status RunBatchNormalization(const OpContext& ctx, const Node& node, const Inputs& inputs,
                             std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kFp32}));
  if (x->rank() < 2) return absl::InvalidArgumentError("X must have rank >= 2");
  // With tessera_concat = k (FuseConcatBatchNorm), X is the first of k parts joined on axis 1 and
  // inputs 5.. the others.
  std::vector<const Value*> parts = {x};
  Shape shape = x->shape();
  for (int64_t i = 1; i < node.attributes.GetInt("tessera_concat", 1); ++i) {
    TESSERA_ASSIGN_OR_RETURN(const Value* part,
                             RequireInput(inputs, 4 + i, "concatenated X", {DataType::kFp32}));
    bool fits = part->rank() == x->rank();
    for (int d = 0; fits && d < x->rank(); ++d) fits = d == 1 || part->dim(d) == x->dim(d);
    if (!fits) {
      return absl::InvalidArgumentError(absl::StrCat("concatenated input ", i, " ",
                                                     DescribeValue(*part), " does not fit X ",
                                                     DescribeValue(*x), " on axis 1"));
    }
    shape[1] += part->dim(1);
    parts.push_back(part);
  }
  const int64_t channels = shape[1];
  const char* names[] = {"scale", "B", "mean", "var"};
  const float* params[4];
  for (int i = 0; i < 4; ++i) {
    TESSERA_ASSIGN_OR_RETURN(const Value* p, RequireInput(inputs, i + 1, names[i],
                                                          {DataType::kFp32}));
    if (p->rank() != 1 || p->dim(0) != channels) {
      return absl::InvalidArgumentError(absl::StrCat(names[i], " ", DescribeValue(*p),
                                                     " must have ", channels, " elements"));
    }
    params[i] = p->data<float>();
  }
  const float epsilon = node.attributes.GetFloat("epsilon", 1e-5f);
  // A Relu after it, fused by FuseBatchNormRelu: clamped in the same pass.
  const float floor = node.attributes.GetString("tessera_activation", "") == "Relu"
                          ? 0.0f
                          : -std::numeric_limits<float>::infinity();
  // Fold to y = x * scale' + shift' per channel.
  std::vector<float> scale(channels), shift(channels);
  for (int64_t c = 0; c < channels; ++c) {
    scale[c] = params[0][c] / std::sqrt(params[3][c] + epsilon);
    shift[c] = params[1][c] - params[2][c] * scale[c];
  }
  if (parts.size() > 1) {
    // The parts' layout is the one most of their bytes have, as for Concat.
    const bool channels_last = MostlyChannelsLast(parts);
    std::vector<Value> converted;
    converted.reserve(parts.size());
    for (const Value*& part : parts) {
      if (part->channels_last() == channels_last) continue;
      converted.push_back(channels_last ? ToChannelsLast(*part, ctx.pool)
                                        : ToRowMajor(*part, ctx.pool));
      part = &converted.back();
    }
    Value y = ctx.NewOutput(0, DataType::kFp32, shape);
    if (channels_last) y = y.WithLayout(Layout::kChannelsLast);
    NormaliseParts(parts, shape, channels_last, scale, shift, floor, y.mutable_data<float>(),
                   ctx.pool);
    (*outputs)[0] = std::move(y);
    return absl::OkStatus();
  }
  if (x->channels_last()) {
    // [N, H, W, C] as stored (a oneDNN Conv's output; DenseNet normalises every concatenation
    // before its next Conv): y stays channels-last. The pixels are seen as rows of k pixels
    // (PixelsPerRow), so the vectorised inner loop runs over k * C values even when C is small.
    const int64_t pixels = x->num_elements() / std::max<int64_t>(1, channels);
    const int64_t k = PixelsPerRow(pixels, channels);
    const int64_t width = k * channels, rows = pixels / k;
    std::vector<float> row_scale(static_cast<size_t>(width)), row_shift(row_scale.size());
    for (int64_t w = 0; w < width; ++w) {
      row_scale[w] = scale[w % channels];
      row_shift[w] = shift[w % channels];
    }
    Value y = ctx.NewOutput(0, DataType::kFp32, x->shape()).WithLayout(Layout::kChannelsLast);
    const float* in = x->data<float>();
    float* out = y.mutable_data<float>();
    const int64_t per_task = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, width));
    ParallelFor(ctx.pool, (rows + per_task - 1) / per_task, [&](int64_t t) {
      const int64_t end = std::min(rows, (t + 1) * per_task);
      for (int64_t r = t * per_task; r < end; ++r) {
        const float* src = in + r * width;
        float* dst = out + r * width;
        for (int64_t w = 0; w < width; ++w) {
          dst[w] = std::max(src[w] * row_scale[w] + row_shift[w], floor);  // NaN stays NaN
        }
      }
    });
    (*outputs)[0] = std::move(y);
    return absl::OkStatus();
  }
  Value y = ctx.NewOutput(0, DataType::kFp32, x->shape());
  NormaliseParts(parts, shape, false, scale, shift, floor, y.mutable_data<float>(), ctx.pool);
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
