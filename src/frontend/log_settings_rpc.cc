#include "log_settings_rpc.h"

#include "absl/strings/str_cat.h"

namespace tessera::frontend {
namespace {

using Value = inference::LogSettingsRequest::SettingValue;

constexpr char kKnownKeys[] =
    "log_file, log_info, log_warning, log_error, log_verbose_level, log_format";

const char* ChoiceName(Value::ParameterChoiceCase choice) {
  switch (choice) {
    case Value::kBoolParam: return "bool_param";
    case Value::kUint32Param: return "uint32_param";
    case Value::kStringParam: return "string_param";
    default: return "no value";
  }
}

Status WrongType(const std::string& key, Value::ParameterChoiceCase want, const Value& value) {
  return absl::InvalidArgumentError(absl::StrCat("log setting '", key, "' takes ",
                                                 ChoiceName(want), ", got ",
                                                 ChoiceName(value.parameter_choice_case())));
}

}  // namespace

StatusOr<LogSettingsUpdate> LogSettingsUpdateFromProto(const inference::LogSettingsRequest& request) {
  LogSettingsUpdate update;
  for (const auto& [key, value] : request.settings()) {
    auto take_bool = [&](std::optional<bool>* field) -> Status {
      if (value.parameter_choice_case() != Value::kBoolParam) {
        return WrongType(key, Value::kBoolParam, value);
      }
      *field = value.bool_param();
      return absl::OkStatus();
    };
    auto take_string = [&](std::optional<std::string>* field) -> Status {
      if (value.parameter_choice_case() != Value::kStringParam) {
        return WrongType(key, Value::kStringParam, value);
      }
      *field = value.string_param();
      return absl::OkStatus();
    };
    if (key == "log_file") {
      TESSERA_RETURN_IF_ERROR(take_string(&update.file));
    } else if (key == "log_format") {
      TESSERA_RETURN_IF_ERROR(take_string(&update.format));
    } else if (key == "log_info") {
      TESSERA_RETURN_IF_ERROR(take_bool(&update.info));
    } else if (key == "log_warning") {
      TESSERA_RETURN_IF_ERROR(take_bool(&update.warning));
    } else if (key == "log_error") {
      TESSERA_RETURN_IF_ERROR(take_bool(&update.error));
    } else if (key == "log_verbose_level") {
      if (value.parameter_choice_case() != Value::kUint32Param) {
        return WrongType(key, Value::kUint32Param, value);
      }
      update.verbose_level = value.uint32_param();
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown log setting '", key, "' (known: ", kKnownKeys, ")"));
    }
  }
  return update;
}

void LogSettingsToProto(const LogSettings& settings, inference::LogSettingsResponse* response) {
  auto& out = *response->mutable_settings();
  out["log_file"].set_string_param(settings.file);
  out["log_info"].set_bool_param(settings.info);
  out["log_warning"].set_bool_param(settings.warning);
  out["log_error"].set_bool_param(settings.error);
  out["log_verbose_level"].set_uint32_param(settings.verbose_level);
  out["log_format"].set_string_param(settings.format);
}

}  // namespace tessera::frontend
