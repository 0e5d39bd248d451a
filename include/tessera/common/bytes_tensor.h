// BYTES (TYPE_STRING) tensors in their one serialized form, shared by every boundary.
//
// KServe v2 sends a BYTES tensor's raw contents as its elements in row-major order, each a 4-byte
// little-endian length followed by that many bytes. Tessera keeps that form from the wire through
// batching, the executor's shared-memory rings and the engine interface (TensorView / Tensor with
// dtype kString), so a BYTES tensor's `byte_size` is the serialized size, not count x element size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/common/status.h"

namespace tessera {

// Bytes of an element's length prefix.
inline constexpr size_t kBytesLengthPrefix = 4;

// Byte offsets of the element boundaries of `size` serialized bytes: offsets[i] is where element
// i's prefix starts and offsets.back() == size, so element i spans [offsets[i], offsets[i + 1]).
// INVALID_ARGUMENT (saying at which element and byte) when a length prefix is cut off or an
// element's length runs past the end. Empty input = zero elements.
StatusOr<std::vector<size_t>> BytesElementOffsets(const void* data, size_t size);

// OK when `size` serialized bytes hold exactly `count` whole elements; INVALID_ARGUMENT otherwise,
// naming `what` (e.g. "input 'text'") and what was found.
Status CheckBytesElements(std::string_view what, const void* data, size_t size, int64_t count);

// The elements of `size` serialized bytes, viewing `data` (which must outlive them).
StatusOr<std::vector<std::string_view>> SplitBytesElements(const void* data, size_t size);

// Appends one element (prefix and bytes) to `out`.
void AppendBytesElement(std::string_view element, std::string* out);

// Serialized size of one element.
inline size_t SerializedBytesElementSize(std::string_view element) {
  return kBytesLengthPrefix + element.size();
}

}  // namespace tessera
