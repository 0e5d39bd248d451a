#include "http_endpoint.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api_access.h"
#include "http_compression.h"
#include "http_json.h"
#include "http_routes.h"
#include "http_tls.h"
#include "mhd_listener.h"
#include "spdlog/spdlog.h"
#include "tessera/common/thread_name.h"

namespace tessera::frontend {
namespace {

// Connections open at once; past it libmicrohttpd stops accepting until some close. Idle ones cost
// a socket and MHD's per-connection buffer (32 KiB), no thread.
constexpr unsigned kMaxConnections = 16384;

// Runs posted tasks on a few threads with default (8 MiB) stacks: the inference path (protobuf,
// the queue, a batch sent to its executor inline) needs more than an I/O thread's.
class WorkQueue {
 public:
  explicit WorkQueue(int count) {
    for (int i = 0; i < count; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~WorkQueue() { Stop(); }

  void Post(std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(task));
    }
    ready_.notify_one();
  }

  // Runs what is queued, then joins the threads.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    ready_.notify_all();
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }

 private:
  void Loop() {
    SetCurrentThreadName("ts-http");
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mu_);
        ready_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// The way from an inference's completion back to the endpoint's workers. The completion may come
// after the endpoint stopped (it answered the request with the shutdown refusal): then `queue` is
// null and the answer is dropped.
struct Lifeline {
  std::mutex mu;
  WorkQueue* queue ABSL_GUARDED_BY(mu) = nullptr;

  void Post(std::function<void()> task) {
    std::lock_guard lock(mu);
    if (queue != nullptr) queue->Post(std::move(task));
  }
};

// One request, from its headers to its answer. libmicrohttpd keeps a pointer to a shared_ptr of it
// as the request's closure (freed when it reports the request completed); the worker and the
// inference callback hold their own.
struct Exchange {
  MHD_Connection* connection = nullptr;  // suspended from dispatch until `reply` is set
  HttpRequest request;
  int64_t declared_length = -1;  // Content-Length; -1 when none (a chunked body)
  bool body_too_large = false;   // the rest of the body is read and dropped, then 413
  bool dispatched = false;       // handed to the workers
  std::mutex mu;
  std::optional<HttpReply> reply ABSL_GUARDED_BY(mu);  // set once; the connection resumes then
  // The inflated body's share of the inflate budget, while the body is kept.
  std::unique_ptr<InflateHold> inflate_hold;
  // An inference's request and answer, kept here until the answer is rendered.
  HttpInferRequest infer;
  inference::ModelInferResponse response;
};
using ExchangePtr = std::shared_ptr<Exchange>;

std::optional<std::string> Header(MHD_Connection* connection, const char* name) {
  const char* value = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

// Queues `reply` (its body moved out) as the request's answer.
MHD_Result Queue(MHD_Connection* connection, HttpReply& reply) {
  auto* body = new std::string(std::move(reply.body));
  MHD_Response* response = MHD_create_response_from_buffer_with_free_callback_cls(
      body->size(), body->data(), [](void* cls) { delete static_cast<std::string*>(cls); }, body);
  if (response == nullptr) {
    delete body;
    return MHD_NO;
  }
  if (!body->empty()) {
    MHD_add_response_header(response, "Content-Type",
                            reply.json_length ? "application/octet-stream" : "application/json");
  }
  if (reply.encoding != HttpEncoding::kIdentity) {
    MHD_add_response_header(response, "Content-Encoding", EncodingName(reply.encoding));
  }
  if (reply.json_length) {
    MHD_add_response_header(response, "Inference-Header-Content-Length",
                            absl::StrCat(*reply.json_length).c_str());
  }
  const MHD_Result queued = MHD_queue_response(connection, reply.code, response);
  MHD_destroy_response(response);
  return queued;
}

// The URL path as sent: routes split it on '/' themselves (a %2F stays inside its segment).
size_t KeepEscapes(void*, MHD_Connection*, char* url) { return std::strlen(url); }

class HttpEndpointImpl final : public HttpEndpoint {
 public:
  HttpEndpointImpl(const FrontendOptions& options, ServerCore* core, InferSubmitter* submitter,
                   InflateBudget* inflate_budget)
      : submitter_(submitter),
        inflate_budget_(inflate_budget),
        routes_(core, submitter, options.server_version, options.allow_log_settings),
        max_body_bytes_(options.max_message_bytes),
        access_(options.http_restricted, ""),
        workers_(std::max(1, options.http_threads)),
        lifeline_(std::make_shared<Lifeline>()) {
    std::lock_guard lock(lifeline_->mu);
    lifeline_->queue = &workers_;
  }
  ~HttpEndpointImpl() override { Shutdown(0); }

  Status Listen(const FrontendOptions& options) {
    // An epoll loop reads requests and writes answers; a connection holds no thread while its
    // client is slow or idle, or while its inference runs (it is suspended until the answer).
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const unsigned io_threads = std::clamp(cores / 4, 1u, 4u);
    auto fn = [](auto f) { return reinterpret_cast<intptr_t>(f); };
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
    std::vector<MHD_OptionItem> mhd_options = {
        {MHD_OPTION_NOTIFY_COMPLETED, fn(&HttpEndpointImpl::OnCompleted), this},
        {MHD_OPTION_CONNECTION_TIMEOUT, options.http_idle_timeout_s, nullptr},
        {MHD_OPTION_CONNECTION_LIMIT, kMaxConnections, nullptr},
        {MHD_OPTION_UNESCAPE_CALLBACK, fn(&KeepEscapes), nullptr}};
    // A pool of one is no pool: libmicrohttpd warns about it on stderr.
    if (io_threads > 1) mhd_options.push_back({MHD_OPTION_THREAD_POOL_SIZE, io_threads, nullptr});
    if (options.http_tls.enabled()) {
      if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        return absl::FailedPreconditionError(
            "http.tls: this libmicrohttpd was built without TLS (GnuTLS)");
      }
      TESSERA_ASSIGN_OR_RETURN(tls_, HttpTls::Start(options.http_tls));
      flags |= MHD_USE_TLS;
      // They point into tls_, which outlives the daemon.
      for (const MHD_OptionItem& item : tls_->MhdOptions()) mhd_options.push_back(item);
    }
    if (options.http_reuse_port) {
      mhd_options.push_back({MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, nullptr});
    }
    StatusOr<MhdListener> listener = StartMhdListener(
        options.http_tls.enabled() ? "HTTPS" : "HTTP", options.http_address, options.http_port,
        flags, &HttpEndpointImpl::OnRequest, this, std::move(mhd_options));
    if (!listener.ok()) return listener.status();
    daemon_ = listener->daemon;
    port_ = listener->port;
    spdlog::info("KServe v2 HTTP endpoint listening on {}:{}{}", options.http_address, port_,
                 !options.http_tls.enabled()          ? ""
                 : options.http_tls.client_ca.empty() ? " (TLS)"
                                                      : " (TLS, client certificates required)");
    return absl::OkStatus();
  }

  int port() const override { return port_; }

  void Shutdown(int64_t deadline_ms) override {
    if (daemon_ != nullptr) StopServing(deadline_ms);
    {
      std::lock_guard lock(lifeline_->mu);
      lifeline_->queue = nullptr;
    }
    workers_.Stop();
  }

 private:
  void StopServing(int64_t deadline_ms) {
    std::set<ExchangePtr> left;
    {
      std::unique_lock lock(mu_);
      stopping_ = true;
      idle_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(deadline_ms, 0)),
                     [this] { return waiting_.empty(); });
      left = waiting_;
    }
    // Their connections resume with the refusal; an answer that comes later is dropped. Every
    // suspended connection must be resumed before libmicrohttpd stops.
    for (const ExchangePtr& exchange : left) {
      Finish(exchange, HttpError(InferSubmitter::ShuttingDown()));
    }
    MHD_stop_daemon(daemon_);
    daemon_ = nullptr;
  }

  static MHD_Result OnRequest(void* self, MHD_Connection* connection, const char* url,
                              const char* method, const char* /*version*/, const char* upload_data,
                              size_t* upload_data_size, void** closure) {
    try {
      return static_cast<HttpEndpointImpl*>(self)->Handle(connection, url, method, upload_data,
                                                          upload_data_size, closure);
    } catch (const std::exception& e) {  // nothing may escape into C code
      spdlog::error("http: {} {}: {}", method, url, e.what());
      return MHD_NO;
    }
  }

  static void OnCompleted(void*, MHD_Connection*, void** closure, MHD_RequestTerminationCode) {
    delete static_cast<ExchangePtr*>(*closure);
    *closure = nullptr;
  }

  // Called on an I/O thread: once with the headers, once per piece of body, once when the request
  // is in, and once more when a dispatched request's connection resumes with its answer.
  MHD_Result Handle(MHD_Connection* connection, const char* url, const char* method,
                    const char* upload_data, size_t* upload_data_size, void** closure) {
    auto* held = static_cast<ExchangePtr*>(*closure);
    if (held == nullptr) {
      // A TLS connection libmicrohttpd did not notify has not been held to client_ca.
      if (tls_ != nullptr && !tls_->Prepared(connection)) return MHD_NO;
      auto exchange = std::make_shared<Exchange>();
      *closure = new ExchangePtr(exchange);
      return Start(connection, url, method, *exchange);
    }
    Exchange& exchange = **held;
    if (*upload_data_size > 0) {
      Append(exchange, upload_data, *upload_data_size);
      *upload_data_size = 0;
      return MHD_YES;
    }
    {
      std::lock_guard lock(exchange.mu);
      if (exchange.reply) return Answer(connection, exchange.request, *exchange.reply);
    }
    if (exchange.dispatched) return MHD_YES;  // its answer resumes the connection
    if (exchange.body_too_large) {
      HttpReply refusal = HttpBodyError(absl::ResourceExhaustedError(absl::StrCat(
          "request body is larger than the server's limit of ", max_body_bytes_, " bytes")));
      return Answer(connection, exchange.request, refusal);
    }
    {
      std::lock_guard lock(mu_);
      if (stopping_) {
        HttpReply refusal = HttpError(InferSubmitter::ShuttingDown());
        return Answer(connection, exchange.request, refusal);
      }
      // Suspended before Shutdown can see it in waiting_: it resumes every connection there, and
      // libmicrohttpd must not stop with one still suspended.
      exchange.dispatched = true;
      exchange.connection = connection;
      MHD_suspend_connection(connection);
      waiting_.insert(*held);
    }
    workers_.Post([this, exchange = *held] { Work(exchange); });
    return MHD_YES;
  }

  // The headers are in. A body declared over the limit is refused before it is sent (libmicrohttpd
  // closes the connection after that answer, the body unread).
  MHD_Result Start(MHD_Connection* connection, const char* url, const char* method,
                   Exchange& exchange) {
    HttpRequest& request = exchange.request;
    request.method = method;
    request.path = absl::StrSplit(url, '/', absl::SkipEmpty());
    request.where = absl::StrCat(request.method, " /", absl::StrJoin(request.path, "/"));
    request.json_length = Header(connection, "Inference-Header-Content-Length");
    request.content_encoding = Header(connection, "Content-Encoding");
    request.accept_encoding = Header(connection, "Accept-Encoding");
    if (submitter_->tracer().opentelemetry()) {
      request.traceparent = Header(connection, "traceparent").value_or("");
      request.tracestate = Header(connection, "tracestate").value_or("");
    }
    // Before the body is read: a client without the header cannot make the server buffer it.
    if (std::optional<ApiGroup> api = HttpApiGroup(request.path)) {
      if (const std::string* header = access_.HeaderOf(*api)) {
        std::optional<std::string> sent = Header(connection, header->c_str());
        if (Status allowed = access_.Check(*api, sent); !allowed.ok()) {
          HttpReply refusal = HttpError(allowed);
          return Answer(connection, request, refusal);
        }
      }
    }
    if (std::optional<std::string> length = Header(connection, "Content-Length")) {
      int64_t declared = 0;
      if (!absl::SimpleAtoi(*length, &declared)) declared = -1;  // libmicrohttpd refuses it anyway
      if (declared > max_body_bytes_) {
        HttpReply refusal = HttpBodyError(absl::ResourceExhaustedError(absl::StrCat(
            "request body of ", declared, " bytes is larger than the server's limit of ",
            max_body_bytes_, " bytes (grpc.max_message_bytes in server.yaml)")));
        return Answer(connection, request, refusal);
      }
      exchange.declared_length = declared;
    }
    return MHD_YES;
  }

  // The body grows with the bytes that arrive, never ahead to the declared Content-Length: sized
  // from the header, a few connections that each claim 2 GB and send nothing took gigabytes.
  void Append(Exchange& exchange, const char* data, size_t size) {
    if (exchange.body_too_large) return;
    std::string& body = exchange.request.body;
    if (static_cast<int64_t>(body.size() + size) > max_body_bytes_) {
      exchange.body_too_large = true;
      std::string().swap(body);
      return;
    }
    if (body.capacity() < body.size() + size) {
      size_t grown = std::max(body.size() + size, 2 * body.capacity());
      if (exchange.declared_length >= 0) {
        grown = std::min(grown, static_cast<size_t>(exchange.declared_length));
      }
      body.reserve(std::max(grown, body.size() + size));
    }
    body.append(data, size);
  }

  MHD_Result Answer(MHD_Connection* connection, const HttpRequest& request, HttpReply& reply) {
    if (reply.code >= 400) {
      spdlog::debug("http {}: {} {}", request.where, reply.code, reply.body);
    }
    return Queue(connection, reply);
  }

  // On a worker: inflates the body, then routes; an inference answers from its callback.
  void Work(const ExchangePtr& exchange) {
    {
      std::lock_guard lock(exchange->mu);
      if (exchange->reply) return;  // refused at shutdown while it waited for a worker
    }
    HttpRequest& request = exchange->request;
    HttpReply reply;
    try {
      StatusOr<HttpEncoding> encoding = ParseContentEncoding(
          request.content_encoding ? request.content_encoding->c_str() : nullptr);
      if (!encoding.ok()) {
        reply = HttpError(encoding.status());
      } else if (*encoding != HttpEncoding::kIdentity &&
                 !InflateBody(*exchange, *encoding, &reply)) {
        // `reply` holds the refusal
      } else if (std::optional<ModelPath> model = InferTarget(request)) {
        if (SubmitInference(exchange, *model, &reply)) return;
      } else {
        reply = routes_.Route(request);
      }
    } catch (const std::exception& e) {
      reply =
          HttpError(500, absl::StrCat("internal error serving ", request.where, ": ", e.what()));
    }
    Finish(exchange, std::move(reply));
  }

  bool InflateBody(Exchange& exchange, HttpEncoding encoding, HttpReply* refusal) {
    HttpRequest& request = exchange.request;
    exchange.inflate_hold = std::make_unique<InflateHold>(inflate_budget_);
    StatusOr<std::string> inflated =
        Inflate(request.body, encoding, max_body_bytes_, exchange.inflate_hold.get());
    if (!inflated.ok()) {
      *refusal = HttpBodyError(inflated.status());
      return false;
    }
    request.body = std::move(inflated).value();
    return true;
  }

  // Parses and submits; true when submitted (the callback answers), else `*refusal` is set.
  bool SubmitInference(const ExchangePtr& exchange, const ModelPath& model, HttpReply* refusal) {
    const HttpRequest& request = exchange->request;
    std::optional<size_t> json_length;
    if (request.json_length) {
      size_t length = 0;
      if (!absl::SimpleAtoi(*request.json_length, &length)) {
        *refusal = HttpError(400, absl::StrCat("Inference-Header-Content-Length '",
                                               *request.json_length, "' is not a byte count"));
        return false;
      }
      json_length = length;
    }
    StatusOr<HttpInferRequest> parsed = ParseHttpInferRequest(request.body, json_length);
    if (!parsed.ok()) {
      *refusal = HttpError(parsed.status());
      return false;
    }
    exchange->infer = std::move(parsed).value();
    exchange->infer.wire.set_model_name(model.name);
    exchange->infer.wire.set_model_version(model.version);
    // The callback runs on the thread that finished the request (an executor's result reader,
    // which answers gRPC too): the answer is rendered on a worker. It touches only the exchange
    // and the lifeline, since it may come after the endpoint is gone.
    submitter_->Submit(exchange->infer.wire, &exchange->response,
                       [this, exchange, lifeline = lifeline_](const Status& status) {
                         lifeline->Post([this, exchange, status] { Render(exchange, status); });
                       },
                       {nullptr, "HTTP_RECV_END", request.traceparent, request.tracestate});
    return true;
  }

  void Render(const ExchangePtr& exchange, const Status& status) {
    if (!status.ok()) return Finish(exchange, HttpError(status));
    StatusOr<HttpBody> answer = RenderHttpInferResponse(exchange->response, exchange->infer.format);
    if (!answer.ok()) return Finish(exchange, HttpError(answer.status()));
    Finish(exchange, {200, std::move(answer->bytes), answer->json_length});
  }

  // Sets the answer (compressed if the client accepts that) and resumes the connection, once: a
  // second answer (the request's own, after the shutdown refusal) is dropped.
  void Finish(const ExchangePtr& exchange, HttpReply reply) {
    const HttpRequest& request = exchange->request;
    const HttpEncoding encoding = ChooseResponseEncoding(
        request.accept_encoding ? request.accept_encoding->c_str() : nullptr);
    if (reply.code == 200 && !reply.body.empty() && encoding != HttpEncoding::kIdentity) {
      reply.body = Deflate(reply.body, encoding);
      reply.encoding = encoding;
    }
    {
      std::lock_guard lock(exchange->mu);
      if (exchange->reply) return;
      exchange->reply = std::move(reply);
      MHD_resume_connection(exchange->connection);  // under the lock: Shutdown waits for it
    }
    std::lock_guard lock(mu_);
    waiting_.erase(exchange);
    if (waiting_.empty()) idle_.notify_all();
  }

  InferSubmitter* const submitter_;
  InflateBudget* const inflate_budget_;
  HttpRoutes routes_;
  const int64_t max_body_bytes_;
  const ApiAccess access_;  // http.restricted
  WorkQueue workers_;
  const std::shared_ptr<Lifeline> lifeline_;
  std::unique_ptr<HttpTls> tls_;  // set before the daemon starts; outlives it
  MHD_Daemon* daemon_ = nullptr;
  int port_ = -1;
  std::mutex mu_;
  std::condition_variable idle_;                        // waiting_ became empty
  std::set<ExchangePtr> waiting_ ABSL_GUARDED_BY(mu_);  // dispatched, not yet answered
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;          // new requests get the refusal
};

}  // namespace

StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(const FrontendOptions& options,
                                                            ServerCore* core,
                                                            InferSubmitter* submitter,
                                                            InflateBudget* inflate_budget) {
  auto endpoint = std::make_unique<HttpEndpointImpl>(options, core, submitter, inflate_budget);
  TESSERA_RETURN_IF_ERROR(endpoint->Listen(options));
  return std::unique_ptr<HttpEndpoint>(std::move(endpoint));
}

}  // namespace tessera::frontend
