// Shapes and non-owning tensor views shared by the frontend, dispatcher, executor and engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/common/data_type.h"

namespace tessera {

using Shape = std::vector<int64_t>;

// Product of dims; 1 for a scalar. Negative (wildcard) dims make it -1.
int64_t ElementCount(const Shape& shape);

// Bytes of a dense tensor: the product of the dims times element_bytes. nullopt when a dim is
// negative (a wildcard) or the size does not fit in 64 bits, as a shape from a request or a model
// file may ask.
std::optional<uint64_t> DenseByteSize(const Shape& shape, size_t element_bytes);

// "[1, 3, 224, 224]" for error messages.
std::string ShapeToString(const Shape& shape);

// A tensor whose bytes live elsewhere (a gRPC message, a shared-memory slot, an engine buffer).
// The view never owns `data`; the owner must outlive every use of the view.
struct TensorView {
  std::string name;
  DataType dtype = DataType::kInvalid;
  Shape shape;
  void* data = nullptr;
  size_t byte_size = 0;
  // Optional: the same bytes already on the GPU (the executor's input mirror), readable once
  // `device_ready` (a cudaEvent_t, or null: ready now) completed. The CUDA backend then copies on
  // the device instead of uploading `data`; other backends read `data`.
  const void* device_data = nullptr;
  void* device_ready = nullptr;
};

// A tensor that owns its bytes (reference data in tests, outputs before they are copied out).
struct Tensor {
  std::string name;
  DataType dtype = DataType::kInvalid;
  Shape shape;
  std::vector<std::byte> bytes;

  TensorView View() { return TensorView{name, dtype, shape, bytes.data(), bytes.size()}; }
};

}  // namespace tessera
