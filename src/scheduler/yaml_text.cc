#include "yaml_text.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <system_error>

namespace tessera::scheduler {

std::string FormatYamlNumber(double value) {
  std::array<char, 64> buffer;
  // to_chars without a precision writes the shortest form that round-trips.
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  if (ec != std::errc()) return "0";
  return std::string(buffer.data(), end);
}

std::string QuoteYamlString(std::string_view text) {
  bool plain =
      !text.empty() && (std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_');
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      plain = false;
    }
  }
  // Words YAML 1.1/1.2 give a meaning of their own.
  for (std::string_view word :
       {"null", "Null", "NULL", "true", "True", "TRUE", "false", "False", "FALSE", "yes", "Yes",
        "YES",  "no",   "No",   "NO",   "on",   "On",   "ON",    "off",   "Off",   "OFF"}) {
    if (text == word) plain = false;
  }
  if (plain) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", u);
      out += escaped;
    } else {
      out += c;  // UTF-8 bytes pass through
    }
  }
  return out + "\"";
}

}  // namespace tessera::scheduler
