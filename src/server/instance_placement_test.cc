#include "instance_placement.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::server {
namespace {

using repository::InstanceGroupConfig;
using repository::InstanceKind;
using repository::ModelConfig;

// Stands in for ExecutorPool::AddExecutor: records the devices asked for and hands out slots
// after the pool's, or fails when `fail` is set.
struct AddedExecutorsForTest {
  int next_slot = 0;
  bool fail = false;
  std::vector<std::string> devices;

  InstancePlacementOptions Options(int base_slots, const std::string& base_device, int gpus) {
    next_slot = base_slots;
    InstancePlacementOptions options;
    options.base_slots = base_slots;
    options.base_device = base_device;
    options.gpu_count = gpus;
    options.add_executor = [this](const std::string& device) -> StatusOr<int> {
      if (fail) return absl::InternalError("executor did not say hello");
      devices.push_back(device);
      return next_slot++;
    };
    return options;
  }
};

ModelConfig WithGroups(std::vector<InstanceGroupConfig> groups) {
  ModelConfig config;
  config.name = "m";
  config.instance_groups = std::move(groups);
  return config;
}

InstanceGroupConfig Group(InstanceKind kind, int count, std::vector<int> gpus = {}) {
  return {"", kind, count, std::move(gpus)};
}

TEST(InstancePlacerTest, OnAGpuServerKindCpuGoesToOneCpuExecutorStartedOnce) {
  AddedExecutorsForTest added;
  InstancePlacer placer(added.Options(2, "cuda:0", 1));
  auto slots = placer.Place(WithGroups({Group(InstanceKind::kCpu, 2)}));
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(*slots, (std::vector<int>{2, 2}));
  EXPECT_EQ(added.devices, std::vector<std::string>{"cpu"});
  EXPECT_EQ(placer.DeviceOf(2), "cpu");
  EXPECT_EQ(placer.DeviceOf(0), "cuda:0");

  // A second model's CPU instances share that executor.
  slots = placer.Place(WithGroups({Group(InstanceKind::kCpu, 1)}));
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(*slots, std::vector<int>{2});
  EXPECT_EQ(added.devices.size(), 1u);
}

TEST(InstancePlacerTest, GpuAndAutoGroupsTakeThePoolRoundRobinAcrossModels) {
  AddedExecutorsForTest added;
  InstancePlacer placer(added.Options(2, "cuda:0", 1));
  auto first =
      placer.Place(WithGroups({Group(InstanceKind::kGpu, 1), Group(InstanceKind::kAuto, 2)}));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, (std::vector<int>{0, 1, 0}));
  auto second = placer.Place(WithGroups({}));  // no instance_group: one instance
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, std::vector<int>{1});
  EXPECT_TRUE(added.devices.empty());
}

TEST(InstancePlacerTest, MixedGroupsSplitBetweenTheGpuAndTheCpu) {
  AddedExecutorsForTest added;
  InstancePlacer placer(added.Options(1, "cuda:0", 1));
  auto slots =
      placer.Place(WithGroups({Group(InstanceKind::kGpu, 1), Group(InstanceKind::kCpu, 1)}));
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(*slots, (std::vector<int>{0, 1}));
  EXPECT_EQ(added.devices, std::vector<std::string>{"cpu"});
}

TEST(InstancePlacerTest, GpusPutCountInstancesOnEachListedGpu) {
  AddedExecutorsForTest added;
  InstancePlacer placer(added.Options(1, "cuda:0", 3));
  auto slots = placer.Place(WithGroups({Group(InstanceKind::kGpu, 2, {0, 2})}));
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(*slots, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(added.devices, std::vector<std::string>{"cuda:2"});
  EXPECT_EQ(placer.DeviceOf(1), "cuda:2");
}

TEST(InstancePlacerTest, WithoutGpusAGroupHasCountInstancesOnEveryGpu) {
  AddedExecutorsForTest added;
  InstancePlacer placer(added.Options(1, "cuda:0", 2));
  auto slots = placer.Place(WithGroups({Group(InstanceKind::kAuto, 2)}));
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(*slots, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(added.devices, std::vector<std::string>{"cuda:1"});
  slots = placer.Place(WithGroups({}));  // no instance_group: one instance on each GPU
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(*slots, (std::vector<int>{0, 1}));
}

TEST(InstancePlacerTest, AGpuTheServerDoesNotHaveIsRefusedBeforeAnythingStarts) {
  AddedExecutorsForTest added;
  InstancePlacer placer(added.Options(1, "cuda:0", 2));
  auto slots = placer.Place(
      WithGroups({Group(InstanceKind::kCpu, 1), Group(InstanceKind::kGpu, 1, {1, 2})}));
  ASSERT_FALSE(slots.ok());
  EXPECT_EQ(slots.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(slots.status().message(),
            "instance_group[1].gpus lists GPU 2, but this server has 2 GPU(s) (ids 0..1)");
  EXPECT_TRUE(added.devices.empty());  // the CPU group's executor was not started either
}

TEST(InstancePlacerTest, OnACpuServerEveryKindAndGpuListTakesThePool) {
  AddedExecutorsForTest added;
  InstancePlacer placer(added.Options(2, "cpu", 0));
  auto slots =
      placer.Place(WithGroups({Group(InstanceKind::kGpu, 1, {3}), Group(InstanceKind::kCpu, 1),
                               Group(InstanceKind::kAuto, 1)}));
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(*slots, (std::vector<int>{0, 1, 0}));
  EXPECT_TRUE(added.devices.empty());
}

TEST(InstancePlacerTest, WorkersShareOneExecutorOfTheFirstGroupsKind) {
  AddedExecutorsForTest added;
  InstancePlacer placer(added.Options(2, "cuda:0", 1));
  ModelConfig config = WithGroups({Group(InstanceKind::kCpu, 1)});
  config.worker_batch_sizes = {1, 4, 16};
  auto slots = placer.Place(config);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(*slots, (std::vector<int>{2, 2, 2}));

  config.instance_groups.clear();
  slots = placer.Place(config);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(*slots, (std::vector<int>{0, 0, 0}));
}

TEST(InstancePlacerTest, AnExecutorThatFailsToStartFailsThePlacementAndIsTriedAgainNextTime) {
  AddedExecutorsForTest added;
  InstancePlacer placer(added.Options(1, "cuda:0", 1));
  added.fail = true;
  auto slots = placer.Place(WithGroups({Group(InstanceKind::kCpu, 1)}));
  ASSERT_FALSE(slots.ok());
  EXPECT_EQ(slots.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(slots.status().message(),
            "cannot start an executor on cpu: executor did not say hello");
  added.fail = false;
  slots = placer.Place(WithGroups({Group(InstanceKind::kCpu, 1)}));
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(*slots, std::vector<int>{1});
}

TEST(InstancePlacerTest, CpuFallbackMovesKindAutoGroupsToTheCpuWithTheirCounts) {
  AddedExecutorsForTest added;
  InstancePlacer placer(added.Options(1, "cuda:0", 2));
  auto on_cpu = placer.CpuFallback(
      WithGroups({Group(InstanceKind::kAuto, 2, {1}), Group(InstanceKind::kCpu, 1)}));
  ASSERT_TRUE(on_cpu.has_value());
  ASSERT_EQ(on_cpu->instance_groups.size(), 2u);
  EXPECT_EQ(on_cpu->instance_groups[0].kind, InstanceKind::kCpu);
  EXPECT_EQ(on_cpu->instance_groups[0].count, 2);
  EXPECT_TRUE(on_cpu->instance_groups[0].gpus.empty());
  EXPECT_EQ(on_cpu->name, "m");
  // Placed, every instance shares the one CPU executor started for them.
  auto slots = placer.Place(*on_cpu);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_EQ(*slots, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(added.devices, std::vector<std::string>{"cpu"});

  // No instance_group is Place's default KIND_AUTO group of one.
  on_cpu = placer.CpuFallback(WithGroups({}));
  ASSERT_TRUE(on_cpu.has_value());
  ASSERT_EQ(on_cpu->instance_groups.size(), 1u);
  EXPECT_EQ(on_cpu->instance_groups[0].kind, InstanceKind::kCpu);
  EXPECT_EQ(on_cpu->instance_groups[0].count, 1);
}

TEST(InstancePlacerTest, NoCpuFallbackForKindGpuForCpuGroupsOrOnACpuServer) {
  AddedExecutorsForTest added;
  InstancePlacer gpu_server(added.Options(1, "cuda:0", 1));
  // The user asked for the GPU: the CUDA backend's refusal stands.
  EXPECT_FALSE(
      gpu_server
          .CpuFallback(WithGroups({Group(InstanceKind::kAuto, 1), Group(InstanceKind::kGpu, 1)}))
          .has_value());
  // Already on the CPU: loading again would change nothing.
  EXPECT_FALSE(gpu_server.CpuFallback(WithGroups({Group(InstanceKind::kCpu, 1)})).has_value());
  InstancePlacer cpu_server(added.Options(1, "cpu", 0));
  EXPECT_FALSE(cpu_server.CpuFallback(WithGroups({Group(InstanceKind::kAuto, 1)})).has_value());
  InstancePlacementOptions fixed;  // no executors can be added
  fixed.base_device = "cuda:0";
  fixed.gpu_count = 1;
  InstancePlacer fixed_pool(fixed);
  EXPECT_FALSE(fixed_pool.CpuFallback(WithGroups({Group(InstanceKind::kAuto, 1)})).has_value());
}

}  // namespace
}  // namespace tessera::server
