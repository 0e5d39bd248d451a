// tessera-bare-server: the floor for Tessera's frontend overhead (bench/frontend_overhead.py).
//
// A bare grpc++ callback server speaking just enough KServe v2 for tessera-bench and tritonclient:
// ServerLive/Ready, ServerMetadata, ModelReady, ModelMetadata, ModelConfig and ModelInfer, which
// answers every request at once with a copy of its first input as output "output" (same datatype
// and shape), on the calling gRPC thread. No queue, no batching, no executor process: whatever
// Tessera adds on top of this is its frontend, dispatch and IPC overhead. Server settings match
// Tessera's frontend (callback API, INT32_MAX message size).
//
// With --answer-thread the handler only queues the finished response, and one thread of its own
// calls Finish: the least any server pays whose answers come from somewhere other than the gRPC
// thread that received the request (a worker, an executor's reader). Against Tessera it separates
// that gRPC cost, which Tessera shares, from Tessera's own queueing and IPC.
//
// With --blocking-handler N the service is gRPC's synchronous one (up to N polling threads) and
// ModelInfer's handler blocks until one thread of the server's own releases it, then returns: the
// answer leaves from the gRPC thread that received the request, as it would in a Tessera whose
// handlers wait for their executor's result. (Measured against --answer-thread in
// bench/results/2026-11-22-frontend-gap-instructions-and-wakeups.md: slower.)

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <iostream>
#include <mutex>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "grpcpp/grpcpp.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tessera/common/mutex_mode.h"

namespace {

using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;

struct Options {
  std::string model = "identity";
  std::string datatype = "FP32";
  std::vector<int64_t> dims = {256};
  int64_t max_batch_size = 8;
  bool answer_thread = false;
};

// Releases queued items from its own thread, in arrival order: `release(item)` for each.
template <typename Item, typename Release>
class ReleaseThread {
 public:
  explicit ReleaseThread(Release release)
      : release_(std::move(release)), thread_([this] { Loop(); }) {}
  ~ReleaseThread() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void Post(Item item) {
    bool was_empty = false;
    {
      std::lock_guard lock(mu_);
      was_empty = queue_.empty();
      queue_.push_back(item);
    }
    if (was_empty) cv_.notify_one();
  }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::deque<Item> ready;
      ready.swap(queue_);
      lock.unlock();
      for (Item item : ready) release_(item);
      lock.lock();
    }
  }

  Release release_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::thread thread_;  // last: Loop runs on the members above
};

// --answer-thread: Finish on a queued reactor.
struct FinishReactor {
  void operator()(ServerUnaryReactor* reactor) const { reactor->Finish(grpc::Status::OK); }
};
using AnswerThread = ReleaseThread<ServerUnaryReactor*, FinishReactor>;
// --blocking-handler: wake the handler waiting on the flag.
struct WakeHandler {
  void operator()(std::atomic<bool>* done) const {
    done->store(true);
    done->notify_one();
  }
};
using WakeThread = ReleaseThread<std::atomic<bool>*, WakeHandler>;

// The answers, shared by the callback and the synchronous service.
void FillModelMetadata(const Options& o, inference::ModelMetadataResponse* r) {
  r->set_name(o.model);
  r->add_versions("1");
  r->set_platform("bare");
  for (const char* name : {"input", "output"}) {
    auto* t = std::string(name) == "input" ? r->add_inputs() : r->add_outputs();
    t->set_name(name);
    t->set_datatype(o.datatype);
    if (o.max_batch_size > 0) t->add_shape(-1);
    for (int64_t d : o.dims) t->add_shape(d);
  }
}

void FillModelConfig(const Options& o, inference::ModelConfigResponse* r) {
  auto* config = r->mutable_config();
  config->set_name(o.model);
  config->set_platform("bare");
  config->set_max_batch_size(static_cast<int32_t>(o.max_batch_size));
}

grpc::Status NotFound(const std::string& name) {
  return {grpc::StatusCode::NOT_FOUND, "unknown model '" + name + "'"};
}

// The copy of the first input as output "output", or the error to answer with.
grpc::Status FillInfer(const Options& o, const inference::ModelInferRequest* q,
                       inference::ModelInferResponse* r) {
  if (q->model_name() != o.model) return NotFound(q->model_name());
  if (q->inputs_size() < 1 || q->raw_input_contents_size() < 1) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "expected one input in raw_input_contents"};
  }
  r->set_model_name(o.model);
  r->set_model_version("1");
  r->set_id(q->id());
  auto* out = r->add_outputs();
  out->set_name("output");
  out->set_datatype(q->inputs(0).datatype());
  *out->mutable_shape() = q->inputs(0).shape();
  *r->add_raw_output_contents() = q->raw_input_contents(0);
  return grpc::Status::OK;
}

ServerUnaryReactor* Finish(CallbackServerContext* context, grpc::Status status) {
  ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

class BareService final : public inference::GRPCInferenceService::CallbackService {
 public:
  explicit BareService(Options options) : o_(std::move(options)) {
    if (o_.answer_thread) answers_ = std::make_unique<AnswerThread>(FinishReactor{});
  }

  ServerUnaryReactor* ServerLive(CallbackServerContext* c, const inference::ServerLiveRequest*,
                                 inference::ServerLiveResponse* r) override {
    r->set_live(true);
    return Finish(c, grpc::Status::OK);
  }
  ServerUnaryReactor* ServerReady(CallbackServerContext* c, const inference::ServerReadyRequest*,
                                  inference::ServerReadyResponse* r) override {
    r->set_ready(true);
    return Finish(c, grpc::Status::OK);
  }
  ServerUnaryReactor* ModelReady(CallbackServerContext* c, const inference::ModelReadyRequest* q,
                                 inference::ModelReadyResponse* r) override {
    r->set_ready(q->name() == o_.model);
    return Finish(c, grpc::Status::OK);
  }
  ServerUnaryReactor* ServerMetadata(CallbackServerContext* c,
                                     const inference::ServerMetadataRequest*,
                                     inference::ServerMetadataResponse* r) override {
    r->set_name("tessera-bare-server");
    r->set_version("0");
    return Finish(c, grpc::Status::OK);
  }
  ServerUnaryReactor* ModelMetadata(CallbackServerContext* c,
                                    const inference::ModelMetadataRequest* q,
                                    inference::ModelMetadataResponse* r) override {
    if (q->name() != o_.model) return Finish(c, NotFound(q->name()));
    FillModelMetadata(o_, r);
    return Finish(c, grpc::Status::OK);
  }
  ServerUnaryReactor* ModelConfig(CallbackServerContext* c, const inference::ModelConfigRequest* q,
                                  inference::ModelConfigResponse* r) override {
    if (q->name() != o_.model) return Finish(c, NotFound(q->name()));
    FillModelConfig(o_, r);
    return Finish(c, grpc::Status::OK);
  }
  ServerUnaryReactor* ModelInfer(CallbackServerContext* c, const inference::ModelInferRequest* q,
                                 inference::ModelInferResponse* r) override {
    if (grpc::Status status = FillInfer(o_, q, r); !status.ok()) return Finish(c, status);
    if (answers_) {
      ServerUnaryReactor* reactor = c->DefaultReactor();
      answers_->Post(reactor);
      return reactor;
    }
    return Finish(c, grpc::Status::OK);
  }

 private:
  Options o_;
  std::unique_ptr<AnswerThread> answers_;
};

// --blocking-handler: gRPC's synchronous API; ModelInfer waits for the wake thread.
class BlockingService final : public inference::GRPCInferenceService::Service {
 public:
  explicit BlockingService(Options options) : o_(std::move(options)), wakes_(WakeHandler{}) {}

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* r) override {
    r->set_live(true);
    return grpc::Status::OK;
  }
  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* r) override {
    r->set_ready(true);
    return grpc::Status::OK;
  }
  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* q,
                          inference::ModelReadyResponse* r) override {
    r->set_ready(q->name() == o_.model);
    return grpc::Status::OK;
  }
  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* q,
                             inference::ModelMetadataResponse* r) override {
    if (q->name() != o_.model) return NotFound(q->name());
    FillModelMetadata(o_, r);
    return grpc::Status::OK;
  }
  grpc::Status ModelConfig(grpc::ServerContext*, const inference::ModelConfigRequest* q,
                           inference::ModelConfigResponse* r) override {
    if (q->name() != o_.model) return NotFound(q->name());
    FillModelConfig(o_, r);
    return grpc::Status::OK;
  }
  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* q,
                          inference::ModelInferResponse* r) override {
    if (grpc::Status status = FillInfer(o_, q, r); !status.ok()) return status;
    std::atomic<bool> done{false};
    wakes_.Post(&done);
    done.wait(false);
    return grpc::Status::OK;
  }

 private:
  Options o_;
  WakeThread wakes_;
};

}  // namespace

int main(int argc, char** argv) {
  // The same process set-up as tessera-server, so that the comparison is of the serving path only.
  tessera::DisableMutexDeadlockDetection();
  Options options;
  std::string address = "0.0.0.0";
  int port = 8101;
  CLI::App app{
      "tessera-bare-server: a bare grpc++ KServe v2 server whose ModelInfer copies the "
      "input (the floor for frontend overhead)"};
  app.add_option("--address", address, "Listen address");
  app.add_option("--grpc-port", port, "gRPC port (0 = any; the chosen port is printed)");
  app.add_option("--model", options.model, "The one model name served");
  app.add_option("--datatype", options.datatype, "Input datatype reported by metadata");
  app.add_option("--dims", options.dims, "Input dims without the batch dimension");
  app.add_option("--max-batch-size", options.max_batch_size, "Reported max_batch_size");
  app.add_flag("--answer-thread", options.answer_thread,
               "Finish every ModelInfer from one thread of its own, not the gRPC thread");
  int blocking_pollers = 0;
  app.add_option("--blocking-handler", blocking_pollers,
                 "Synchronous API with up to this many polling threads; ModelInfer blocks until a "
                 "thread of the server's own releases it (0 = the callback API)")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  std::unique_ptr<BareService> callback_service;
  std::unique_ptr<BlockingService> blocking_service;
  grpc::ServerBuilder builder;
  int selected = 0;
  builder.AddListeningPort(address + ":" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &selected);
  builder.SetMaxReceiveMessageSize(INT32_MAX);
  builder.SetMaxSendMessageSize(INT32_MAX);
  if (blocking_pollers > 0) {
    blocking_service = std::make_unique<BlockingService>(options);
    builder.RegisterService(blocking_service.get());
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                                blocking_pollers);
  } else {
    callback_service = std::make_unique<BareService>(options);
    builder.RegisterService(callback_service.get());
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || selected == 0) {
    std::cerr << "tessera-bare-server: error: cannot listen on " << address << ":" << port << "\n";
    return 1;
  }
  std::cout << "tessera-bare-server: serving model '" << options.model << "' on " << address << ":"
            << selected << std::endl;
  // Stop on SIGTERM/SIGINT: a waiter thread sees the signal and shuts the server down.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    server->Shutdown();
  });
  server->Wait();
  waiter.join();
  return 0;
}
