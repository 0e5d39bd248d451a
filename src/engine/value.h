// The engine's internal tensor: a dtype, a shape and shared, 64-byte aligned storage.
//
// Storage is reference counted so Reshape/Flatten/Identity can alias their input without a copy,
// and so weights (graph constants) are shared by every Run without copying. A Value handed to a
// kernel as input is never written; kernels allocate fresh outputs (or alias inputs read-only).
// A kString (BYTES) value's elements are 8-byte handles to strings held elsewhere, not the strings
// themselves (engine/string_tensor.h says who owns them).
// Thread-safety: a Value is a plain value type; concurrent reads of shared storage are fine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tessera/common/data_type.h"
#include "tessera/common/tensor.h"

namespace tessera::engine {

// How a 4-D value's bytes are ordered. The shape is always the logical ONNX one ([N, C, H, W]);
// kChannelsLast stores it as [N, H, W, C], the order oneDNN's fast convolutions read and write.
// Only layout-aware kernels produce or accept kChannelsLast (cpu/ops.h OpDef::layout); the CPU
// model converts such values back to row-major before any other kernel reads them.
enum class Layout { kRowMajor, kChannelsLast };

// Bytes per element of a Value of `dtype`. DataTypeByteSize except for kString, whose elements
// are 8-byte handles (string_tensor.h) so that kernels moving elements by size move strings too.
inline size_t ElementSize(DataType dtype) {
  return dtype == DataType::kString ? sizeof(void*) : DataTypeByteSize(dtype);
}

class Value {
 public:
  Value() = default;

  // Uninitialised storage for `shape` (all dims must be >= 0).
  static Value Allocate(DataType dtype, Shape shape);
  // Zero-filled storage.
  static Value Zeros(DataType dtype, Shape shape);
  // A non-owning view of caller memory; the caller keeps `data` alive while the Value is used.
  static Value Borrow(DataType dtype, Shape shape, void* data);
  // A view of `data` that keeps `owner` (whatever holds `data`) alive as long as any copy lives.
  static Value Adopt(DataType dtype, Shape shape, std::shared_ptr<void> owner, void* data);

  // The same bytes seen with another shape (element count must match; checked by the caller).
  // Only meaningful for row-major values.
  Value Reshaped(Shape shape) const;
  // The same bytes labelled with another layout (no data movement).
  Value WithLayout(Layout layout) const {
    Value v = *this;
    v.layout_ = layout;
    return v;
  }

  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t num_elements() const { return num_elements_; }
  size_t byte_size() const { return static_cast<size_t>(num_elements_) * ElementSize(dtype_); }
  bool defined() const { return dtype_ != DataType::kInvalid; }
  Layout layout() const { return layout_; }
  bool channels_last() const { return layout_ == Layout::kChannelsLast; }

  template <typename T>
  const T* data() const { return static_cast<const T*>(data_); }
  template <typename T>
  T* mutable_data() const { return static_cast<T*>(data_); }
  const void* raw() const { return data_; }

 private:
  DataType dtype_ = DataType::kInvalid;
  Shape shape_;
  int64_t num_elements_ = 0;
  Layout layout_ = Layout::kRowMajor;
  std::shared_ptr<void> storage_;  // keeps data_ alive; null for borrowed views
  void* data_ = nullptr;
};

// "FP32" etc. as a std::string (abseil's StrCat here predates std::string_view support).
inline std::string TypeName(DataType type) { return std::string(DataTypeToWireName(type)); }

// "FP32[4, 10]" for error messages.
std::string DescribeValue(const Value& value);

}  // namespace tessera::engine
