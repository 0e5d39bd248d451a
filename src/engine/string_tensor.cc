#include "engine/string_tensor.h"

#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "tessera/common/bytes_tensor.h"

namespace tessera::engine {
namespace {

// What a self-owning kString value's storage holds: the strings and the handles pointing at them.
struct OwnedStrings {
  std::vector<std::string> strings;
  std::vector<StringHandle> handles;
};

}  // namespace

StringHandle StringArena::Add(std::string_view s) {
  if (s.empty()) return nullptr;
  return &strings_.emplace_back(s);
}

StringHandle StringArena::Add(std::string&& s) {
  if (s.empty()) return nullptr;
  return &strings_.emplace_back(std::move(s));
}

Value MakeStringValue(Shape shape, std::vector<std::string> strings) {
  auto owned = std::make_shared<OwnedStrings>();
  owned->strings = std::move(strings);
  owned->handles.reserve(owned->strings.size() + 1);  // never empty: data() must not be null
  for (const std::string& s : owned->strings) {
    owned->handles.push_back(s.empty() ? nullptr : &s);
  }
  void* data = owned->handles.data();
  return Value::Adopt(DataType::kString, std::move(shape), std::move(owned), data);
}

Value OwnStrings(const Value& v) {
  std::vector<std::string> strings;
  strings.reserve(static_cast<size_t>(v.num_elements()));
  for (int64_t i = 0; i < v.num_elements(); ++i) strings.emplace_back(StringAt(v, i));
  return MakeStringValue(v.shape(), std::move(strings));
}

StatusOr<Value> BindStrings(const std::string& what, const Shape& shape, const void* data,
                            size_t size, StringArena* arena) {
  const int64_t count = ElementCount(shape);
  TESSERA_RETURN_IF_ERROR(CheckBytesElements(what, data, size, count));
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string_view> elements, SplitBytesElements(data, size));
  Value v = Value::Allocate(DataType::kString, shape);
  StringHandle* handles = v.mutable_data<StringHandle>();
  for (int64_t i = 0; i < count; ++i) handles[i] = arena->Add(elements[i]);
  return v;
}

void SerializeStrings(const Value& v, std::vector<std::byte>* out) {
  std::string bytes;
  for (int64_t i = 0; i < v.num_elements(); ++i) AppendBytesElement(StringAt(v, i), &bytes);
  const auto* begin = reinterpret_cast<const std::byte*>(bytes.data());
  out->insert(out->end(), begin, begin + bytes.size());
}

std::string TruncateForMessage(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return std::string(s);
  return absl::StrCat(absl::string_view(s.data(), max_bytes), "...");
}

}  // namespace tessera::engine
