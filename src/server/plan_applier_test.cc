#include "plan_applier.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "input_pool.h"

namespace tessera::server {
namespace {

constexpr uint64_t kImageRowBytes = 3 * 224 * 224 * 4;  // a ResNet-50 request, fp32

ServedModel Served(const std::string& name, std::vector<std::pair<DataType, Shape>> inputs) {
  auto config = std::make_shared<repository::ModelConfig>();
  config->name = name;
  config->max_batch_size = 32;
  for (auto& [type, dims] : inputs) {
    repository::TensorConfig input;
    input.name = absl::StrCat("input", config->inputs.size());
    input.data_type = type;
    input.dims = dims;
    config->inputs.push_back(input);
  }
  ServedModel served;
  served.name = name;
  served.version = 1;
  served.config = config;
  return served;
}

std::map<std::string, ServedModel> Models() {
  std::map<std::string, ServedModel> models;
  models["resnet50"] = Served("resnet50", {{DataType::kFp32, {3, 224, 224}}});
  models["bert"] = Served("bert", {{DataType::kInt64, {128}}, {DataType::kInt64, {128}}});
  models["dynamic"] = Served("dynamic", {{DataType::kFp32, {-1, 64}}});
  return models;
}

scheduler::Gpulet GpuletOf(std::vector<std::pair<std::string, int>> models) {
  scheduler::Gpulet gpulet;
  gpulet.partition_pct = 50;
  for (auto& [model, batch] : models) gpulet.models.push_back({model, batch});
  return gpulet;
}

// What the executor does with the launch: the pool is input_pool_fraction of the ring, split into
// input_pool_instances regions. Returns how many requests of `row_bytes` (one input) one region
// stages before it is full.
int RequestsOneRegionStages(const ExecutorLaunchOptions& launch, std::vector<PoolInputSpec> inputs,
                            std::vector<uint64_t> bytes) {
  InputPoolOptions options;
  options.bytes =
      static_cast<uint64_t>(launch.input_ring_bytes * launch.input_pool_fraction) / 4096 * 4096;
  options.regions = launch.input_pool_instances;
  auto pool = InputPool::Create(options);
  if (!pool->AddInstance("m", inputs)) return -1;
  std::vector<std::unique_ptr<PooledInputs>> held;
  while (held.size() < 100000) {
    auto slot = pool->Reserve("m", bytes);
    if (slot == nullptr) break;
    held.push_back(std::move(slot));
  }
  return static_cast<int>(held.size());
}

TEST(SizeGpuletInputRingTest, OneLargeModelGetsRoomForFourBatchesInItsRegion) {
  ExecutorLaunchOptions launch;  // 64 MiB ring, half of it the pool, 4 regions
  SizeGpuletInputRing(GpuletOf({{"resnet50", 32}}), Models(), &launch);
  EXPECT_EQ(launch.input_pool_instances, 1);
  EXPECT_GE(launch.input_ring_bytes, 2 * 4 * 32 * kImageRowBytes);
  EXPECT_EQ(launch.input_ring_bytes % 4096, 0u);
  EXPECT_GE(RequestsOneRegionStages(launch, {{4, kImageRowBytes}}, {kImageRowBytes}), 4 * 32);
  // After the sub-ring, a spill area for the wrapped head of a batch that straddles its end.
  InputPoolOptions options;
  options.bytes =
      static_cast<uint64_t>(launch.input_ring_bytes * launch.input_pool_fraction) / 4096 * 4096;
  options.regions = 1;
  auto pool = InputPool::Create(options);
  ASSERT_TRUE(pool->AddInstance("m", {{4, kImageRowBytes}}));
  EXPECT_GE(options.bytes - pool->SubRing("m", 0)->bytes, 32 * kImageRowBytes);
  // The gather part (the rest of the ring) holds two such batches too.
  EXPECT_GE(launch.input_ring_bytes * (1 - launch.input_pool_fraction), 2.0 * 32 * kImageRowBytes);
}

TEST(SizeGpuletInputRingTest, TheDefaultsRegionsWereTooSmallForThatModel) {
  // The case the sizing is for (an H100 run: most ResNet-50 batches of 8 missed the pool).
  ExecutorLaunchOptions defaults;
  EXPECT_LT(RequestsOneRegionStages(defaults, {{4, kImageRowBytes}}, {kImageRowBytes}), 2 * 8);
}

TEST(SizeGpuletInputRingTest, EveryModelOfAGpuletGetsARegionOfFourOfTheLargestBatches) {
  ExecutorLaunchOptions launch;
  SizeGpuletInputRing(GpuletOf({{"resnet50", 16}, {"bert", 8}}), Models(), &launch);
  EXPECT_EQ(launch.input_pool_instances, 2);
  EXPECT_GE(RequestsOneRegionStages(launch, {{4, kImageRowBytes}}, {kImageRowBytes}), 4 * 16);
  EXPECT_GE(RequestsOneRegionStages(launch, {{8, 1024}, {8, 1024}}, {1024, 1024}), 4 * 8);
}

TEST(SizeGpuletInputRingTest, SmallOrDynamicModelsKeepTheConfiguredRing) {
  ExecutorLaunchOptions launch;
  launch.input_ring_bytes = 8 << 20;
  SizeGpuletInputRing(GpuletOf({{"bert", 8}, {"dynamic", 8}}), Models(), &launch);
  EXPECT_EQ(launch.input_ring_bytes, 8u << 20);
  EXPECT_EQ(launch.input_pool_instances, 2);

  ExecutorLaunchOptions larger;
  larger.input_ring_bytes = 1ull << 30;  // the configured size is the least
  SizeGpuletInputRing(GpuletOf({{"resnet50", 32}}), Models(), &larger);
  EXPECT_EQ(larger.input_ring_bytes, 1ull << 30);
}

TEST(SizeGpuletInputRingTest, AModelTooLargeForAnySensibleRingKeepsTheConfiguredOne) {
  auto models = Models();
  models["huge"] = Served("huge", {{DataType::kFp32, {100000, 100000}}});  // 40 GB per row
  ExecutorLaunchOptions launch;
  SizeGpuletInputRing(GpuletOf({{"huge", 32}}), models, &launch);
  EXPECT_EQ(launch.input_ring_bytes, 64u << 20);
}

TEST(SizeGpuletInputRingTest, NoPoolMeansNoPoolSizing) {
  ExecutorLaunchOptions launch;
  launch.input_pool_fraction = 0;
  SizeGpuletInputRing(GpuletOf({{"resnet50", 32}}), Models(), &launch);
  EXPECT_EQ(launch.input_ring_bytes, 64u << 20);
}

}  // namespace
}  // namespace tessera::server
