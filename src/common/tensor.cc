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

std::string ShapeToString(const Shape& shape) { return "[" + absl::StrJoin(shape, ", ") + "]"; }

}  // namespace tessera
