#include "settings_calls.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "log_settings_rpc.h"
#include "spdlog/spdlog.h"

namespace tessera::frontend {

Status LogSettingsCall(const inference::LogSettingsRequest& request, bool allow_changes,
                       inference::LogSettingsResponse* response) {
  if (!request.settings().empty()) {
    if (!allow_changes) {
      return absl::PermissionDeniedError(
          "changing log settings is disabled on this server; start it with --allow-log-settings "
          "(server.yaml: log.allow_settings_rpc: true)");
    }
    TESSERA_ASSIGN_OR_RETURN(LogSettingsUpdate update, LogSettingsUpdateFromProto(request));
    TESSERA_RETURN_IF_ERROR(UpdateLogSettings(update));
    spdlog::info("log settings changed by a LogSettings call");
  }
  LogSettingsToProto(CurrentLogSettings(), response);
  return absl::OkStatus();
}

Status TraceSettingCall(const inference::TraceSettingRequest& request, const ServerCore& core,
                        RequestTracer& tracer, inference::TraceSettingResponse* response) {
  const std::string& model = request.model_name();
  if (!model.empty()) {
    const std::vector<ModelIndexEntry> index = core.RepositoryIndex(false);
    if (std::none_of(index.begin(), index.end(),
                     [&](const ModelIndexEntry& e) { return e.name == model; })) {
      return absl::NotFoundError(absl::StrCat("no model '", model, "' in the model repository"));
    }
  }
  if (!request.settings().empty()) {
    TESSERA_ASSIGN_OR_RETURN(TraceSettingsUpdate update, TraceSettingsUpdateFromProto(request));
    TESSERA_RETURN_IF_ERROR(tracer.Update(model, update));
    spdlog::info("trace settings of {} changed by a TraceSetting call",
                 model.empty() ? "the server" : "model '" + model + "'");
  }
  TraceSettingsToProto(tracer.Get(model), response);
  return absl::OkStatus();
}

}  // namespace tessera::frontend
