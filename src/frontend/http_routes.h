// The KServe v2 HTTP routes, transport aside: a request as parsed from the wire, the reply it
// gets, and every route that answers at once (health, metadata, config, statistics, repository,
// shared memory, log and trace settings). Inference answers later: http_endpoint.cc runs it
// through the InferSubmitter. Errors answer as Triton's HTTP endpoint does, {"error": message}.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "http_compression.h"
#include "infer_submitter.h"
#include "nlohmann/json.hpp"
#include "tessera/common/server_config.h"
#include "tessera/common/status.h"
#include "tessera/frontend/server_core.h"

namespace tessera::frontend {

struct HttpReply {
  int code = 200;
  std::string body;
  std::optional<size_t> json_length;  // Inference-Header-Content-Length (before compression)
  HttpEncoding encoding = HttpEncoding::kIdentity;  // of `body`
};

// What a route needs of a request; the body is the whole body, inflated.
struct HttpRequest {
  std::string method;
  std::vector<std::string> path;
  std::string where;  // "METHOD /path", for messages
  std::string body;
  std::optional<std::string> json_length;  // the Inference-Header-Content-Length header
  std::optional<std::string> content_encoding;
  std::optional<std::string> accept_encoding;
  // W3C trace context headers ("" when absent), for an inference's OpenTelemetry trace.
  std::string traceparent;
  std::string tracestate;
};

// The part of a URL path after /v2/models/<name>[/versions/<version>].
struct ModelPath {
  std::string name;
  std::string version;  // "" = the latest ready one
  std::string action;   // "" (metadata), ready, config, stats, infer
};

// HTTP status codes as Triton's HTTP endpoint answers them; the message is in the body either way.
int HttpCodeOf(absl::StatusCode code);
HttpReply HttpError(const Status& status);
HttpReply HttpError(int code, const std::string& message);
// A body's errors: one over the size limit (RESOURCE_EXHAUSTED) is 413 Payload Too Large.
HttpReply HttpBodyError(const Status& status);

// The model of an inference request (POST /v2/models/<name>[/versions/<v>]/infer); nullopt for
// any other request, Route's.
std::optional<ModelPath> InferTarget(const HttpRequest& request);

// The API group of a request path, for http.restricted (api_access.h); nullopt for a path no
// route answers.
std::optional<ApiGroup> HttpApiGroup(const std::vector<std::string>& path);

class HttpRoutes {
 public:
  // `core` and `submitter` must outlive the routes.
  HttpRoutes(ServerCore* core, InferSubmitter* submitter, std::string server_version,
             bool allow_log_settings)
      : core_(core),
        submitter_(submitter),
        version_(std::move(server_version)),
        allow_log_settings_(allow_log_settings) {}

  // Every request but InferTarget's. May block (a model load), so not on an I/O thread.
  HttpReply Route(const HttpRequest& request);

 private:
  HttpReply RouteModel(const HttpRequest& request, const ModelPath& model);
  template <typename CallRequest, typename CallResponse>
  HttpReply SettingsCall(const HttpRequest& request,
                         StatusOr<CallRequest> (*from_json)(const nlohmann::json&),
                         const std::function<Status(CallRequest&, CallResponse*)>& call,
                         nlohmann::json (*to_json)(const CallResponse&));
  HttpReply LogSettings(const HttpRequest& request);
  HttpReply TraceSetting(const HttpRequest& request, const std::string& model);
  HttpReply Statistics(const std::string& name, const std::string& version);
  HttpReply RouteRepository(const HttpRequest& request);
  HttpReply RouteSharedMemory(const HttpRequest& request);

  ServerCore* const core_;
  InferSubmitter* const submitter_;
  const std::string version_;
  const bool allow_log_settings_;
};

}  // namespace tessera::frontend
