// ModelQueue with runners that take more than one submission at a time (BatchRunner::Submit).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "tessera/dispatch/model_queue.h"
#include "model_queue_test_requests.h"

namespace tessera::dispatch {
namespace {

// Test double: Submit queues the batches; a thread of its own answers them in order (each
// request with its input's first float) while the queue goes on. Records what it was given.
class FakeAsyncRunnerForTest : public BatchRunner {
 public:
  FakeAsyncRunnerForTest(int max_in_flight, std::chrono::microseconds per_batch)
      : max_in_flight_(max_in_flight), per_batch_(per_batch), thread_([this] { Answer(); }) {}
  ~FakeAsyncRunnerForTest() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  StatusOr<std::vector<Response>> Run(const std::vector<const Request*>&) override {
    return absl::InternalError("Run called on a pipelined runner");
  }
  int max_in_flight() const override { return max_in_flight_; }
  void Submit(const std::vector<std::vector<const Request*>>& batches,
              std::vector<BatchOutcomeCallback> done) override {
    std::lock_guard lock(mu_);
    ++in_flight_;
    max_seen_in_flight_ = std::max(max_seen_in_flight_, in_flight_);
    submission_sizes_.push_back(batches.size());
    work_.push_back(Submission{batches, std::move(done)});
    cv_.notify_all();
  }
  std::string Describe() const override { return "fake async"; }

  void Hold(bool hold) {
    {
      std::lock_guard lock(mu_);
      hold_ = hold;
    }
    cv_.notify_all();
  }
  int max_seen_in_flight() {
    std::lock_guard lock(mu_);
    return max_seen_in_flight_;
  }
  std::vector<size_t> submission_sizes() {
    std::lock_guard lock(mu_);
    return submission_sizes_;
  }
  std::vector<size_t> batch_sizes() {
    std::lock_guard lock(mu_);
    return batch_sizes_;
  }

 private:
  struct Submission {
    std::vector<std::vector<const Request*>> batches;
    std::vector<BatchOutcomeCallback> done;
  };

  void Answer() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || (!hold_ && !work_.empty()); });
      if (work_.empty()) return;
      Submission submission = std::move(work_.front());
      work_.pop_front();
      for (const auto& batch : submission.batches) batch_sizes_.push_back(batch.size());
      lock.unlock();
      for (size_t i = 0; i < submission.batches.size(); ++i) {
        std::this_thread::sleep_for(per_batch_);
        std::vector<Response> responses;
        for (const Request* request : submission.batches[i]) {
          Response response;
          OutputTensor out{"y", DataType::kFp32, {1}, std::string(4, '\0')};
          std::memcpy(out.bytes.data(), request->inputs[0].data, 4);
          response.outputs.push_back(std::move(out));
          responses.push_back(std::move(response));
        }
        // The runner counts the submission finished before its last answer, as a real one may
        // see its reply before the caller's bookkeeping runs.
        if (i + 1 == submission.batches.size()) {
          std::lock_guard guard(mu_);
          --in_flight_;
        }
        submission.done[i](std::move(responses));
      }
      lock.lock();
    }
  }

  const int max_in_flight_;
  const std::chrono::microseconds per_batch_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Submission> work_;
  bool hold_ = false;
  bool stop_ = false;
  int in_flight_ = 0;
  int max_seen_in_flight_ = 0;
  std::vector<size_t> submission_sizes_;
  std::vector<size_t> batch_sizes_;
  std::thread thread_;  // last: starts after the rest is initialised
};

// Enqueues n requests valued 0..n-1 while the runner holds its answers, then lets it go.
std::vector<Submitted> EnqueueHeld(ModelQueue& queue, FakeAsyncRunnerForTest* runner, size_t n) {
  std::vector<Submitted> submitted(n);
  runner->Hold(true);
  for (size_t i = 0; i < n; ++i) {
    submitted[i].value = {static_cast<float>(i)};
    EXPECT_TRUE(queue.Enqueue(MakeRequest(submitted[i])).ok());
    if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // first one is out
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  runner->Hold(false);
  return submitted;
}

TEST(ModelQueuePipelinedTest, UnbatchedRequestsShareSubmissionsButRunOneByOne) {
  auto runner = std::make_unique<FakeAsyncRunnerForTest>(2, std::chrono::microseconds(100));
  FakeAsyncRunnerForTest* fake = runner.get();
  std::vector<std::unique_ptr<BatchRunner>> runners;
  runners.push_back(std::move(runner));
  auto stats = std::make_shared<ModelStats>();
  ModelQueue queue({"m/1", BatchPolicyOptions{}, 0}, std::move(runners), stats);

  std::vector<Submitted> submitted = EnqueueHeld(queue, fake, 40);
  for (size_t i = 0; i < submitted.size(); ++i) {
    auto result = submitted[i].promise.get_future().get();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(FirstFloat(*result), static_cast<float>(i));
    EXPECT_EQ(result->batch_size, 1);
  }
  EXPECT_TRUE(queue.WaitIdle(5000));
  EXPECT_LE(fake->max_seen_in_flight(), 2);
  EXPECT_EQ(fake->max_seen_in_flight(), 2);  // the second went out while the first was held
  for (size_t size : fake->batch_sizes()) EXPECT_EQ(size, 1u);  // never batched together
  const std::vector<size_t> submissions = fake->submission_sizes();
  EXPECT_LT(submissions.size(), 10u);  // 40 requests in a few round trips
  for (size_t size : submissions) EXPECT_LE(size, 32u);
  ModelStatsSnapshot snap = stats->Snapshot();
  EXPECT_EQ(snap.success.count, 40u);
  EXPECT_EQ(snap.execution_count, 40u);
  EXPECT_EQ(snap.pending, 0u);
}

TEST(ModelQueuePipelinedTest, BatchedLaneKeepsOneBatchPerSubmissionWithinItsLimit) {
  auto runner = std::make_unique<FakeAsyncRunnerForTest>(2, std::chrono::microseconds(200));
  FakeAsyncRunnerForTest* fake = runner.get();
  std::vector<std::unique_ptr<BatchRunner>> runners;
  runners.push_back(std::move(runner));
  auto stats = std::make_shared<ModelStats>();
  ModelQueue queue({"m/1", BatchPolicyOptions{true, 8, {}, 0}, 0}, std::move(runners), stats);

  std::vector<Submitted> submitted = EnqueueHeld(queue, fake, 30);
  for (size_t i = 0; i < submitted.size(); ++i) {
    auto result = submitted[i].promise.get_future().get();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(FirstFloat(*result), static_cast<float>(i));
  }
  EXPECT_TRUE(queue.WaitIdle(5000));
  EXPECT_EQ(fake->max_seen_in_flight(), 2);
  for (size_t size : fake->submission_sizes()) EXPECT_EQ(size, 1u);
  size_t rows = 0;
  for (size_t size : fake->batch_sizes()) {
    EXPECT_LE(size, 8u);
    rows += size;
  }
  EXPECT_EQ(rows, 30u);
  EXPECT_LT(fake->batch_sizes().size(), 30u);  // held requests were batched
}

TEST(ModelQueuePipelinedTest, UnbatchedSubmissionsLeaveTheOtherRunnersTheirShare) {
  std::vector<FakeAsyncRunnerForTest*> fakes;
  std::vector<std::unique_ptr<BatchRunner>> runners;
  for (int i = 0; i < 2; ++i) {
    auto runner = std::make_unique<FakeAsyncRunnerForTest>(2, std::chrono::microseconds(100));
    fakes.push_back(runner.get());
    runners.push_back(std::move(runner));
  }
  auto stats = std::make_shared<ModelStats>();
  ModelQueue queue({"m/1", BatchPolicyOptions{}, 0}, std::move(runners), stats);
  std::vector<Submitted> submitted(40);
  for (auto* fake : fakes) fake->Hold(true);
  for (size_t i = 0; i < submitted.size(); ++i) {
    submitted[i].value = {static_cast<float>(i)};
    ASSERT_TRUE(queue.Enqueue(MakeRequest(submitted[i])).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  for (auto* fake : fakes) fake->Hold(false);
  for (auto& s : submitted) ASSERT_TRUE(s.promise.get_future().get().ok());
  for (auto* fake : fakes) {
    for (size_t size : fake->submission_sizes()) EXPECT_LE(size, 20u);  // half of what waited
    EXPECT_GT(fake->batch_sizes().size(), 0u);
  }
}

TEST(ModelQueuePipelinedTest, ReplaceLanesReturnsOnlyAfterTheOldLanesSubmissionsFinished) {
  auto runner = std::make_shared<FakeAsyncRunnerForTest>(2, std::chrono::microseconds(0));
  auto stats = std::make_shared<ModelStats>();
  Lane lane;
  lane.plan.label = "old";
  lane.runners.push_back(runner);
  ModelQueue queue({"m/1", BatchPolicyOptions{}, 0}, std::move(lane), stats);
  std::vector<Submitted> submitted = std::vector<Submitted>(4);
  runner->Hold(true);
  for (size_t i = 0; i < submitted.size(); ++i) {
    submitted[i].value = {static_cast<float>(i)};
    ASSERT_TRUE(queue.Enqueue(MakeRequest(submitted[i])).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // all submitted and held

  Lane fresh;
  fresh.plan.label = "new";
  fresh.runners.push_back(std::make_shared<FakeAsyncRunnerForTest>(2, std::chrono::microseconds(0)));
  std::atomic<bool> replaced{false};
  std::thread switcher([&] {
    auto swap = queue.ReplaceLanes({std::move(fresh)});
    EXPECT_TRUE(swap.ok()) << swap.status();
    replaced = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(replaced.load());  // waits for the held submissions
  runner->Hold(false);
  switcher.join();
  for (size_t i = 0; i < submitted.size(); ++i) {
    auto result = submitted[i].promise.get_future().get();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(FirstFloat(*result), static_cast<float>(i));
  }
}

TEST(ModelQueuePipelinedTest, ShutdownWaitsForSubmittedBatchesAndFailsOnlyQueuedOnes) {
  auto runner = std::make_unique<FakeAsyncRunnerForTest>(2, std::chrono::microseconds(0));
  FakeAsyncRunnerForTest* fake = runner.get();
  std::vector<std::unique_ptr<BatchRunner>> runners;
  runners.push_back(std::move(runner));
  auto stats = std::make_shared<ModelStats>();
  // Batches of one row: once two are out (the limit), the other three wait in the queue.
  ModelQueue queue({"m/1", BatchPolicyOptions{true, 1, {}, 0}, 0}, std::move(runners), stats);
  std::vector<Submitted> submitted(5);
  fake->Hold(true);
  for (size_t i = 0; i < submitted.size(); ++i) {
    submitted[i].value = {static_cast<float>(i)};
    ASSERT_TRUE(queue.Enqueue(MakeRequest(submitted[i])).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    fake->Hold(false);
  });
  queue.Shutdown("test shutdown");
  releaser.join();
  int ok = 0, abandoned = 0;
  for (auto& s : submitted) {
    auto result = s.promise.get_future().get();
    if (result.ok()) {
      ++ok;
    } else {
      EXPECT_NE(result.status().message().find("test shutdown"), std::string::npos);
      ++abandoned;
    }
  }
  EXPECT_EQ(ok, 2);  // the two submitted batches of one row each
  EXPECT_EQ(abandoned, 3);
}

}  // namespace
}  // namespace tessera::dispatch
