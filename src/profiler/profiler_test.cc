#include "profiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tessera/engine/engine.h"
#include "tessera/repository/repository.h"
#include "tessera/scheduler/profile.h"

namespace tessera::profiler {
namespace {

namespace fs = std::filesystem;
using scheduler::ModelProfile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kModels = std::string(TESSERA_SOURCE_DIR) + "/configs/models";

fs::path FreshTempDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("profiler_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(CoresForPartitionTest, RoundsHalfUpAndNeverBelowOne) {
  EXPECT_EQ(CoresForPartition(20, 2), 1);  // 0.4 → at least 1
  EXPECT_EQ(CoresForPartition(50, 2), 1);
  EXPECT_EQ(CoresForPartition(60, 2), 1);  // 1.2
  EXPECT_EQ(CoresForPartition(80, 2), 2);  // 1.6
  EXPECT_EQ(CoresForPartition(100, 2), 2);
  EXPECT_EQ(CoresForPartition(50, 3), 2);  // 1.5 rounds up
  EXPECT_EQ(CoresForPartition(20, 16), 3);
  EXPECT_EQ(CoresForPartition(100, 1), 1);
}

TEST(DefaultPartitionsTest, OnePerDistinctCoreCountKeepingTheLargest) {
  EXPECT_THAT(DefaultPartitions(1), ElementsAre(100));
  // 20..60 % are all 1 core of 2; 80 and 100 are 2.
  EXPECT_THAT(DefaultPartitions(2), ElementsAre(60, 100));
  // 1, 2, 2, 2, 3, 4 cores.
  EXPECT_THAT(DefaultPartitions(4), ElementsAre(20, 60, 80, 100));
  // 2, 3, 4, 5, 6, 8 and 3, 6, 8, 10, 13, 16 cores: all distinct.
  EXPECT_THAT(DefaultPartitions(8), ElementsAre(20, 40, 50, 60, 80, 100));
  EXPECT_THAT(DefaultPartitions(16), ElementsAre(20, 40, 50, 60, 80, 100));
}

TEST(DefaultBatchesTest, PowersOfTwoAndTheMaximum) {
  EXPECT_THAT(DefaultBatches(0), ElementsAre(1));
  EXPECT_THAT(DefaultBatches(1), ElementsAre(1));
  EXPECT_THAT(DefaultBatches(8), ElementsAre(1, 2, 4, 8));
  EXPECT_THAT(DefaultBatches(12), ElementsAre(1, 2, 4, 8, 12));
}

TEST(ParseIntListTest, AcceptsAndSorts) {
  auto parsed = ParseIntList("100, 50", "--partitions", 1, 100, 100);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(*parsed, ElementsAre(50, 100));
}

TEST(ParseIntListTest, RejectsBadListsNamingTheProblem) {
  struct Case {
    const char* text;
    const char* message;
  };
  for (const Case& c :
       {Case{"50,abc,100", "'abc' is not an integer"}, Case{"0,100", "0 is outside 1..100"},
        Case{"50,150", "150 is outside 1..100"}, Case{"50,50,100", "50 is listed twice"},
        Case{"50", "must contain 100"}, Case{"", "'' is not an integer"}}) {
    auto parsed = ParseIntList(c.text, "--partitions", 1, 100, 100);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("--partitions"));
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(c.message)) << c.text;
  }
}

TEST(MakeMonotoneTest, LeavesAMonotoneTableAlone) {
  ModelProfile::Table t{{50, 100}, {1, 2, 4}, {{2, 3, 5}, {1, 2, 3}}};
  const auto before = t.latency_ms;
  EXPECT_EQ(MakeMonotone(&t), 0);
  EXPECT_EQ(t.latency_ms, before);
}

TEST(MakeMonotoneTest, NeverSlowerWithMoreCoresNeverFasterWithLargerBatch) {
  // Noise: at batch 2 the 100 % cell is slower than 50 % (1 change); at 100 % batch 4 is faster
  // than batch 2 (after the first step 100 % reads {1, 3, 2.5} → {1, 3, 3}: 1 more change).
  ModelProfile::Table t{{50, 100}, {1, 2, 4}, {{2, 3, 5}, {1, 3.5, 2.5}}};
  // The raw table is not a valid profile (3.5 > 3 · 1.05).
  EXPECT_FALSE(ModelProfile::Create("m", "d", t, 1, {}, false).ok());
  EXPECT_EQ(MakeMonotone(&t), 2);
  EXPECT_THAT(t.latency_ms[0], ElementsAre(2, 3, 5));
  EXPECT_THAT(t.latency_ms[1], ElementsAre(1, 3, 3));
  EXPECT_TRUE(ModelProfile::Create("m", "d", t, 1, {}, false).ok());
}

TEST(MakeMonotoneTest, PropagatesAcrossSeveralPartitionsAndKeepsPartitionOrderAfterBatchStep) {
  ModelProfile::Table t{{20, 60, 100},
                        {1, 2},
                        {{4, 3},    // batch 2 faster than batch 1 → {4, 4}
                         {5, 6},    // both slower than 20 % → {4, 3} → then {4, 4}
                         {1, 7}}};  // 7 slower than 60 %'s (new) 3 → {1, 3}
  EXPECT_EQ(MakeMonotone(&t), 4);
  EXPECT_THAT(t.latency_ms[0], ElementsAre(4, 4));
  EXPECT_THAT(t.latency_ms[1], ElementsAre(4, 4));
  EXPECT_THAT(t.latency_ms[2], ElementsAre(1, 3));
  for (size_t j = 0; j < 2; ++j) {
    EXPECT_LE(t.latency_ms[1][j], t.latency_ms[0][j]);
    EXPECT_LE(t.latency_ms[2][j], t.latency_ms[1][j]);
  }
}

std::vector<int> ThreadAffinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  pthread_getaffinity_np(pthread_self(), sizeof(set), &set);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

// Cpus_allowed_list of every thread of this process, by thread id.
std::map<std::string, std::string> ThreadCpuLists() {
  std::map<std::string, std::string> lists;
  for (const auto& task : fs::directory_iterator("/proc/self/task")) {
    std::ifstream status(task.path() / "status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        lists[task.path().filename().string()] = line.substr(line.find_first_not_of(" \t", 18));
      }
    }
  }
  return lists;
}

TEST(ScopedAffinityTest, EngineWorkersCreatedWhilePinnedInheritThePin) {
  const std::vector<int> before = ThreadAffinity();
  const int cpu = before.back();
  {
    auto pin = ScopedAffinity::Create({cpu});
    ASSERT_TRUE(pin.ok()) << pin.status();
    EXPECT_THAT(ThreadAffinity(), ElementsAre(cpu));
    engine::ModelOptions options;
    options.num_threads = 3;  // the caller + 2 pool workers, created at load
    auto model = engine::LoadOnnxModel(kModels + "/mlp/1/model.onnx", options);
    ASSERT_TRUE(model.ok()) << model.status();
    const auto lists = ThreadCpuLists();
    EXPECT_GE(lists.size(), 3u);
    for (const auto& [tid, list] : lists) {
      EXPECT_EQ(list, std::to_string(cpu)) << "thread " << tid;
    }
  }
  EXPECT_EQ(ThreadAffinity(), before) << "the destructor restores the mask";
}

TEST(ScopedAffinityTest, ACpuOutsideTheAllowedSetIsAnError) {
  const std::vector<int> before = ThreadAffinity();
  auto pin = ScopedAffinity::Create({CPU_SETSIZE - 1});
  ASSERT_FALSE(pin.ok());
  EXPECT_THAT(std::string(pin.status().message()), HasSubstr("cannot pin"));
  EXPECT_EQ(ThreadAffinity(), before);
}

TEST(ProfileModelTest, ProfilesTheBundledMlpAndTheFolderLoadsBack) {
  auto entry = repository::ScanModel(kModels, "mlp");
  ASSERT_TRUE(entry.ok()) << entry.status();
  auto cpus = AllowedCpus();
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  const std::vector<int> before = ThreadAffinity();

  ProfileOptions options;
  options.device_name = "cpu-test";
  options.partitions_pct = {50, 100};
  options.batches = {1, 2};
  options.warmup = 1;
  options.iterations = 3;
  options.rounds = 2;
  auto measured = ProfileModel(*entry, options);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_EQ(ThreadAffinity(), before) << "the caller's affinity must be restored";

  const ModelProfile& p = measured->profile;
  EXPECT_EQ(p.model(), "mlp");
  EXPECT_EQ(p.device(), "cpu-test");
  EXPECT_FALSE(p.synthetic());
  EXPECT_THAT(p.table().partitions_pct, ElementsAre(50, 100));
  EXPECT_THAT(p.table().batches, ElementsAre(1, 2));
  EXPECT_GT(p.memory_mb(), 0);
  EXPECT_EQ(measured->num_cores, static_cast<int>(cpus->size()));
  EXPECT_EQ(measured->cores_per_partition,
            (std::vector<int>{CoresForPartition(50, measured->num_cores), measured->num_cores}));
  for (const auto& row : measured->raw.latency_ms) {
    for (double v : row) EXPECT_GT(v, 0);
  }

  const fs::path dir = FreshTempDir("mlp");
  scheduler::DeviceInfo device{"cpu-test", PhysicalMemoryMb(), false};
  ASSERT_GT(device.memory_mb, 0);
  WriteOptions write{"tessera-profile on test", "test device", "a test run"};
  ASSERT_TRUE(WriteProfileDirectory(dir, device, {*measured}, write).ok());

  auto set = scheduler::ProfileSet::LoadDirectory(dir);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->device().name, "cpu-test");
  const ModelProfile* loaded = set->Find("mlp");
  ASSERT_NE(loaded, nullptr);
  EXPECT_EQ(loaded->table().latency_ms, p.table().latency_ms);
  EXPECT_EQ(loaded->memory_mb(), p.memory_mb());

  std::ifstream in(dir / "mlp.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("source: \"tessera-profile on test\""));
  EXPECT_THAT(text, HasSubstr("median of 6 timed runs per cell (2 round(s) over the table of 3 "
                              "runs, each after 1 warm-up"));
  EXPECT_THAT(text, HasSubstr("a test run"));
  EXPECT_THAT(text, HasSubstr("# raw medians"));
}

TEST(ProfileModelTest, DefaultsSkipBatchesAboveTheModelsMaximum) {
  auto entry = repository::ScanModel(kModels, "mlp");  // max_batch_size 8
  ASSERT_TRUE(entry.ok()) << entry.status();
  ProfileOptions options;
  options.device_name = "cpu-test";
  options.cpus = {ThreadAffinity().front()};  // one core: partitions default to {100}
  options.batches = {1, 8, 16};
  options.warmup = 0;
  options.iterations = 1;
  auto measured = ProfileModel(*entry, options);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_THAT(measured->profile.table().partitions_pct, ElementsAre(100));
  EXPECT_THAT(measured->profile.table().batches, ElementsAre(1, 8));
}

TEST(ProfileModelTest, VariableNonBatchDimAsksForAFixedShape) {
  const fs::path repo = FreshTempDir("variable_dim");
  fs::create_directories(repo / "mlp" / "1");
  fs::copy_file(kModels + "/mlp/1/model.onnx", repo / "mlp" / "1" / "model.onnx");
  std::ofstream(repo / "mlp" / "config.yaml") << "name: mlp\n"
                                                 "max_batch_size: 8\n"
                                                 "input:\n"
                                                 "  - {name: input, data_type: TYPE_FP32, "
                                                 "dims: [-1]}\n"
                                                 "output:\n"
                                                 "  - {name: output, data_type: TYPE_FP32, "
                                                 "dims: [10]}\n";
  auto entry = repository::ScanModel(repo.string(), "mlp");
  ASSERT_TRUE(entry.ok()) << entry.status();
  ProfileOptions options;
  options.device_name = "cpu-test";
  options.iterations = 1;
  auto measured = ProfileModel(*entry, options);
  ASSERT_FALSE(measured.ok());
  EXPECT_EQ(measured.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(measured.status().message()), HasSubstr("input 'input'"));
  EXPECT_THAT(std::string(measured.status().message()), HasSubstr("needs a fixed shape"));
}

TEST(ProfileModelTest, RejectsBadOptions) {
  auto entry = repository::ScanModel(kModels, "mlp");
  ASSERT_TRUE(entry.ok()) << entry.status();
  ProfileOptions options;
  options.device_name = "cpu-test";
  options.partitions_pct = {50};  // no 100
  EXPECT_EQ(ProfileModel(*entry, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.partitions_pct = {};
  options.iterations = 0;
  EXPECT_EQ(ProfileModel(*entry, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.iterations = 1;
  options.rounds = 0;
  EXPECT_EQ(ProfileModel(*entry, options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::profiler

namespace tessera::profiler {
namespace {

// The committed measured set (profiles/cpu-2core/, docs/profile-format.md) loads and is what
// tessera-profile writes: measured, both bundled models, partitions by the 2-core default.
TEST(CommittedProfilesTest, Cpu2CoreLoadsAsAMeasuredSet) {
  auto set =
      scheduler::ProfileSet::LoadDirectory(std::string(TESSERA_SOURCE_DIR) + "/profiles/cpu-2core");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->device().name, "cpu-2core");
  EXPECT_FALSE(set->device().synthetic);
  EXPECT_EQ(set->models(), (std::vector<std::string>{"mlp", "small_cnn"}));
  for (const std::string& model : set->models()) {
    const ModelProfile* p = set->Find(model);
    EXPECT_FALSE(p->synthetic());
    EXPECT_THAT(p->table().partitions_pct, ElementsAre(60, 100)) << model;
    EXPECT_THAT(p->table().batches, ElementsAre(1, 2, 4, 8)) << model;
    EXPECT_GT(p->memory_mb(), 0) << model;
  }
}

}  // namespace
}  // namespace tessera::profiler
