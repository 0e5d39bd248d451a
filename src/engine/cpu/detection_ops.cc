// NonMaxSuppression (opsets 10-11), a detector's last step: per image and class, the boxes that
// score above score_threshold, best first (ties: lower box index first), each kept unless its IoU
// with a box already kept exceeds iou_threshold, at most max_output_boxes_per_class of them.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

struct Corners {
  float y1, x1, y2, x2;
  float Area() const { return (y2 - y1) * (x2 - x1); }
};

// center_point_box = 0: [y1, x1, y2, x2], either corner pair; 1: [x_center, y_center, w, h].
Corners ToCorners(const float* b, bool center) {
  if (center) {
    return {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
  }
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// Whether IoU(a, b) > threshold; boxes without area never suppress each other.
bool Overlaps(const Corners& a, const Corners& b, float threshold) {
  const float area_a = a.Area(), area_b = b.Area();
  if (area_a <= 0 || area_b <= 0) return false;
  const float h = std::max(0.0f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const float w = std::max(0.0f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const float inter = h * w;
  const float uni = area_a + area_b - inter;
  return uni > 0 && inter / uni > threshold;
}

// An optional scalar input (a 1-element tensor of `dtype`), or `fallback` when omitted.
template <typename T>
StatusOr<T> OptionalScalar(const Inputs& inputs, size_t index, const char* what, DataType dtype,
                           T fallback) {
  if (index >= inputs.size() || inputs[index] == nullptr) return fallback;
  const Value& v = *inputs[index];
  if (v.dtype() != dtype || v.num_elements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", DescribeValue(v), " must be a ", TypeName(dtype), " scalar"));
  }
  return v.data<T>()[0];
}

}  // namespace

Status RunNonMaxSuppression(const OpContext& ctx, const Node& node, const Inputs& inputs,
                            std::vector<Value>* outputs) {
  TESSERA_ASSIGN_OR_RETURN(const Value* boxes, RequireInput(inputs, 0, "boxes", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(const Value* scores,
                           RequireInput(inputs, 1, "scores", {DataType::kFp32}));
  TESSERA_ASSIGN_OR_RETURN(
      int64_t max_per_class,
      OptionalScalar<int64_t>(inputs, 2, "max_output_boxes_per_class", DataType::kInt64, 0));
  TESSERA_ASSIGN_OR_RETURN(float iou_threshold,
                           OptionalScalar<float>(inputs, 3, "iou_threshold", DataType::kFp32, 0));
  const bool has_score_threshold = inputs.size() > 4 && inputs[4] != nullptr;
  TESSERA_ASSIGN_OR_RETURN(float score_threshold,
                           OptionalScalar<float>(inputs, 4, "score_threshold", DataType::kFp32, 0));
  if (boxes->rank() != 3 || boxes->dim(2) != 4 || scores->rank() != 3 ||
      scores->dim(0) != boxes->dim(0) || scores->dim(2) != boxes->dim(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("boxes ", DescribeValue(*boxes), " and scores ", DescribeValue(*scores),
                     " must be [batches, boxes, 4] and [batches, classes, boxes]"));
  }
  if (iou_threshold < 0 || iou_threshold > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("iou_threshold ", iou_threshold, " is outside [0, 1]"));
  }
  const bool center = node.attributes.GetInt("center_point_box", 0) != 0;
  const int64_t batches = boxes->dim(0), count = boxes->dim(1), classes = scores->dim(1);
  std::vector<Corners> corners(static_cast<size_t>(count));
  std::vector<int64_t> selected;  // batch, class, box triples
  std::vector<int64_t> order;
  std::vector<int64_t> kept;
  for (int64_t b = 0; b < batches && max_per_class > 0; ++b) {
    for (int64_t i = 0; i < count; ++i) {
      corners[static_cast<size_t>(i)] =
          ToCorners(boxes->data<float>() + (b * count + i) * 4, center);
    }
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = scores->data<float>() + (b * classes + c) * count;
      order.clear();
      for (int64_t i = 0; i < count; ++i) {
        if (!has_score_threshold || s[i] > score_threshold) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t l, int64_t r) { return s[l] > s[r]; });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_per_class) break;
        const Corners& box = corners[static_cast<size_t>(i)];
        const bool suppressed = std::any_of(kept.begin(), kept.end(), [&](int64_t k) {
          return Overlaps(corners[static_cast<size_t>(k)], box, iou_threshold);
        });
        if (suppressed) continue;
        kept.push_back(i);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  const int64_t rows = static_cast<int64_t>(selected.size() / 3);
  Value y = ctx.NewOutput(0, DataType::kInt64, Shape{rows, 3});
  std::copy(selected.begin(), selected.end(), y.mutable_data<int64_t>());
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
