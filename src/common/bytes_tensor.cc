#include "tessera/common/bytes_tensor.h"

#include <cstring>

namespace tessera {

StatusOr<std::vector<size_t>> BytesElementOffsets(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::vector<size_t> offsets;
  size_t at = 0;
  while (at < size) {
    offsets.push_back(at);
    if (size - at < kBytesLengthPrefix) {
      return absl::InvalidArgumentError(
          absl::StrCat("BYTES element ", offsets.size() - 1, " at byte ", at,
                       ": its 4-byte length is cut off (", size - at, " bytes left)"));
    }
    // Little-endian on the wire whatever the host; every supported host is little-endian too,
    // but spelling the bytes out keeps the format in one place.
    const uint32_t length =
        static_cast<uint32_t>(bytes[at]) | static_cast<uint32_t>(bytes[at + 1]) << 8 |
        static_cast<uint32_t>(bytes[at + 2]) << 16 | static_cast<uint32_t>(bytes[at + 3]) << 24;
    at += kBytesLengthPrefix;
    if (length > size - at) {
      return absl::InvalidArgumentError(absl::StrCat("BYTES element ", offsets.size() - 1,
                                                     " says it has ", length, " bytes but only ",
                                                     size - at, " follow"));
    }
    at += length;
  }
  offsets.push_back(size);
  return offsets;
}

Status CheckBytesElements(std::string_view what, const void* data, size_t size, int64_t count) {
  StatusOr<std::vector<size_t>> offsets = BytesElementOffsets(data, size);
  if (!offsets.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(absl::string_view(what.data(), what.size()),
                                                   ": ", offsets.status().message()));
  }
  const auto found = static_cast<int64_t>(offsets->size() - 1);
  if (found != count) {
    return absl::InvalidArgumentError(absl::StrCat(absl::string_view(what.data(), what.size()),
                                                   ": ", size, " bytes of BYTES data hold ", found,
                                                   " elements, the shape needs ", count));
  }
  return absl::OkStatus();
}

StatusOr<std::vector<std::string_view>> SplitBytesElements(const void* data, size_t size) {
  StatusOr<std::vector<size_t>> offsets = BytesElementOffsets(data, size);
  if (!offsets.ok()) return offsets.status();
  std::vector<std::string_view> elements;
  elements.reserve(offsets->size() - 1);
  const char* base = static_cast<const char*>(data);
  for (size_t i = 0; i + 1 < offsets->size(); ++i) {
    const size_t begin = (*offsets)[i] + kBytesLengthPrefix;
    elements.emplace_back(base + begin, (*offsets)[i + 1] - begin);
  }
  return elements;
}

void AppendBytesElement(std::string_view element, std::string* out) {
  const auto length = static_cast<uint32_t>(element.size());
  const char prefix[kBytesLengthPrefix] = {
      static_cast<char>(length & 0xff), static_cast<char>(length >> 8 & 0xff),
      static_cast<char>(length >> 16 & 0xff), static_cast<char>(length >> 24 & 0xff)};
  out->append(prefix, kBytesLengthPrefix);
  out->append(element);
}

}  // namespace tessera
