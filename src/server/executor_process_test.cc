// ExecutorProcess against a real tessera-executor running the mlp: batches whose requests were
// staged into the input pool against the same batches gathered at batch time.
#include "executor_process.h"

#include <signal.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "executor_batch_runner.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "tessera/repository/model_config.h"

namespace tessera::server {
namespace {

constexpr char kKey[] = "mlp/1#0";

class ExecutorProcessPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = repository::LoadModelConfigFile(
        std::string(TESSERA_SOURCE_DIR) + "/configs/models/mlp/config.yaml", "mlp");
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *std::move(config);
    static std::atomic<int> generation{0};
    ExecutorLaunchOptions options;
    options.executor_id = 7;
    options.generation = generation++;
    options.binary = TESSERA_EXECUTOR_BINARY;
    options.input_ring_bytes = 1 << 20;
    options.output_ring_bytes = 1 << 20;
    options.batch_timeout_ms = batch_timeout_ms_;
    options.input_mirror = input_mirror_;
    auto process = ExecutorProcess::Start(options, nullptr);
    ASSERT_TRUE(process.ok()) << process.status();
    process_ = *std::move(process);

    Status loaded = process_->Load(MlpLoad(kKey), 60000);
    ASSERT_TRUE(loaded.ok()) << loaded;
  }

  ipc::LoadModel MlpLoad(const std::string& key) const {
    ipc::LoadModel load;
    load.set_instance_key(key);
    load.set_model_name("mlp");
    load.set_version(1);
    load.set_model_path(std::string(TESSERA_SOURCE_DIR) + "/configs/models/mlp/1/model.onnx");
    load.set_max_batch_size(config_.max_batch_size);
    for (const auto& tensor : config_.inputs) {
      ipc::TensorSpec* spec = load.add_inputs();
      spec->set_name(tensor.name);
      spec->set_data_type(static_cast<int>(tensor.data_type));
      for (int64_t dim : tensor.dims) spec->add_dims(dim);
    }
    return load;
  }

  // Requests with the given row counts, random inputs (kept alive in data_).
  std::vector<std::unique_ptr<dispatch::Request>> MakeRequests(const std::vector<int64_t>& rows) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1, 1);
    std::vector<std::unique_ptr<dispatch::Request>> requests;
    for (int64_t r : rows) {
      auto& data = data_.emplace_back(static_cast<size_t>(r * 64));
      for (float& v : data) v = dist(rng);
      auto request = std::make_unique<dispatch::Request>();
      request->batch_size = r;
      request->inputs.push_back(
          TensorView{"input", DataType::kFp32, {r, 64}, data.data(), data.size() * sizeof(float)});
      requests.push_back(std::move(request));
    }
    return requests;
  }

  std::vector<std::string> Run(const std::vector<std::unique_ptr<dispatch::Request>>& requests) {
    std::vector<const dispatch::Request*> batch;
    for (const auto& request : requests) batch.push_back(request.get());
    auto responses = process_->RunBatch(kKey, config_, batch);
    EXPECT_TRUE(responses.ok()) << responses.status();
    std::vector<std::string> outputs;
    if (!responses.ok()) return outputs;
    for (const dispatch::Response& response : *responses) {
      EXPECT_EQ(response.outputs.size(), 1u);
      outputs.push_back(response.outputs.empty() ? "" : response.outputs[0].bytes);
    }
    return outputs;
  }

  void StageAll(std::vector<std::unique_ptr<dispatch::Request>>& requests) {
    for (auto& request : requests) {
      request->staged = process_->Stage(kKey, config_, *request);
      ASSERT_NE(request->staged, nullptr);
    }
  }

  // Submits `batches` in one SubmitBatches; returns each batch's outcome, by index, once all came.
  std::vector<StatusOr<std::vector<dispatch::Response>>> SubmitAll(
      const std::vector<std::vector<const dispatch::Request*>>& batches) {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::optional<StatusOr<std::vector<dispatch::Response>>>> outcomes(batches.size());
    std::vector<int> calls(batches.size(), 0);
    size_t answered = 0;
    std::vector<ExecutorProcess::BatchDone> done;
    for (size_t i = 0; i < batches.size(); ++i) {
      done.push_back([&, i](StatusOr<std::vector<dispatch::Response>> outcome) {
        std::lock_guard lock(mu);
        if (calls[i]++ == 0) outcomes[i] = std::move(outcome);
        ++answered;
        cv.notify_all();
      });
    }
    process_->SubmitBatches(kKey, config_, batches, std::move(done));
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(60),
                            [&] { return answered >= batches.size(); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a second call would show here
    std::vector<StatusOr<std::vector<dispatch::Response>>> result;
    for (size_t i = 0; i < batches.size(); ++i) {
      EXPECT_EQ(calls[i], 1) << "batch " << i << " answered " << calls[i] << " times";
      result.push_back(outcomes[i] ? std::move(*outcomes[i]) : absl::InternalError("no answer"));
    }
    return result;
  }

  // Stages and runs 250 batches of 1 + 4 rows, each round staging the next batch before the last
  // one's slots are released, as a pipeline would: the sub-ring never empties and wraps. Returns
  // the counters after checking every batch's outputs.
  InputPoolCounters RunManyStagedBatches() {
    auto requests = MakeRequests({1, 4});
    const std::vector<std::string> expected = Run(requests);
    for (int i = 0; i < 250; ++i) {
      StageAll(requests);  // replaces (releases) the previous round's handles one by one
      EXPECT_EQ(Run(requests), expected) << "batch " << i;
    }
    return process_->input_pool_counters();
  }

  int64_t batch_timeout_ms_ = 300000;
  std::string input_mirror_ = "auto";  // a CPU executor has none
  repository::ModelConfig config_;
  std::unique_ptr<ExecutorProcess> process_;
  std::vector<std::vector<float>> data_;
};

TEST_F(ExecutorProcessPoolTest, StagedBatchMatchesGatheredBatchByteForByte) {
  auto requests = MakeRequests({1, 2, 3, 2});
  const std::vector<std::string> gathered = Run(requests);
  ASSERT_EQ(gathered.size(), 4u);
  EXPECT_EQ(gathered[2].size(), 3u * 10 * sizeof(float));
  InputPoolCounters after_gather = process_->input_pool_counters();
  EXPECT_EQ(after_gather.batches_gathered, 1u);
  EXPECT_EQ(after_gather.batches_pooled, 0u);
  EXPECT_EQ(after_gather.gather_bytes, 8u * 64 * sizeof(float));

  StageAll(requests);
  // The executor must read the pooled copy, not the caller's bytes: scribble over those.
  for (auto& data : data_) std::fill(data.begin(), data.end(), 1e6f);
  const std::vector<std::string> pooled = Run(requests);
  EXPECT_EQ(pooled, gathered);
  InputPoolCounters after_pool = process_->input_pool_counters();
  EXPECT_EQ(after_pool.batches_pooled, 1u);
  EXPECT_EQ(after_pool.batches_gathered, 1u);
  EXPECT_EQ(after_pool.gather_bytes, after_gather.gather_bytes);  // no copy at batch time
  EXPECT_EQ(after_pool.requests_staged, 4u);
}

TEST_F(ExecutorProcessPoolTest, MixedOrReorderedBatchesAreGathered) {
  auto requests = MakeRequests({2, 2, 2});
  const std::vector<std::string> expected = Run(requests);
  StageAll(requests);
  requests[1]->staged.reset();  // one request not pooled: the whole batch gathers
  EXPECT_EQ(Run(requests), expected);
  // Request 1 staged again lands after request 2 in the pool: staged, but not one run.
  requests[1]->staged = process_->Stage(kKey, config_, *requests[1]);
  ASSERT_NE(requests[1]->staged, nullptr);
  EXPECT_EQ(Run(requests), expected);
  InputPoolCounters counters = process_->input_pool_counters();
  EXPECT_EQ(counters.batches_pooled, 0u);
  EXPECT_EQ(counters.batches_gathered, 3u);

  // Released and staged again in batch order, the same batch goes pooled.
  for (auto& request : requests) request->staged.reset();
  StageAll(requests);
  EXPECT_EQ(Run(requests), expected);
  EXPECT_EQ(process_->input_pool_counters().batches_pooled, 1u);
}

TEST_F(ExecutorProcessPoolTest, BatchesStraddlingTheWrapGoPooledWithTheirHeadCopied) {
  // The mlp's region is 1 MiB / 2 / 4 = 128 KiB, of which 104,860 bytes of sub-ring (409 rows
  // of 256 bytes and a bit): it wraps about every 82 batches of 5 rows, each time in the middle
  // of a batch, or with bytes left at the end where the 4-row request does not fit.
  InputPoolCounters counters = RunManyStagedBatches();
  EXPECT_EQ(counters.batches_gathered, 1u);  // the first one, before anything was staged
  EXPECT_EQ(counters.batches_pooled, 250u);
  EXPECT_GE(counters.batches_spilled, 2u);
  EXPECT_GT(counters.spill_bytes, 0u);
  EXPECT_EQ(counters.requests_not_staged, 0u);
  EXPECT_EQ(counters.batches_mirrored, 0u);  // no mirror on a CPU executor
}

class ExecutorProcessHostMirrorTest : public ExecutorProcessPoolTest {
 protected:
  ExecutorProcessHostMirrorTest() { input_mirror_ = "host"; }
};

TEST_F(ExecutorProcessHostMirrorTest, SpilledHeadsReachTheMirrorBeforeTheirBatch) {
  // With a mirror the executor reads a batch from its copy only when every byte of the run was
  // announced: a head moved but not announced (or announced after the batch) would read stale or
  // unmirrored bytes and the outputs would differ.
  InputPoolCounters counters = RunManyStagedBatches();
  EXPECT_EQ(counters.batches_pooled, 250u);
  EXPECT_GE(counters.batches_spilled, 2u);
  EXPECT_EQ(counters.batches_mirrored, 250u);  // the spilled ones too: their heads were announced
}

TEST_F(ExecutorProcessPoolTest, FullPoolLeavesRequestsUnstaged) {
  auto requests = MakeRequests({8});
  std::vector<std::unique_ptr<dispatch::StagedInputs>> held;
  // 104,860 bytes of sub-ring in the 128 KiB region / 2 KiB per request = 51 fit.
  for (int i = 0; i < 51; ++i) {
    held.push_back(process_->Stage(kKey, config_, *requests[0]));
    ASSERT_NE(held.back(), nullptr) << i;
  }
  EXPECT_EQ(process_->Stage(kKey, config_, *requests[0]), nullptr);
  EXPECT_EQ(process_->Stage("not/loaded#9", config_, *requests[0]), nullptr);
  EXPECT_EQ(process_->input_pool_counters().requests_not_staged, 2u);
  held.clear();
  EXPECT_NE(process_->Stage(kKey, config_, *requests[0]), nullptr);
}

TEST_F(ExecutorProcessPoolTest, StagedHandleOutlivesACrashedProcess) {
  auto requests = MakeRequests({1});
  StageAll(requests);
  kill(process_->pid(), SIGKILL);
  for (int i = 0; i < 500 && process_->alive(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(process_->alive());
  EXPECT_EQ(process_->Stage(kKey, config_, *requests[0]), nullptr);
  process_.reset();
  requests[0]->staged.reset();  // releases into the dead process's pool state: no crash
}

TEST_F(ExecutorProcessPoolTest, CpuWeightsAreNotExportedAndALoadGivenForeignWeightsUsesItsOwn) {
  auto exported = process_->ExportWeights(kKey, 10000);
  ASSERT_FALSE(exported.ok());
  EXPECT_EQ(exported.status().code(), absl::StatusCode::kUnimplemented) << exported.status();
  EXPECT_NE(exported.status().message().find("does not share weights"), std::string::npos)
      << exported.status();
  auto unknown = process_->ExportWeights("nope/1", 10000);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();
  EXPECT_NE(unknown.status().message().find("nope/1"), std::string::npos) << unknown.status();

  // A load that comes with another process's weights (here a memory file) still loads, with its
  // own copy, and serves; the descriptor travels with the frame and is closed by the executor.
  SharedWeightsHandle foreign;
  foreign.fd = UniqueFd(memfd_create("foreign-weights", MFD_CLOEXEC));
  ASSERT_TRUE(foreign.fd.valid());
  foreign.bytes = 4096;
  foreign.layout = "cuda gpu=0 fp32 bytes=4096 constants=1 hash=0";
  foreign.source = "a test";
  bool weights_shared = true;
  ASSERT_TRUE(process_->Load(MlpLoad("mlp/1#1"), 60000, &foreign, &weights_shared).ok());
  EXPECT_FALSE(weights_shared);
  auto requests = MakeRequests({2});
  std::vector<const dispatch::Request*> batch = {requests[0].get()};
  auto responses = process_->RunBatch("mlp/1#1", config_, batch);
  ASSERT_TRUE(responses.ok()) << responses.status();
  EXPECT_EQ(responses->size(), 1u);
}

// The model manager loads a KIND_AUTO model the GPU's engine refuses again on the CPU, so the
// executor's UNIMPLEMENTED must reach it as such; other refusals are the model's.
TEST_F(ExecutorProcessPoolTest, AnEngineRefusalKeepsItsCodeAndABrokenFileIsInvalidArgument) {
  onnx::ModelProto model;
  {
    std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/configs/models/mlp/1/model.onnx",
                     std::ios::binary);
    ASSERT_TRUE(model.ParseFromIstream(&in));
  }
  ASSERT_GT(model.opset_import_size(), 0);
  model.mutable_opset_import(0)->set_version(999);
  const std::string path = ::testing::TempDir() + "/mlp_opset_999.onnx";
  {
    std::ofstream out(path, std::ios::binary);
    ASSERT_TRUE(model.SerializeToOstream(&out));
  }
  ipc::LoadModel load = MlpLoad("mlp/1#9");
  load.set_model_path(path);
  Status refused = process_->Load(load, 60000);
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnimplemented) << refused;
  EXPECT_NE(refused.message().find("opset 999"), std::string::npos) << refused;

  load.set_model_path(path + ".missing");
  Status missing = process_->Load(load, 60000);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument) << missing;
  std::filesystem::remove(path);
}

TEST_F(ExecutorProcessPoolTest, WarmUpRunsEachSizeTwiceSoTheFirstLiveBatchIsNotTheEnginesFirst) {
  const InputPoolCounters before = process_->input_pool_counters();
  ASSERT_TRUE(WarmUp(*process_, kKey, config_, 4).ok());
  const InputPoolCounters after = process_->input_pool_counters();
  EXPECT_EQ(after.batches_gathered - before.batches_gathered, 2u);
}

TEST_F(ExecutorProcessPoolTest, WarmUpOfInputsTooLargeForTheRingFailsBeforeAllocatingThem) {
  // Dims from a model file: 2^40 x 64 FP32 is 256 TiB, far past the 1 MiB ring (and memory); a
  // wrapped 2^62 x 4 x 4 bytes must not pass as 0 bytes either.
  for (const std::vector<int64_t>& dims :
       {std::vector<int64_t>{int64_t{1} << 40, 64}, std::vector<int64_t>{int64_t{1} << 62, 4}}) {
    repository::ModelConfig config = config_;
    config.inputs[0].dims = dims;
    const Status status = WarmUp(*process_, kKey, config, 1);
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
    EXPECT_NE(status.message().find("input 'input' of shape [1, "), std::string::npos) << status;
    EXPECT_NE(status.message().find("executors.input_ring_bytes"), std::string::npos) << status;
  }
  EXPECT_TRUE(process_->alive());
  EXPECT_TRUE(WarmUp(*process_, kKey, config_, 1).ok());
}

TEST_F(ExecutorProcessPoolTest, SubmittedBatchesMatchBatchesRunOneByOne) {
  std::vector<int64_t> rows;
  for (int i = 0; i < 40; ++i) rows.push_back(1 + i % 4);
  auto requests = MakeRequests(rows);
  std::vector<std::vector<const dispatch::Request*>> batches;
  std::vector<std::string> expected;
  for (size_t i = 0; i < requests.size(); i += 2) {
    batches.push_back({requests[i].get(), requests[i + 1].get()});
    auto outputs = process_->RunBatch(kKey, config_, batches.back());
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    for (const auto& response : *outputs) expected.push_back(response.outputs[0].bytes);
  }
  auto outcomes = SubmitAll(batches);
  std::vector<std::string> got;
  for (auto& outcome : outcomes) {
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    ASSERT_EQ(outcome->size(), 2u);
    for (const auto& response : *outcome) got.push_back(response.outputs[0].bytes);
  }
  EXPECT_EQ(got, expected);
}

TEST_F(ExecutorProcessPoolTest, ASubmissionLargerThanTheGatherRingIsSentInParts) {
  // 300 batches of 8 rows gather 600 KiB; the gather part of the 1 MiB input ring holds 512 KiB,
  // which comes back only as sent batches are answered: the first ones must go out first.
  auto requests = MakeRequests(std::vector<int64_t>(300, 8));
  std::vector<std::vector<const dispatch::Request*>> batches;
  for (const auto& request : requests) batches.push_back({request.get()});
  const auto start = std::chrono::steady_clock::now();
  auto outcomes = SubmitAll(batches);
  for (auto& outcome : outcomes) ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(process_->input_pool_counters().batches_gathered, 300u);
}

TEST_F(ExecutorProcessPoolTest, BatchesSubmittedFromAResultCallbackGoOutWithTheReadersNextWrite) {
  // Each answer submits the next batch from the reader thread (as the model queue does): those go
  // out in the reader's own write, after its ReleaseOutputs, and must all come back right.
  auto requests = MakeRequests(std::vector<int64_t>(60, 2));
  std::vector<std::string> expected;
  for (const auto& request : requests) {
    auto outputs = process_->RunBatch(kKey, config_, {request.get()});
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    expected.push_back(outputs->at(0).outputs[0].bytes);
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> got(requests.size());
  size_t answered = 0;
  std::function<void(size_t)> submit = [&](size_t i) {
    std::vector<ExecutorProcess::BatchDone> done;
    done.push_back([&, i](StatusOr<std::vector<dispatch::Response>> outcome) {
      if (i + 3 < requests.size()) submit(i + 3);  // on the reader thread
      // Last: once the count is complete the test may return and take all of this with it.
      std::lock_guard lock(mu);
      got[i] = outcome.ok() ? outcome->at(0).outputs[0].bytes : outcome.status().ToString();
      ++answered;
      cv.notify_all();
    });
    process_->SubmitBatches(kKey, config_, {{requests[i].get()}}, std::move(done));
  };
  for (size_t i = 0; i < 3; ++i) submit(i);  // three chains in flight at once
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return answered == requests.size(); }));
  EXPECT_EQ(got, expected);
}

TEST_F(ExecutorProcessPoolTest, AGatherLargerThanTheWholeRingFailsAtOnceAndTheRestRun) {
  // 1 MiB input ring, half of it the pool: 512 KiB of gather space can never hold 600 KiB.
  auto big = MakeRequests({2400});
  auto small = MakeRequests({1, 1});
  auto outcomes = SubmitAll({{big[0].get()}, {small[0].get(), small[1].get()}});
  ASSERT_FALSE(outcomes[0].ok());
  EXPECT_TRUE(absl::IsResourceExhausted(outcomes[0].status())) << outcomes[0].status();
  EXPECT_NE(outcomes[0].status().message().find("executors.input_ring_bytes"), std::string::npos)
      << outcomes[0].status();
  ASSERT_TRUE(outcomes[1].ok()) << outcomes[1].status();
}

TEST_F(ExecutorProcessPoolTest, AKilledExecutorAnswersEveryBatchInFlightOnce) {
  // 400 × 8 rows gather 800 KiB, more than the 512 KiB gather space: at the kill some batches are
  // running, some sent, and some still waiting in the server for ring space.
  auto requests = MakeRequests(std::vector<int64_t>(400, 8));
  std::vector<std::vector<const dispatch::Request*>> batches;
  for (const auto& request : requests) batches.push_back({request.get()});
  std::thread killer([pid = process_->pid()] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    kill(pid, SIGKILL);
  });
  auto outcomes = SubmitAll(batches);  // checks one call per batch
  killer.join();
  size_t failed = 0;
  for (auto& outcome : outcomes) {
    if (outcome.ok()) continue;
    ++failed;
    EXPECT_TRUE(absl::IsUnavailable(outcome.status())) << outcome.status();
  }
  EXPECT_GT(failed, 0u);
}

class ExecutorProcessWatchdogTest : public ExecutorProcessPoolTest {
 protected:
  ExecutorProcessWatchdogTest() { batch_timeout_ms_ = 300; }
};

TEST_F(ExecutorProcessWatchdogTest, AHungExecutorIsKilledAndItsBatchFails) {
  auto requests = MakeRequests({1});
  kill(process_->pid(), SIGSTOP);  // hangs: alive, never answers
  const auto start = std::chrono::steady_clock::now();
  auto outcome = process_->RunBatch(kKey, config_, {requests[0].get()});
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(outcome.ok());
  EXPECT_TRUE(absl::IsUnavailable(outcome.status())) << outcome.status();
  EXPECT_NE(outcome.status().message().find("killed by signal 9"), std::string::npos)
      << outcome.status();
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  EXPECT_LT(waited, std::chrono::seconds(10));
}

}  // namespace
}  // namespace tessera::server
