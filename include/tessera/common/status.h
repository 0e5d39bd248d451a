// Status and StatusOr used at every module boundary (absl, which gRPC already brings).
// Errors inside a module may use anything; what crosses a component boundary is a Status.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "spdlog/fmt/fmt.h"

namespace tessera {

using Status = absl::Status;
template <typename T>
using StatusOr = absl::StatusOr<T>;

}  // namespace tessera

// Debian's abseil has its own string_view type (not std::string_view), so Status::message() needs
// a formatter before spdlog can log it.
#if !defined(ABSL_USES_STD_STRING_VIEW)
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename FormatContext>
  auto format(absl::string_view text, FormatContext& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(text.data(), text.size()),
                                                    ctx);
  }
};
#endif

template <>
struct fmt::formatter<absl::Status> : fmt::formatter<fmt::string_view> {
  template <typename FormatContext>
  auto format(const absl::Status& status, FormatContext& ctx) const {
    const std::string text = status.ToString();
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(text), ctx);
  }
};

#define TESSERA_CONCAT_INNER_(a, b) a##b
#define TESSERA_CONCAT_(a, b) TESSERA_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (a Status) is not OK.
#define TESSERA_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status tessera_status_ = (expr);           \
    if (!tessera_status_.ok()) return tessera_status_; \
  } while (0)

// `lhs = value of expr` (a StatusOr), or returns its error from the enclosing function.
#define TESSERA_ASSIGN_OR_RETURN(lhs, expr) \
  TESSERA_ASSIGN_OR_RETURN_IMPL_(TESSERA_CONCAT_(tessera_statusor_, __LINE__), lhs, expr)
#define TESSERA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()
