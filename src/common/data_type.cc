#include "tessera/common/data_type.h"

#include <array>

namespace tessera {
namespace {

struct DataTypeInfo {
  DataType type;
  size_t byte_size;
  std::string_view wire_name;
  std::string_view config_name;
  int32_t onnx_type;  // onnx.proto's TensorProto.DataType value
};

constexpr std::array<DataTypeInfo, 15> kInfos = {{
    {DataType::kInvalid, 0, "INVALID", "TYPE_INVALID", 0},
    {DataType::kBool, 1, "BOOL", "TYPE_BOOL", 9},
    {DataType::kUint8, 1, "UINT8", "TYPE_UINT8", 2},
    {DataType::kUint16, 2, "UINT16", "TYPE_UINT16", 4},
    {DataType::kUint32, 4, "UINT32", "TYPE_UINT32", 12},
    {DataType::kUint64, 8, "UINT64", "TYPE_UINT64", 13},
    {DataType::kInt8, 1, "INT8", "TYPE_INT8", 3},
    {DataType::kInt16, 2, "INT16", "TYPE_INT16", 5},
    {DataType::kInt32, 4, "INT32", "TYPE_INT32", 6},
    {DataType::kInt64, 8, "INT64", "TYPE_INT64", 7},
    {DataType::kFp16, 2, "FP16", "TYPE_FP16", 10},
    {DataType::kFp32, 4, "FP32", "TYPE_FP32", 1},
    {DataType::kFp64, 8, "FP64", "TYPE_FP64", 11},
    {DataType::kString, 0, "BYTES", "TYPE_STRING", 8},
    {DataType::kBf16, 2, "BF16", "TYPE_BF16", 16},
}};

const DataTypeInfo& Info(DataType type) {
  auto index = static_cast<size_t>(type);
  return index < kInfos.size() ? kInfos[index] : kInfos[0];
}

}  // namespace

size_t DataTypeByteSize(DataType type) { return Info(type).byte_size; }

std::string_view DataTypeToWireName(DataType type) { return Info(type).wire_name; }

std::optional<DataType> DataTypeFromWireName(std::string_view name) {
  for (const auto& info : kInfos) {
    if (info.type != DataType::kInvalid && info.wire_name == name) return info.type;
  }
  return std::nullopt;
}

std::string_view DataTypeToConfigName(DataType type) { return Info(type).config_name; }

std::optional<DataType> DataTypeFromConfigName(std::string_view name) {
  for (const auto& info : kInfos) {
    if (info.type != DataType::kInvalid && info.config_name == name) return info.type;
  }
  return std::nullopt;
}

std::optional<DataType> DataTypeFromOnnxElementType(int32_t onnx_type) {
  for (const auto& info : kInfos) {
    if (info.type != DataType::kInvalid && info.onnx_type == onnx_type) return info.type;
  }
  return std::nullopt;
}

}  // namespace tessera
