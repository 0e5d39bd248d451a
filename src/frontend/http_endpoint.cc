#include "http_endpoint.h"

#include <civetweb.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client_shm.h"
#include "config_proto.h"
#include "http_compression.h"
#include "http_json.h"
#include "http_settings.h"
#include "settings_calls.h"
#include "spdlog/spdlog.h"
#include "statistics_proto.h"

namespace tessera::frontend {
namespace {

using nlohmann::json;

struct HttpReply {
  int code = 200;
  std::string body;
  std::optional<size_t> json_length;  // Inference-Header-Content-Length (before compression)
  HttpEncoding encoding = HttpEncoding::kIdentity;  // of `body`
};

// Status codes as Triton's HTTP endpoint answers them; the message is in the body either way.
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

HttpReply Error(const Status& status) {
  return {HttpCodeOf(status.code()), ErrorJson(std::string(status.message())), std::nullopt};
}
HttpReply Error(int code, const std::string& message) {
  return {code, ErrorJson(message), std::nullopt};
}
// ReadBody's errors: a body over the size limit is 413 Payload Too Large.
HttpReply BodyError(const Status& status) {
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    return Error(413, std::string(status.message()));
  }
  return Error(status);
}
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

// The part of a URL path after /v2/models/<name>[/versions/<version>].
struct ModelPath {
  std::string name;
  std::string version;  // "" = the latest ready one
  std::string action;   // "" (metadata), ready, config, stats, infer
};

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

// What a route needs of a request: the body is read (POST only) before routing.
struct HttpRequest {
  std::string method;
  std::vector<std::string> path;
  std::string where;  // "METHOD /path", for messages
  std::string body;
  std::optional<std::string> json_length;  // the Inference-Header-Content-Length header
  std::optional<std::string> content_encoding;
  std::optional<std::string> accept_encoding;
};

// Runs each task on a thread with the default stack (8 MiB), the caller waiting: civetweb's
// worker threads have 100 KiB, too little for the inference path (protobuf, the queue, a batch
// sent to its executor inline). One thread per civetweb worker, so a task never waits for one.
class TaskThreads {
 public:
  explicit TaskThreads(int count) {
    for (int i = 0; i < count; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~TaskThreads() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    ready_.notify_all();
    for (std::thread& thread : threads_) thread.join();
  }

  void Run(const std::function<void()>& task) {
    Job job;
    job.task = &task;
    {
      std::lock_guard lock(mu_);
      queue_.push_back(&job);
    }
    ready_.notify_one();
    std::unique_lock lock(job.mu);
    job.cv.wait(lock, [&] { return job.done; });
  }

 private:
  struct Job {
    const std::function<void()>* task = nullptr;
    std::mutex mu;
    std::condition_variable cv;
    bool done ABSL_GUARDED_BY(mu) = false;
  };

  void Loop() {
    for (;;) {
      Job* job = nullptr;
      {
        std::unique_lock lock(mu_);
        ready_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = queue_.front();
        queue_.pop_front();
      }
      (*job->task)();
      std::lock_guard lock(job->mu);  // notified under the lock: the waiter owns `job`
      job->done = true;
      job->cv.notify_one();
    }
  }

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<Job*> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// One inference in progress: its handler thread waits until `status` is set or it is abandoned.
struct Call {
  HttpInferRequest request;
  inference::ModelInferResponse response;
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Status> status ABSL_GUARDED_BY(mu);
  bool abandoned ABSL_GUARDED_BY(mu) = false;
};

class HttpEndpointImpl final : public HttpEndpoint {
 public:
  HttpEndpointImpl(const FrontendOptions& options, ServerCore* core, InferSubmitter* submitter)
      : core_(core),
        submitter_(submitter),
        version_(options.server_version),
        max_body_bytes_(options.max_message_bytes),
        allow_log_settings_(options.allow_log_settings) {}
  ~HttpEndpointImpl() override { Shutdown(0); }

  Status Listen(const FrontendOptions& options) {
    const std::string ports = absl::StrCat(options.http_address, ":", options.http_port);
    const std::string threads = absl::StrCat(std::max(1, options.http_threads));
    // Idle keep-alive connections hold a worker thread in civetweb: let them go after 5 s.
    const char* config[] = {"listening_ports",
                            ports.c_str(),
                            "num_threads",
                            threads.c_str(),
                            "enable_keep_alive",
                            "yes",
                            "keep_alive_timeout_ms",
                            "5000",
                            "tcp_nodelay",
                            "1",
                            nullptr};
    tasks_ = std::make_unique<TaskThreads>(std::max(1, options.http_threads));
    mg_callbacks callbacks{};
    callbacks.log_message = [](const mg_connection*, const char* message) {
      spdlog::debug("http: {}", message);
      return 1;
    };
    context_ = mg_start(&callbacks, this, config);
    if (context_ == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen for HTTP on ", ports, " (address in use or not available)"));
    }
    mg_set_request_handler(context_, "/", &HttpEndpointImpl::Handle, this);
    mg_server_port port{};
    if (mg_get_server_ports(context_, 1, &port) == 1) port_ = port.port;
    spdlog::info("KServe v2 HTTP endpoint listening on {}:{}", options.http_address, port_);
    return absl::OkStatus();
  }

  int port() const override { return port_; }

  void Shutdown(int64_t deadline_ms) override {
    if (context_ == nullptr) return;
    {
      std::unique_lock lock(mu_);
      stopping_ = true;
      idle_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(deadline_ms, 0)),
                     [this] { return waiting_.empty(); });
      for (Call* call : waiting_) {  // answered with the refusal; their requests finish unseen
        std::lock_guard call_lock(call->mu);
        call->abandoned = true;
        call->cv.notify_one();
      }
    }
    mg_stop(context_);
    context_ = nullptr;
  }

 private:
  static int Handle(mg_connection* conn, void* self) {
    return static_cast<HttpEndpointImpl*>(self)->Serve(conn);
  }

  int Serve(mg_connection* conn) {
    const mg_request_info* info = mg_get_request_info(conn);
    HttpRequest request;
    request.method = info->request_method ? info->request_method : "";
    const std::string uri = info->local_uri_raw ? info->local_uri_raw : "";
    request.path = absl::StrSplit(uri, '/', absl::SkipEmpty());
    request.where = absl::StrCat(request.method, " /", absl::StrJoin(request.path, "/"));
    if (const char* header = mg_get_header(conn, "Inference-Header-Content-Length")) {
      request.json_length = header;
    }
    if (const char* header = mg_get_header(conn, "Content-Encoding")) {
      request.content_encoding = header;
    }
    if (const char* header = mg_get_header(conn, "Accept-Encoding")) {
      request.accept_encoding = header;
    }
    HttpReply reply;
    bool continued = false;  // "100 Continue" was sent
    StatusOr<std::string> body =
        request.method == "POST" ? ReadBody(conn, &continued) : std::string();
    if (body.ok()) {
      request.body = std::move(body).value();
      tasks_->Run([&] {
        try {
          reply = Answer(request);
        } catch (const std::exception& e) {
          // Nothing may escape into civetweb, which would end the process: a bug answers 500.
          reply =
              Error(500, absl::StrCat("internal error serving ", request.where, ": ", e.what()));
        }
      });
    } else {
      reply = BodyError(body.status());
    }
    const std::string& method = request.method;
    if (reply.code >= 400) spdlog::debug("http {} {}: {} {}", method, uri, reply.code, reply.body);
    Send(conn, reply, continued);
    return reply.code;
  }

  // Inflates a compressed body, routes, and compresses the answer if the client accepts that.
  HttpReply Answer(HttpRequest& request) {
    StatusOr<HttpEncoding> encoding = ParseContentEncoding(
        request.content_encoding ? request.content_encoding->c_str() : nullptr);
    if (!encoding.ok()) return Error(encoding.status());
    if (*encoding != HttpEncoding::kIdentity) {
      StatusOr<std::string> inflated = Inflate(request.body, *encoding, max_body_bytes_);
      if (!inflated.ok()) return BodyError(inflated.status());
      request.body = std::move(inflated).value();
    }
    HttpReply reply = Route(request);
    const HttpEncoding answer_encoding = ChooseResponseEncoding(
        request.accept_encoding ? request.accept_encoding->c_str() : nullptr);
    if (reply.code == 200 && !reply.body.empty() && answer_encoding != HttpEncoding::kIdentity) {
      reply.body = Deflate(reply.body, answer_encoding);
      reply.encoding = answer_encoding;
    }
    return reply;
  }

  HttpReply Route(const HttpRequest& request) {
    const std::string& method = request.method;
    const std::vector<std::string>& path = request.path;
    const std::string& where = request.where;
    auto only = [&](const char* allowed) -> std::optional<HttpReply> {
      if (method == allowed) return std::nullopt;
      return Error(405, absl::StrCat(where, ": use ", allowed));
    };
    if (path.empty() || path[0] != "v2") {
      return Error(404, absl::StrCat("no such endpoint: ", where, " (KServe v2 paths start /v2)"));
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
      return {path[2] == "live" || core_->IsReady() ? 200 : 400, "", std::nullopt};
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
    if (group == "cudasharedmemory") return Error(absl::UnimplementedError(kCudaShmRefusal));
    if (group == "logging" && path.size() == 2) return LogSettings(request);
    if (group == "trace" && path.size() == 3 && path[2] == "setting") {
      return TraceSetting(request, "");
    }
    return Error(404, absl::StrCat("no such endpoint: ", where));
  }

  HttpReply RouteModel(const HttpRequest& request, const ModelPath& model) {
    const std::string& method = request.method;
    const std::string& where = request.where;
    const bool get = model.action != "infer";
    if (method != (get ? "GET" : "POST")) {
      return Error(405, absl::StrCat(where, ": use ", get ? "GET" : "POST"));
    }
    if (model.action == "stats") return Statistics(model.name, model.version);
    if (model.action == "infer") return Infer(request, model);
    auto ready = core_->GetReadyModel(model.name, model.version);
    if (model.action == "ready") return {ready.ok() ? 200 : 400, "", std::nullopt};
    if (!ready.ok()) return Error(ready.status());
    if (model.action == "config") return Json(ProtoToJson(ToTritonModelConfig(*ready->config)));
    if (!model.action.empty()) return Error(404, absl::StrCat("no such endpoint: ", where));
    inference::ModelMetadataResponse metadata;
    FillModelMetadata(ready->name, ready->ready_versions, *ready->config, &metadata);
    return Json(ProtoToJson(metadata));
  }

  // GET reads the settings; POST changes those its JSON object gives (`from_json` makes the call's
  // request of it), then reads them all. `call` answers the request; `to_json` writes the answer.
  template <typename CallRequest, typename CallResponse>
  HttpReply SettingsCall(const HttpRequest& request,
                         StatusOr<CallRequest> (*from_json)(const json&),
                         const std::function<Status(CallRequest&, CallResponse*)>& call,
                         json (*to_json)(const CallResponse&)) {
    if (request.method != "GET" && request.method != "POST") {
      return Error(405, absl::StrCat(request.where, ": use GET or POST"));
    }
    CallRequest settings;
    if (request.method == "POST") {
      StatusOr<json> body = ParseObject(request.body);
      if (!body.ok()) return Error(body.status());
      StatusOr<CallRequest> parsed = from_json(*body);
      if (!parsed.ok()) return Error(parsed.status());
      settings = std::move(parsed).value();
    }
    CallResponse response;
    const Status done = call(settings, &response);
    return done.ok() ? Json(to_json(response)) : Error(done);
  }

  HttpReply LogSettings(const HttpRequest& request) {
    return SettingsCall<inference::LogSettingsRequest, inference::LogSettingsResponse>(
        request, &LogSettingsFromJson,
        [this](inference::LogSettingsRequest& settings, inference::LogSettingsResponse* response) {
          return LogSettingsCall(settings, allow_log_settings_, response);
        },
        &LogSettingsToJson);
  }

  HttpReply TraceSetting(const HttpRequest& request, const std::string& model) {
    return SettingsCall<inference::TraceSettingRequest, inference::TraceSettingResponse>(
        request, &TraceSettingFromJson,
        [&](inference::TraceSettingRequest& settings, inference::TraceSettingResponse* response) {
          settings.set_model_name(model);
          return TraceSettingCall(settings, *core_, submitter_->tracer(), response);
        },
        &TraceSettingToJson);
  }

  HttpReply Statistics(const std::string& name, const std::string& version) {
    auto entries = core_->Statistics(name, version);
    if (!entries.ok()) return Error(entries.status());
    inference::ModelStatisticsResponse response;
    for (const ModelStatsEntry& entry : *entries) {
      FillModelStatistics(entry, response.add_model_stats());
    }
    return Json(ProtoToJson(response));
  }

  HttpReply RouteRepository(const HttpRequest& request) {
    const std::string& method = request.method;
    const std::vector<std::string>& path = request.path;
    const std::string& where = request.where;
    const bool index = path.size() == 3 && path[2] == "index";
    const bool control =
        path.size() == 5 && path[2] == "models" && (path[4] == "load" || path[4] == "unload");
    if (!index && !control) return Error(404, absl::StrCat("no such endpoint: ", where));
    if (method != "POST") return Error(405, absl::StrCat(where, ": use POST"));
    StatusOr<json> body = ParseObject(request.body);
    if (!body.ok()) return Error(body.status());
    if (index) {
      bool ready_only = false;
      if (auto it = body->find("ready"); it != body->end()) {
        if (!it->is_boolean()) return Error(400, "'ready' must be a boolean");
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
    if (path[4] == "load") {
      if (auto params = body->find("parameters");
          params != body->end() && !(params->is_object() && params->empty())) {
        return Error(400, "load parameters are not supported; edit the repository instead");
      }
    }
    const Status done = path[4] == "load" ? core_->LoadModel(path[3]) : core_->UnloadModel(path[3]);
    return done.ok() ? HttpReply{200, "", std::nullopt} : Error(done);
  }

  HttpReply RouteSharedMemory(const HttpRequest& request) {
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
      return Error(404, absl::StrCat("no such endpoint: ", where));
    }
    if (action == "status") {
      if (method != "GET") return Error(405, absl::StrCat(where, ": use GET"));
      auto regions = shm.Regions(region);
      if (!regions.ok()) return Error(regions.status());
      json out = json::array();
      for (const auto& r : *regions) {
        out.push_back({{"name", r->name},
                       {"key", r->key},
                       {"offset", r->offset},
                       {"byte_size", r->byte_size}});
      }
      return Json(out);
    }
    if (method != "POST") return Error(405, absl::StrCat(where, ": use POST"));
    if (action == "unregister") {
      const Status done = shm.Unregister(region);
      return done.ok() ? HttpReply{200, "", std::nullopt} : Error(done);
    }
    if (action != "register" || region.empty()) {
      return Error(404, absl::StrCat("no such endpoint: ", where));
    }
    StatusOr<json> body = ParseObject(request.body);
    if (!body.ok()) return Error(body.status());
    auto key = body->find("key");
    if (key == body->end() || !key->is_string()) {
      return Error(400, "register needs 'key', the name of the POSIX shared-memory object");
    }
    uint64_t fields[2] = {0, 0};
    const char* names[2] = {"offset", "byte_size"};
    for (int i = 0; i < 2; ++i) {
      auto it = body->find(names[i]);
      if (it == body->end() && i == 0) continue;  // offset defaults to 0
      if (it == body->end() || !it->is_number_unsigned()) {
        return Error(400,
                     absl::StrCat("register needs '", names[i], "' as a non-negative integer"));
      }
      fields[i] = it->get<uint64_t>();
    }
    const Status done = shm.Register(region, key->get<std::string>(), fields[0], fields[1]);
    return done.ok() ? HttpReply{200, "", std::nullopt} : Error(done);
  }

  HttpReply Infer(const HttpRequest& request, const ModelPath& model) {
    std::optional<size_t> json_length;
    if (request.json_length) {
      size_t length = 0;
      if (!absl::SimpleAtoi(*request.json_length, &length)) {
        return Error(400, absl::StrCat("Inference-Header-Content-Length '", *request.json_length,
                                       "' is not a byte count"));
      }
      json_length = length;
    }
    StatusOr<HttpInferRequest> parsed = ParseHttpInferRequest(request.body, json_length);
    if (!parsed.ok()) return Error(parsed.status());
    auto call = std::make_shared<Call>();
    call->request = std::move(parsed).value();
    call->request.wire.set_model_name(model.name);
    call->request.wire.set_model_version(model.version);
    {
      std::lock_guard lock(mu_);
      if (stopping_) return Error(InferSubmitter::ShuttingDown());
      waiting_.insert(call.get());
    }
    // Touches only the call: after an abandoned wait, the answer may come once the endpoint is
    // gone.
    submitter_->Submit(
        call->request.wire, &call->response,
        [call](const Status& status) {
          std::lock_guard lock(call->mu);
          call->status = status;
          call->cv.notify_one();
        },
        nullptr);
    Status status;
    {
      std::unique_lock lock(call->mu);
      call->cv.wait(lock, [&] { return call->status.has_value() || call->abandoned; });
      status = call->status.value_or(InferSubmitter::ShuttingDown());
    }
    {
      std::lock_guard lock(mu_);
      waiting_.erase(call.get());
      if (waiting_.empty()) idle_.notify_all();
    }
    if (!status.ok()) return Error(status);
    StatusOr<HttpBody> answer = RenderHttpInferResponse(call->response, call->request.format);
    if (!answer.ok()) return Error(answer.status());
    return {200, std::move(answer->bytes), answer->json_length};
  }

  // The request body as sent (perhaps compressed), up to the endpoint's size limit.
  StatusOr<std::string> ReadBody(mg_connection* conn, bool* continued) {
    const long long length = mg_get_request_info(conn)->content_length;
    if (length > max_body_bytes_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("request body of ", length, " bytes is larger than the server's limit of ",
                       max_body_bytes_, " bytes (grpc.max_message_bytes in server.yaml)"));
    }
    // A client that asked may wait (curl: 1 s) for leave to send the body; civetweb does not
    // answer this for request handlers.
    if (const char* expect = mg_get_header(conn, "Expect");
        expect != nullptr && absl::EqualsIgnoreCase(expect, "100-continue")) {
      mg_printf(conn, "HTTP/1.1 100 Continue\r\n\r\n");
      *continued = true;
    }
    // Read straight into the string: civetweb's worker threads have small stacks. It grows with
    // the bytes that arrive, never ahead to the declared Content-Length: sized from the header,
    // a few connections that each claim 2 GB and send nothing took gigabytes (one took 1.1 GB
    // within 3 s) and could get the server killed for memory.
    constexpr size_t kFirstChunk = 1 << 20;
    std::string body;
    size_t got = 0;
    for (;;) {
      if (body.size() - got < 4096) {
        const size_t grown = std::max(kFirstChunk, 4 * body.size());
        body.resize(length >= 0 ? std::min(grown, static_cast<size_t>(length) + 1) : grown);
      }
      const int n =
          mg_read(conn, body.data() + got, std::min<size_t>(body.size() - got, INT32_MAX));
      if (n <= 0) break;
      got += static_cast<size_t>(n);
      if (static_cast<int64_t>(got) > max_body_bytes_) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "request body is larger than the server's limit of ", max_body_bytes_, " bytes"));
      }
    }
    body.resize(got);
    if (length >= 0 && body.size() != static_cast<size_t>(length)) {
      return absl::InvalidArgumentError(
          absl::StrCat("request body ended after ", body.size(), " of its ", length, " bytes"));
    }
    return body;
  }

  static void Send(mg_connection* conn, const HttpReply& reply, bool continued) {
    const char* type = reply.json_length ? "application/octet-stream" : "application/json";
    if (continued) {
      // civetweb counts the interim "100 Continue" as the response's start and refuses its
      // header calls after it: the final header is written here (and the connection closed).
      std::string header =
          absl::StrCat("HTTP/1.1 ", reply.code, " ", mg_get_response_code_text(conn, reply.code),
                       "\r\nContent-Length: ", reply.body.size(), "\r\n");
      if (!reply.body.empty()) absl::StrAppend(&header, "Content-Type: ", type, "\r\n");
      if (reply.encoding != HttpEncoding::kIdentity) {
        absl::StrAppend(&header, "Content-Encoding: ", EncodingName(reply.encoding), "\r\n");
      }
      if (reply.json_length) {
        absl::StrAppend(&header, "Inference-Header-Content-Length: ", *reply.json_length, "\r\n");
      }
      absl::StrAppend(&header, "Connection: close\r\n\r\n");
      mg_write(conn, header.data(), header.size());
    } else {
      mg_response_header_start(conn, reply.code);
      if (!reply.body.empty()) mg_response_header_add(conn, "Content-Type", type, -1);
      if (reply.encoding != HttpEncoding::kIdentity) {
        mg_response_header_add(conn, "Content-Encoding", EncodingName(reply.encoding), -1);
      }
      mg_response_header_add(conn, "Content-Length", absl::StrCat(reply.body.size()).c_str(), -1);
      if (reply.json_length) {
        mg_response_header_add(conn, "Inference-Header-Content-Length",
                               absl::StrCat(*reply.json_length).c_str(), -1);
      }
      mg_response_header_send(conn);
    }
    if (!reply.body.empty()) mg_write(conn, reply.body.data(), reply.body.size());
  }

  ServerCore* const core_;
  InferSubmitter* const submitter_;
  const std::string version_;
  const int64_t max_body_bytes_;
  const bool allow_log_settings_;
  std::unique_ptr<TaskThreads> tasks_;
  mg_context* context_ = nullptr;
  int port_ = -1;
  std::mutex mu_;
  std::condition_variable idle_;                  // waiting_ became empty
  std::set<Call*> waiting_ ABSL_GUARDED_BY(mu_);  // inferences whose handler waits
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;    // no new inference is accepted
};

}  // namespace

StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(const FrontendOptions& options,
                                                            ServerCore* core,
                                                            InferSubmitter* submitter) {
  auto endpoint = std::make_unique<HttpEndpointImpl>(options, core, submitter);
  TESSERA_RETURN_IF_ERROR(endpoint->Listen(options));
  return std::unique_ptr<HttpEndpoint>(std::move(endpoint));
}

}  // namespace tessera::frontend
