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
// With a TryMode other than kNone it also takes submissions through TrySubmit (kAccept), or
// refuses every TrySubmit (kRefuse), and records which threads called it.
enum class TryMode { kNone, kAccept, kRefuse };

class FakeAsyncRunnerForTest : public BatchRunner {
 public:
  FakeAsyncRunnerForTest(int max_in_flight, std::chrono::microseconds per_batch,
                         TryMode try_mode = TryMode::kNone)
      : max_in_flight_(max_in_flight),
        per_batch_(per_batch),
        try_mode_(try_mode),
        thread_([this] { Answer(); }) {}
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
  bool supports_try_submit() const override { return try_mode_ != TryMode::kNone; }
  bool TrySubmit(const std::vector<std::vector<const Request*>>& batches,
                 std::vector<BatchOutcomeCallback>& done) override {
    {
      std::lock_guard lock(mu_);
      try_threads_.push_back(std::this_thread::get_id());
      if (try_mode_ != TryMode::kAccept) return false;
      ++tried_submissions_;
    }
    Submit(batches, std::move(done));
    return true;
  }
  // Submit calls that did not come through TrySubmit: the worker's.
  size_t worker_submissions() {
    std::lock_guard lock(mu_);
    return submission_sizes_.size() - tried_submissions_;
  }
  std::vector<std::thread::id> try_threads() {
    std::lock_guard lock(mu_);
    return try_threads_;
  }
  std::thread::id answer_thread() const { return thread_.get_id(); }

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
  const TryMode try_mode_;
  size_t tried_submissions_ = 0;
  std::vector<std::thread::id> try_threads_;
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

// A queue whose one lane is one FakeAsyncRunnerForTest with room for two submissions.
struct OneRunnerQueue {
  OneRunnerQueue(std::chrono::microseconds per_batch, TryMode try_mode,
                 BatchPolicyOptions policy = BatchPolicyOptions{}) {
    auto runner = std::make_unique<FakeAsyncRunnerForTest>(2, per_batch, try_mode);
    fake = runner.get();
    std::vector<std::unique_ptr<BatchRunner>> runners;
    runners.push_back(std::move(runner));
    queue = std::make_unique<ModelQueue>(ModelQueueOptions{"m/1", policy, 0}, std::move(runners),
                                         stats);
  }
  FakeAsyncRunnerForTest* fake = nullptr;
  std::shared_ptr<ModelStats> stats = std::make_shared<ModelStats>();
  std::unique_ptr<ModelQueue> queue;
};

TEST(ModelQueuePipelinedTest, WithRoomTheEnqueuingThreadStartsTheSubmissionItself) {
  OneRunnerQueue q(std::chrono::microseconds(0), TryMode::kAccept);
  FakeAsyncRunnerForTest* fake = q.fake;
  ModelQueue& queue = *q.queue;
  std::shared_ptr<ModelStats> stats = q.stats;
  for (int i = 0; i < 5; ++i) {
    Submitted s;
    s.value = static_cast<float>(i);
    ASSERT_TRUE(queue.Enqueue(MakeRequest(s)).ok());
    auto result = s.promise.get_future().get();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(FirstFloat(*result), static_cast<float>(i));
  }
  EXPECT_TRUE(queue.WaitIdle(5000));
  const std::vector<std::thread::id> threads = fake->try_threads();
  ASSERT_EQ(threads.size(), 5u);  // one request at a time: each found the runner idle
  for (std::thread::id id : threads) EXPECT_EQ(id, std::this_thread::get_id());
  EXPECT_EQ(fake->worker_submissions(), 0u);
  EXPECT_EQ(stats->Snapshot().pending, 0u);
}

TEST(ModelQueuePipelinedTest, TheThreadWithAResultStartsWhatQueuedMeanwhile) {
  OneRunnerQueue q(std::chrono::microseconds(100), TryMode::kAccept);
  FakeAsyncRunnerForTest* fake = q.fake;
  ModelQueue& queue = *q.queue;
  std::shared_ptr<ModelStats> stats = q.stats;

  // Two go out from this thread (the limit), 38 queue; the answers start the rest.
  std::vector<Submitted> submitted = EnqueueHeld(queue, fake, 40);
  for (size_t i = 0; i < submitted.size(); ++i) {
    auto result = submitted[i].promise.get_future().get();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(FirstFloat(*result), static_cast<float>(i));
  }
  EXPECT_TRUE(queue.WaitIdle(5000));
  EXPECT_EQ(fake->max_seen_in_flight(), 2);
  EXPECT_EQ(fake->worker_submissions(), 0u);
  const std::vector<std::thread::id> threads = fake->try_threads();
  ASSERT_GE(threads.size(), 3u);
  EXPECT_EQ(threads[0], std::this_thread::get_id());
  EXPECT_EQ(threads[1], std::this_thread::get_id());
  for (size_t i = 2; i < threads.size(); ++i) EXPECT_EQ(threads[i], fake->answer_thread());
  for (size_t size : fake->submission_sizes()) EXPECT_LE(size, 32u);
  ModelStatsSnapshot snap = stats->Snapshot();
  EXPECT_EQ(snap.success.count, 40u);
  EXPECT_EQ(snap.pending, 0u);
}

TEST(ModelQueuePipelinedTest, ASubmissionTheRunnerCannotStartAtOnceIsHandedToTheWorker) {
  OneRunnerQueue q(std::chrono::microseconds(50), TryMode::kRefuse);
  FakeAsyncRunnerForTest* fake = q.fake;
  ModelQueue& queue = *q.queue;
  std::shared_ptr<ModelStats> stats = q.stats;
  std::vector<Submitted> submitted = EnqueueHeld(queue, fake, 30);
  for (size_t i = 0; i < submitted.size(); ++i) {
    auto result = submitted[i].promise.get_future().get();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(FirstFloat(*result), static_cast<float>(i));
  }
  EXPECT_TRUE(queue.WaitIdle(5000));
  EXPECT_GT(fake->try_threads().size(), 0u);  // it was asked, refused, and the worker sent it
  EXPECT_EQ(fake->worker_submissions(), fake->submission_sizes().size());
  EXPECT_LE(fake->max_seen_in_flight(), 2);
  ModelStatsSnapshot snap = stats->Snapshot();
  EXPECT_EQ(snap.success.count, 30u);
  EXPECT_EQ(snap.pending, 0u);
}

TEST(ModelQueuePipelinedTest, TheQueueDelayIsWaitedOutEvenWhenTheRunnerHasRoom) {
  // Batches of up to 8 rows, waiting up to 150 ms for more.
  OneRunnerQueue q(std::chrono::microseconds(0), TryMode::kAccept,
                   BatchPolicyOptions{true, 8, {}, 150'000'000});
  FakeAsyncRunnerForTest* fake = q.fake;
  ModelQueue& queue = *q.queue;
  std::vector<Submitted> submitted(3);
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < submitted.size(); ++i) {
    submitted[i].value = static_cast<float>(i);
    ASSERT_TRUE(queue.Enqueue(MakeRequest(submitted[i])).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Nobody started it early. On a loaded machine the sleep can outlast the delay: the snapshot,
  // taken first, only has to be empty when it was taken before the delay ran out.
  const auto sizes = fake->submission_sizes();
  if (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(150)) {
    EXPECT_TRUE(sizes.empty());
  }
  for (auto& s : submitted) ASSERT_TRUE(s.promise.get_future().get().ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(140));
  EXPECT_EQ(fake->batch_sizes(), std::vector<size_t>{3});  // one batch, after the delay
  EXPECT_EQ(fake->worker_submissions(), 1u);               // the worker waited it out
}

// Test double: answers every batch with an error inside the call that submits it.
class FakeFailingRunnerForTest : public BatchRunner {
 public:
  StatusOr<std::vector<Response>> Run(const std::vector<const Request*>&) override {
    return absl::InternalError("Run called on a pipelined runner");
  }
  int max_in_flight() const override { return 2; }
  void Submit(const std::vector<std::vector<const Request*>>& batches,
              std::vector<BatchOutcomeCallback> done) override {
    for (size_t i = 0; i < batches.size(); ++i) done[i](absl::UnavailableError("fake is down"));
  }
  bool supports_try_submit() const override { return true; }
  bool TrySubmit(const std::vector<std::vector<const Request*>>& batches,
                 std::vector<BatchOutcomeCallback>& done) override {
    Submit(batches, std::move(done));
    return true;
  }
  std::string Describe() const override { return "fake failing"; }
};

TEST(ModelQueuePipelinedTest, ARunnerThatFailsInsideTheCallAnswersEveryRequestWithoutRecursing) {
  std::vector<std::unique_ptr<BatchRunner>> runners;
  runners.push_back(std::make_unique<FakeFailingRunnerForTest>());
  auto stats = std::make_shared<ModelStats>();
  ModelQueue queue({"m/1", BatchPolicyOptions{}, 0}, std::move(runners), stats);
  constexpr size_t kRequests = 20000;
  std::vector<Submitted> submitted(kRequests);
  std::vector<std::thread> enqueuers;
  for (size_t t = 0; t < 4; ++t) {
    enqueuers.emplace_back([&, t] {
      for (size_t i = t; i < kRequests; i += 4) {
        EXPECT_TRUE(queue.Enqueue(MakeRequest(submitted[i])).ok());
      }
    });
  }
  for (auto& thread : enqueuers) thread.join();
  for (auto& s : submitted) {
    auto result = s.promise.get_future().get();
    ASSERT_FALSE(result.ok());
    EXPECT_TRUE(absl::IsUnavailable(result.status())) << result.status();
  }
  EXPECT_TRUE(queue.WaitIdle(5000));
  EXPECT_EQ(stats->Snapshot().pending, 0u);
}

}  // namespace
}  // namespace tessera::dispatch
