#include "tessera/dispatch/model_queue.h"
#include "model_queue_test_requests.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>

namespace tessera::dispatch {
namespace {

// Test double: answers each request with its own first input's first float, after an optional
// pause, and records the batch sizes it saw.
class FakeRunnerForTest : public BatchRunner {
 public:
  explicit FakeRunnerForTest(std::chrono::milliseconds pause, bool fail = false)
      : pause_(pause), fail_(fail) {}
  StatusOr<std::vector<Response>> Run(const std::vector<const Request*>& batch) override {
    std::this_thread::sleep_for(pause_);
    {
      std::lock_guard lock(mu);
      batch_sizes.push_back(batch.size());
    }
    if (fail_) return absl::InternalError("fake runner failure");
    std::vector<Response> responses;
    for (const Request* request : batch) {
      Response response;
      OutputTensor out{"y", DataType::kFp32, {1}, std::string(4, '\0')};
      std::memcpy(out.bytes.data(), request->inputs[0].data, 4);
      response.outputs.push_back(std::move(out));
      response.timing.compute_infer_ns = 1000;
      responses.push_back(std::move(response));
    }
    return responses;
  }
  std::string Describe() const override { return "fake"; }

  std::mutex mu;
  std::vector<size_t> batch_sizes;

 private:
  std::chrono::milliseconds pause_;
  bool fail_;
};

// A queue of one fake runner taking one request per batch, each `pause` long.
struct OneAtATime {
  explicit OneAtATime(std::chrono::milliseconds pause) {
    auto runner = std::make_unique<FakeRunnerForTest>(pause);
    fake = runner.get();
    std::vector<std::unique_ptr<BatchRunner>> runners;
    runners.push_back(std::move(runner));
    queue = std::make_unique<ModelQueue>(
        ModelQueueOptions{"m/1", BatchPolicyOptions{true, 1, {}, 0}, 0}, std::move(runners), stats);
  }
  std::shared_ptr<ModelStats> stats = std::make_shared<ModelStats>();
  FakeRunnerForTest* fake = nullptr;  // owned by the queue
  std::unique_ptr<ModelQueue> queue;
};

TEST(ModelQueueTest, ConcurrentRequestsAreBatchedAndAnsweredInOrder) {
  auto runner = std::make_unique<FakeRunnerForTest>(std::chrono::milliseconds(20));
  FakeRunnerForTest* fake = runner.get();
  std::vector<std::unique_ptr<BatchRunner>> runners;
  runners.push_back(std::move(runner));
  auto stats = std::make_shared<ModelStats>();
  ModelQueueOptions options{"m/1", BatchPolicyOptions{true, 8, {}, 5'000'000}, 0};
  ModelQueue queue(options, std::move(runners), stats);

  std::vector<Submitted> submitted(20);
  for (size_t i = 0; i < submitted.size(); ++i) {
    submitted[i].value = {static_cast<float>(i)};
    ASSERT_TRUE(queue.Enqueue(MakeRequest(submitted[i])).ok());
  }
  for (size_t i = 0; i < submitted.size(); ++i) {
    auto result = submitted[i].promise.get_future().get();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(FirstFloat(*result), static_cast<float>(i));
  }
  std::lock_guard lock(fake->mu);
  EXPECT_LT(fake->batch_sizes.size(), 20u);  // batching merged requests
  for (size_t size : fake->batch_sizes) EXPECT_LE(size, 8u);
  ModelStatsSnapshot snap = stats->Snapshot();
  EXPECT_EQ(snap.inference_count, 20u);
  EXPECT_EQ(snap.success.count, 20u);
  EXPECT_EQ(snap.queue.count, 20u);
  EXPECT_EQ(snap.execution_count, fake->batch_sizes.size());
  EXPECT_EQ(snap.pending, 0u);
}

TEST(ModelQueueTest, RequestsTheirClientsGaveUpOnAreNotRun) {
  // One request per batch, each 30 ms: the first runs while the rest wait; two clients have given
  // up (set before they are queued, so no timing decides it), and those are answered CANCELLED
  // when their turn comes, without running.
  OneAtATime one(std::chrono::milliseconds(30));
  ModelQueue& queue = *one.queue;
  const std::shared_ptr<ModelStats>& stats = one.stats;
  FakeRunnerForTest* fake = one.fake;
  std::vector<Submitted> submitted(4);
  std::atomic<bool> gave_up{true};
  for (size_t i = 0; i < submitted.size(); ++i) {
    submitted[i].value = static_cast<float>(i);
    auto request = MakeRequest(submitted[i]);
    if (i == 1 || i == 2) request->cancelled = [&gave_up] { return gave_up.load(); };
    ASSERT_TRUE(queue.Enqueue(std::move(request)).ok());
  }
  EXPECT_TRUE(submitted[0].promise.get_future().get().ok());
  for (size_t i : {1, 2}) {
    StatusOr<Response> result = submitted[i].promise.get_future().get();
    EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
    EXPECT_NE(result.status().message().find("request cancelled by the client while queued"),
              std::string::npos)
        << result.status();
  }
  EXPECT_EQ(FirstFloat(*submitted[3].promise.get_future().get()), 3.0f);
  std::lock_guard lock(fake->mu);
  EXPECT_EQ(fake->batch_sizes.size(), 2u);  // requests 0 and 3
  ModelStatsSnapshot snap = stats->Snapshot();
  EXPECT_EQ(snap.failures_by_reason["CANCELED"], 2u);
  EXPECT_EQ(snap.success.count, 2u);
  EXPECT_EQ(snap.pending, 0u);
}

TEST(ModelQueueTest, RequestsPastTheirQueueTimeoutAreRejectedNotRun) {
  // One request per batch, each 50 ms; the second may wait 10 ms, so it times out behind the
  // first; the third has no timeout and runs.
  OneAtATime one(std::chrono::milliseconds(50));
  ModelQueue& queue = *one.queue;
  const std::shared_ptr<ModelStats>& stats = one.stats;
  FakeRunnerForTest* fake = one.fake;
  std::vector<Submitted> submitted(3);
  for (size_t i = 0; i < submitted.size(); ++i) {
    submitted[i].value = static_cast<float>(i);
    auto request = MakeRequest(submitted[i]);
    if (i == 1) request->queue_timeout_ns = 10'000'000;
    ASSERT_TRUE(queue.Enqueue(std::move(request)).ok());
  }
  EXPECT_TRUE(submitted[0].promise.get_future().get().ok());
  StatusOr<Response> timed_out = submitted[1].promise.get_future().get();
  EXPECT_EQ(timed_out.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(timed_out.status().message().find("request timeout expired"), std::string::npos)
      << timed_out.status();
  EXPECT_EQ(FirstFloat(*submitted[2].promise.get_future().get()), 2.0f);
  std::lock_guard lock(fake->mu);
  EXPECT_EQ(fake->batch_sizes.size(), 2u);
  EXPECT_EQ(stats->Snapshot().failures_by_reason["REJECTED"], 1u);
}

TEST(ModelQueueTest, HigherPriorityLevelsAreBatchedFirstArrivalOrderWithinALevel) {
  // One request per 40 ms batch: they run by level (1 first), each level in arrival order. The
  // first is of level 1 too, so whether it is still queued when the others come does not matter.
  OneAtATime one(std::chrono::milliseconds(40));
  ModelQueue& queue = *one.queue;
  const std::vector<uint32_t> levels = {1, 3, 2, 1, 3, 1};
  std::vector<Submitted> submitted(levels.size());
  std::mutex order_mu;
  std::vector<float> order;
  for (size_t i = 0; i < levels.size(); ++i) {
    submitted[i].value = static_cast<float>(i);
    auto request = MakeRequest(submitted[i]);
    request->priority = levels[i];
    request->done = [&, i](StatusOr<Response> r) {
      {
        std::lock_guard lock(order_mu);
        order.push_back(static_cast<float>(i));
      }
      submitted[i].promise.set_value(std::move(r));
    };
    ASSERT_TRUE(queue.Enqueue(std::move(request)).ok());
  }
  for (auto& s : submitted) ASSERT_TRUE(s.promise.get_future().get().ok());
  std::lock_guard lock(order_mu);
  EXPECT_EQ(order, (std::vector<float>{0, 3, 5, 2, 1, 4}));
}

TEST(ModelQueueTest, RunnerFailureFailsEveryRequestOfTheBatch) {
  std::vector<std::unique_ptr<BatchRunner>> runners;
  runners.push_back(std::make_unique<FakeRunnerForTest>(std::chrono::milliseconds(0), true));
  auto stats = std::make_shared<ModelStats>();
  ModelQueue queue({"m/1", BatchPolicyOptions{true, 4, {}, 0}, 0}, std::move(runners), stats);
  std::vector<Submitted> submitted(3);
  for (auto& s : submitted) {
    s.value = {1};
    ASSERT_TRUE(queue.Enqueue(MakeRequest(s)).ok());
  }
  for (auto& s : submitted) {
    auto result = s.promise.get_future().get();
    ASSERT_FALSE(result.ok());
    EXPECT_NE(result.status().message().find("fake runner failure"), std::string::npos);
  }
  EXPECT_EQ(stats->Snapshot().fail.count, 3u);
  EXPECT_EQ(stats->Snapshot().failures_by_reason["BACKEND"], 3u);
}

TEST(ModelQueueTest, FullQueueRejectsAndStoppedQueueRefuses) {
  std::vector<std::unique_ptr<BatchRunner>> runners;
  runners.push_back(std::make_unique<FakeRunnerForTest>(std::chrono::milliseconds(200)));
  auto stats = std::make_shared<ModelStats>();
  ModelQueue queue({"m/1", BatchPolicyOptions{}, 1}, std::move(runners), stats);
  std::vector<Submitted> submitted(3);
  for (auto& s : submitted) s.value = {1};
  ASSERT_TRUE(queue.Enqueue(MakeRequest(submitted[0])).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // first one is running now
  ASSERT_TRUE(queue.Enqueue(MakeRequest(submitted[1])).ok());
  Status full = queue.Enqueue(MakeRequest(submitted[2]));
  EXPECT_EQ(full.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(full.message().find("full"), std::string::npos);

  queue.StopAccepting();
  Submitted late;
  late.value = {1};
  EXPECT_EQ(queue.Enqueue(MakeRequest(late)).code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(queue.WaitIdle(5000));
  EXPECT_TRUE(submitted[0].promise.get_future().get().ok());
  EXPECT_TRUE(submitted[1].promise.get_future().get().ok());
}

TEST(ModelQueueTest, EachPriorityLevelHasItsOwnQueueLimit) {
  std::vector<std::unique_ptr<BatchRunner>> runners;
  runners.push_back(std::make_unique<FakeRunnerForTest>(std::chrono::milliseconds(300)));
  auto stats = std::make_shared<ModelStats>();
  ModelQueueOptions options{"m/1", BatchPolicyOptions{}, 2};  // levels without a policy: 2
  options.max_queue_size_by_level[1] = 1;
  ModelQueue queue(options, std::move(runners), stats);
  std::vector<Submitted> submitted(7);
  auto enqueue = [&](size_t i, uint32_t level) {
    submitted[i].value = {1};
    auto request = MakeRequest(submitted[i]);
    request->priority = level;
    return queue.Enqueue(std::move(request));
  };
  ASSERT_TRUE(enqueue(0, 2).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the first one is running now
  EXPECT_TRUE(enqueue(1, 1).ok());
  Status full = enqueue(2, 1);  // level 1 holds one
  EXPECT_EQ(full.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(full.message(), "queue of model 'm/1' is full (max_queue_size 1 at priority level 1)");
  EXPECT_TRUE(enqueue(3, 2).ok());  // the other levels count their own
  EXPECT_TRUE(enqueue(4, 2).ok());
  EXPECT_EQ(enqueue(5, 2).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(queue.WaitIdle(10000));
  EXPECT_TRUE(enqueue(6, 1).ok());  // room again once the queue has drained
  EXPECT_TRUE(queue.WaitIdle(10000));
  for (size_t i : {0, 1, 3, 4, 6}) EXPECT_TRUE(submitted[i].promise.get_future().get().ok()) << i;
}

TEST(ModelQueueTest, ShutdownFailsQueuedRequests) {
  std::vector<std::unique_ptr<BatchRunner>> runners;
  runners.push_back(std::make_unique<FakeRunnerForTest>(std::chrono::milliseconds(100)));
  auto stats = std::make_shared<ModelStats>();
  auto queue = std::make_unique<ModelQueue>(ModelQueueOptions{"m/1", BatchPolicyOptions{}, 0},
                                            std::move(runners), stats);
  std::vector<Submitted> submitted(4);
  for (auto& s : submitted) {
    s.value = {1};
    ASSERT_TRUE(queue->Enqueue(MakeRequest(s)).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  queue->Shutdown("test shutdown");
  int ok = 0, abandoned = 0;
  for (auto& s : submitted) {
    auto result = s.promise.get_future().get();
    if (result.ok()) {
      ++ok;
    } else {
      EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
      EXPECT_NE(result.status().message().find("test shutdown"), std::string::npos);
      ++abandoned;
    }
  }
  EXPECT_EQ(ok + abandoned, 4);
  EXPECT_GE(abandoned, 1);
}

TEST(ShapeKeyTest, RaggedInputsDoNotKeepRequestsApart) {
  float data[8] = {};
  auto request = [&](int64_t tokens, int64_t width) {
    Request r;
    r.inputs.push_back(TensorView{"tokens", DataType::kFp32, {1, tokens}, data, 0});
    r.inputs.push_back(TensorView{"width", DataType::kFp32, {1, width}, data, 0});
    return r;
  };
  const Request a = request(3, 2), b = request(5, 2), c = request(3, 4);
  EXPECT_NE(ShapeKey(a, true), ShapeKey(b, true));
  EXPECT_EQ(ShapeKey(a, true, {true, false}), ShapeKey(b, true, {true, false}));
  // Only the ragged input's shape is left out.
  EXPECT_NE(ShapeKey(a, true, {true, false}), ShapeKey(c, true, {true, false}));
  // Rows are never part of the key.
  EXPECT_EQ(ShapeKey(request(3, 2), true), ShapeKey(a, true));
}

TEST(ShapeKeyTest, RequestsThatLeaveOutDifferentInputsAreKeptApart) {
  float data[8] = {};
  auto request = [&](bool with_scale) {
    Request r;
    r.inputs.push_back(TensorView{"x", DataType::kFp32, {1, 2}, data, 8});
    r.inputs.push_back(with_scale ? TensorView{"scale", DataType::kFp32, {1}, data, 4}
                                  : AbsentInput("scale", DataType::kFp32));
    return r;
  };
  EXPECT_EQ(ShapeKey(request(false), true), ShapeKey(request(false), true));
  EXPECT_NE(ShapeKey(request(false), true), ShapeKey(request(true), true));
  // Without the batch dim a given [1] leaves no dims at all, still not the absent input's key.
  Request scalar = request(true);
  scalar.inputs[1].shape = {};
  EXPECT_NE(ShapeKey(request(false), false), ShapeKey(scalar, false));
  EXPECT_FALSE(IsAbsent(scalar.inputs[1]));  // a scalar has its element's bytes
}

}  // namespace
}  // namespace tessera::dispatch
