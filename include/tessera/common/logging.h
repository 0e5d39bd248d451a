// Process-wide logging set-up on top of spdlog. Components log with spdlog::info/warn/... directly.
//
// The settings can change while the process runs (Triton's LogSettings RPC): which severities are
// written, the verbose level, the line format and the destination file. Every line goes through
// one sink that applies the current settings, so a change takes effect for the next line of every
// thread, and no line is lost or torn while it happens.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tessera/common/status.h"

namespace tessera {

// verbose_level 0 = info; 1 = debug; >= 2 = trace (tritonserver's --log-verbose semantics).
// `process_tag` prefixes every line ("server", "executor-0") so interleaved logs stay readable.
void InitLogging(int verbose_level, std::string_view process_tag);

// The settings, named as tritonserver names them.
struct LogSettings {
  std::string file;        // log_file: "" = standard error
  bool info = true;        // log_info
  bool warning = true;     // log_warning
  bool error = true;       // log_error
  uint32_t verbose_level = 0;  // log_verbose_level: 1 adds debug lines, >= 2 trace lines too
  // log_format: "default" (local time, millisecond precision) or "ISO8601" (UTC, "...Z").
  std::string format = "default";
};

// A change of some settings; unset fields keep their value.
struct LogSettingsUpdate {
  std::optional<std::string> file;
  std::optional<bool> info;
  std::optional<bool> warning;
  std::optional<bool> error;
  std::optional<uint32_t> verbose_level;
  std::optional<std::string> format;
};

LogSettings CurrentLogSettings();

// Applies `update` whole, or changes nothing: INVALID_ARGUMENT for a format other than "default"
// or "ISO8601"; FAILED_PRECONDITION for a file that cannot be opened for appending (naming it and
// the reason: a missing directory is not created) or before InitLogging.
Status UpdateLogSettings(const LogSettingsUpdate& update);

}  // namespace tessera
