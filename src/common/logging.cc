#include "tessera/common/logging.h"

#include <string>

#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace tessera {

void InitLogging(int verbose_level, std::string_view process_tag) {
  // stderr so that stdout stays free for tools that print results.
  auto logger = spdlog::stderr_color_mt(std::string(process_tag));
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%n %P] %v");
  if (verbose_level <= 0) {
    spdlog::set_level(spdlog::level::info);
  } else if (verbose_level == 1) {
    spdlog::set_level(spdlog::level::debug);
  } else {
    spdlog::set_level(spdlog::level::trace);
  }
  spdlog::flush_on(spdlog::level::info);
}

}  // namespace tessera
