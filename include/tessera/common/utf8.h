// UTF-8 checks for text that comes from files (model folders, configs, ONNX names) and ends up in
// protobuf `string` fields, which must hold valid UTF-8: a message with anything else fails to
// parse on the other side (RFC 3629's rules: no overlong forms, no surrogates, at most U+10FFFF).
// Written here rather than taken from protobuf, whose validator is in its `internal` namespace.
#pragma once

#include <string>
#include <string_view>

namespace tessera {

bool IsValidUtf8(std::string_view text);

// `text` with every byte that is not part of a valid UTF-8 sequence replaced by '?'.
std::string CoerceToUtf8(std::string_view text);

}  // namespace tessera
