// Helpers shared by the data-movement kernels (index_ops.cc, layout_ops.cc, shape_ops.cc,
// slice_ops.cc, resize.cc): row copies, element-size
// dispatch for dtype-generic copies, a reader for INT64/INT32 index tensors, and output sizes
// checked against int64 overflow before anything is allocated.
// Thread-safety: pure functions and read-only views.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/value.h"
#include "tessera/common/status.h"

namespace tessera::engine::cpu {

// Copies `n` bytes. Rows of a channels-last value joined or split on its channel axis are one
// pixel's channels, often 32-192 bytes: those are copied with fixed-size moves the compiler
// inlines, instead of a memcpy call each, which measured slower for millions of them.
inline void CopyRow(std::byte* dst, const std::byte* src, size_t n) {
  if (n >= 256) {
    std::memcpy(dst, src, n);
    return;
  }
  for (; n >= 32; n -= 32, dst += 32, src += 32) std::memcpy(dst, src, 32);
  for (; n >= 4; n -= 4, dst += 4, src += 4) std::memcpy(dst, src, 4);
  if (n > 0) std::memcpy(dst, src, n);
}

// Calls fn(T*) with a null pointer tagging an unsigned type of `bytes` bytes (1, 4 or 8): data
// movement only needs the element's width, so FP32 and INT32 share one instantiation.
template <typename Fn>
void ForElementSize(size_t bytes, Fn&& fn) {
  switch (bytes) {
    case 8:
      fn(static_cast<uint64_t*>(nullptr));
      break;
    case 4:
      fn(static_cast<uint32_t*>(nullptr));
      break;
    default:
      fn(static_cast<uint8_t*>(nullptr));
      break;
  }
}

// Calls fn(T*) (a null pointer tagging the type) for the C++ type behind `dtype`, for kernels
// that compare or compute; BOOL and UINT8 both give uint8_t.
template <typename Fn>
void ForArithmeticType(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFp32:
      fn(static_cast<float*>(nullptr));
      break;
    case DataType::kInt64:
      fn(static_cast<int64_t*>(nullptr));
      break;
    case DataType::kInt32:
      fn(static_cast<int32_t*>(nullptr));
      break;
    default:
      fn(static_cast<uint8_t*>(nullptr));
      break;
  }
}

// Element k of an INT64 or INT32 index tensor as int64 (the caller checked the dtype).
class IndexView {
 public:
  explicit IndexView(const Value& v)
      : i64_(v.dtype() == DataType::kInt64 ? v.data<int64_t>() : nullptr),
        i32_(v.dtype() == DataType::kInt32 ? v.data<int32_t>() : nullptr) {}
  int64_t operator[](int64_t k) const { return i64_ != nullptr ? i64_[k] : i32_[k]; }

 private:
  const int64_t* i64_;
  const int32_t* i32_;
};

// `index` wrapped into [0, len) when it lies in [-len, len), else INVALID_ARGUMENT naming it.
inline StatusOr<int64_t> WrapIndex(int64_t index, int64_t len, const char* what) {
  if (index < -len || index >= len) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " index ", index, " is out of range for a dim of ", len));
  }
  return index < 0 ? index + len : index;
}

// Row-major element strides of `shape`.
inline std::vector<int64_t> RowMajorStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

// Visits the coordinates of `shape` in row-major order from linear position `start`, keeping
// offset() = sum of coord[d] * strides[d]: the source offset of a gather whose output walks
// `shape`. Lets a parallel chunk start mid-tensor without a per-element division.
class StridedWalk {
 public:
  StridedWalk(const Shape& shape, std::vector<int64_t> strides, int64_t start)
      : shape_(shape), strides_(std::move(strides)), coord_(shape.size(), 0) {
    for (int d = static_cast<int>(shape_.size()) - 1; d >= 0 && shape_[d] > 0; --d) {
      coord_[d] = start % shape_[d];
      start /= shape_[d];
      offset_ += coord_[d] * strides_[d];
    }
  }
  int64_t offset() const { return offset_; }
  const std::vector<int64_t>& coord() const { return coord_; }
  void Next() {
    for (int d = static_cast<int>(shape_.size()) - 1; d >= 0; --d) {
      offset_ += strides_[d];
      if (++coord_[d] < shape_[d]) return;
      offset_ -= strides_[d] * shape_[d];
      coord_[d] = 0;
    }
  }

 private:
  const Shape& shape_;
  std::vector<int64_t> strides_;
  std::vector<int64_t> coord_;
  int64_t offset_ = 0;
};

// a * b for non-negative sizes, or INVALID_ARGUMENT when it passes `limit`.
inline StatusOr<int64_t> CheckedProduct(int64_t a, int64_t b,
                                        int64_t limit = std::numeric_limits<int64_t>::max()) {
  if (a < 0 || b < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative size ", a < 0 ? a : b));
  }
  if (a != 0 && b > limit / a) {
    return absl::InvalidArgumentError(absl::StrCat("size ", a, " x ", b, " overflows"));
  }
  return a * b;
}

// Checks that a tensor of `shape` with `elem_bytes` elements has non-negative dims and a byte
// size that fits int64: computed output shapes (Tile, OneHot) come from untrusted values, and an
// overflowed count would allocate less than the kernel then writes.
inline Status CheckAllocatable(const Shape& shape, size_t elem_bytes) {
  int64_t bytes = static_cast<int64_t>(elem_bytes);
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dim ", d));
    StatusOr<int64_t> next = CheckedProduct(bytes, d);
    if (!next.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("output shape ", ShapeToString(shape), " is too large"));
    }
    bytes = *next;
  }
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
