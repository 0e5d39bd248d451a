// Writing YAML by hand for the scheduler's files (profiles, device, interference): the layout is
// chosen for people (flow lists, comments), which yaml-cpp's emitter does not give.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace tessera::scheduler {

// Shortest decimal text that parses back to exactly `value` ("0.1", "12", "1e-07").
std::string FormatYamlNumber(double value);

// `text` as a YAML scalar that reads back as the same string: plain when it is a simple name
// (letters, digits, '_', '-', '.', starting with a letter or '_', and not null/true/false),
// otherwise double-quoted with escapes.
std::string QuoteYamlString(std::string_view text);

}  // namespace tessera::scheduler
