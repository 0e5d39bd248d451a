// Triton's `reshape` of a config tensor: clients send and receive `dims`, the model file takes and
// gives `reshape`. Only shapes change; the bytes are the same row-major elements.
#include "absl/strings/str_cat.h"
#include "tessera/repository/model_config.h"

namespace tessera::repository {
namespace {

// The element counts of the runs of fixed dims around the -1s: [2, 4, -1, 6] -> {8, 6}.
std::vector<int64_t> FixedRunCounts(const Shape& shape) {
  std::vector<int64_t> counts = {1};
  for (int64_t dim : shape) {
    if (dim < 0) {
      counts.push_back(1);
    } else {
      counts.back() *= dim;
    }
  }
  return counts;
}

}  // namespace

const Shape& ModelDims(const TensorConfig& tensor) {
  return tensor.reshape ? *tensor.reshape : tensor.dims;
}

Status CheckReshape(const Shape& dims, const Shape& reshape) {
  const std::vector<int64_t> from = FixedRunCounts(dims);
  const std::vector<int64_t> to = FixedRunCounts(reshape);
  if (from.size() != to.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        ShapeToString(reshape), " has ", to.size() - 1, " variable dims (-1), dims ",
        ShapeToString(dims), " has ", from.size() - 1, "; a reshape keeps the variable dims"));
  }
  if (from.size() == 1 && from[0] != to[0]) {
    return absl::InvalidArgumentError(absl::StrCat(ShapeToString(reshape), " has ", to[0],
                                                   " elements, dims ", ShapeToString(dims),
                                                   " has ", from[0]));
  }
  if (from != to) {
    return absl::InvalidArgumentError(absl::StrCat(
        ShapeToString(reshape), " does not fit dims ", ShapeToString(dims),
        ": the fixed dims before, between and after the variable ones must hold as many elements "
        "in both (e.g. [2, 4, -1, 6] -> [8, -1, 1, 6])"));
  }
  return absl::OkStatus();
}

Shape ToModelShape(const TensorConfig& tensor, const Shape& client_shape, bool batched) {
  const size_t offset = batched ? 1 : 0;
  if (!tensor.reshape || client_shape.size() != tensor.dims.size() + offset) return client_shape;
  std::vector<int64_t> variable;  // the request's sizes of dims' -1s, in order
  for (size_t d = 0; d < tensor.dims.size(); ++d) {
    if (tensor.dims[d] < 0) variable.push_back(client_shape[d + offset]);
  }
  Shape shape(client_shape.begin(), client_shape.begin() + offset);
  size_t next = 0;
  for (int64_t dim : *tensor.reshape) {
    shape.push_back(dim >= 0 || next >= variable.size() ? dim : variable[next++]);
  }
  return shape;
}

std::optional<Shape> ToClientShape(const TensorConfig& tensor, const Shape& model_shape,
                                   bool batched) {
  const size_t offset = batched ? 1 : 0;
  if (!tensor.reshape) return model_shape;
  const Shape& reshape = *tensor.reshape;
  if (model_shape.size() != reshape.size() + offset) return std::nullopt;
  std::vector<int64_t> variable;
  for (size_t d = 0; d < reshape.size(); ++d) {
    if (reshape[d] < 0) {
      variable.push_back(model_shape[d + offset]);
    } else if (reshape[d] != model_shape[d + offset]) {
      return std::nullopt;
    }
  }
  Shape shape(model_shape.begin(), model_shape.begin() + offset);
  size_t next = 0;
  for (int64_t dim : tensor.dims) {
    if (dim >= 0) {
      shape.push_back(dim);
    } else if (next < variable.size()) {
      shape.push_back(variable[next++]);
    } else {
      return std::nullopt;
    }
  }
  return shape;
}

}  // namespace tessera::repository
