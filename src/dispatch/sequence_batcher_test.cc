#include "tessera/dispatch/sequence_batcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>

#include "model_queue_test_requests.h"
#include "tessera/common/bytes_tensor.h"

namespace tessera::dispatch {
namespace {

float FloatAt(const void* data) {
  float v;
  std::memcpy(&v, data, 4);
  return v;
}

const TensorView* Find(const Request& request, const std::string& name) {
  for (const TensorView& view : request.inputs) {
    if (view.name == name) return &view;
  }
  return nullptr;
}

// Test double: an accumulator. y = x + state, and the next state is y; records every row's START
// and CORRID control values and the batch sizes. Optionally pauses per batch, or gives a state
// output of the wrong shape, or keeps a growing state: every y so far, y = x + the last of them.
class AccumulatorRunnerForTest : public BatchRunner {
 public:
  StatusOr<std::vector<Response>> Run(const std::vector<const Request*>& batch) override {
    std::this_thread::sleep_for(pause);
    std::vector<Response> responses;
    std::lock_guard lock(mu);
    batch_sizes.push_back(batch.size());
    for (const Request* request : batch) {
      const TensorView* x = Find(*request, "x");
      const TensorView* state = Find(*request, "state_in");
      const TensorView* start = Find(*request, "START");
      const TensorView* corrid = Find(*request, "CORRID");
      if (!x || !state || !start || !corrid) return absl::InternalError("an input is missing");
      EXPECT_EQ(start->shape, (Shape{1, 1}));
      if (!growing_state) EXPECT_EQ(state->shape, (Shape{1, 1}));
      const int64_t length = state->shape.at(1);
      state_lengths.push_back(length);
      int32_t start_value;
      std::memcpy(&start_value, start->data, 4);
      starts.push_back(start_value);
      if (corrid->dtype == DataType::kString) {  // one serialized BYTES element
        auto text = SplitBytesElements(corrid->data, corrid->byte_size);
        EXPECT_TRUE(text.ok() && text->size() == 1) << corrid->byte_size;
        if (text.ok() && text->size() == 1) id_texts.emplace_back(text->front());
      } else {
        uint64_t id;
        std::memcpy(&id, corrid->data, 8);
        ids.push_back(id);
      }
      const auto* state_floats = static_cast<const char*>(state->data);
      const float y = FloatAt(x->data) + FloatAt(state_floats + 4 * (length - 1));
      Response response;
      std::string bytes(4, '\0');
      std::memcpy(bytes.data(), &y, 4);
      response.outputs.push_back(OutputTensor{"y", DataType::kFp32, {1, 1}, bytes});
      if (growing_state) {
        response.outputs.push_back(
            OutputTensor{"state_out",
                         DataType::kFp32,
                         {1, length + 1},
                         std::string(state_floats, state->byte_size) + bytes});
      } else {
        response.outputs.push_back(OutputTensor{
            "state_out", DataType::kFp32, wrong_state_shape ? Shape{1, 2} : Shape{1, 1}, bytes});
      }
      responses.push_back(std::move(response));
    }
    return responses;
  }
  std::string Describe() const override { return "accumulator"; }

  std::chrono::milliseconds pause{0};
  bool wrong_state_shape = false;
  bool growing_state = false;
  std::mutex mu;
  std::vector<int64_t> state_lengths;  // each row's state_in dim 1
  std::vector<size_t> batch_sizes;
  std::vector<int32_t> starts;
  std::vector<uint64_t> ids;
  std::vector<std::string> id_texts;  // a TYPE_STRING CORRID's values
};

class ManualClockForTest : public Clock {
 public:
  uint64_t NowNs() const override { return now.load(); }
  std::atomic<uint64_t> now{1'000'000'000};
};

struct Accumulator {
  explicit Accumulator(uint64_t max_queue_delay_ns = 0, const Clock* clock = nullptr,
                       DataType corrid_type = DataType::kUint64, Shape state_dims = {1}) {
    auto owned = std::make_unique<AccumulatorRunnerForTest>();
    runner = owned.get();
    std::vector<std::unique_ptr<BatchRunner>> runners;
    runners.push_back(std::move(owned));
    queue = std::make_shared<ModelQueue>(
        ModelQueueOptions{"acc/1", BatchPolicyOptions{true, 8, {}, max_queue_delay_ns}, 0},
        std::move(runners), stats);
    SequenceBatcherOptions options;
    options.model_label = "acc/1";
    options.batched = true;
    options.idle_timeout_ns = 5'000'000'000;
    options.controls.push_back({"START", SequenceControl::Kind::kStart, DataType::kInt32, 0, 1});
    options.controls.push_back(
        {"CORRID", SequenceControl::Kind::kCorrelationId, corrid_type, 0, 1});
    options.states.push_back({"state_in", "state_out", DataType::kFp32, std::move(state_dims)});
    options.outputs = {"y"};
    batcher = std::make_shared<SequenceBatcher>(options, queue, stats, clock);
  }
  // Joins the queue's workers here, as ModelManager does before letting go of a version. A
  // worker's completion callback may hold the last reference to the batcher, and with it the
  // queue: destroyed there, the queue would join its own worker thread.
  ~Accumulator() { queue->Shutdown("test done"); }
  std::shared_ptr<ModelStats> stats = std::make_shared<ModelStats>();
  AccumulatorRunnerForTest* runner = nullptr;  // owned by the queue
  std::shared_ptr<ModelQueue> queue;
  std::shared_ptr<SequenceBatcher> batcher;
};

// One request: x = value, batch dim 1.
std::unique_ptr<Request> Step(Submitted& s) {
  auto request = MakeRequest(s);
  request->inputs[0].shape = {1, 1};
  return request;
}

SequenceFlags Flags(uint64_t id, bool start = false, bool end = false) {
  SequenceFlags flags;
  flags.id = id;
  flags.start = start;
  flags.end = end;
  return flags;
}

TEST(SequenceBatcherTest, StateCarriesFromOneRequestToTheNextAndIsHiddenFromTheAnswer) {
  Accumulator acc;
  std::vector<Submitted> steps(4);
  for (size_t i = 0; i < steps.size(); ++i) {
    steps[i].value = static_cast<float>(i + 1);  // 1, 2, 3, 4
    ASSERT_TRUE(acc.batcher->Enqueue(Step(steps[i]), Flags(7, i == 0, i + 1 == steps.size())).ok());
  }
  float expected = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    auto result = steps[i].promise.get_future().get();
    ASSERT_TRUE(result.ok()) << result.status();
    expected += static_cast<float>(i + 1);
    ASSERT_EQ(result->outputs.size(), 1u);  // the state output is taken out
    EXPECT_EQ(result->outputs[0].name, "y");
    EXPECT_EQ(FirstFloat(*result), expected);  // 1, 3, 6, 10
  }
  EXPECT_EQ(acc.runner->starts, (std::vector<int32_t>{1, 0, 0, 0}));
  EXPECT_EQ(acc.runner->ids, (std::vector<uint64_t>{7, 7, 7, 7}));
  EXPECT_TRUE(acc.batcher->WaitIdle(1000));
  EXPECT_EQ(acc.batcher->active_sequences(), 0u);  // ended
}

TEST(SequenceBatcherTest, AVariableStateTakesTheShapeTheRequestBeforeGaveIt) {
  Accumulator acc(0, nullptr, DataType::kUint64, /*state_dims=*/{-1});
  acc.runner->growing_state = true;
  for (int round = 0; round < 2; ++round) {  // the second START begins again at one element
    std::vector<Submitted> steps(3);
    for (size_t i = 0; i < steps.size(); ++i) {
      steps[i].value = static_cast<float>(i + 1);
      ASSERT_TRUE(acc.batcher->Enqueue(Step(steps[i]), Flags(7, i == 0, i == 2)).ok());
    }
    const float expected[] = {1, 3, 6};  // x + the last y: 1, 2 + 1, 3 + 3
    for (size_t i = 0; i < steps.size(); ++i) {
      auto result = steps[i].promise.get_future().get();
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(FirstFloat(*result), expected[i]);
    }
  }
  std::lock_guard lock(acc.runner->mu);
  // Zeros of one element at START (the -1 as 1), then what each request gave.
  EXPECT_EQ(acc.runner->state_lengths, (std::vector<int64_t>{1, 2, 3, 1, 2, 3}));
}

TEST(SequenceBatcherTest, SequencesKeepApartStatesAndBatchTogether) {
  Accumulator acc(/*max_queue_delay_ns=*/20'000'000);
  constexpr int kSequences = 4;
  constexpr int kSteps = 3;
  std::vector<Submitted> steps(kSequences * kSteps);
  for (int step = 0; step < kSteps; ++step) {
    for (int s = 0; s < kSequences; ++s) {
      Submitted& submitted = steps[step * kSequences + s];
      submitted.value = static_cast<float>((s + 1) * 100);
      ASSERT_TRUE(
          acc.batcher->Enqueue(Step(submitted), Flags(s + 1, step == 0, step == kSteps - 1)).ok());
    }
  }
  for (int step = 0; step < kSteps; ++step) {
    for (int s = 0; s < kSequences; ++s) {
      auto result = steps[step * kSequences + s].promise.get_future().get();
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(FirstFloat(*result), static_cast<float>((s + 1) * 100 * (step + 1)));
    }
  }
  // One request per sequence in flight at a time, so batches hold at most kSequences rows, and
  // the queue delay lets the sequences' first requests share one.
  std::lock_guard lock(acc.runner->mu);
  for (size_t size : acc.runner->batch_sizes) EXPECT_LE(size, static_cast<size_t>(kSequences));
  EXPECT_EQ(acc.runner->batch_sizes.front(), static_cast<size_t>(kSequences));
}

TEST(SequenceBatcherTest, RefusesRequestsWithoutIdOrStartOrWithSeveralRows) {
  Accumulator acc;
  Submitted s;
  auto request = Step(s);
  Status no_id = acc.batcher->Enqueue(std::move(request), Flags(0, true));
  EXPECT_EQ(no_id.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_id.message().find("correlation ID"), std::string::npos) << no_id;
  ASSERT_NE(request, nullptr);  // left with the caller

  Status no_start = acc.batcher->Enqueue(std::move(request), Flags(9));
  EXPECT_EQ(no_start.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_start.message().find("START"), std::string::npos) << no_start;
  EXPECT_NE(no_start.message().find("sequence 9"), std::string::npos) << no_start;

  request->batch_size = 2;
  Status rows = acc.batcher->Enqueue(std::move(request), Flags(9, true));
  EXPECT_EQ(rows.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(rows.message().find("batch size 1"), std::string::npos) << rows;

  request->batch_size = 1;
  SequenceFlags text = Flags(0, true);
  text.id_text = "abc";
  Status text_id = acc.batcher->Enqueue(std::move(request), text);
  EXPECT_EQ(text_id.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(text_id.message().find("CORRID"), std::string::npos) << text_id;
  EXPECT_EQ(acc.batcher->active_sequences(), 0u);
}

TEST(SequenceBatcherTest, AStringCorridGetsStringIdsAsTheyAreAndNumbersAsText) {
  Accumulator acc(0, nullptr, DataType::kString);
  std::vector<Submitted> steps(3);
  SequenceFlags text = Flags(0, true);
  text.id_text = "user-7";
  ASSERT_TRUE(acc.batcher->Enqueue(Step(steps[0]), text).ok());
  ASSERT_TRUE(acc.batcher->Enqueue(Step(steps[1]), Flags(42, true)).ok());
  text.start = false;
  ASSERT_TRUE(acc.batcher->Enqueue(Step(steps[2]), text).ok());
  for (Submitted& step : steps) ASSERT_TRUE(step.promise.get_future().get().ok());
  std::lock_guard lock(acc.runner->mu);
  std::vector<std::string> seen = acc.runner->id_texts;
  std::sort(seen.begin(), seen.end());  // the two sequences may share a batch in either order
  EXPECT_EQ(seen, (std::vector<std::string>{"42", "user-7", "user-7"}));
  EXPECT_EQ(acc.batcher->active_sequences(), 2u);
}

TEST(SequenceBatcherTest, RequestsQueuedAfterEndNeedANewStart) {
  Accumulator acc;
  acc.runner->pause = std::chrono::milliseconds(30);  // the later requests wait behind the first
  std::vector<Submitted> steps(3);
  for (Submitted& s : steps) s.value = 1;
  ASSERT_TRUE(acc.batcher->Enqueue(Step(steps[0]), Flags(3, true, true)).ok());
  ASSERT_TRUE(acc.batcher->Enqueue(Step(steps[1]), Flags(3)).ok());        // after END
  ASSERT_TRUE(acc.batcher->Enqueue(Step(steps[2]), Flags(3, true)).ok());  // a new sequence
  ASSERT_TRUE(steps[0].promise.get_future().get().ok());
  auto refused = steps[1].promise.get_future().get();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("ended"), std::string::npos) << refused.status();
  auto restarted = steps[2].promise.get_future().get();
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(FirstFloat(*restarted), 1.0f);  // from the initial state again
  EXPECT_EQ(acc.batcher->active_sequences(), 1u);
}

TEST(SequenceBatcherTest, IdleSequencesAreReleased) {
  ManualClockForTest clock;
  Accumulator acc(0, &clock);
  Submitted first;
  first.value = 2;
  ASSERT_TRUE(acc.batcher->Enqueue(Step(first), Flags(5, true)).ok());
  ASSERT_TRUE(first.promise.get_future().get().ok());
  ASSERT_TRUE(acc.batcher->WaitIdle(1000));
  EXPECT_EQ(acc.batcher->active_sequences(), 1u);

  clock.now += 4'000'000'000;  // within the 5 s timeout: still active
  Submitted second;
  second.value = 3;
  ASSERT_TRUE(acc.batcher->Enqueue(Step(second), Flags(5)).ok());
  auto kept = second.promise.get_future().get();
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(FirstFloat(*kept), 5.0f);

  clock.now += 6'000'000'000;  // past it
  EXPECT_EQ(acc.batcher->active_sequences(), 0u);
  Submitted late;
  Status released = acc.batcher->Enqueue(Step(late), Flags(5));
  EXPECT_EQ(released.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(released.message().find("idle"), std::string::npos) << released;
}

TEST(SequenceBatcherTest, AWrongStateOutputFailsTheRequestAndKeepsTheState) {
  Accumulator acc;
  Submitted first;
  first.value = 2;
  ASSERT_TRUE(acc.batcher->Enqueue(Step(first), Flags(1, true)).ok());
  ASSERT_TRUE(first.promise.get_future().get().ok());
  ASSERT_TRUE(acc.batcher->WaitIdle(1000));
  {
    std::lock_guard lock(acc.runner->mu);
    acc.runner->wrong_state_shape = true;
  }
  Submitted bad;
  bad.value = 10;
  ASSERT_TRUE(acc.batcher->Enqueue(Step(bad), Flags(1)).ok());
  auto failed = bad.promise.get_future().get();
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(failed.status().message().find("state_out"), std::string::npos) << failed.status();
  ASSERT_TRUE(acc.batcher->WaitIdle(1000));
  {
    std::lock_guard lock(acc.runner->mu);
    acc.runner->wrong_state_shape = false;
  }
  Submitted next;
  next.value = 1;
  ASSERT_TRUE(acc.batcher->Enqueue(Step(next), Flags(1)).ok());
  auto result = next.promise.get_future().get();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(FirstFloat(*result), 3.0f);  // 2 + 1: the failed step left no state
}

TEST(SequenceBatcherTest, HeldRequestsDrainAfterStopAccepting) {
  Accumulator acc;
  acc.runner->pause = std::chrono::milliseconds(20);
  std::vector<Submitted> steps(3);
  for (size_t i = 0; i < steps.size(); ++i) {
    steps[i].value = 1;
    ASSERT_TRUE(acc.batcher->Enqueue(Step(steps[i]), Flags(2, i == 0)).ok());
  }
  acc.batcher->StopAccepting();
  acc.queue->StopAccepting();
  Submitted refused;
  EXPECT_EQ(acc.batcher->Enqueue(Step(refused), Flags(2)).code(), absl::StatusCode::kAborted);
  ASSERT_TRUE(acc.batcher->WaitIdle(5000));
  for (size_t i = 0; i < steps.size(); ++i) {
    auto result = steps[i].promise.get_future().get();
    ASSERT_TRUE(result.ok()) << result.status();  // accepted before the stop: still answered
    EXPECT_EQ(FirstFloat(*result), static_cast<float>(i + 1));
  }
}

}  // namespace
}  // namespace tessera::dispatch
