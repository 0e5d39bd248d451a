// ExecutorProcess against a real tessera-executor running the mlp: batches whose requests were
// staged into the input pool against the same batches gathered at batch time.
#include "executor_process.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
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
    auto process = ExecutorProcess::Start(options, nullptr);
    ASSERT_TRUE(process.ok()) << process.status();
    process_ = *std::move(process);

    ipc::LoadModel load;
    load.set_instance_key(kKey);
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
    Status loaded = process_->Load(load, 60000);
    ASSERT_TRUE(loaded.ok()) << loaded;
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

TEST_F(ExecutorProcessPoolTest, ManyStagedBatchesWrapTheSubRingAndStayCorrect) {
  // The mlp's region is 1 MiB / 2 / 4 = 128 KiB: 512 rows of 256 bytes. Each round stages the
  // next batch (5 rows) before the last one's slots are released, as a pipeline would, so the
  // sub-ring never empties and wraps about every 102 batches; 512 % 5 = 2 rows are left at the
  // end, where the 1-row request fits and the 4-row one does not: that batch is gathered.
  auto requests = MakeRequests({1, 4});
  const std::vector<std::string> expected = Run(requests);
  for (int i = 0; i < 250; ++i) {
    StageAll(requests);  // replaces (releases) the previous round's handles one by one
    ASSERT_EQ(Run(requests), expected) << "batch " << i;
  }
  InputPoolCounters counters = process_->input_pool_counters();
  EXPECT_GE(counters.batches_gathered, 2u);  // the first (unstaged) one and >= 1 wrap
  EXPECT_GE(counters.batches_pooled, 240u);
  EXPECT_EQ(counters.batches_pooled + counters.batches_gathered, 251u);
  EXPECT_EQ(counters.requests_not_staged, 0u);
}

TEST_F(ExecutorProcessPoolTest, FullPoolLeavesRequestsUnstaged) {
  auto requests = MakeRequests({8});
  std::vector<std::unique_ptr<dispatch::StagedInputs>> held;
  // 128 KiB region / 2 KiB per request = 64 fit.
  for (int i = 0; i < 64; ++i) {
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

}  // namespace
}  // namespace tessera::server
