// Triton's LogSettings and TraceSetting calls, answered alike on the gRPC and HTTP endpoints.
#pragma once

#include "inference/grpc_service.pb.h"
#include "request_tracer.h"
#include "tessera/common/status.h"
#include "tessera/frontend/server_core.h"

namespace tessera::frontend {

// Applies the settings the request gives (none: a read), then lists every setting. Changes need
// `allow_changes` (--allow-log-settings): PERMISSION_DENIED otherwise.
Status LogSettingsCall(const inference::LogSettingsRequest& request, bool allow_changes,
                       inference::LogSettingsResponse* response);

// The same for the trace settings of the server, or of request.model_name() (NOT_FOUND for a
// model the repository does not have).
Status TraceSettingCall(const inference::TraceSettingRequest& request, const ServerCore& core,
                        RequestTracer& tracer, inference::TraceSettingResponse* response);

}  // namespace tessera::frontend
