#include "load_parameters.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tessera::frontend {
namespace {

constexpr std::string_view kFilePrefix = "file:";
constexpr std::string_view kConfig = "config";
constexpr std::string_view kUnloadDependents = "unload_dependents";

Status UnknownLoadParameter(const std::string& key) {
  return absl::InvalidArgumentError(
      absl::StrCat("unknown load parameter '", key, "' (a load takes 'config' and 'file:<path>')"));
}

Status UnknownUnloadParameter(const std::string& key) {
  return absl::InvalidArgumentError(
      absl::StrCat("unknown unload parameter '", key, "' (an unload takes 'unload_dependents')"));
}

Status WrongType(const std::string& key, const char* wanted) {
  return absl::InvalidArgumentError(absl::StrCat("parameter '", key, "' must be ", wanted));
}

// Files without a config cannot be served: the config says what the files are.
Status CheckComplete(const LoadOverrides& overrides) {
  if (overrides.files.empty() || overrides.config_json) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "load parameter 'file:", overrides.files.begin()->first,
      "' needs a 'config' parameter too: the files make the model folder, the config says how to "
      "serve it"));
}

}  // namespace

StatusOr<LoadOverrides> LoadOverridesFromGrpc(const RepositoryParameters& parameters) {
  LoadOverrides overrides;
  for (const auto& [key, value] : parameters) {
    if (key == kConfig) {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kStringParam) {
        return WrongType(key, "a string_param holding the model config as JSON");
      }
      overrides.config_json = value.string_param();
    } else if (key.starts_with(kFilePrefix)) {
      if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kBytesParam) {
        return WrongType(key, "a bytes_param holding the file's content");
      }
      overrides.files[key.substr(kFilePrefix.size())] = value.bytes_param();
    } else {
      return UnknownLoadParameter(key);
    }
  }
  TESSERA_RETURN_IF_ERROR(CheckComplete(overrides));
  return overrides;
}

StatusOr<LoadOverrides> LoadOverridesFromJson(const nlohmann::json& parameters) {
  if (!parameters.is_object()) {
    return absl::InvalidArgumentError("'parameters' must be a JSON object");
  }
  LoadOverrides overrides;
  for (const auto& [key, value] : parameters.items()) {
    if (key == kConfig) {
      if (!value.is_string()) return WrongType(key, "a string holding the model config as JSON");
      overrides.config_json = value.get<std::string>();
    } else if (key.starts_with(kFilePrefix)) {
      std::string bytes;
      if (!value.is_string() || !absl::Base64Unescape(value.get<std::string>(), &bytes)) {
        return WrongType(key, "a string holding the file's content in base64");
      }
      overrides.files[key.substr(kFilePrefix.size())] = std::move(bytes);
    } else {
      return UnknownLoadParameter(key);
    }
  }
  TESSERA_RETURN_IF_ERROR(CheckComplete(overrides));
  return overrides;
}

StatusOr<bool> UnloadDependentsFromGrpc(const RepositoryParameters& parameters) {
  bool dependents = false;
  for (const auto& [key, value] : parameters) {
    if (key != kUnloadDependents) return UnknownUnloadParameter(key);
    if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kBoolParam) {
      return WrongType(key, "a bool_param");
    }
    dependents = value.bool_param();
  }
  return dependents;
}

StatusOr<bool> UnloadDependentsFromJson(const nlohmann::json& parameters) {
  if (!parameters.is_object()) {
    return absl::InvalidArgumentError("'parameters' must be a JSON object");
  }
  bool dependents = false;
  for (const auto& [key, value] : parameters.items()) {
    if (key != kUnloadDependents) return UnknownUnloadParameter(key);
    if (!value.is_boolean()) return WrongType(key, "a boolean");
    dependents = value.get<bool>();
  }
  return dependents;
}

}  // namespace tessera::frontend
