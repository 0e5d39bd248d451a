// The JSON bodies of Triton's HTTP log and trace settings (/v2/logging, /v2/trace/setting and
// /v2/models/<m>/trace/setting) ↔ the gRPC messages settings_calls.h takes and gives.
#pragma once

#include "inference/grpc_service.pb.h"
#include "nlohmann/json.hpp"
#include "tessera/common/status.h"

namespace tessera::frontend {

// {"log_info": true, "log_verbose_level": 1, "log_file": "..."}: booleans, non-negative
// integers and strings. INVALID_ARGUMENT naming the key for any other value.
StatusOr<inference::LogSettingsRequest> LogSettingsFromJson(const nlohmann::json& body);
nlohmann::json LogSettingsToJson(const inference::LogSettingsResponse& response);

// {"trace_level": ["TIMESTAMPS"], "trace_rate": "100", "trace_count": null, ...}: a string, a
// number or a list of strings each; null clears a model's setting (back to the server's).
StatusOr<inference::TraceSettingRequest> TraceSettingFromJson(const nlohmann::json& body);
// trace_level as a list, the others as one string each, as Triton's HTTP endpoint answers.
nlohmann::json TraceSettingToJson(const inference::TraceSettingResponse& response);

}  // namespace tessera::frontend
