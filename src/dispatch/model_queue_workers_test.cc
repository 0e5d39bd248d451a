// Multi-granularity workers (E²bird, seed 002 §1.4–1.5): the handout rule (DecideSizedBatches)
// and a ModelQueue lane whose runners have batch sizes.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "tessera/dispatch/batch_policy.h"
#include "tessera/dispatch/model_queue.h"
#include "model_queue_test_requests.h"

namespace tessera::dispatch {
namespace {

using std::chrono::milliseconds;
constexpr uint64_t kMs = 1'000'000;

std::vector<PendingRequest> Rows(std::vector<int64_t> rows, uint64_t arrival = 0) {
  std::vector<PendingRequest> pending;
  for (int64_t r : rows) pending.push_back({r, arrival, 7});
  return pending;
}
std::vector<PendingRequest> Ones(size_t n, uint64_t arrival = 0) {
  return Rows(std::vector<int64_t>(n, 1), arrival);
}

// The default lane rule (DecideBatch) with a queue delay, capped at the worker's size.
BatchRule DelayRule(uint64_t now, uint64_t delay_ns) {
  return [now, delay_ns](const std::vector<PendingRequest>& window, int64_t max_rows) {
    return DecideBatch(window, now, BatchPolicyOptions{true, max_rows, {}, delay_ns});
  };
}

std::vector<SizedWorker> Workers(std::vector<int64_t> sizes, std::set<size_t> busy = {}) {
  std::vector<SizedWorker> workers;
  for (size_t i = 0; i < sizes.size(); ++i) workers.push_back({sizes[i], !busy.count(i)});
  return workers;
}

TEST(DecideSizedBatchesTest, Fig10TwelveReadyGoToTheEightThenTheFourInQueueOrder) {
  SizedDecision d = DecideSizedBatches(Ones(12), Workers({8, 4, 2, 1}), DelayRule(0, 0));
  ASSERT_EQ(d.handouts.size(), 2u);
  EXPECT_EQ(d.handouts[0].worker, 0u);
  EXPECT_EQ(d.handouts[0].count, 8u);
  EXPECT_EQ(d.handouts[1].worker, 1u);
  EXPECT_EQ(d.handouts[1].count, 4u);
}

TEST(DecideSizedBatchesTest, Fig10WithTheEightBusyTheHeadOfTheIdleQueueTakesTheRest) {
  // Worker order in the vector does not matter: the largest fitting idle one is chosen.
  SizedDecision d = DecideSizedBatches(Ones(4), Workers({1, 8, 2, 4}, {1}), DelayRule(0, 0));
  ASSERT_EQ(d.handouts.size(), 1u);
  EXPECT_EQ(d.handouts[0].worker, 3u);
  EXPECT_EQ(d.handouts[0].count, 4u);
}

TEST(DecideSizedBatchesTest, SevenReadySplitIntoFourTwoOne) {
  SizedDecision d = DecideSizedBatches(Ones(7), Workers({8, 4, 2, 1}), DelayRule(0, 0));
  ASSERT_EQ(d.handouts.size(), 3u);
  EXPECT_EQ(d.handouts[0].worker, 1u);
  EXPECT_EQ(d.handouts[0].count, 4u);
  EXPECT_EQ(d.handouts[1].worker, 2u);
  EXPECT_EQ(d.handouts[1].count, 2u);
  EXPECT_EQ(d.handouts[2].worker, 3u);
  EXPECT_EQ(d.handouts[2].count, 1u);
}

TEST(DecideSizedBatchesTest, BelowEveryIdleSizeTheSmallestWaitsUnderTheQueueDelay) {
  // 3 ready, idle 8 and 4: the 4 builds under the lane's delay (oldest arrived at 10 ms, 2 ms).
  SizedDecision wait = DecideSizedBatches(Ones(3, 10 * kMs), Workers({8, 4}),
                                          DelayRule(10 * kMs + 1, 2 * kMs));
  EXPECT_TRUE(wait.handouts.empty());
  EXPECT_EQ(wait.wake_at_ns, 12 * kMs);
  SizedDecision go = DecideSizedBatches(Ones(3, 10 * kMs), Workers({8, 4}),
                                        DelayRule(12 * kMs, 2 * kMs));
  ASSERT_EQ(go.handouts.size(), 1u);
  EXPECT_EQ(go.handouts[0].worker, 1u);
  EXPECT_EQ(go.handouts[0].count, 3u);
}

TEST(DecideSizedBatchesTest, NothingIsHandedOutWhenEveryWorkerIsBusy) {
  SizedDecision d = DecideSizedBatches(Ones(20), Workers({8, 4}, {0, 1}), DelayRule(0, 0));
  EXPECT_TRUE(d.handouts.empty());
  EXPECT_EQ(d.wake_at_ns, 0u);
}

TEST(DecideSizedBatchesTest, MultiRowRequestsNeverOverfillAWorker) {
  // Rows 3,3,3: R = 9 → the 8 takes 3+3 (a third would make 9); the rest, 3 rows, goes to the 4.
  SizedDecision d = DecideSizedBatches(Rows({3, 3, 3}), Workers({8, 4, 2, 1}), DelayRule(0, 0));
  ASSERT_EQ(d.handouts.size(), 2u);
  EXPECT_EQ(d.handouts[0].worker, 0u);
  EXPECT_EQ(d.handouts[0].count, 2u);
  EXPECT_EQ(d.handouts[1].worker, 1u);
  EXPECT_EQ(d.handouts[1].count, 1u);
}

TEST(DecideSizedBatchesTest, AnOldestRequestLargerThanTheIdleWorkersWaitsForOneItFits) {
  // A 6-row request, the 8 busy, 4/2/1 idle: nobody idle can hold it, so it waits for the 8.
  SizedDecision wait = DecideSizedBatches(Rows({6, 1}), Workers({8, 4, 2, 1}, {0}), DelayRule(0, 0));
  EXPECT_TRUE(wait.handouts.empty());
  // Larger than every worker: it runs alone on the largest idle one instead of stalling.
  SizedDecision alone = DecideSizedBatches(Rows({6, 1}), Workers({4, 2}), DelayRule(0, 0));
  ASSERT_GE(alone.handouts.size(), 1u);
  EXPECT_EQ(alone.handouts[0].worker, 0u);
  EXPECT_EQ(alone.handouts[0].count, 1u);
}

TEST(DecideSizedBatchesTest, ARunOfAnotherShapeStartsItsOwnBatch) {
  std::vector<PendingRequest> pending = Ones(3);
  pending[2].shape_key = 9;  // two of shape 7, then one of shape 9
  SizedDecision d = DecideSizedBatches(pending, Workers({2, 1}), DelayRule(0, 0));
  ASSERT_EQ(d.handouts.size(), 2u);
  EXPECT_EQ(d.handouts[0].worker, 0u);
  EXPECT_EQ(d.handouts[0].count, 2u);
  EXPECT_EQ(d.handouts[1].worker, 1u);
  EXPECT_EQ(d.handouts[1].count, 1u);
}

// Test double for one worker: answers each request with its input's first float, records every
// batch (its values, in order) and can hold its batches until `Release`.
class FakeSizedRunnerForTest : public BatchRunner {
 public:
  explicit FakeSizedRunnerForTest(int64_t size, milliseconds pause = milliseconds(0))
      : size_(size), pause_(pause) {}
  StatusOr<std::vector<Response>> Run(const std::vector<const Request*>& batch) override {
    std::vector<float> values;
    for (const Request* request : batch) {
      float v;
      std::memcpy(&v, request->inputs[0].data, 4);
      values.push_back(v);
    }
    {
      std::unique_lock lock(mu_);
      batches.push_back(values);
      ++running_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !held_; });
    }
    if (pause_.count() > 0) std::this_thread::sleep_for(pause_);
    std::vector<Response> responses;
    for (float v : values) {
      Response response;
      OutputTensor out{"y", DataType::kFp32, {1}, std::string(4, '\0')};
      std::memcpy(out.bytes.data(), &v, 4);
      response.outputs.push_back(std::move(out));
      responses.push_back(std::move(response));
    }
    return responses;
  }
  std::string Describe() const override { return absl::StrCat("fake worker of ", size_); }
  void Stage(Request& /*request*/) override { staged.fetch_add(1); }
  std::atomic<int> staged{0};  // requests this runner was asked to stage
  void Hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void Release() {
    std::lock_guard lock(mu_);
    held_ = false;
    cv_.notify_all();
  }
  // True once a batch is inside Run (held there when Hold was called).
  bool WaitRunning(milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return running_ > 0; });
  }
  std::vector<std::vector<float>> Batches() {
    std::lock_guard lock(mu_);
    return batches;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<float>> batches;
  int running_ = 0;
  bool held_ = false;
  int64_t size_;
  milliseconds pause_;
};

struct SizedLaneForTest {
  Lane lane;
  std::vector<std::shared_ptr<FakeSizedRunnerForTest>> runners;
};
SizedLaneForTest MakeSizedLane(std::vector<int64_t> sizes, milliseconds pause = milliseconds(0)) {
  SizedLaneForTest out;
  out.lane.plan.label = "workers";
  for (int64_t size : sizes) {
    out.runners.push_back(std::make_shared<FakeSizedRunnerForTest>(size, pause));
    out.lane.runners.push_back(out.runners.back());
  }
  out.lane.worker_batch_sizes = sizes;
  return out;
}

ModelQueueOptions Options() { return ModelQueueOptions{"m/1", BatchPolicyOptions{true, 8, {}, 0}, 0}; }

TEST(ModelQueueWorkersTest, Fig10TwelveReadyRunOnTheEightAndTheFourConcurrentlyInOrder) {
  auto stats = std::make_shared<ModelStats>();
  // An ordinary lane whose only runner is held inside a batch, so 12 more requests queue up.
  auto gate = std::make_shared<FakeSizedRunnerForTest>(8);
  gate->Hold();
  Lane first;
  first.runners.push_back(gate);
  ModelQueue queue(Options(), std::move(first), stats);
  Submitted blocker;
  blocker.value = -1;
  ASSERT_TRUE(queue.Enqueue(MakeRequest(blocker)).ok());
  ASSERT_TRUE(gate->WaitRunning(milliseconds(5000)));
  std::vector<Submitted> submitted(12);
  for (size_t i = 0; i < submitted.size(); ++i) {
    submitted[i].value = static_cast<float>(i);
    ASSERT_TRUE(queue.Enqueue(MakeRequest(submitted[i])).ok());
  }
  // Switch to workers 8, 4, 2, 1: they see all 12 at once (moved under one lock).
  SizedLaneForTest sized = MakeSizedLane({8, 4, 2, 1});
  for (auto& runner : sized.runners) runner->Hold();
  std::vector<Lane> lanes;
  lanes.push_back(sized.lane);
  auto swap = std::async(std::launch::async, [&] { return queue.ReplaceLanes(std::move(lanes)); });
  // Both batches are inside Run at the same time: they run concurrently.
  ASSERT_TRUE(sized.runners[0]->WaitRunning(milliseconds(5000)));
  ASSERT_TRUE(sized.runners[1]->WaitRunning(milliseconds(5000)));
  EXPECT_EQ(sized.runners[0]->Batches(),
            (std::vector<std::vector<float>>{{0, 1, 2, 3, 4, 5, 6, 7}}));
  EXPECT_EQ(sized.runners[1]->Batches(), (std::vector<std::vector<float>>{{8, 9, 10, 11}}));
  EXPECT_TRUE(sized.runners[2]->Batches().empty());
  EXPECT_TRUE(sized.runners[3]->Batches().empty());
  for (auto& runner : sized.runners) runner->Release();
  gate->Release();
  ASSERT_TRUE(swap.get().ok());
  ASSERT_TRUE(blocker.promise.get_future().get().ok());
  for (size_t i = 0; i < submitted.size(); ++i) {
    auto result = submitted[i].promise.get_future().get();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(FirstFloat(*result), static_cast<float>(i));
    EXPECT_EQ(result->batch_size, i < 8 ? 8 : 4);
  }
  ModelStatsSnapshot snap = stats->Snapshot();
  EXPECT_EQ(snap.worker_batches[8], 1u);
  EXPECT_EQ(snap.worker_batches[4], 1u);
  EXPECT_EQ(snap.worker_batches.count(2), 0u);
}

TEST(ModelQueueWorkersTest, NoRequestIsLostOrDuplicatedAndNoBatchExceedsItsWorker) {
  auto stats = std::make_shared<ModelStats>();
  const std::vector<int64_t> sizes = {8, 4, 2, 1};
  SizedLaneForTest sized = MakeSizedLane(sizes, milliseconds(1));
  ModelQueueOptions options = Options();
  options.policy.max_queue_delay_ns = 500'000;  // 0.5 ms: small batches also wait a little
  ModelQueue queue(options, sized.lane, stats);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 750;
  std::vector<Submitted> submitted(kThreads * kPerThread);
  for (size_t i = 0; i < submitted.size(); ++i) submitted[i].value = static_cast<float>(i);
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng(t + 1);
      std::uniform_int_distribution<int> gap_us(0, 400);
      for (int i = 0; i < kPerThread; ++i) {
        ASSERT_TRUE(queue.Enqueue(MakeRequest(submitted[t * kPerThread + i])).ok());
        if (i % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us(rng)));
      }
    });
  }
  for (std::thread& client : clients) client.join();
  for (size_t i = 0; i < submitted.size(); ++i) {
    auto result = submitted[i].promise.get_future().get();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(FirstFloat(*result), static_cast<float>(i));
  }
  EXPECT_TRUE(queue.WaitIdle(5000));
  std::multiset<float> seen;
  size_t batches = 0;
  for (size_t w = 0; w < sizes.size(); ++w) {
    for (const auto& batch : sized.runners[w]->Batches()) {
      EXPECT_LE(static_cast<int64_t>(batch.size()), sizes[w]) << "worker of " << sizes[w];
      seen.insert(batch.begin(), batch.end());
      ++batches;
    }
  }
  EXPECT_EQ(seen.size(), submitted.size());  // every request ran exactly once
  EXPECT_EQ(std::set<float>(seen.begin(), seen.end()).size(), submitted.size());
  ModelStatsSnapshot snap = stats->Snapshot();
  EXPECT_EQ(snap.success.count, submitted.size());
  EXPECT_EQ(snap.pending, 0u);
  uint64_t counted = 0;
  for (const auto& [size, count] : snap.worker_batches) counted += count;
  EXPECT_EQ(counted, batches);
  // Under this load the big worker was used, not only the small ones.
  EXPECT_GT(snap.worker_batches[8], 0u);
}

TEST(ModelQueueWorkersTest, RequestsThatCanNoLongerMeetTheSloAreDropped) {
  auto stats = std::make_shared<ModelStats>();
  ModelQueueOptions options = Options();
  options.slo_ns = 50'000'000;  // 50 ms
  options.slo_drop = true;
  SizedLaneForTest sized = MakeSizedLane({4, 2, 1});
  sized.lane.plan.expected_run_ns = 20'000'000;  // a batch takes 20 ms
  ModelQueue queue(options, sized.lane, stats);
  Submitted late, fresh;
  ASSERT_TRUE(queue.Enqueue(MakeRequest(late, MonotonicNs() - 40'000'000)).ok());
  auto late_result = late.promise.get_future().get();
  ASSERT_FALSE(late_result.ok());
  EXPECT_EQ(late_result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(late_result.status().message().find("SLO of 50.0 ms"), std::string::npos)
      << late_result.status();
  ASSERT_TRUE(queue.Enqueue(MakeRequest(fresh)).ok());
  EXPECT_TRUE(fresh.promise.get_future().get().ok());
  ModelStatsSnapshot snap = stats->Snapshot();
  EXPECT_EQ(snap.slo_dropped, 1u);
  EXPECT_EQ(snap.success.count, 1u);
  EXPECT_EQ(snap.pending, 0u);
}

TEST(ModelQueueWorkersTest, ShutdownAnswersEveryRequestOnce) {
  auto stats = std::make_shared<ModelStats>();
  SizedLaneForTest sized = MakeSizedLane({2, 1}, milliseconds(5));
  auto queue = std::make_unique<ModelQueue>(Options(), sized.lane, stats);
  std::vector<Submitted> submitted(40);
  for (auto& s : submitted) ASSERT_TRUE(queue->Enqueue(MakeRequest(s)).ok());
  queue->Shutdown("test shutdown");
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
  EXPECT_EQ(ok + abandoned, 40);
  EXPECT_GE(abandoned, 1);
}

TEST(ModelQueueWorkersTest, EveryRequestIsStagedOnceThroughTheFirstWorker) {
  // The workers share the first worker's pool region: staging goes through it, in queue order,
  // whichever worker later takes the request.
  auto stats = std::make_shared<ModelStats>();
  SizedLaneForTest sized = MakeSizedLane({4, 2, 1});
  auto queue = std::make_unique<ModelQueue>(Options(), sized.lane, stats);
  std::vector<Submitted> submitted(30);
  for (auto& s : submitted) ASSERT_TRUE(queue->Enqueue(MakeRequest(s)).ok());
  for (auto& s : submitted) ASSERT_TRUE(s.promise.get_future().get().ok());
  EXPECT_EQ(sized.runners[0]->staged.load(), 30);
  EXPECT_EQ(sized.runners[1]->staged.load(), 0);
  EXPECT_EQ(sized.runners[2]->staged.load(), 0);
}

TEST(ModelQueueWorkersTest, LanesWhoseSizesDoNotMatchTheirRunnersAreRefused) {
  auto stats = std::make_shared<ModelStats>();
  SizedLaneForTest ok_lane = MakeSizedLane({2, 1});
  ModelQueue queue(Options(), ok_lane.lane, stats);
  SizedLaneForTest bad = MakeSizedLane({2, 1});
  bad.lane.worker_batch_sizes = {2};
  std::vector<Lane> lanes;
  lanes.push_back(bad.lane);
  auto swap = queue.ReplaceLanes(std::move(lanes));
  EXPECT_EQ(swap.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(swap.status().message().find("1 worker batch sizes for 2 runners"), std::string::npos)
      << swap.status();
  bad.lane.worker_batch_sizes = {2, 0};
  EXPECT_FALSE(ModelQueue::ValidateLane(bad.lane, "m/1").ok());
}

}  // namespace
}  // namespace tessera::dispatch
