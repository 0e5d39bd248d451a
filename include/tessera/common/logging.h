// Process-wide logging set-up on top of spdlog. Components log with spdlog::info/warn/... directly.
#pragma once

#include <string_view>

namespace tessera {

// verbose_level 0 = info; 1 = debug; >= 2 = trace (tritonserver's --log-verbose semantics).
// `process_tag` prefixes every line ("server", "executor-0") so interleaved logs stay readable.
void InitLogging(int verbose_level, std::string_view process_tag);

}  // namespace tessera
