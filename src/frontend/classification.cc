#include "classification.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace tessera::frontend {
namespace {

constexpr char kParameter[] = "classification";

template <typename T>
double Read(const std::string& bytes, size_t index) {
  T value;
  std::memcpy(&value, bytes.data() + index * sizeof(T), sizeof(T));
  return static_cast<double>(value);
}

// Reads element `index` of a tensor of this type as a double; null for the types not classified.
using ElementReader = double (*)(const std::string& bytes, size_t index);
ElementReader ReaderFor(DataType type) {
  switch (type) {
    case DataType::kFp32:
      return &Read<float>;
    case DataType::kFp64:
      return &Read<double>;
    case DataType::kInt8:
      return &Read<int8_t>;
    case DataType::kInt16:
      return &Read<int16_t>;
    case DataType::kInt32:
      return &Read<int32_t>;
    case DataType::kInt64:
      return &Read<int64_t>;
    case DataType::kUint8:
      return &Read<uint8_t>;
    case DataType::kUint16:
      return &Read<uint16_t>;
    case DataType::kUint32:
      return &Read<uint32_t>;
    case DataType::kUint64:
      return &Read<uint64_t>;
    default:
      return nullptr;
  }
}

// One BYTES element as KServe's binary form carries it: a 4-byte little-endian length, then the
// bytes.
void AppendBytesElement(const std::string& element, std::string& out) {
  const auto length = static_cast<uint32_t>(element.size());
  char prefix[4];
  for (int i = 0; i < 4; ++i) prefix[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  out.append(prefix, 4);
  out.append(element);
}

}  // namespace

StatusOr<std::optional<ClassifiedOutput>> ReadClassification(
    const inference::ModelInferRequest::InferRequestedOutputTensor& requested,
    const repository::TensorConfig& output, bool batched) {
  auto it = requested.parameters().find(kParameter);
  if (it == requested.parameters().end()) return std::nullopt;
  const inference::InferParameter& value = it->second;
  if (value.parameter_choice_case() != inference::InferParameter::kInt64Param ||
      value.int64_param() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("output '", requested.name(),
                     "': the classification parameter must be a positive int64 (the number of "
                     "classes to return)"));
  }
  if (ReaderFor(output.data_type) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("output '", requested.name(),
                     "': classification needs a numeric output of FP32, FP64 "
                     "or an integer type; this one is ",
                     std::string(DataTypeToWireName(output.data_type))));
  }
  return ClassifiedOutput{requested.name(), value.int64_param(), batched, output.labels};
}

Status Classify(const ClassifiedOutput& classified, dispatch::OutputTensor& output) {
  const size_t width = DataTypeByteSize(output.dtype);
  const size_t elements = width == 0 ? 0 : output.bytes.size() / width;
  const size_t rows = classified.batched && !output.shape.empty()
                          ? static_cast<size_t>(std::max<int64_t>(output.shape[0], 0))
                          : 1;
  const ElementReader read = ReaderFor(output.dtype);
  if (rows == 0 || elements == 0 || elements % rows != 0 || read == nullptr) {
    return absl::InternalError(absl::StrCat("output '", output.name, "': cannot classify shape ",
                                            ShapeToString(output.shape)));
  }
  const size_t classes = elements / rows;
  const size_t k = std::min(classes, static_cast<size_t>(classified.count));
  std::string bytes;
  std::vector<size_t> order(classes);
  for (size_t row = 0; row < rows; ++row) {
    auto value = [&](size_t index) { return read(output.bytes, row * classes + index); };
    std::iota(order.begin(), order.end(), size_t{0});
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](size_t a, size_t b) {
                        const double va = value(a);
                        const double vb = value(b);
                        return va > vb || (va == vb && a < b);
                      });
    for (size_t j = 0; j < k; ++j) {
      const size_t index = order[j];
      std::string element = absl::StrCat(value(index), ":", index);
      if (classified.labels != nullptr && index < classified.labels->size()) {
        absl::StrAppend(&element, ":", (*classified.labels)[index]);
      }
      AppendBytesElement(element, bytes);
    }
  }
  output.dtype = DataType::kString;
  output.shape = classified.batched ? Shape{static_cast<int64_t>(rows), static_cast<int64_t>(k)}
                                    : Shape{static_cast<int64_t>(k)};
  output.bytes = std::move(bytes);
  return absl::OkStatus();
}

}  // namespace tessera::frontend
