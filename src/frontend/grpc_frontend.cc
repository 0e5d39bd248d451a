#include "tessera/frontend/grpc_frontend.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "config_proto.h"
#include "infer_request.h"
#include "inference/grpc_service.grpc.pb.h"
#include "spdlog/spdlog.h"
#include "tessera/common/clock.h"

namespace tessera::frontend {
namespace {

using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;

constexpr char kRefusedWhileShuttingDown[] =
    "server is shutting down: new requests are refused while accepted ones drain";

// The one place where an absl::Status becomes a gRPC status (the code numbers are identical).
grpc::Status ToGrpc(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

ServerUnaryReactor* FinishNow(CallbackServerContext* context, const Status& status) {
  ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpc(status));
  return reactor;
}

void FillDuration(const dispatch::Duration& from, inference::StatisticDuration* to) {
  to->set_count(from.count);
  to->set_ns(from.ns);
}

class InferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  InferenceService(ServerCore* core, std::string version)
      : core_(core), version_(std::move(version)) {}

  // Worded apart from every error an accepted request can get, so that a client (and the drain
  // test) can tell "refused at the door" from "accepted, then lost".
  // (DefaultReactor() may be called once per call, hence the reactor as the argument.)
  ServerUnaryReactor* RefuseWhileShuttingDown(ServerUnaryReactor* reactor) {
    last_refusal_ns_.store(MonotonicNs(), std::memory_order_relaxed);
    refused_.fetch_add(1, std::memory_order_relaxed);
    reactor->Finish(ToGrpc(absl::UnavailableError(kRefusedWhileShuttingDown)));
    return reactor;
  }

  uint64_t last_refusal_ns() const { return last_refusal_ns_.load(std::memory_order_relaxed); }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

  // Waits for detached repository-control threads (load/unload) to finish.
  void WaitForBackgroundWork() {
    std::unique_lock lock(mu_);
    background_cv_.wait(lock, [this] { return background_ == 0; });
  }

  ServerUnaryReactor* ServerLive(CallbackServerContext* context, const inference::ServerLiveRequest*,
                                 inference::ServerLiveResponse* response) override {
    response->set_live(true);
    return FinishNow(context, absl::OkStatus());
  }

  ServerUnaryReactor* ServerReady(CallbackServerContext* context,
                                  const inference::ServerReadyRequest*,
                                  inference::ServerReadyResponse* response) override {
    response->set_ready(core_->IsReady());
    return FinishNow(context, absl::OkStatus());
  }

  ServerUnaryReactor* ModelReady(CallbackServerContext* context,
                                 const inference::ModelReadyRequest* request,
                                 inference::ModelReadyResponse* response) override {
    response->set_ready(core_->GetReadyModel(request->name(), request->version()).ok());
    return FinishNow(context, absl::OkStatus());
  }

  ServerUnaryReactor* ServerMetadata(CallbackServerContext* context,
                                     const inference::ServerMetadataRequest*,
                                     inference::ServerMetadataResponse* response) override {
    response->set_name("tessera");
    response->set_version(version_);
    for (const char* extension :
         {"model_repository", "model_configuration", "binary_tensor_data", "statistics"}) {
      response->add_extensions(extension);
    }
    return FinishNow(context, absl::OkStatus());
  }

  ServerUnaryReactor* ModelMetadata(CallbackServerContext* context,
                                    const inference::ModelMetadataRequest* request,
                                    inference::ModelMetadataResponse* response) override {
    auto model = core_->GetReadyModel(request->name(), request->version());
    if (!model.ok()) return FinishNow(context, model.status());
    const repository::ModelConfig& config = *model->config;
    response->set_name(model->name);
    for (int64_t v : model->ready_versions) response->add_versions(absl::StrCat(v));
    response->set_platform(config.platform);
    auto fill = [&](const repository::TensorConfig& tensor, auto* out) {
      out->set_name(tensor.name);
      out->set_datatype(std::string(DataTypeToWireName(tensor.data_type)));
      // perf_analyzer drops the first dim when max_batch_size > 0 (serving-systems.md §2.4).
      if (config.max_batch_size > 0) out->add_shape(-1);
      for (int64_t dim : tensor.dims) out->add_shape(dim);
    };
    for (const auto& tensor : config.inputs) fill(tensor, response->add_inputs());
    for (const auto& tensor : config.outputs) fill(tensor, response->add_outputs());
    return FinishNow(context, absl::OkStatus());
  }

  ServerUnaryReactor* ModelConfig(CallbackServerContext* context,
                                  const inference::ModelConfigRequest* request,
                                  inference::ModelConfigResponse* response) override {
    auto model = core_->GetReadyModel(request->name(), request->version());
    if (!model.ok()) return FinishNow(context, model.status());
    *response->mutable_config() = ToTritonModelConfig(*model->config);
    return FinishNow(context, absl::OkStatus());
  }

  ServerUnaryReactor* ModelInfer(CallbackServerContext* context,
                                 const inference::ModelInferRequest* request,
                                 inference::ModelInferResponse* response) override {
    const uint64_t arrival_ns = MonotonicNs();
    if (!core_->IsReady()) return RefuseWhileShuttingDown(context->DefaultReactor());
    auto model = core_->GetReadyModel(request->model_name(), request->model_version());
    if (!model.ok()) return FinishNow(context, model.status());

    auto storage = std::make_shared<ConvertedInputs>();
    auto built = BuildDispatchRequest(*request, *model->config, storage.get());
    if (!built.ok()) {
      model->stats->RecordFailure("OTHER", MonotonicNs() - arrival_ns);
      return FinishNow(context, built.status());
    }
    std::unique_ptr<dispatch::Request> dispatch_request = std::move(built).value();
    dispatch_request->arrival_ns = arrival_ns;

    ServerUnaryReactor* reactor = context->DefaultReactor();
    // Set again if a reload moves the request to a newer version before it is queued.
    auto served_version = std::make_shared<int64_t>(model->version);
    // Holds only what the answer needs: capturing the queue would make it own itself.
    dispatch_request->done = [reactor, response, storage, served_version, name = model->name,
                              id = request->id()](StatusOr<dispatch::Response> result) {
      if (!result.ok()) {
        reactor->Finish(ToGrpc(result.status()));
        return;
      }
      FillInferResponse(name, *served_version, id, std::move(result).value(), response);
      reactor->Finish(grpc::Status::OK);
    };
    Status enqueued = model->queue->Enqueue(std::move(dispatch_request));
    if (enqueued.code() == absl::StatusCode::kAborted && !core_->IsReady()) {
      // Shutdown began after the check above and closed the queue: refused, not lost.
      return RefuseWhileShuttingDown(reactor);
    }
    if (enqueued.code() == absl::StatusCode::kAborted) {
      // The version was swapped out between lookup and enqueue (a reload): the new one serves it.
      auto current = core_->GetReadyModel(request->model_name(), request->model_version());
      if (current.ok()) {
        *served_version = current->version;
        enqueued = current->queue->Enqueue(std::move(dispatch_request));
      } else {
        enqueued = current.status();
      }
      if (enqueued.code() == absl::StatusCode::kAborted) {
        enqueued = absl::UnavailableError(enqueued.message());
      }
    }
    if (!enqueued.ok()) {
      model->stats->RecordFailure("REJECTED", MonotonicNs() - arrival_ns);
      reactor->Finish(ToGrpc(enqueued));
    }
    return reactor;
  }

  ServerUnaryReactor* ModelStatistics(CallbackServerContext* context,
                                      const inference::ModelStatisticsRequest* request,
                                      inference::ModelStatisticsResponse* response) override {
    auto entries = core_->Statistics(request->name(), request->version());
    if (!entries.ok()) return FinishNow(context, entries.status());
    for (const ModelStatsEntry& entry : *entries) {
      dispatch::ModelStatsSnapshot s = entry.stats->Snapshot();
      auto* out = response->add_model_stats();
      out->set_name(entry.name);
      out->set_version(absl::StrCat(entry.version));
      out->set_last_inference(s.last_inference_ms);
      out->set_inference_count(s.inference_count);
      out->set_execution_count(s.execution_count);
      auto* infer = out->mutable_inference_stats();
      FillDuration(s.success, infer->mutable_success());
      FillDuration(s.fail, infer->mutable_fail());
      FillDuration(s.queue, infer->mutable_queue());
      FillDuration(s.compute_input, infer->mutable_compute_input());
      FillDuration(s.compute_infer, infer->mutable_compute_infer());
      FillDuration(s.compute_output, infer->mutable_compute_output());
      for (const auto& [size, batch] : s.batch_stats) {
        auto* b = out->add_batch_stats();
        b->set_batch_size(static_cast<uint64_t>(size));
        FillDuration(batch.compute_input, b->mutable_compute_input());
        FillDuration(batch.compute_infer, b->mutable_compute_infer());
        FillDuration(batch.compute_output, b->mutable_compute_output());
      }
    }
    return FinishNow(context, absl::OkStatus());
  }

  ServerUnaryReactor* RepositoryIndex(CallbackServerContext* context,
                                      const inference::RepositoryIndexRequest* request,
                                      inference::RepositoryIndexResponse* response) override {
    for (const ModelIndexEntry& entry : core_->RepositoryIndex(request->ready())) {
      auto* model = response->add_models();
      model->set_name(entry.name);
      model->set_version(entry.version);
      model->set_state(entry.state);
      model->set_reason(entry.reason);
    }
    return FinishNow(context, absl::OkStatus());
  }

  ServerUnaryReactor* RepositoryModelLoad(CallbackServerContext* context,
                                          const inference::RepositoryModelLoadRequest* request,
                                          inference::RepositoryModelLoadResponse*) override {
    if (!request->parameters().empty()) {
      return FinishNow(context, absl::InvalidArgumentError(absl::StrCat(
                                    "load parameters (such as '",
                                    request->parameters().begin()->first,
                                    "') are not supported; edit the repository instead")));
    }
    return RunInBackground(context, [this, name = request->model_name()] {
      return core_->LoadModel(name);
    });
  }

  ServerUnaryReactor* RepositoryModelUnload(CallbackServerContext* context,
                                            const inference::RepositoryModelUnloadRequest* request,
                                            inference::RepositoryModelUnloadResponse*) override {
    return RunInBackground(context, [this, name = request->model_name()] {
      return core_->UnloadModel(name);
    });
  }

 private:
  // Loading can take seconds; never block a gRPC callback thread on it.
  ServerUnaryReactor* RunInBackground(CallbackServerContext* context,
                                      std::function<Status()> work) {
    ServerUnaryReactor* reactor = context->DefaultReactor();
    {
      std::lock_guard lock(mu_);
      ++background_;
    }
    std::thread([this, reactor, work = std::move(work)] {
      Status status = work();
      reactor->Finish(ToGrpc(status));
      std::lock_guard lock(mu_);
      if (--background_ == 0) background_cv_.notify_all();
    }).detach();
    return reactor;
  }

  ServerCore* core_;
  const std::string version_;
  std::mutex mu_;
  std::condition_variable background_cv_;
  int background_ = 0;
  std::atomic<uint64_t> last_refusal_ns_{0};
  std::atomic<uint64_t> refused_{0};
};

class GrpcFrontendImpl final : public GrpcFrontend {
 public:
  GrpcFrontendImpl(std::unique_ptr<InferenceService> service, std::unique_ptr<grpc::Server> server,
                   int port)
      : service_(std::move(service)), server_(std::move(server)), port_(port) {}
  ~GrpcFrontendImpl() override { Shutdown(0); }

  int port() const override { return port_; }

  void RefuseUntilQuiet(int64_t quiet_ms, int64_t max_ms) override {
    const uint64_t start_ns = MonotonicNs();
    const uint64_t quiet_ns = static_cast<uint64_t>(std::max<int64_t>(quiet_ms, 0)) * 1000000;
    const uint64_t deadline_ns =
        start_ns + static_cast<uint64_t>(std::max<int64_t>(max_ms, 0)) * 1000000;
    bool quiet = false;
    for (;;) {
      const uint64_t now = MonotonicNs();
      // Counted from the start too: a call on the wire needs time to arrive even if none has yet.
      const uint64_t quiet_until = std::max(start_ns, service_->last_refusal_ns()) + quiet_ns;
      if (now >= quiet_until) {
        quiet = true;
        break;
      }
      if (now >= deadline_ns) break;
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min(quiet_until, deadline_ns) - now));
    }
    spdlog::info("refused {} inference request(s) while shutting down; closing the endpoint ({} "
                 "after {:.0f} ms)",
                 service_->refused(), quiet ? "no more arriving" : "still arriving",
                 static_cast<double>(MonotonicNs() - start_ns) / 1e6);
  }

  void Shutdown(int64_t deadline_ms) override {
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
    service_->WaitForBackgroundWork();
    server_->Wait();
    server_.reset();
  }

 private:
  std::unique_ptr<InferenceService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_;
};

}  // namespace

StatusOr<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Start(const FrontendOptions& options,
                                                            ServerCore* core) {
  auto service = std::make_unique<InferenceService>(core, options.server_version);
  grpc::ServerBuilder builder;
  int selected_port = 0;
  const std::string address = absl::StrCat(options.grpc_address, ":", options.grpc_port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &selected_port);
  // The default 4 MiB receive limit rejects ordinary image batches (serving-systems.md §2.4).
  const int max_bytes = static_cast<int>(std::min<int64_t>(options.max_message_bytes, INT32_MAX));
  builder.SetMaxReceiveMessageSize(max_bytes);
  builder.SetMaxSendMessageSize(max_bytes);
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || selected_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ", address,
                                               " (address in use or not available)"));
  }
  spdlog::info("KServe v2 gRPC endpoint listening on {}:{}", options.grpc_address, selected_port);
  return std::unique_ptr<GrpcFrontend>(
      std::make_unique<GrpcFrontendImpl>(std::move(service), std::move(server), selected_port));
}

}  // namespace tessera::frontend
