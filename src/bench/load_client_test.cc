// LoadClient against an in-process fake KServe v2 server: every request ends in exactly one
// outcome, and server errors come back counted by status with the server's message.
#include "load_client.h"

#include <atomic>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace tessera::bench {
namespace {

// Model "m": input "input" FP32 [-1, 4], max_batch_size 8; every 4th request fails UNAVAILABLE.
// Model "slow": as "m" but answers after 20 ms. Any other model: NOT_FOUND.
class FakeService final : public inference::GRPCInferenceService::Service {
 public:
  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* req,
                             inference::ModelMetadataResponse* resp) override {
    if (req->name() != "m" && req->name() != "slow") {
      return {grpc::StatusCode::NOT_FOUND, "unknown model '" + req->name() + "'"};
    }
    resp->set_name(req->name());
    auto* in = resp->add_inputs();
    in->set_name("input");
    in->set_datatype("FP32");
    in->add_shape(-1);
    in->add_shape(4);
    return grpc::Status::OK;
  }
  grpc::Status ModelConfig(grpc::ServerContext*, const inference::ModelConfigRequest* req,
                           inference::ModelConfigResponse* resp) override {
    resp->mutable_config()->set_name(req->name());
    resp->mutable_config()->set_max_batch_size(8);
    return grpc::Status::OK;
  }
  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* req,
                          inference::ModelInferResponse* resp) override {
    if (req->model_name() == "slow") {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } else if (req->model_name() != "m") {
      return {grpc::StatusCode::NOT_FOUND, "unknown model '" + req->model_name() + "'"};
    }
    last_bytes = req->raw_input_contents_size() ? req->raw_input_contents(0).size() : 0;
    if (++count % 4 == 0) return {grpc::StatusCode::UNAVAILABLE, "overloaded (fake)"};
    *resp->add_raw_output_contents() = req->raw_input_contents(0);
    return grpc::Status::OK;
  }
  std::atomic<int> count{0};
  std::atomic<size_t> last_bytes{0};
};

class LoadClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override { server_->Shutdown(); }

  Scenario MakeScenario(const std::string& model, double rate) {
    Scenario s;
    s.server = "127.0.0.1:" + std::to_string(port_);
    ModelLoad m;
    m.name = model;
    m.arrival = ArrivalKind::kConstant;
    m.rate = RateSchedule::Constant(rate);
    m.batch_size = 2;
    m.slo_ms = 1000;
    s.models.push_back(m);
    s.warmup_s = 0;
    s.duration_s = 0.5;
    s.drain_s = 5;
    return s;
  }

  FakeService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(LoadClientTest, ServerErrorsAreCountedByStatusWithTheirMessage) {
  auto client = LoadClient::Create(MakeScenario("m", 200));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->request_bytes()[0], 2 * 4 * 4);  // batch 2 x 4 FP32
  auto offsets = GenerateArrivals(ArrivalKind::kConstant, RateSchedule::Constant(200), 0.5, 1);
  ASSERT_EQ(offsets.size(), 100u);
  auto run = (*client)->RunOpen({offsets}, 0, 500'000'000);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(service_.last_bytes.load(), 32u);
  auto s = Summarize(run->outcomes, {"m"}, {1000}, {0, 500'000'000});
  EXPECT_EQ(s[0].intended, 100);
  EXPECT_EQ(s[0].sent, 100);
  EXPECT_EQ(s[0].ok, 75);
  EXPECT_EQ(s[0].errors.at("UNAVAILABLE"), 25);
  EXPECT_EQ(s[0].not_sent + s[0].unfinished, 0);
  ASSERT_EQ(run->error_examples.size(), 1u);
  EXPECT_EQ(run->error_examples[0].status, "UNAVAILABLE");
  EXPECT_EQ(run->error_examples[0].message, "overloaded (fake)");
  EXPECT_EQ((*client)->progress().errors.load(), 25);
}

TEST_F(LoadClientTest, UnknownModelFailsSetupUnlessInputsAreGivenThenEveryRequestIsNotFound) {
  auto refused = LoadClient::Create(MakeScenario("nope", 100));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(refused.status().message().find("model \"nope\""), absl::string_view::npos);

  Scenario s = MakeScenario("nope", 100);
  s.models[0].inputs = {{"input", "FP32", {1, 4}}};
  auto client = LoadClient::Create(s);
  ASSERT_TRUE(client.ok()) << client.status();
  auto run = (*client)->RunOpen({{0, 1'000'000, 2'000'000}}, 0, 10'000'000);
  ASSERT_TRUE(run.ok());
  auto summary = Summarize(run->outcomes, {"nope"}, {0}, {0, 10'000'000});
  EXPECT_EQ(summary[0].ok, 0);
  EXPECT_EQ(summary[0].errors.at("NOT_FOUND"), 3);
  EXPECT_DOUBLE_EQ(summary[0].violation_pct, 100);
}

TEST_F(LoadClientTest, InFlightLimitDropsAndCountsRequests) {
  Scenario s = MakeScenario("slow", 500);
  s.max_in_flight = 1;
  auto client = LoadClient::Create(s);
  ASSERT_TRUE(client.ok()) << client.status();
  auto offsets = GenerateArrivals(ArrivalKind::kConstant, RateSchedule::Constant(500), 0.1, 1);
  auto run = (*client)->RunOpen({offsets}, 0, 100'000'000);
  ASSERT_TRUE(run.ok());
  auto summary = Summarize(run->outcomes, {"slow"}, {0}, {0, 100'000'000});
  EXPECT_EQ(summary[0].intended, 50);
  EXPECT_GT(summary[0].not_sent, 30);
  EXPECT_EQ(summary[0].sent + summary[0].not_sent, 50);
  EXPECT_EQ(summary[0].ok + summary[0].error_count + summary[0].not_sent, 50);
}

TEST_F(LoadClientTest, ClosedLoopKeepsConcurrencyAndAccountsForEveryRequest) {
  Scenario s = MakeScenario("m", 0);
  s.mode = LoadMode::kClosed;
  s.duration_s = 0.3;
  auto client = LoadClient::Create(s);
  ASSERT_TRUE(client.ok()) << client.status();
  auto run = (*client)->RunClosed({2});
  ASSERT_TRUE(run.ok());
  EXPECT_GT(run->outcomes.size(), 20u);
  int64_t ok = 0, unavailable = 0;
  for (const Outcome& o : run->outcomes) {
    ASSERT_GE(o.sent_ns, 0);
    (o.code == 0 ? ok : unavailable) += 1;
    if (o.code != 0) {
      EXPECT_EQ(o.code, grpc::StatusCode::UNAVAILABLE);
    }
  }
  EXPECT_EQ(ok + unavailable, service_.count.load());
  EXPECT_EQ((*client)->progress().in_flight.load(), 0);
}

TEST(LoadClientSetupTest, UnreachableServerIsNamed) {
  Scenario s;
  s.server = "127.0.0.1:1";
  ModelLoad m;
  m.name = "m";
  s.models.push_back(m);
  auto client = LoadClient::Create(s, 0.3);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find("127.0.0.1:1"), absl::string_view::npos);
}

}  // namespace
}  // namespace tessera::bench
