#include "tessera/common/logging.h"

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/sinks/basic_file_sink.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace tessera {
namespace {

constexpr char kDefaultPattern[] = "%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%n %P] %v";
constexpr char kIso8601Pattern[] = "%Y-%m-%dT%H:%M:%SZ %^%L%$ [%n %P] %v";

// The one sink of the process's logger: filters lines by the settings' severities and writes them
// to the current target (stderr or the log file). Its lock (base_sink's) also guards a change, so
// a line is written wholly before or after it.
class SettingsSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void Apply(std::shared_ptr<spdlog::sinks::sink> target, const LogSettings& settings) {
    const bool utc = settings.format == "ISO8601";
    target->set_formatter(std::make_unique<spdlog::pattern_formatter>(
        utc ? kIso8601Pattern : kDefaultPattern,
        utc ? spdlog::pattern_time_type::utc : spdlog::pattern_time_type::local));
    std::lock_guard lock(mutex_);
    if (target_) target_->flush();
    target_ = std::move(target);
    info_ = settings.info;
    warning_ = settings.warning;
    error_ = settings.error;
    verbose_level_ = settings.verbose_level;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!Enabled(msg.level)) return;
    target_->log(msg);
  }
  void flush_() override { target_->flush(); }
  // The settings choose the format; spdlog::set_pattern elsewhere must not undo that.
  void set_pattern_(const std::string&) override {}
  void set_formatter_(std::unique_ptr<spdlog::formatter>) override {}

 private:
  bool Enabled(spdlog::level::level_enum level) const {
    switch (level) {
      case spdlog::level::trace: return verbose_level_ >= 2;
      case spdlog::level::debug: return verbose_level_ >= 1;
      case spdlog::level::info: return info_;
      case spdlog::level::warn: return warning_;
      case spdlog::level::err:
      case spdlog::level::critical: return error_;
      default: return false;
    }
  }

  std::shared_ptr<spdlog::sinks::sink> target_;
  bool info_ = true;
  bool warning_ = true;
  bool error_ = true;
  uint32_t verbose_level_ = 0;
};

// The lowest severity any setting lets through: lines below it are not even formatted.
spdlog::level::level_enum LoggerLevel(const LogSettings& settings) {
  if (settings.verbose_level >= 2) return spdlog::level::trace;
  if (settings.verbose_level == 1) return spdlog::level::debug;
  if (settings.info) return spdlog::level::info;
  if (settings.warning) return spdlog::level::warn;
  if (settings.error) return spdlog::level::err;
  return spdlog::level::off;
}

struct LoggingState {
  std::mutex mu;  // serializes changes
  std::shared_ptr<SettingsSink> sink;
  std::shared_ptr<spdlog::logger> logger;
  LogSettings settings;
};

LoggingState& State() {
  static LoggingState* state = new LoggingState();  // never destroyed: threads log until exit
  return *state;
}

}  // namespace

void InitLogging(int verbose_level, std::string_view process_tag) {
  LoggingState& state = State();
  std::lock_guard lock(state.mu);
  state.settings = LogSettings{};
  state.settings.verbose_level = verbose_level > 0 ? static_cast<uint32_t>(verbose_level) : 0;
  state.sink = std::make_shared<SettingsSink>();
  // stderr so that stdout stays free for tools that print results.
  state.sink->Apply(std::make_shared<spdlog::sinks::stderr_color_sink_st>(), state.settings);
  state.logger = std::make_shared<spdlog::logger>(std::string(process_tag), state.sink);
  state.logger->set_level(LoggerLevel(state.settings));
  state.logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(state.logger);
}

LogSettings CurrentLogSettings() {
  LoggingState& state = State();
  std::lock_guard lock(state.mu);
  return state.settings;
}

Status UpdateLogSettings(const LogSettingsUpdate& update) {
  LoggingState& state = State();
  std::lock_guard lock(state.mu);
  if (!state.sink) {
    return absl::FailedPreconditionError("logging is not initialised in this process");
  }
  LogSettings next = state.settings;
  if (update.file) next.file = *update.file;
  if (update.info) next.info = *update.info;
  if (update.warning) next.warning = *update.warning;
  if (update.error) next.error = *update.error;
  if (update.verbose_level) next.verbose_level = *update.verbose_level;
  if (update.format) next.format = *update.format;
  if (next.format != "default" && next.format != "ISO8601") {
    return absl::InvalidArgumentError(absl::StrCat("log_format '", next.format,
                                                   "' is not one of \"default\", \"ISO8601\""));
  }
  std::shared_ptr<spdlog::sinks::sink> target;
  if (next.file.empty()) {
    target = std::make_shared<spdlog::sinks::stderr_color_sink_st>();
  } else {
    // spdlog would create missing directories; a log file goes where the operator made room.
    const std::filesystem::path parent = std::filesystem::path(next.file).parent_path();
    std::error_code error;
    if (!parent.empty() && !std::filesystem::is_directory(parent, error)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "log_file '", next.file, "' cannot be opened for appending: its directory '",
          parent.string(), "' does not exist"));
    }
    try {
      target = std::make_shared<spdlog::sinks::basic_file_sink_st>(next.file, /*truncate=*/false);
    } catch (const spdlog::spdlog_ex& e) {
      return absl::FailedPreconditionError(
          absl::StrCat("log_file '", next.file, "' cannot be opened for appending: ", e.what()));
    }
  }
  state.sink->Apply(std::move(target), next);
  state.logger->set_level(LoggerLevel(next));
  state.settings = next;
  return absl::OkStatus();
}

}  // namespace tessera
