// The rules InferShapes and FoldShapeSubgraphs (shape_inference.cc) apply node by node: what the
// analysis tracks per value, broadcasting, the symbolic elements of shape vectors, and the
// static reading of Slice, Reshape, window and type attributes. Internal to the engine.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "engine/graph.h"

namespace tessera::engine::shape_rules {

// Element values of tracked int64 tensors: the batch size, or some value known only at Run.
// Far outside any real dim or Reshape code (-1, 0), so they never collide with literals.
inline constexpr int64_t kSymBatch = std::numeric_limits<int64_t>::min();
inline constexpr int64_t kSymUnknown = std::numeric_limits<int64_t>::min() + 1;
inline constexpr int64_t kMaxTrackedElements = 64;

inline bool IsSym(int64_t v) { return v == kSymBatch || v == kSymUnknown; }
inline bool Static(int64_t d) { return d >= 0; }

using Elements = std::vector<int64_t>;

// What the sweep knows of each value, indexed like Graph::value_names.
struct Analysis {
  std::vector<std::optional<Shape>> shapes;
  std::vector<DataType> dtypes;
  std::vector<std::optional<Elements>> data;  // int64, rank <= 1, <= kMaxTrackedElements
};

// Dims that numpy-broadcast together (static sizes win over symbols: a symbol must equal them or
// 1).
int64_t BroadcastDim(int64_t a, int64_t b);
// Two shapes numpy-broadcast together, dim by dim with BroadcastDim.
std::optional<Shape> BroadcastShape(const Shape& a, const Shape& b);

// The product of some dims as static_product × batch^batch_count, or unknown.
struct Factor {
  int64_t product = 1;
  int batch = 0;
  bool unknown = false;
  void Add(int64_t d) {
    if (d == kBatchDim) {
      ++batch;
    } else if (Static(d)) {
      product *= d;
    } else {
      unknown = true;
    }
  }
  // The dim this product is, when expressible.
  int64_t AsDim() const {
    if (unknown || batch > 1) return kUnknownDim;
    if (batch == 1) return product == 1 ? kBatchDim : kUnknownDim;
    return product;
  }
};

// A tracked element as a dim (kSymBatch is kBatchDim), and back.
int64_t DimFromElement(int64_t e);
int64_t ElementFromDim(int64_t d);

// A constant's elements, when it is a small int64 tensor of rank <= 1.
std::optional<Elements> ElementsOf(const Value& v);

// Axes of Unsqueeze/Squeeze: the attribute (opset < 13) or the statically known input 1.
std::optional<std::vector<int64_t>> AxesOf(const Node& node, const Analysis& a);

// A possibly negative axis in [0, rank), or nullopt when out of range.
std::optional<int> Axis(int64_t axis, size_t rank);

// Spatial output dims of Conv and the pools, when the input's spatial dims are static.
void WindowDims(const Node& node, const Shape& x, const std::vector<int64_t>& kernel,
                bool ceil_mode, Shape* out);

// Slice's starts/ends/axes/steps: inputs 1..4 (opset >= 10) or attributes; all statically known.
struct SliceSpec {
  std::vector<int64_t> starts, ends, axes, steps;
};

std::optional<SliceSpec> SliceSpecOf(const Node& node, const Analysis& a, size_t rank);

// Elements a Slice takes along a static dim: count, first index (ONNX clamping rules).
std::optional<std::pair<int64_t, int64_t>> SliceRange(int64_t dim, int64_t start, int64_t end,
                                                      int64_t step);

// Reshape's output shape from its input's and the tracked target (0 copies, -1 infers).
std::optional<Shape> ReshapeShape(const Node& node, const Analysis& a);

// LabelEncoder's output type: that of its values_* (opset 1: the other of STRING and INT64).
DataType LabelEncoderOutputType(const Node& node, DataType input);

// The element type of output 0 of an op whose shape InferNode does not compute, by ONNX's type
// constraints; kInvalid where it depends on more than the inputs' types (Cast's `to`, say).
DataType UnshapedOutputType(const Node& node, const Analysis& a, DataType first_input);

}  // namespace tessera::engine::shape_rules
