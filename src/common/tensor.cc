#include "tessera/common/tensor.h"

#include "absl/strings/str_join.h"

namespace tessera {

int64_t ElementCount(const Shape& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return -1;
    count *= dim;
  }
  return count;
}

std::optional<uint64_t> DenseByteSize(const Shape& shape, size_t element_bytes) {
  uint64_t bytes = element_bytes;
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) {
      return std::nullopt;
    }
  }
  return bytes;
}

std::string ShapeToString(const Shape& shape) { return "[" + absl::StrJoin(shape, ", ") + "]"; }

}  // namespace tessera
