// The gRPC endpoint during a shutdown: ModelInfer is refused with one recognisable message, a call
// that races the start of the shutdown is refused rather than lost, and RefuseUntilQuiet keeps the
// endpoint up while calls are still arriving; grpc.health.v1.Health turns NOT_SERVING when the
// drain begins. A real grpc++ server and client on loopback; the server behind them is a fake.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "inference/grpc_service.grpc.pb.h"
#include "tessera/frontend/frontend.h"

namespace tessera::frontend {
namespace {

constexpr char kRefusal[] = "server is shutting down: new requests are refused";

// Test double: the queue below never forms a batch (it accepts nothing).
class NeverRunsRunnerForTest : public dispatch::BatchRunner {
 public:
  StatusOr<std::vector<dispatch::Response>> Run(
      const std::vector<const dispatch::Request*>&) override {
    return absl::InternalError("a closed queue ran a batch");
  }
  std::string Describe() const override { return "never runs"; }
};

// Test double: one model "m" (FP32 [1], max batch 4) whose queue has stopped accepting, as
// BeginShutdown leaves it. `ready_checks_before_shutdown` IsReady calls answer true, later ones
// false: 1 puts the shutdown between the frontend's readiness check and its Enqueue.
class FakeShuttingDownCoreForTest : public ServerCore {
 public:
  explicit FakeShuttingDownCoreForTest(int ready_checks_before_shutdown)
      : ready_checks_left_(ready_checks_before_shutdown) {
    auto config = std::make_shared<repository::ModelConfig>();
    config->name = "m";
    config->max_batch_size = 4;
    config->inputs.push_back({"x", DataType::kFp32, Shape{1}});
    config->outputs.push_back({"y", DataType::kFp32, Shape{1}});
    model_.name = "m";
    model_.version = 1;
    model_.ready_versions = {1};
    model_.config = config;
    model_.stats = std::make_shared<dispatch::ModelStats>();
    std::vector<std::unique_ptr<dispatch::BatchRunner>> runners;
    runners.push_back(std::make_unique<NeverRunsRunnerForTest>());
    dispatch::ModelQueueOptions options;
    options.model_label = "m/1";
    model_.queue =
        std::make_shared<dispatch::ModelQueue>(options, std::move(runners), model_.stats);
    model_.queue->StopAccepting();
  }

  bool IsReady() const override { return ready_checks_left_.fetch_sub(1) > 0; }
  StatusOr<ReadyModel> GetReadyModel(const std::string& name, const std::string&) const override {
    if (name != "m") return absl::NotFoundError(name);
    return model_;
  }
  std::vector<ModelIndexEntry> RepositoryIndex(bool) const override { return {}; }
  Status LoadModel(const std::string&, const LoadOverrides&) override {
    return absl::UnimplementedError("fake");
  }
  Status UnloadModel(const std::string&, bool) override { return absl::UnimplementedError("fake"); }
  StatusOr<std::vector<ModelStatsEntry>> Statistics(const std::string&,
                                                    const std::string&) const override {
    return std::vector<ModelStatsEntry>{};
  }

 private:
  mutable std::atomic<int> ready_checks_left_;
  ReadyModel model_;
};

class FrontendShutdownTest : public ::testing::Test {
 protected:
  void Start(int ready_checks_before_shutdown) {
    core_ = std::make_unique<FakeShuttingDownCoreForTest>(ready_checks_before_shutdown);
    FrontendOptions options;
    options.grpc_address = "127.0.0.1";
    options.grpc_port = 0;
    options.metrics_port = 0;
    auto frontend = Frontend::Start(options, core_.get());
    ASSERT_TRUE(frontend.ok()) << frontend.status();
    frontend_ = std::move(frontend).value();
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(frontend_->grpc_port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = inference::GRPCInferenceService::NewStub(channel_);
  }

  // grpc.health.v1.Health/Check for the server ("") as the bytes of its HealthCheckResponse
  // (field 1, status: 1 SERVING, 2 NOT_SERVING), or the call's error.
  std::string HealthCheck() {
    grpc::GenericStub stub(channel_);
    grpc::CompletionQueue cq;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Slice empty("", 0);  // HealthCheckRequest{service: ""}: no bytes, but a message
    grpc::ByteBuffer request(&empty, 1), response;
    auto call = stub.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", request, &cq);
    call->StartCall();
    grpc::Status status;
    call->Finish(&response, &status, nullptr);
    void* tag = nullptr;
    bool ok = false;
    cq.Next(&tag, &ok);
    if (!status.ok()) return "error: " + status.error_message();
    std::vector<grpc::Slice> slices;
    (void)response.Dump(&slices);
    std::string bytes;
    for (const grpc::Slice& slice : slices) {
      bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    return bytes;
  }

  grpc::Status Infer() {
    inference::ModelInferRequest request;
    request.set_model_name("m");
    auto* input = request.add_inputs();
    input->set_name("x");
    input->set_datatype("FP32");
    input->add_shape(1);
    input->add_shape(1);
    request.add_raw_input_contents(std::string(sizeof(float), '\0'));
    inference::ModelInferResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->ModelInfer(&context, request, &response);
  }

  std::unique_ptr<FakeShuttingDownCoreForTest> core_;
  std::unique_ptr<Frontend> frontend_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

TEST_F(FrontendShutdownTest, HealthCheckServiceSaysServingUntilTheDrainBegins) {
  Start(1000);
  EXPECT_EQ(HealthCheck(), std::string("\x08\x01", 2));  // SERVING
  frontend_->StopServing();
  EXPECT_EQ(HealthCheck(), std::string("\x08\x02", 2));  // NOT_SERVING
}

TEST_F(FrontendShutdownTest, InferenceIsRefusedWithTheShutdownMessage) {
  Start(0);
  grpc::Status status = Infer();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(status.error_message().find(kRefusal), std::string::npos) << status.error_message();
}

TEST_F(FrontendShutdownTest, ACallThatMissesTheClosingQueueIsRefusedNotFailedAsUnloading) {
  Start(1);  // the readiness check passes, then the queue refuses: the shutdown came in between
  grpc::Status status = Infer();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(status.error_message().find(kRefusal), std::string::npos) << status.error_message();
}

TEST_F(FrontendShutdownTest, RefuseUntilQuietWaitsWhileCallsArriveAndStopsAtItsLimit) {
  Start(0);
  using Clock = std::chrono::steady_clock;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> last_answer_ns{0};
  std::atomic<int> refused{0};
  const auto client_stop = Clock::now() + std::chrono::milliseconds(400);
  std::thread client([&] {
    while (!stop && Clock::now() < client_stop) {
      if (Infer().error_code() == grpc::StatusCode::UNAVAILABLE) ++refused;
      last_answer_ns = Clock::now().time_since_epoch().count();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  // Quiet means no call for 300 ms: it cannot come while the client sends every ~5 ms.
  frontend_->RefuseUntilQuiet(300, 10000);
  const int64_t returned_ns = Clock::now().time_since_epoch().count();
  client.join();
  // How many calls fit in the client's 400 ms depends on the machine's load (a loaded 2-core CI
  // machine managed 10): what matters is that they were refused and waited out.
  EXPECT_GT(refused.load(), 0);
  EXPECT_GE(returned_ns, last_answer_ns.load()) << "returned while calls were still arriving";

  // A client that never stops cannot hold the shutdown past the limit.
  std::thread endless([&] {
    while (!stop) Infer();
  });
  const auto start = Clock::now();
  frontend_->RefuseUntilQuiet(300, 200);
  const auto waited = Clock::now() - start;
  stop = true;
  endless.join();
  EXPECT_LT(waited, std::chrono::seconds(5));
}

}  // namespace
}  // namespace tessera::frontend
