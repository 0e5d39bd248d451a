#include "http_settings.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace tessera::frontend {

using nlohmann::json;

StatusOr<inference::LogSettingsRequest> LogSettingsFromJson(const json& body) {
  if (!body.is_object()) return absl::InvalidArgumentError("log settings must be a JSON object");
  inference::LogSettingsRequest request;
  for (const auto& [key, value] : body.items()) {
    auto& setting = (*request.mutable_settings())[key];
    if (value.is_boolean()) {
      setting.set_bool_param(value.get<bool>());
    } else if (value.is_number_integer() &&
               (value.is_number_unsigned() || value.get<int64_t>() >= 0) &&
               value.get<uint64_t>() <= std::numeric_limits<uint32_t>::max()) {
      setting.set_uint32_param(static_cast<uint32_t>(value.get<uint64_t>()));
    } else if (value.is_string()) {
      setting.set_string_param(value.get<std::string>());
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "log setting '", key, "' must be a boolean, a non-negative 32-bit integer or a string"));
    }
  }
  return request;
}

json LogSettingsToJson(const inference::LogSettingsResponse& response) {
  json out = json::object();
  for (const auto& [key, value] : response.settings()) {
    switch (value.parameter_choice_case()) {
      case inference::LogSettingsResponse::SettingValue::kBoolParam:
        out[key] = value.bool_param();
        break;
      case inference::LogSettingsResponse::SettingValue::kUint32Param:
        out[key] = value.uint32_param();
        break;
      case inference::LogSettingsResponse::SettingValue::kStringParam:
        out[key] = value.string_param();
        break;
      case inference::LogSettingsResponse::SettingValue::PARAMETER_CHOICE_NOT_SET:
        out[key] = nullptr;
        break;
    }
  }
  return out;
}

StatusOr<inference::TraceSettingRequest> TraceSettingFromJson(const json& body) {
  if (!body.is_object()) return absl::InvalidArgumentError("trace settings must be a JSON object");
  inference::TraceSettingRequest request;
  for (const auto& [key, value] : body.items()) {
    auto* values = (*request.mutable_settings())[key].mutable_value();
    auto add = [&](const json& v) -> Status {
      if (v.is_string()) {
        values->Add(v.get<std::string>());
      } else if (v.is_number_integer()) {
        values->Add(v.dump());
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "trace setting '", key, "' must be a string, an integer, a list of strings or null"));
      }
      return absl::OkStatus();
    };
    if (value.is_array()) {
      for (const json& v : value) TESSERA_RETURN_IF_ERROR(add(v));
    } else if (!value.is_null()) {
      TESSERA_RETURN_IF_ERROR(add(value));
    }
  }
  return request;
}

json TraceSettingToJson(const inference::TraceSettingResponse& response) {
  json out = json::object();
  for (const auto& [key, value] : response.settings()) {
    if (key == "trace_level" || value.value_size() != 1) {
      out[key] = json(value.value());
    } else {
      out[key] = value.value(0);
    }
  }
  return out;
}

}  // namespace tessera::frontend
