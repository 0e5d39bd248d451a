// LayerNormalization (opset 17): normalises X over dims [axis, rank) and applies Scale and B.
// Rows are independent and spread over the pool; each is two passes (mean, then the centred
// variance, which is more accurate than E[x^2] - mean^2) plus the affine pass.
// InstanceNormalization and MeanVarianceNormalization normalise the same way over other dims;
// LRN scales each element by its neighbourhood across channels.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

// Sum of `count` values, and of their squared distances from `center`, in kLanes partial sums so
// that the loops vectorise (one float accumulator fixes the order of the additions and leaves
// the loop to wait on each add); compiled for AVX-512 and AVX2 as well as the baseline.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
float LaneSum(const float* src, int64_t count, float center, bool squared) {
  constexpr int64_t kLanes = 16;
  float lanes[kLanes] = {};
  const int64_t whole = count - count % kLanes;
  if (squared) {
    for (int64_t i = 0; i < whole; i += kLanes) {
      for (int64_t l = 0; l < kLanes; ++l) {
        const float c = src[i + l] - center;
        lanes[l] += c * c;
      }
    }
  } else {
    for (int64_t i = 0; i < whole; i += kLanes) {
      for (int64_t l = 0; l < kLanes; ++l) lanes[l] += src[i + l];
    }
  }
  float sum = 0.0f;
  for (int64_t l = 0; l < kLanes; ++l) sum += lanes[l];
  for (int64_t i = whole; i < count; ++i) {
    const float c = src[i] - center;
    sum += squared ? c * c : src[i];
  }
  return sum;
}

// Mean and 1/sqrt(variance + epsilon) of `count` values.
std::pair<float, float> MeanAndInvStd(const float* src, int64_t count, float epsilon) {
  const float mean =
      count > 0 ? LaneSum(src, count, 0.0f, false) / static_cast<float>(count) : 0.0f;
  const float variance =
      count > 0 ? LaneSum(src, count, mean, true) / static_cast<float>(count) : 0.0f;
  return {mean, 1.0f / std::sqrt(variance + epsilon)};
}

// dst = (src - mean) * inv_std * scale + bias over one row, both operands per element: the common
// form, compiled for AVX-512 and AVX2 as well as the baseline like LaneSum.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void AffineRow(const float* src, int64_t count, float mean, float inv_std, const float* scale,
               const float* bias, float* dst) {
  for (int64_t i = 0; i < count; ++i) dst[i] = (src[i] - mean) * inv_std * scale[i] + bias[i];
}

}  // namespace

Status CheckLayerNormalization(const Node& node, const Graph&) {
  const int64_t stash = node.attributes.GetInt("stash_type", 1);
  if (stash != 1) {
    return absl::UnimplementedError(absl::StrCat("stash_type ", stash, " (only FLOAT)"));
  }
  return absl::OkStatus();
}

Status RunLayerNormalization(const OpContext& ctx, const Node& node, const Inputs& inputs,
                             std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* scale, RequireInput(inputs, 1, "Scale", {DataType::kFp32}));
  const Value* bias = inputs.size() > 2 ? inputs[2] : nullptr;
  if (bias != nullptr && bias->dtype() != DataType::kFp32) {
    return absl::InvalidArgumentError(absl::StrCat("B ", DescribeValue(*bias), " must be FLOAT"));
  }
  const int rank = x->rank();
  if (rank == 0) return absl::InvalidArgumentError("LayerNormalization of a scalar");
  TESSERA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.attributes.GetInt("axis", -1), rank));
  const float epsilon = node.attributes.GetFloat("epsilon", 1e-5f);
  int64_t rows = 1, cols = 1;
  for (int d = 0; d < rank; ++d) (d < axis ? rows : cols) *= x->dim(d);
  // Scale and B must cover the normalised shape element for element, or be a single value.
  for (const Value* p : {scale, bias}) {
    if (p != nullptr && p->num_elements() != cols && p->num_elements() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(p == scale ? "Scale " : "B ", DescribeValue(*p), " does not match the ",
                       cols, " normalised elements of ", DescribeValue(*x), " from axis ", axis));
    }
  }
  Value y = ctx.NewOutput(0, DataType::kFp32, x->shape());
  // Optional Mean and InvStdDev outputs: X's shape with the normalised dims set to 1.
  Shape stat_shape = x->shape();
  for (int d = axis; d < rank; ++d) stat_shape[d] = 1;
  Value mean_out, inv_out;
  if (outputs->size() > 1) mean_out = ctx.NewOutput(1, DataType::kFp32, stat_shape);
  if (outputs->size() > 2) inv_out = ctx.NewOutput(2, DataType::kFp32, stat_shape);
  const float* in = x->data<float>();
  float* out = y.mutable_data<float>();
  const float* s = scale->data<float>();
  const float* b = bias != nullptr ? bias->data<float>() : nullptr;
  const bool scalar_s = scale->num_elements() == 1 && cols != 1;
  const bool scalar_b = b != nullptr && bias->num_elements() == 1 && cols != 1;
  const int64_t per_task = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols));
  const int64_t tasks = (rows + per_task - 1) / per_task;
  ParallelFor(ctx.pool, tasks, [&](int64_t t) {
    const int64_t end = std::min(rows, (t + 1) * per_task);
    for (int64_t r = t * per_task; r < end; ++r) {
      const float* src = in + r * cols;
      float* dst = out + r * cols;
      const auto [mean, inv_std] = MeanAndInvStd(src, cols, epsilon);
      if (!scalar_s && b != nullptr && !scalar_b) {
        AffineRow(src, cols, mean, inv_std, s, b, dst);
      } else {
        for (int64_t i = 0; i < cols; ++i) {
          float v = (src[i] - mean) * inv_std * s[scalar_s ? 0 : i];
          if (b != nullptr) v += b[scalar_b ? 0 : i];
          dst[i] = v;
        }
      }
      if (mean_out.defined()) mean_out.mutable_data<float>()[r] = mean;
      if (inv_out.defined()) inv_out.mutable_data<float>()[r] = inv_std;
    }
  });
  (*outputs)[0] = std::move(y);
  if (mean_out.defined()) (*outputs)[1] = std::move(mean_out);
  if (inv_out.defined()) (*outputs)[2] = std::move(inv_out);
  return absl::OkStatus();
}

Status RunInstanceNormalization(const OpContext& ctx, const Node& node, const Inputs& inputs,
                                std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "input", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* scale, RequireInput(inputs, 1, "scale", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* bias, RequireInput(inputs, 2, "B", {DataType::kFp32}));
  if (x->rank() < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", DescribeValue(*x), " must be [N, C, D1, ...]"));
  }
  const int64_t channels = x->dim(1);
  for (const Value* p : {scale, bias}) {
    if (p->rank() != 1 || p->dim(0) != channels) {
      return absl::InvalidArgumentError(absl::StrCat(
          p == scale ? "scale " : "B ", DescribeValue(*p), " must be FLOAT[", channels, "]"));
    }
  }
  const float epsilon = node.attributes.GetFloat("epsilon", 1e-5f);
  if (x->channels_last()) {
    // [N, H, W, C] as stored (a oneDNN convolution's output): per image, the channel statistics
    // accumulate over the pixels with the channels as the vectorised inner loop, and the output
    // stays channels-last for the next convolution, saving two transposes. An image's
    // [pixels, C] is seen as [pixels / k, k * C] (PixelsPerRow): looping over 8 or 16 channels
    // of a small U-Net left the loops mostly overhead.
    const int64_t batch = x->dim(0), pixels = x->dim(2) * x->dim(3);
    const int64_t k = PixelsPerRow(pixels, channels);
    const int64_t width = k * channels, rows = pixels / k;
    const float count = static_cast<float>(std::max<int64_t>(1, pixels));
    Value y = ctx.NewOutput(0, DataType::kFp32, x->shape()).WithLayout(Layout::kChannelsLast);
    ParallelFor(ctx.pool, batch, [&](int64_t n) {
      const float* src = x->data<float>() + n * pixels * channels;
      float* dst = y.mutable_data<float>() + n * pixels * channels;
      std::vector<float> column(static_cast<size_t>(width));
      std::vector<float> shift(static_cast<size_t>(width));  // per column: its channel's value
      std::vector<float> stat(static_cast<size_t>(channels));
      // Sums each column over the rows of `values`, after subtracting `shift`, squared or not,
      // and folds the columns into their channels' `stat`.
      auto column_sums = [&](bool squared) {
        std::fill(column.begin(), column.end(), 0.0f);
        for (int64_t r = 0; r < rows; ++r) {
          const float* row = src + r * width;
          for (int64_t w = 0; w < width; ++w) {
            const float d = row[w] - shift[w];
            column[w] += squared ? d * d : d;
          }
        }
        std::fill(stat.begin(), stat.end(), 0.0f);
        for (int64_t w = 0; w < width; ++w) stat[w % channels] += column[w];
      };
      std::fill(shift.begin(), shift.end(), 0.0f);
      column_sums(false);
      for (int64_t w = 0; w < width; ++w) shift[w] = stat[w % channels] / count;  // the mean
      column_sums(true);
      // y = x * s + b with s = scale / std and b = bias - mean * s, per channel.
      std::vector<float> s(static_cast<size_t>(width)), b(static_cast<size_t>(width));
      for (int64_t w = 0; w < width; ++w) {
        const int64_t c = w % channels;
        s[w] = scale->data<float>()[c] / std::sqrt(stat[c] / count + epsilon);
        b[w] = bias->data<float>()[c] - shift[w] * s[w];
      }
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = src + r * width;
        float* out = dst + r * width;
        for (int64_t w = 0; w < width; ++w) out[w] = row[w] * s[w] + b[w];
      }
    });
    (*outputs)[0] = std::move(y);
    return absl::OkStatus();
  }
  const int64_t rows = x->dim(0) * channels;
  const int64_t cols = rows == 0 ? 0 : x->num_elements() / rows;
  Value y = ctx.NewOutput(0, DataType::kFp32, x->shape());
  const float* in = x->data<float>();
  float* out = y.mutable_data<float>();
  ParallelFor(ctx.pool, rows, [&](int64_t r) {
    const float* src = in + r * cols;
    float* dst = out + r * cols;
    const auto [mean, inv_std] = MeanAndInvStd(src, cols, epsilon);
    const float s = scale->data<float>()[r % channels] * inv_std;
    const float b = bias->data<float>()[r % channels] - mean * s;
    for (int64_t i = 0; i < cols; ++i) dst[i] = src[i] * s + b;
  });
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status RunMeanVarianceNormalization(const OpContext& ctx, const Node& node, const Inputs& inputs,
                                    std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kFp32}));
  const int rank = x->rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : node.attributes.GetInts("axes", {0, 2, 3})) {
    TESSERA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(a, rank));
    reduced[static_cast<size_t>(axis)] = true;
  }
  // Each element's group: its index over the kept dims. The spec's function body adds 1e-9 to
  // the variance.
  int64_t groups = 1;
  for (int d = 0; d < rank; ++d) {
    if (!reduced[static_cast<size_t>(d)]) groups *= x->dim(d);
  }
  const int64_t total = x->num_elements();
  std::vector<int64_t> group_of(static_cast<size_t>(total));
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  for (int64_t e = 0; e < total; ++e) {
    int64_t g = 0;
    for (int d = 0; d < rank; ++d) {
      if (!reduced[static_cast<size_t>(d)]) g = g * x->dim(d) + index[static_cast<size_t>(d)];
    }
    group_of[static_cast<size_t>(e)] = g;
    for (int d = rank - 1; d >= 0 && ++index[static_cast<size_t>(d)] == x->dim(d); --d) {
      index[static_cast<size_t>(d)] = 0;
    }
  }
  const float* in = x->data<float>();
  std::vector<double> sum(static_cast<size_t>(groups), 0.0), sq(static_cast<size_t>(groups), 0.0);
  std::vector<int64_t> count(static_cast<size_t>(groups), 0);
  for (int64_t e = 0; e < total; ++e) {
    const size_t g = static_cast<size_t>(group_of[static_cast<size_t>(e)]);
    sum[g] += in[e];
    ++count[g];
  }
  for (size_t g = 0; g < sum.size(); ++g) sum[g] /= std::max<int64_t>(1, count[g]);
  for (int64_t e = 0; e < total; ++e) {
    const size_t g = static_cast<size_t>(group_of[static_cast<size_t>(e)]);
    const double c = in[e] - sum[g];
    sq[g] += c * c;
  }
  Value y = ctx.NewOutput(0, DataType::kFp32, x->shape());
  float* out = y.mutable_data<float>();
  for (int64_t e = 0; e < total; ++e) {
    const size_t g = static_cast<size_t>(group_of[static_cast<size_t>(e)]);
    const double variance = sq[g] / std::max<int64_t>(1, count[g]);
    out[e] = static_cast<float>((in[e] - sum[g]) / std::sqrt(variance + 1e-9));
  }
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

Status CheckLrn(const Node& node, const Graph&) {
  if (node.attributes.GetInt("size", 0) < 1) {
    return absl::InvalidArgumentError("LRN needs a size attribute >= 1");
  }
  return absl::OkStatus();
}

Status RunLrn(const OpContext& ctx, const Node& node, const Inputs& inputs,
              std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* x, RequireInput(inputs, 0, "X", {DataType::kFp32}));
  if (x->rank() < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("X ", DescribeValue(*x), " must be [N, C, D1, ...]"));
  }
  const int64_t size = node.attributes.GetInt("size", 0);
  if (size < 1) return absl::InvalidArgumentError("LRN needs a size attribute >= 1");
  const float alpha = node.attributes.GetFloat("alpha", 1e-4f);
  const float beta = node.attributes.GetFloat("beta", 0.75f);
  const float bias = node.attributes.GetFloat("bias", 1.0f);
  const int64_t batch = x->dim(0), channels = x->dim(1);
  const int64_t spatial = batch * channels == 0 ? 0 : x->num_elements() / (batch * channels);
  // The window over channels: floor((size - 1) / 2) before, ceil((size - 1) / 2) after.
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  Value y = ctx.NewOutput(0, DataType::kFp32, x->shape());
  const float* in = x->data<float>();
  float* out = y.mutable_data<float>();
  ParallelFor(ctx.pool, batch * channels, [&](int64_t nc) {
    const int64_t n = nc / channels, c = nc % channels;
    const int64_t lo = std::max<int64_t>(0, c - before);
    const int64_t hi = std::min<int64_t>(channels - 1, c + after);
    const float* src = in + nc * spatial;
    float* dst = out + nc * spatial;
    for (int64_t i = 0; i < spatial; ++i) {
      float square_sum = 0.0f;
      for (int64_t k = lo; k <= hi; ++k) {
        const float v = in[(n * channels + k) * spatial + i];
        square_sum += v * v;
      }
      dst[i] = src[i] / std::pow(bias + alpha / static_cast<float>(size) * square_sum, beta);
    }
  });
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
