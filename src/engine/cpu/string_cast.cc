// Cast between STRING and the number types (ONNX Cast/CastLike).
//
// Numbers to strings match onnxruntime's formatting: integers in decimal, BOOL as "1"/"0", FLOAT
// as printf's "%.8g" (1.5 -> "1.5", 0.1f -> "0.1", 0.3f -> "0.30000001", 1e10f -> "1e+10", the
// ONNX test data's form too) with "INF", "-INF" and "NaN" for the special values.
//
// Strings to numbers follow the ONNX spec where it speaks and are strict where it does not:
// surrounding ASCII whitespace and a leading '+' are allowed; FLOAT takes decimal and scientific
// forms and "inf"/"infinity"/"nan" in any case (out of range: +-inf or +-0, as C's strtof); the
// integer types take a decimal integer, or a decimal number which is truncated toward zero
// ("2.7" -> 2, "1e3" -> 1000), narrowed to INT32/UINT8 by dropping high bits as an integer Cast
// does; BOOL is a number's "!= 0". Anything else (empty, trailing characters such as "1.5abc",
// hex, an integer beyond INT64) is INVALID_ARGUMENT quoting the string, where onnxruntime would
// accept a prefix or fail with a bare "stod".
#include <locale.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

std::string_view TrimAscii(std::string_view s) {
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// `s` without surrounding whitespace and one leading '+' (std::from_chars takes neither).
std::string_view NumberText(std::string_view s) {
  s = TrimAscii(s);
  if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  return s;
}

// The C locale, so that an out-of-range number's strtof does not depend on the process locale.
locale_t CLocale() {
  static const locale_t c = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(0));
  return c;
}

// A whole string as a T (float or double), or false.
template <typename T>
bool ParseFloating(std::string_view s, T* out) {
  s = NumberText(s);
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  if (end != s.data() + s.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    // from_chars leaves *out alone here; strtod says which of +-inf and +-0 it is. The syntax is
    // already known to be a whole number, so the NUL-terminated copy parses the same text.
    const std::string copy(s);
    if constexpr (std::is_same_v<T, float>) {
      *out = strtof_l(copy.c_str(), nullptr, CLocale());
    } else {
      *out = strtod_l(copy.c_str(), nullptr, CLocale());
    }
    return true;
  }
  return ec == std::errc();
}

// A whole string as an int64: an integer, or a finite number in range truncated toward zero.
bool ParseInteger(std::string_view s, int64_t* out) {
  const std::string_view text = NumberText(s);
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  if (ec == std::errc() && end == text.data() + text.size()) return true;
  if (ec == std::errc::result_out_of_range) return false;
  double d = 0;
  // 2^63 is exactly representable; anything at or past it is out of int64's range.
  if (!ParseFloating(text, &d) || !std::isfinite(d) || d >= 9223372036854775808.0 ||
      d < -9223372036854775808.0) {
    return false;
  }
  *out = static_cast<int64_t>(d);
  return true;
}

Status Unparsable(std::string_view s, int64_t index, DataType to) {
  return absl::InvalidArgumentError(absl::StrCat("cannot cast string \"", TruncateForMessage(s),
                                                 "\" (element ", index, ") to ", TypeName(to)));
}

std::string FormatFloat(float v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
  char buf[32];
  const auto result = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general, 8);
  return std::string(buf, result.ptr);
}

template <typename T>
std::string FormatInteger(T v) {
  char buf[24];
  const auto result = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, result.ptr);
}

std::string FormatElement(const Value& x, int64_t i) {
  switch (x.dtype()) {
    case DataType::kFp32:
      return FormatFloat(x.data<float>()[i]);
    case DataType::kInt64:
      return FormatInteger(x.data<int64_t>()[i]);
    case DataType::kInt32:
      return FormatInteger(x.data<int32_t>()[i]);
    case DataType::kBool:
      return x.data<uint8_t>()[i] != 0 ? "1" : "0";
    default:
      return FormatInteger(static_cast<unsigned>(x.data<uint8_t>()[i]));
  }
}

// Element i of STRING value x into element i of y (of a number type).
Status ParseElement(const Value& x, int64_t i, const Value& y) {
  const std::string_view s = StringAt(x, i);
  if (y.dtype() == DataType::kFp32) {
    if (!ParseFloating(s, &y.mutable_data<float>()[i])) return Unparsable(s, i, y.dtype());
    return absl::OkStatus();
  }
  if (y.dtype() == DataType::kBool) {  // any number; every integer's != 0 survives a double
    double d = 0;
    if (!ParseFloating(s, &d)) return Unparsable(s, i, y.dtype());
    y.mutable_data<uint8_t>()[i] = d != 0 ? 1 : 0;
    return absl::OkStatus();
  }
  int64_t n = 0;
  if (!ParseInteger(s, &n)) return Unparsable(s, i, y.dtype());
  switch (y.dtype()) {
    case DataType::kInt64:
      y.mutable_data<int64_t>()[i] = n;
      break;
    case DataType::kInt32:
      y.mutable_data<int32_t>()[i] = static_cast<int32_t>(n);
      break;
    default:
      y.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(n);
      break;
  }
  return absl::OkStatus();
}

}  // namespace

Status CastStrings(const OpContext& ctx, const Value& x, DataType to, std::vector<Value>* outputs) {
  const int64_t n = x.num_elements();
  if (to == DataType::kString) {
    if (ctx.strings == nullptr) return absl::InternalError("no string arena for Cast to STRING");
    Value y = ctx.NewOutput(0, DataType::kString, x.shape());
    StringHandle* out = y.mutable_data<StringHandle>();
    // One thread: the arena is not thread-safe, and formatting is cheap next to the copy out.
    for (int64_t i = 0; i < n; ++i) out[i] = ctx.strings->Add(FormatElement(x, i));
    (*outputs)[0] = std::move(y);
    return absl::OkStatus();
  }
  if (to != DataType::kFp32 && to != DataType::kInt64 && to != DataType::kInt32 &&
      to != DataType::kUint8 && to != DataType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat("cannot cast STRING to ", TypeName(to)));
  }
  Value y = ctx.NewOutput(0, to, x.shape());
  for (int64_t i = 0; i < n; ++i) TESSERA_RETURN_IF_ERROR(ParseElement(x, i, y));
  (*outputs)[0] = std::move(y);
  return absl::OkStatus();
}

}  // namespace tessera::engine::cpu
