#include "engine/value.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

namespace tessera::engine {
namespace {

// 64 bytes: one cache line, and enough for any SIMD load the kernels' compilers may choose.
constexpr size_t kAlignment = 64;

std::shared_ptr<void> AlignedBytes(size_t bytes) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) throw std::bad_alloc();
  return std::shared_ptr<void>(p, std::free);
}

}  // namespace

Value Value::Allocate(DataType dtype, Shape shape) {
  Value v;
  v.dtype_ = dtype;
  v.num_elements_ = ElementCount(shape);
  v.shape_ = std::move(shape);
  v.storage_ = AlignedBytes(v.byte_size());
  v.data_ = v.storage_.get();
  return v;
}

Value Value::Zeros(DataType dtype, Shape shape) {
  Value v = Allocate(dtype, std::move(shape));
  std::memset(v.data_, 0, v.byte_size());
  return v;
}

Value Value::Borrow(DataType dtype, Shape shape, void* data) {
  Value v;
  v.dtype_ = dtype;
  v.num_elements_ = ElementCount(shape);
  v.shape_ = std::move(shape);
  v.data_ = data;
  return v;
}

Value Value::Adopt(DataType dtype, Shape shape, std::shared_ptr<void> owner, void* data) {
  Value v = Borrow(dtype, std::move(shape), data);
  v.storage_ = std::move(owner);
  return v;
}

Value Value::Reshaped(Shape shape) const {
  Value v = *this;
  v.shape_ = std::move(shape);
  return v;
}

std::string DescribeValue(const Value& value) {
  return absl::StrCat(TypeName(value.dtype()), ShapeToString(value.shape()));
}

}  // namespace tessera::engine
