#include "http_routes.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client_shm.h"
#include "config_proto.h"
#include "http_json.h"
#include "http_settings.h"
#include "load_parameters.h"
#include "settings_calls.h"
#include "statistics_proto.h"

namespace tessera::frontend {
namespace {

using nlohmann::json;

HttpReply Json(const json& value) {
  return {200, value.dump(-1, ' ', false, json::error_handler_t::replace), std::nullopt};
}

// A body that must be a JSON object when given (management calls); empty = {}.
StatusOr<json> ParseObject(const std::string& body) {
  if (body.empty()) return json::object();
  try {
    json value = json::parse(body);
    if (value.is_object()) return value;
  } catch (const json::exception& e) {  // syntax errors, and numbers out of double's range
    return absl::InvalidArgumentError(
        absl::StrCat("the request body is not valid JSON: ", e.what()));
  }
  return absl::InvalidArgumentError("the request body must be a JSON object");
}

std::optional<ModelPath> ParseModelPath(const std::vector<std::string>& path) {
  // path = v2 models <name> [versions <v>] [action]
  if (path.size() < 3 || path.size() > 6) return std::nullopt;
  ModelPath out{path[2], "", ""};
  size_t at = 3;
  if (path.size() > 4 && path[3] == "versions") {
    out.version = path[4];
    at = 5;
  }
  if (at + 1 < path.size()) return std::nullopt;
  if (at < path.size()) out.action = path[at];
  return out;
}

}  // namespace

int HttpCodeOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
      return 409;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
      return 503;
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDataLoss:
      return 500;
    default:
      return 400;
  }
}

HttpReply HttpError(const Status& status) {
  return {HttpCodeOf(status.code()), ErrorJson(std::string(status.message())), std::nullopt};
}
HttpReply HttpError(int code, const std::string& message) {
  return {code, ErrorJson(message), std::nullopt};
}
HttpReply HttpBodyError(const Status& status) {
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    return HttpError(413, std::string(status.message()));
  }
  return HttpError(status);
}

std::optional<ModelPath> InferTarget(const HttpRequest& request) {
  if (request.method != "POST" || request.path.size() < 4 || request.path[0] != "v2" ||
      request.path[1] != "models") {
    return std::nullopt;
  }
  std::optional<ModelPath> model = ParseModelPath(request.path);
  if (!model || model->action != "infer") return std::nullopt;
  return model;
}

std::optional<ApiGroup> HttpApiGroup(const std::vector<std::string>& path) {
  if (path.empty() || path[0] != "v2") return std::nullopt;
  if (path.size() == 1) return ApiGroup::kMetadata;
  const std::string& group = path[1];
  if (group == "health") return ApiGroup::kHealth;
  if (group == "repository") return ApiGroup::kModelRepository;
  if (group == "systemsharedmemory" || group == "cudasharedmemory") return ApiGroup::kSharedMemory;
  if (group == "logging") return ApiGroup::kLogging;
  if (group == "trace") return ApiGroup::kTrace;
  if (group != "models") return std::nullopt;
  // As Route tells them apart.
  if (path.size() == 3 && path[2] == "stats") return ApiGroup::kStatistics;
  if (path.size() == 5 && path[3] == "trace" && path[4] == "setting") return ApiGroup::kTrace;
  std::optional<ModelPath> model = ParseModelPath(path);
  if (!model) return std::nullopt;
  if (model->action.empty()) return ApiGroup::kMetadata;
  if (model->action == "ready") return ApiGroup::kHealth;
  if (model->action == "config") return ApiGroup::kModelConfig;
  if (model->action == "stats") return ApiGroup::kStatistics;
  if (model->action == "infer") return ApiGroup::kInference;
  return std::nullopt;
}

HttpReply HttpRoutes::Route(const HttpRequest& request) {
  const std::string& method = request.method;
  const std::vector<std::string>& path = request.path;
  const std::string& where = request.where;
  auto only = [&](const char* allowed) -> std::optional<HttpReply> {
    if (method == allowed) return std::nullopt;
    return HttpError(405, absl::StrCat(where, ": use ", allowed));
  };
  if (path.empty() || path[0] != "v2") {
    return HttpError(404,
                     absl::StrCat("no such endpoint: ", where, " (KServe v2 paths start /v2)"));
  }
  if (path.size() == 1) {
    if (auto e = only("GET")) return *e;
    inference::ServerMetadataResponse metadata;
    FillServerMetadata(version_, submitter_->client_shm().enabled(), &metadata);
    return Json(ProtoToJson(metadata));
  }
  const std::string& group = path[1];
  if (group == "health" && path.size() == 3 && (path[2] == "live" || path[2] == "ready")) {
    if (auto e = only("GET")) return *e;
    // As Triton: the answer is the status code; the body is empty.
    return {path[2] == "live" || core_->HealthReady() ? 200 : 400, "", std::nullopt};
  }
  if (group == "models" && path.size() == 3 && path[2] == "stats") {
    if (auto e = only("GET")) return *e;
    return Statistics("", "");
  }
  if (group == "models" && path.size() == 5 && path[3] == "trace" && path[4] == "setting") {
    return TraceSetting(request, path[2]);
  }
  if (group == "models") {
    std::optional<ModelPath> model = ParseModelPath(path);
    if (model) return RouteModel(request, *model);
  }
  if (group == "repository") return RouteRepository(request);
  if (group == "systemsharedmemory") return RouteSharedMemory(request);
  if (group == "cudasharedmemory") return HttpError(absl::UnimplementedError(kCudaShmRefusal));
  if (group == "logging" && path.size() == 2) return LogSettings(request);
  if (group == "trace" && path.size() == 3 && path[2] == "setting") {
    return TraceSetting(request, "");
  }
  return HttpError(404, absl::StrCat("no such endpoint: ", where));
}

HttpReply HttpRoutes::RouteModel(const HttpRequest& request, const ModelPath& model) {
  const std::string& method = request.method;
  const std::string& where = request.where;
  const bool get = model.action != "infer";
  if (method != (get ? "GET" : "POST")) {
    return HttpError(405, absl::StrCat(where, ": use ", get ? "GET" : "POST"));
  }
  if (model.action == "stats") return Statistics(model.name, model.version);
  if (model.action == "infer") {  // InferTarget's: the endpoint answers those itself
    return HttpError(500, absl::StrCat(where, " reached the synchronous routes"));
  }
  auto ready = core_->GetReadyModel(model.name, model.version);
  if (model.action == "ready") return {ready.ok() ? 200 : 400, "", std::nullopt};
  if (!ready.ok()) return HttpError(ready.status());
  if (model.action == "config") return Json(ProtoToJson(ToTritonModelConfig(*ready->config)));
  if (!model.action.empty()) return HttpError(404, absl::StrCat("no such endpoint: ", where));
  inference::ModelMetadataResponse metadata;
  FillModelMetadata(ready->name, ready->ready_versions, *ready->config, &metadata);
  return Json(ProtoToJson(metadata));
}

// GET reads the settings; POST changes those its JSON object gives (`from_json` makes the call's
// request of it), then reads them all. `call` answers the request; `to_json` writes the answer.
template <typename CallRequest, typename CallResponse>
HttpReply HttpRoutes::SettingsCall(const HttpRequest& request,
                                   StatusOr<CallRequest> (*from_json)(const json&),
                                   const std::function<Status(CallRequest&, CallResponse*)>& call,
                                   json (*to_json)(const CallResponse&)) {
  if (request.method != "GET" && request.method != "POST") {
    return HttpError(405, absl::StrCat(request.where, ": use GET or POST"));
  }
  CallRequest settings;
  if (request.method == "POST") {
    StatusOr<json> body = ParseObject(request.body);
    if (!body.ok()) return HttpError(body.status());
    StatusOr<CallRequest> parsed = from_json(*body);
    if (!parsed.ok()) return HttpError(parsed.status());
    settings = std::move(parsed).value();
  }
  CallResponse response;
  const Status done = call(settings, &response);
  return done.ok() ? Json(to_json(response)) : HttpError(done);
}

HttpReply HttpRoutes::LogSettings(const HttpRequest& request) {
  return SettingsCall<inference::LogSettingsRequest, inference::LogSettingsResponse>(
      request, &LogSettingsFromJson,
      [this](inference::LogSettingsRequest& settings, inference::LogSettingsResponse* response) {
        return LogSettingsCall(settings, allow_log_settings_, response);
      },
      &LogSettingsToJson);
}

HttpReply HttpRoutes::TraceSetting(const HttpRequest& request, const std::string& model) {
  return SettingsCall<inference::TraceSettingRequest, inference::TraceSettingResponse>(
      request, &TraceSettingFromJson,
      [&](inference::TraceSettingRequest& settings, inference::TraceSettingResponse* response) {
        settings.set_model_name(model);
        return TraceSettingCall(settings, *core_, submitter_->tracer(), response);
      },
      &TraceSettingToJson);
}

HttpReply HttpRoutes::Statistics(const std::string& name, const std::string& version) {
  auto entries = core_->Statistics(name, version);
  if (!entries.ok()) return HttpError(entries.status());
  inference::ModelStatisticsResponse response;
  for (const ModelStatsEntry& entry : *entries) {
    FillModelStatistics(entry, response.add_model_stats());
  }
  return Json(ProtoToJson(response));
}

HttpReply HttpRoutes::RouteRepository(const HttpRequest& request) {
  const std::string& method = request.method;
  const std::vector<std::string>& path = request.path;
  const std::string& where = request.where;
  const bool index = path.size() == 3 && path[2] == "index";
  const bool control =
      path.size() == 5 && path[2] == "models" && (path[4] == "load" || path[4] == "unload");
  if (!index && !control) return HttpError(404, absl::StrCat("no such endpoint: ", where));
  if (method != "POST") return HttpError(405, absl::StrCat(where, ": use POST"));
  StatusOr<json> body = ParseObject(request.body);
  if (!body.ok()) return HttpError(body.status());
  if (index) {
    bool ready_only = false;
    if (auto it = body->find("ready"); it != body->end()) {
      if (!it->is_boolean()) return HttpError(400, "'ready' must be a boolean");
      ready_only = it->get<bool>();
    }
    json models = json::array();
    for (const ModelIndexEntry& entry : core_->RepositoryIndex(ready_only)) {
      json model = {{"name", entry.name}, {"version", entry.version}, {"state", entry.state}};
      if (!entry.reason.empty()) model["reason"] = entry.reason;
      models.push_back(std::move(model));
    }
    return Json(models);
  }
  const auto params = body->find("parameters");
  const json parameters = params == body->end() ? json::object() : *params;
  Status done;
  if (path[4] == "load") {
    StatusOr<LoadOverrides> overrides = LoadOverridesFromJson(parameters);
    done = overrides.ok() ? core_->LoadModel(path[3], *overrides) : overrides.status();
  } else {
    StatusOr<bool> dependents = UnloadDependentsFromJson(parameters);
    done = dependents.ok() ? core_->UnloadModel(path[3], *dependents) : dependents.status();
  }
  return done.ok() ? HttpReply{200, "", std::nullopt} : HttpError(done);
}

HttpReply HttpRoutes::RouteSharedMemory(const HttpRequest& request) {
  const std::string& method = request.method;
  const std::vector<std::string>& path = request.path;
  const std::string& where = request.where;
  ClientShmRegistry& shm = submitter_->client_shm();
  // v2/systemsharedmemory[/region/<name>]/<action>
  std::string region, action;
  if (path.size() == 3) {
    action = path[2];
  } else if (path.size() == 5 && path[2] == "region") {
    region = path[3];
    action = path[4];
  } else {
    return HttpError(404, absl::StrCat("no such endpoint: ", where));
  }
  if (action == "status") {
    if (method != "GET") return HttpError(405, absl::StrCat(where, ": use GET"));
    auto regions = shm.Regions(region);
    if (!regions.ok()) return HttpError(regions.status());
    json out = json::array();
    for (const auto& r : *regions) {
      out.push_back(
          {{"name", r->name}, {"key", r->key}, {"offset", r->offset}, {"byte_size", r->byte_size}});
    }
    return Json(out);
  }
  if (method != "POST") return HttpError(405, absl::StrCat(where, ": use POST"));
  if (action == "unregister") {
    const Status done = shm.Unregister(region);
    return done.ok() ? HttpReply{200, "", std::nullopt} : HttpError(done);
  }
  if (action != "register" || region.empty()) {
    return HttpError(404, absl::StrCat("no such endpoint: ", where));
  }
  StatusOr<json> body = ParseObject(request.body);
  if (!body.ok()) return HttpError(body.status());
  auto key = body->find("key");
  if (key == body->end() || !key->is_string()) {
    return HttpError(400, "register needs 'key', the name of the POSIX shared-memory object");
  }
  uint64_t fields[2] = {0, 0};
  const char* names[2] = {"offset", "byte_size"};
  for (int i = 0; i < 2; ++i) {
    auto it = body->find(names[i]);
    if (it == body->end() && i == 0) continue;  // offset defaults to 0
    if (it == body->end() || !it->is_number_unsigned()) {
      return HttpError(400,
                       absl::StrCat("register needs '", names[i], "' as a non-negative integer"));
    }
    fields[i] = it->get<uint64_t>();
  }
  const Status done = shm.Register(region, key->get<std::string>(), fields[0], fields[1]);
  return done.ok() ? HttpReply{200, "", std::nullopt} : HttpError(done);
}

}  // namespace tessera::frontend
