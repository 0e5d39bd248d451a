#include "ragged_batch.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tessera/common/data_type.h"

namespace tessera::server {
namespace {

using Kind = repository::BatchInputConfig::Kind;

size_t InputIndex(const repository::ModelConfig& config, const std::string& name) {
  for (size_t k = 0; k < config.inputs.size(); ++k) {
    if (config.inputs[k].name == name) return k;
  }
  return 0;  // the config reader checked that every source is an input
}

// `values` as a tensor of `dtype` (INT32, INT64 or FP32, as the config reader allows).
std::string Encode(const std::vector<int64_t>& values, DataType dtype) {
  std::string bytes(values.size() * DataTypeByteSize(dtype), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    char* at = bytes.data() + i * DataTypeByteSize(dtype);
    if (dtype == DataType::kInt32) {
      const auto value = static_cast<int32_t>(values[i]);
      std::memcpy(at, &value, sizeof(value));
    } else if (dtype == DataType::kFp32) {
      const auto value = static_cast<float>(values[i]);
      std::memcpy(at, &value, sizeof(value));
    } else {
      std::memcpy(at, &values[i], sizeof(int64_t));
    }
  }
  return bytes;
}

}  // namespace

const RaggedBatching::Scatter* RaggedBatching::FindScatter(const std::string& output) const {
  for (const Scatter& scatter : scatters) {
    if (scatter.output == output) return &scatter;
  }
  return nullptr;
}

std::shared_ptr<const RaggedBatching> MakeRaggedBatching(const repository::ModelConfig& config) {
  if (!config.ragged_batching()) return nullptr;
  auto ragged = std::make_shared<RaggedBatching>();
  ragged->flat_inputs.assign(repository::ModelFileInputCount(config), false);
  for (size_t k = 0; k < config.inputs.size(); ++k) {
    ragged->flat_inputs[k] = config.inputs[k].allow_ragged_batch;
  }
  for (const repository::BatchInputConfig& batch_input : config.batch_inputs) {
    ragged->batch_inputs.push_back({batch_input, InputIndex(config, batch_input.source_input)});
  }
  for (const repository::BatchOutputConfig& batch_output : config.batch_outputs) {
    for (const std::string& target : batch_output.target_names) {
      RaggedBatching::Scatter scatter;
      scatter.output = target;
      scatter.source = InputIndex(config, batch_output.source_input);
      scatter.dims = {-1};
      const Shape& dims = repository::FindTensor(config.outputs, target)->dims;
      scatter.dims.insert(scatter.dims.end(), dims.begin(), dims.end());
      ragged->scatters.push_back(std::move(scatter));
    }
  }
  return ragged;
}

MadeTensor MakeBatchInput(const repository::BatchInputConfig& config,
                          const std::vector<Shape>& source_shapes) {
  MadeTensor made;
  made.dtype = config.data_type;
  std::vector<int64_t> values;
  int64_t running = 0;
  switch (config.kind) {
    case Kind::kElementCount:
    case Kind::kAccumulatedElementCount:
      for (const Shape& shape : source_shapes) {
        running += ElementCount(shape);
        values.push_back(config.kind == Kind::kElementCount ? ElementCount(shape) : running);
      }
      break;
    case Kind::kAccumulatedElementCountWithZero:
      values.push_back(0);
      for (const Shape& shape : source_shapes) values.push_back(running += ElementCount(shape));
      break;
    case Kind::kMaxElementCountAsShape: {
      int64_t largest = 0;
      for (const Shape& shape : source_shapes) largest = std::max(largest, ElementCount(shape));
      made.shape = {largest};
      made.bytes.assign(static_cast<size_t>(largest) * DataTypeByteSize(made.dtype), '\0');
      return made;
    }
    case Kind::kItemShape:
    case Kind::kItemShapeFlatten: {
      int64_t rows = 0;
      const int64_t rank =
          source_shapes.empty() ? 0 : static_cast<int64_t>(source_shapes.front().size()) - 1;
      for (const Shape& shape : source_shapes) {
        const int64_t batch = shape.empty() ? 1 : shape[0];
        for (int64_t row = 0; row < batch; ++row) {
          values.insert(values.end(), shape.begin() + 1, shape.end());
        }
        rows += batch;
      }
      made.shape = config.kind == Kind::kItemShape ? Shape{rows, rank} : Shape{rows * rank};
      made.bytes = Encode(values, made.dtype);
      return made;
    }
  }
  made.shape = {static_cast<int64_t>(values.size())};
  made.bytes = Encode(values, made.dtype);
  return made;
}

Shape ScatterShape(const Shape& dims, const Shape& source_shape) {
  Shape shape = dims;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0 && d < source_shape.size()) shape[d] = source_shape[d];
  }
  return shape;
}

Status ScatterOutput(const RaggedBatching::Scatter& scatter, const std::string& model_name,
                     DataType dtype, const char* data, uint64_t byte_size,
                     const std::vector<const dispatch::Request*>& requests,
                     std::vector<dispatch::Response>& responses) {
  std::vector<Shape> shapes;
  uint64_t wanted = 0;
  for (const dispatch::Request* request : requests) {
    shapes.push_back(ScatterShape(scatter.dims, request->inputs[scatter.source].shape));
    wanted += static_cast<uint64_t>(ElementCount(shapes.back())) * DataTypeByteSize(dtype);
  }
  if (wanted != byte_size) {
    return absl::InternalError(absl::StrCat(
        "model '", model_name, "' gave batch output '", scatter.output, "' as ", byte_size,
        " bytes, but its requests' parts (by the shapes of input '",
        requests.empty() ? std::string() : requests.front()->inputs[scatter.source].name,
        "') add up to ", wanted, " bytes"));
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    dispatch::OutputTensor tensor;
    tensor.name = scatter.output;
    tensor.dtype = dtype;
    const uint64_t bytes = static_cast<uint64_t>(ElementCount(shapes[i])) * DataTypeByteSize(dtype);
    tensor.shape = std::move(shapes[i]);
    tensor.bytes.assign(data + offset, bytes);
    offset += bytes;
    responses[i].outputs.push_back(std::move(tensor));
  }
  return absl::OkStatus();
}

}  // namespace tessera::server
