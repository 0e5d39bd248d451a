// STRING (BYTES) tensors inside the engine.
//
// A kString Value holds one StringHandle per element: a pointer to a std::string, null for the
// empty string. Kernels that move elements by size (Gather, Concat, Transpose, the memory
// planner's arenas, ...) thus move strings without knowing it, and a zero-filled kString value is
// a tensor of empty strings. The strings live elsewhere, in one of two owners:
//   - graph constants (initializers, Constant nodes, folded values) own theirs: the Value's shared
//     storage holds the strings too (MakeStringValue, OwnStrings), so copies of the Value keep
//     them;
//   - everything made during a Run (bound inputs, kernel results) lives in that Run's StringArena,
//     which outlives every Value of the Run and is dropped after the outputs are serialized.
// A kernel may also point handles into memory that outlives the model's Runs (its KernelState, a
// constant input). Handles are never written through.
//
// At the engine interface a kString tensor is in the serialized form of
// tessera/common/bytes_tensor.h; BindStrings and SerializeStrings convert.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "engine/value.h"
#include "tessera/common/status.h"

namespace tessera::engine {

using StringHandle = const std::string*;
static_assert(sizeof(StringHandle) == 8, "kString elements are 8-byte handles");

// Strings made during one Run (or one constant-folding pass). Addresses stay valid until the arena
// is destroyed. Not thread-safe: kernels add strings from the calling thread only.
class StringArena {
 public:
  // A handle of a copy of `s`; null (the empty string) when `s` is empty.
  StringHandle Add(std::string_view s);
  StringHandle Add(std::string&& s);

 private:
  std::deque<std::string> strings_;
};

// The string behind a handle.
inline std::string_view HandleView(StringHandle h) {
  return h == nullptr ? std::string_view() : std::string_view(*h);
}

// Element `i` of a kString value.
inline std::string_view StringAt(const Value& v, int64_t i) {
  return HandleView(v.data<StringHandle>()[i]);
}

// A kString value of `shape` that owns `strings` (row-major, one per element).
Value MakeStringValue(Shape shape, std::vector<std::string> strings);

// A copy of kString value `v` that owns its strings (for values that must outlive a Run's arena,
// e.g. folded constants).
Value OwnStrings(const Value& v);

// A kString value of `shape` from the serialized BYTES form (bytes_tensor.h), its strings copied
// into `arena`. INVALID_ARGUMENT naming `what` unless the bytes hold exactly the shape's elements.
StatusOr<Value> BindStrings(const std::string& what, const Shape& shape, const void* data,
                            size_t size, StringArena* arena);

// The serialized BYTES form of kString value `v`, appended to `out`.
void SerializeStrings(const Value& v, std::vector<std::byte>* out);

// `s` cut to at most `max_bytes` (with "..." when cut), for error messages quoting user data.
std::string TruncateForMessage(std::string_view s, size_t max_bytes = 40);

}  // namespace tessera::engine
