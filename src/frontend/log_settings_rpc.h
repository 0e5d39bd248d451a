// Triton's LogSettings RPC: its settings map ↔ tessera::LogSettings (common/logging.h).
#pragma once

#include "inference/grpc_service.pb.h"
#include "tessera/common/logging.h"
#include "tessera/common/status.h"

namespace tessera::frontend {

// The change a LogSettingsRequest asks for. INVALID_ARGUMENT naming the key for an unknown key,
// a value of the wrong type (log_file and log_format take string_param, log_info, log_warning
// and log_error bool_param, log_verbose_level uint32_param) or a value that is not set.
StatusOr<LogSettingsUpdate> LogSettingsUpdateFromProto(const inference::LogSettingsRequest& request);

// Every setting, as the response lists them.
void LogSettingsToProto(const LogSettings& settings, inference::LogSettingsResponse* response);

}  // namespace tessera::frontend
