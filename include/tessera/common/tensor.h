// Shapes and non-owning tensor views shared by the frontend, dispatcher, executor and engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/common/data_type.h"

namespace tessera {

using Shape = std::vector<int64_t>;

// Product of dims; 1 for a scalar. Negative (wildcard) dims make it -1.
int64_t ElementCount(const Shape& shape);

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
