#include "grpc_endpoint.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "api_access.h"
#include "background_calls.h"
#include "client_shm.h"
#include "config_proto.h"
#include "grpc_transport.h"
#include "inference/grpc_service.grpc.pb.h"
#include "load_parameters.h"
#include "malformed_request.h"
#include "request_tracer.h"
#include "settings_calls.h"
#include "spdlog/spdlog.h"
#include "statistics_proto.h"
#include "tessera/common/utf8.h"

namespace tessera::frontend {
namespace {

using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;

// The one place where an absl::Status becomes a gRPC status (the code numbers are identical).
// Messages may quote names from model files, which need not be UTF-8; clients decode them as such.
grpc::Status ToGrpc(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const absl::string_view message = status.message();
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      CoerceToUtf8(std::string_view(message.data(), message.size())));
}

ServerUnaryReactor* FinishNow(CallbackServerContext* context, const Status& status) {
  ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpc(status));
  return reactor;
}

class StreamInferReactor;

// Every method is served raw: gRPC's own inflation is off
// (GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION; gRPC 1.51 inflates a message whole before comparing
// it with the receive limit), so each request is parsed here by ParseRequestBytes, inflated within
// grpc.max_message_bytes and the inflate budget when it arrived compressed, and a malformed one is
// answered with INVALID_ARGUMENT naming its message type. (GRPCInferenceService::CallbackService
// with every method raw; the names are gRPC's generated ones.)
using S = inference::GRPCInferenceService;
using InferenceServiceBase = S::WithRawCallbackMethod_ServerLive<S::WithRawCallbackMethod_ServerReady<
    S::WithRawCallbackMethod_ModelReady<S::WithRawCallbackMethod_ServerMetadata<
        S::WithRawCallbackMethod_ModelMetadata<S::WithRawCallbackMethod_ModelInfer<
            S::WithRawCallbackMethod_ModelStreamInfer<S::WithRawCallbackMethod_ModelConfig<
                S::WithRawCallbackMethod_ModelStatistics<S::WithRawCallbackMethod_RepositoryIndex<
                    S::WithRawCallbackMethod_RepositoryModelLoad<
                        S::WithRawCallbackMethod_RepositoryModelUnload<
                            S::WithRawCallbackMethod_SystemSharedMemoryStatus<
                                S::WithRawCallbackMethod_SystemSharedMemoryRegister<
                                    S::WithRawCallbackMethod_SystemSharedMemoryUnregister<
                                        S::WithRawCallbackMethod_CudaSharedMemoryStatus<
                                            S::WithRawCallbackMethod_CudaSharedMemoryRegister<
                                                S::WithRawCallbackMethod_CudaSharedMemoryUnregister<
                                                    S::WithRawCallbackMethod_TraceSetting<
                                                        S::WithRawCallbackMethod_LogSettings<
                                                            S::Service>>>>>>>>>>>>>>>>>>>>;

// The raw unary method `Method`, answered at once by Answer##Method from the parsed request.
// `Api` is its ApiGroup, for grpc.restricted.
#define TESSERA_UNARY_METHOD(Method, Api)                                                        \
  ServerUnaryReactor* Method(CallbackServerContext* context, const grpc::ByteBuffer* request,    \
                             grpc::ByteBuffer* response) override {                              \
    return Unary(context, ApiGroup::Api, *request, response, &InferenceService::Answer##Method); \
  }

class InferenceService final : public InferenceServiceBase {
 public:
  InferenceService(ServerCore* core, const FrontendOptions& options, InferSubmitter* submitter,
                   InflateBudget* inflate_budget)
      : core_(core),
        inflation_{std::min<int64_t>(options.max_message_bytes, INT32_MAX), inflate_budget},
        version_(options.server_version),
        submitter_(submitter),
        client_shm_(submitter->client_shm()),
        allow_log_settings_(options.allow_log_settings),
        access_(options.grpc_restricted, "triton-grpc-protocol-") {}

  // How compressed requests are inflated (gRPC's own inflation is off).
  const RequestInflation& inflation() const { return inflation_; }

  // Waits for detached repository-control threads (load/unload) to finish.
  void WaitForBackgroundWork() { background_.Wait(); }

  TESSERA_UNARY_METHOD(ServerLive, kHealth)
  TESSERA_UNARY_METHOD(ServerReady, kHealth)
  TESSERA_UNARY_METHOD(ModelReady, kHealth)
  TESSERA_UNARY_METHOD(ServerMetadata, kMetadata)
  TESSERA_UNARY_METHOD(ModelMetadata, kMetadata)
  TESSERA_UNARY_METHOD(ModelConfig, kModelConfig)
  TESSERA_UNARY_METHOD(ModelStatistics, kStatistics)
  TESSERA_UNARY_METHOD(RepositoryIndex, kModelRepository)
  TESSERA_UNARY_METHOD(SystemSharedMemoryRegister, kSharedMemory)
  TESSERA_UNARY_METHOD(SystemSharedMemoryUnregister, kSharedMemory)
  TESSERA_UNARY_METHOD(SystemSharedMemoryStatus, kSharedMemory)
  TESSERA_UNARY_METHOD(CudaSharedMemoryRegister, kSharedMemory)
  TESSERA_UNARY_METHOD(CudaSharedMemoryUnregister, kSharedMemory)
  TESSERA_UNARY_METHOD(CudaSharedMemoryStatus, kSharedMemory)
  TESSERA_UNARY_METHOD(LogSettings, kLogging)
  TESSERA_UNARY_METHOD(TraceSetting, kTrace)

  // Model loads and unloads take seconds: answered from a thread of their own (a gRPC callback
  // thread must never block on them).
  ServerUnaryReactor* RepositoryModelLoad(CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override {
    return InBackground(context, *request, response, &InferenceService::AnswerRepositoryModelLoad);
  }
  ServerUnaryReactor* RepositoryModelUnload(CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override {
    return InBackground(context, *request, response,
                        &InferenceService::AnswerRepositoryModelUnload);
  }

  ServerUnaryReactor* ModelInfer(CallbackServerContext* context,
                                 const grpc::ByteBuffer* request_bytes,
                                 grpc::ByteBuffer* response_bytes) override {
    struct Call {
      inference::ModelInferRequest request;
      inference::ModelInferResponse response;
    };
    if (Status allowed = Allowed(context, ApiGroup::kInference); !allowed.ok()) {
      return FinishNow(context, allowed);
    }
    auto call = std::make_shared<Call>();
    if (Status parsed = ParseRequestBytes(*request_bytes, &call->request, inflation_);
        !parsed.ok()) {
      return FinishNow(context, parsed);
    }
    ServerUnaryReactor* reactor = context->DefaultReactor();
    Submit(
        call->request, &call->response,
        [reactor, call, response_bytes](const grpc::Status& status) {
          reactor->Finish(
              status.ok() ? ToGrpc(SerializeToByteBuffer(call->response, response_bytes)) : status);
        },
        context);
    return reactor;
  }

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ModelStreamInfer(
      CallbackServerContext*) override;

  // Open streams, so that a shutdown can end them itself: left to gRPC, a stream the client keeps
  // open holds Shutdown for its whole deadline and then ends as a bare "Cancelling all calls".
  // AddStream returns false once CloseStreams has run (the stream should end at once).
  bool AddStream(StreamInferReactor* stream) {
    std::lock_guard lock(streams_mu_);
    streams_.insert(stream);
    return !streams_closed_;
  }
  void RemoveStream(StreamInferReactor* stream) {
    std::lock_guard lock(streams_mu_);
    streams_.erase(stream);
  }
  // Ends every open stream with the shutdown refusal, each once its answers are written.
  void CloseStreams();

  // OK, or PERMISSION_DENIED when grpc.restricted restricts `api` and the call lacks its header.
  Status Allowed(CallbackServerContext* context, ApiGroup api) const {
    const std::string* header = access_.HeaderOf(api);
    return header == nullptr ? absl::OkStatus() : access_.Check(api, Metadata(context, *header));
  }

  // The client's metadata `key` (the first, if sent twice); nullopt when absent.
  static std::optional<std::string_view> Metadata(CallbackServerContext* context,
                                                  std::string_view key) {
    const auto& metadata = context->client_metadata();
    const auto sent = metadata.find(grpc::string_ref(key.data(), key.size()));
    if (sent == metadata.end()) return std::nullopt;
    return std::string_view(sent->second.data(), sent->second.size());
  }

  // One inference (a ModelInfer call, or one request of a stream): InferSubmitter::Submit, with
  // `finish` given a gRPC status and the call's cancellation dropping the request while queued.
  void Submit(const inference::ModelInferRequest& request, inference::ModelInferResponse* response,
              std::function<void(const grpc::Status&)> finish, CallbackServerContext* context) {
    // Past its deadline counts as cancelled even before gRPC says so: gRPC marks the call when its
    // timer thread runs, which a machine busy with inference can delay past the request's turn
    // in the queue (in CI, 15 of 16 queued requests with short deadlines still ran).
    InferSubmitter::CallContext call{
        [context] {
          return context->IsCancelled() || std::chrono::system_clock::now() > context->deadline();
        },
        "GRPC_WAITREAD_END", "", ""};
    if (submitter_->tracer().opentelemetry()) {  // W3C trace context, read only when it is used
      call.traceparent = Metadata(context, "traceparent").value_or("");
      call.tracestate = Metadata(context, "tracestate").value_or("");
    }
    // A request dropped because its deadline passed answers as gRPC would have: DEADLINE_EXCEEDED.
    submitter_->Submit(
        request, response,
        [finish = std::move(finish), context](const Status& status) {
          if (absl::IsCancelled(status) && std::chrono::system_clock::now() > context->deadline()) {
            finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                absl::StrCat("Deadline Exceeded: ", status.message())));
            return;
          }
          finish(ToGrpc(status));
        },
        std::move(call));
  }

 private:
  // Parses the request, then answers it with `answer` on this thread.
  template <typename Request, typename Response>
  ServerUnaryReactor* Unary(CallbackServerContext* context, ApiGroup api,
                            const grpc::ByteBuffer& request_bytes, grpc::ByteBuffer* response_bytes,
                            Status (InferenceService::*answer)(const Request&, Response*)) {
    Request request;
    Status status = Allowed(context, api);
    if (status.ok()) status = ParseRequestBytes(request_bytes, &request, inflation_);
    if (status.ok()) status = Respond(request, response_bytes, answer);
    return FinishNow(context, status);
  }

  // Parses the request, then answers it with `answer` on a thread of its own.
  template <typename Request, typename Response>
  ServerUnaryReactor* InBackground(CallbackServerContext* context,
                                   const grpc::ByteBuffer& request_bytes,
                                   grpc::ByteBuffer* response_bytes,
                                   Status (InferenceService::*answer)(const Request&, Response*)) {
    // Loads and unloads are the repository's only methods in the background.
    if (Status allowed = Allowed(context, ApiGroup::kModelRepository); !allowed.ok()) {
      return FinishNow(context, allowed);
    }
    auto request = std::make_shared<Request>();
    if (Status parsed = ParseRequestBytes(request_bytes, request.get(), inflation_); !parsed.ok()) {
      return FinishNow(context, parsed);
    }
    // response_bytes lives until the call is finished, which background_ does after this.
    return background_.Run(context, [this, request, response_bytes, answer] {
      return ToGrpc(Respond(*request, response_bytes, answer));
    });
  }

  // The response that `answer` fills, serialised (a raw method's answer must be, before Finish).
  template <typename Request, typename Response>
  Status Respond(const Request& request, grpc::ByteBuffer* response_bytes,
                 Status (InferenceService::*answer)(const Request&, Response*)) {
    Response response;
    TESSERA_RETURN_IF_ERROR((this->*answer)(request, &response));
    return SerializeToByteBuffer(response, response_bytes);
  }

  Status AnswerServerLive(const inference::ServerLiveRequest&,
                          inference::ServerLiveResponse* response) {
    response->set_live(true);
    return absl::OkStatus();
  }

  Status AnswerServerReady(const inference::ServerReadyRequest&,
                           inference::ServerReadyResponse* response) {
    response->set_ready(core_->HealthReady());
    return absl::OkStatus();
  }

  Status AnswerModelReady(const inference::ModelReadyRequest& request,
                          inference::ModelReadyResponse* response) {
    response->set_ready(core_->GetReadyModel(request.name(), request.version()).ok());
    return absl::OkStatus();
  }

  Status AnswerServerMetadata(const inference::ServerMetadataRequest&,
                              inference::ServerMetadataResponse* response) {
    FillServerMetadata(version_, client_shm_.enabled(), response);
    return absl::OkStatus();
  }

  Status AnswerModelMetadata(const inference::ModelMetadataRequest& request,
                             inference::ModelMetadataResponse* response) {
    TESSERA_ASSIGN_OR_RETURN(auto model, core_->GetReadyModel(request.name(), request.version()));
    FillModelMetadata(model.name, model.ready_versions, *model.config, response);
    return absl::OkStatus();
  }

  Status AnswerModelConfig(const inference::ModelConfigRequest& request,
                           inference::ModelConfigResponse* response) {
    TESSERA_ASSIGN_OR_RETURN(auto model, core_->GetReadyModel(request.name(), request.version()));
    *response->mutable_config() = ToTritonModelConfig(*model.config);
    return absl::OkStatus();
  }

  Status AnswerModelStatistics(const inference::ModelStatisticsRequest& request,
                               inference::ModelStatisticsResponse* response) {
    TESSERA_ASSIGN_OR_RETURN(auto entries, core_->Statistics(request.name(), request.version()));
    for (const ModelStatsEntry& entry : entries) {
      FillModelStatistics(entry, response->add_model_stats());
    }
    return absl::OkStatus();
  }

  Status AnswerRepositoryIndex(const inference::RepositoryIndexRequest& request,
                               inference::RepositoryIndexResponse* response) {
    for (const ModelIndexEntry& entry : core_->RepositoryIndex(request.ready())) {
      auto* model = response->add_models();
      model->set_name(CoerceToUtf8(entry.name));  // a folder name: any bytes (proto: UTF-8)
      model->set_version(entry.version);
      model->set_state(entry.state);
      model->set_reason(CoerceToUtf8(entry.reason));
    }
    return absl::OkStatus();
  }

  Status AnswerRepositoryModelLoad(const inference::RepositoryModelLoadRequest& request,
                                   inference::RepositoryModelLoadResponse*) {
    TESSERA_ASSIGN_OR_RETURN(LoadOverrides overrides, LoadOverridesFromGrpc(request.parameters()));
    return core_->LoadModel(request.model_name(), overrides);
  }

  Status AnswerRepositoryModelUnload(const inference::RepositoryModelUnloadRequest& request,
                                     inference::RepositoryModelUnloadResponse*) {
    TESSERA_ASSIGN_OR_RETURN(bool dependents, UnloadDependentsFromGrpc(request.parameters()));
    return core_->UnloadModel(request.model_name(), dependents);
  }

  Status AnswerSystemSharedMemoryRegister(
      const inference::SystemSharedMemoryRegisterRequest& request,
      inference::SystemSharedMemoryRegisterResponse*) {
    return client_shm_.Register(request.name(), request.key(), request.offset(),
                                request.byte_size());
  }

  Status AnswerSystemSharedMemoryUnregister(
      const inference::SystemSharedMemoryUnregisterRequest& request,
      inference::SystemSharedMemoryUnregisterResponse*) {
    return client_shm_.Unregister(request.name());
  }

  Status AnswerSystemSharedMemoryStatus(const inference::SystemSharedMemoryStatusRequest& request,
                                        inference::SystemSharedMemoryStatusResponse* response) {
    TESSERA_ASSIGN_OR_RETURN(auto regions, client_shm_.Regions(request.name()));
    for (const auto& region : regions) {
      auto& out = (*response->mutable_regions())[region->name];
      out.set_name(region->name);
      out.set_key(region->key);
      out.set_offset(region->offset);
      out.set_byte_size(region->byte_size);
    }
    return absl::OkStatus();
  }

  // CUDA shared memory (a client's cudaIpcMemHandle) needs the GPU-resident input pool to be worth
  // anything; until then a clear answer rather than gRPC's bare UNIMPLEMENTED.
  Status AnswerCudaSharedMemoryRegister(const inference::CudaSharedMemoryRegisterRequest&,
                                        inference::CudaSharedMemoryRegisterResponse*) {
    return absl::UnimplementedError(kCudaShmRefusal);
  }
  Status AnswerCudaSharedMemoryUnregister(const inference::CudaSharedMemoryUnregisterRequest&,
                                          inference::CudaSharedMemoryUnregisterResponse*) {
    return absl::UnimplementedError(kCudaShmRefusal);
  }
  Status AnswerCudaSharedMemoryStatus(const inference::CudaSharedMemoryStatusRequest&,
                                      inference::CudaSharedMemoryStatusResponse*) {
    return absl::UnimplementedError(kCudaShmRefusal);
  }

  // Triton's log settings, for this server process (executors keep the verbose level they were
  // started with and write to the server's standard error).
  Status AnswerLogSettings(const inference::LogSettingsRequest& request,
                           inference::LogSettingsResponse* response) {
    return LogSettingsCall(request, allow_log_settings_, response);
  }

  // Triton's trace extension at the TIMESTAMPS level: global settings, or one model's.
  Status AnswerTraceSetting(const inference::TraceSettingRequest& request,
                            inference::TraceSettingResponse* response) {
    return TraceSettingCall(request, *core_, submitter_->tracer(), response);
  }

  ServerCore* core_;
  const RequestInflation inflation_;
  const std::string version_;
  InferSubmitter* const submitter_;
  ClientShmRegistry& client_shm_;  // shared with the HTTP endpoint
  const bool allow_log_settings_;
  const ApiAccess access_;  // grpc.restricted
  std::mutex streams_mu_;
  std::set<StreamInferReactor*> streams_ ABSL_GUARDED_BY(streams_mu_);
  bool streams_closed_ ABSL_GUARDED_BY(streams_mu_) = false;
  BackgroundCalls background_;  // repository loads and unloads
};

#undef TESSERA_UNARY_METHOD

// One ModelStreamInfer call: every request read is submitted at once (reading goes on while it
// runs), and each answer is written when it is ready, in completion order (clients match them by
// `id`). A request that fails gets a ModelStreamInferResponse with error_message, and the stream
// goes on. The call finishes once the client has closed its side (or the server is shutting down)
// and every answer is written.
//
// Threads: gRPC's callbacks and the dispatch threads that finish requests; the fields below are
// guarded by mu_ (taken after the service's streams_mu_, never before). Lifetime: gRPC calls
// OnDone after Finish, which is called once, when no request is in flight, so nothing refers to
// the reactor when OnDone deletes it.
class StreamInferReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamInferReactor(InferenceService* service, CallbackServerContext* context)
      : service_(service), context_(context) {
    if (Status allowed = service_->Allowed(context, ApiGroup::kInference); !allowed.ok()) {
      {
        std::lock_guard lock(mu_);
        finished_ = true;
      }
      Finish(ToGrpc(allowed));  // never added to the service's streams
      return;
    }
    if (!service_->AddStream(this) && BeginClose(ShuttingDownStatus())) {
      Finish(ShuttingDownStatus());
      return;
    }
    StartRead(&incoming_);
  }

  static grpc::Status ShuttingDownStatus() { return ToGrpc(InferSubmitter::ShuttingDown()); }

  // Ends the stream with `status` once every answer is written. True when the caller must call
  // Finish(status) now (nothing in flight); it does so outside the service's lock.
  bool BeginClose(const grpc::Status& status) {
    std::lock_guard lock(mu_);
    if (closing_ || finished_) return false;
    closing_ = true;
    finish_status_ = status;
    return ShouldFinishLocked();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side, or the call was cancelled
      FinishIf([this] {
        reads_done_ = true;
        return ShouldFinishLocked();
      });
      return;
    }
    auto request = std::make_shared<inference::ModelInferRequest>();
    const Status parsed = ParseRequestBytes(incoming_, request.get(), service_->inflation());
    incoming_.Clear();
    auto response = std::make_shared<inference::ModelStreamInferResponse>();
    {
      std::lock_guard lock(mu_);
      // Finish was called meanwhile (shutdown): nothing more can be written on this stream.
      if (finished_) return;
      ++in_flight_;
    }
    StartRead(&incoming_);
    if (!parsed.ok()) {  // answered like any failed request; the stream goes on
      response->set_error_message(std::string(parsed.message()));
      return Send(*response);
    }
    service_->Submit(
        *request, response->mutable_infer_response(),
        [this, request, response](const grpc::Status& status) {
          if (!status.ok()) {
            response->mutable_infer_response()->Clear();
            response->mutable_infer_response()->set_model_name(request->model_name());
            response->mutable_infer_response()->set_id(request->id());
            response->set_error_message(status.error_message());
          }
          Send(*response);
        },
        context_);
  }

  void OnWriteDone(bool ok) override {
    std::shared_ptr<grpc::ByteBuffer> next;
    FinishIf([&] {
      --in_flight_;
      writing_.reset();
      if (!ok) {
        // The stream is broken (client gone): what is left cannot be delivered.
        in_flight_ -= static_cast<int64_t>(pending_.size());
        pending_.clear();
        broken_ = true;
      } else if (!pending_.empty()) {
        next = std::move(pending_.front());
        pending_.pop_front();
        writing_ = next;
      }
      return !next && ShouldFinishLocked();
    });
    if (next) StartWrite(next.get());
  }

  void OnDone() override {
    service_->RemoveStream(this);
    delete this;
  }

 private:
  void Send(const inference::ModelStreamInferResponse& answer) {
    auto response = std::make_shared<grpc::ByteBuffer>();
    if (Status encoded = SerializeToByteBuffer(answer, response.get()); !encoded.ok()) {
      inference::ModelStreamInferResponse error;
      error.set_error_message(std::string(encoded.message()));
      error.mutable_infer_response()->set_id(answer.infer_response().id());
      (void)SerializeToByteBuffer(error, response.get());
    }
    bool start = false;
    FinishIf([&] {
      if (broken_) {
        --in_flight_;
        return ShouldFinishLocked();
      }
      if (writing_) {
        pending_.push_back(response);
      } else {
        writing_ = response;
        start = true;  // only one write may be outstanding, and none is
      }
      return false;
    });
    if (start) StartWrite(response.get());
  }

  // Runs `decide` under mu_; if it says so, calls Finish after releasing the lock.
  template <typename Decide>
  void FinishIf(Decide decide) {
    grpc::Status status;
    {
      std::lock_guard lock(mu_);
      if (!decide()) return;
      status = finish_status_;
    }
    Finish(status);
  }

  bool ShouldFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || !(reads_done_ || closing_) || in_flight_ > 0 || writing_) return false;
    finished_ = true;
    return true;
  }

  InferenceService* const service_;
  CallbackServerContext* const context_;  // lives until OnDone, after every answer
  grpc::ByteBuffer incoming_;             // the read in progress (one at a time)
  std::mutex mu_;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // read, not yet written or dropped
  std::shared_ptr<grpc::ByteBuffer> writing_ ABSL_GUARDED_BY(mu_);  // encoded answers
  std::deque<std::shared_ptr<grpc::ByteBuffer>> pending_ ABSL_GUARDED_BY(mu_);
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;  // the server ends the stream (shutdown)
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish called or about to be
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* InferenceService::ModelStreamInfer(
    CallbackServerContext* context) {
  return new StreamInferReactor(this, context);
}

void InferenceService::CloseStreams() {
  std::vector<StreamInferReactor*> finish_now;
  {
    std::lock_guard lock(streams_mu_);
    streams_closed_ = true;
    for (StreamInferReactor* stream : streams_) {
      if (stream->BeginClose(StreamInferReactor::ShuttingDownStatus()))
        finish_now.push_back(stream);
    }
  }
  // Safe outside the lock: a stream that BeginClose claimed cannot reach OnDone before Finish.
  for (StreamInferReactor* stream : finish_now)
    stream->Finish(StreamInferReactor::ShuttingDownStatus());
}

class GrpcEndpointImpl final : public GrpcEndpoint {
 public:
  GrpcEndpointImpl(std::unique_ptr<InferenceService> service, std::unique_ptr<grpc::Server> server,
                   int port)
      : service_(std::move(service)), server_(std::move(server)), port_(port) {}
  ~GrpcEndpointImpl() override { Shutdown(0); }

  int port() const override { return port_; }

  void StopServing() override {
    std::lock_guard lock(health_mu_);
    stopped_serving_ = true;
    if (server_ && server_->GetHealthCheckService() != nullptr) {
      server_->GetHealthCheckService()->SetServingStatus(false);
    }
  }

  void SetHealth(bool serving) override {
    std::lock_guard lock(health_mu_);
    if (stopped_serving_) return;
    if (server_ && server_->GetHealthCheckService() != nullptr) {
      server_->GetHealthCheckService()->SetServingStatus(serving);
    }
  }

  void Shutdown(int64_t deadline_ms) override {
    if (!server_) return;
    {
      std::lock_guard lock(health_mu_);  // no SetHealth on a server going away
      stopped_serving_ = true;
    }
    service_->CloseStreams();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
    service_->WaitForBackgroundWork();
    server_->Wait();
    server_.reset();
  }

 private:
  std::unique_ptr<InferenceService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_;
  std::mutex health_mu_;
  bool stopped_serving_ = false;  // guarded by health_mu_
};

}  // namespace

StatusOr<std::unique_ptr<GrpcEndpoint>> GrpcEndpoint::Start(const FrontendOptions& options,
                                                            ServerCore* core,
                                                            InferSubmitter* submitter,
                                                            InflateBudget* inflate_budget) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                           GrpcCredentials(options.grpc_tls));
  auto service = std::make_unique<InferenceService>(core, options, submitter, inflate_budget);
  // grpc.health.v1.Health (Kubernetes' gRPC probes, grpc_health_probe), as Triton serves it:
  // SERVING while ServerCore::HealthReady (Frontend::RefreshHealth), NOT_SERVING from the
  // shutdown's drain on.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int selected_port = 0;
  const std::string address = absl::StrCat(options.grpc_address, ":", options.grpc_port);
  builder.AddListeningPort(address, credentials, &selected_port);
  ApplyGrpcTransportOptions(options, &builder);
  builder.RegisterService(service.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(MakeUnknownMethodInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || selected_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for gRPC on ", address, " (address in use or not available)"));
  }
  spdlog::info("KServe v2 gRPC endpoint listening on {}:{}{}", options.grpc_address, selected_port,
               !options.grpc_tls.enabled()          ? ""
               : options.grpc_tls.client_ca.empty() ? " (TLS)"
                                                    : " (TLS, client certificates required)");
  return std::unique_ptr<GrpcEndpoint>(
      std::make_unique<GrpcEndpointImpl>(std::move(service), std::move(server), selected_port));
}

}  // namespace tessera::frontend
