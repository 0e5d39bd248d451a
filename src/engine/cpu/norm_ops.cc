// LayerNormalization (opset 17): normalises X over dims [axis, rank) and applies Scale and B.
// Rows are independent and spread over the pool; each is two passes (mean, then the centred
// variance, which is more accurate than E[x^2] - mean^2) plus the affine pass.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {

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
      float sum = 0.0f;
      for (int64_t i = 0; i < cols; ++i) sum += src[i];
      const float mean = sum / static_cast<float>(cols);
      float sq = 0.0f;
      for (int64_t i = 0; i < cols; ++i) {
        const float c = src[i] - mean;
        sq += c * c;
      }
      const float inv_std = 1.0f / std::sqrt(sq / static_cast<float>(cols) + epsilon);
      if (!scalar_s && b != nullptr && !scalar_b) {
        for (int64_t i = 0; i < cols; ++i) dst[i] = (src[i] - mean) * inv_std * s[i] + b[i];
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

}  // namespace tessera::engine::cpu
