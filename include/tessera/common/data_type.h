// Tensor element types, numbered as Triton's inference.DataType (model_config.proto) so a config's
// `data_type: TYPE_FP32` and the wire enum map one to one. BYTES/STRING tensors have no element
// size; their one serialized form is tessera/common/bytes_tensor.h's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

enum class DataType : int {
  kInvalid = 0,
  kBool = 1,
  kUint8 = 2,
  kUint16 = 3,
  kUint32 = 4,
  kUint64 = 5,
  kInt8 = 6,
  kInt16 = 7,
  kInt32 = 8,
  kInt64 = 9,
  kFp16 = 10,
  kFp32 = 11,
  kFp64 = 12,
  kString = 13,
  kBf16 = 14,
};

// Bytes per element; 0 for kInvalid and kString (variable size).
size_t DataTypeByteSize(DataType type);

// KServe v2 datatype strings used on the wire: "FP32", "INT64", "BYTES", ...
std::string_view DataTypeToWireName(DataType type);
std::optional<DataType> DataTypeFromWireName(std::string_view name);

// Model-config names: "TYPE_FP32", "TYPE_STRING", ...
std::string_view DataTypeToConfigName(DataType type);
std::optional<DataType> DataTypeFromConfigName(std::string_view name);

// ONNX's TensorProto.DataType value (FLOAT = 1, ...) → DataType; nullopt for the ONNX types KServe
// has no name for (complex numbers, 8-bit floats, 4-bit integers) and for UNDEFINED.
std::optional<DataType> DataTypeFromOnnxElementType(int32_t onnx_type);

}  // namespace tessera
