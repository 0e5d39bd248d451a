// Runs the tessera-profile binary (path from the build: TESSERA_PROFILE_BINARY) on the bundled
// configs/models with tiny settings and checks what a user sees: the exit status, the messages of
// bad inputs, and that the written folder loads with ProfileSet::LoadDirectory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "tessera/scheduler/profile.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kModels = std::string(TESSERA_SOURCE_DIR) + "/configs/models";

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

Result RunProfile(const std::string& args) {
  const std::string command = std::string(TESSERA_PROFILE_BINARY) + " " + args + " 2>&1";
  Result result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

fs::path FreshTempDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("profiler_cli_test_" + name);
  fs::remove_all(dir);
  return dir;
}

TEST(ProfilerCliTest, ProfilesTheBundledModelsIntoALoadableFolder) {
  const fs::path out = FreshTempDir("all");
  const Result r = RunProfile("--model-repository " + kModels + " --out " + out.string() +
                              " --partitions 50,100 --batches 1,2 --warmup 1 --iterations 3" +
                              " --rounds 2 --device-name cpu-cli-test");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("wrote " + out.string()));

  auto set = tessera::scheduler::ProfileSet::LoadDirectory(out);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->device().name, "cpu-cli-test");
  EXPECT_GT(set->device().memory_mb, 0);
  EXPECT_EQ(set->models(), (std::vector<std::string>{"mlp", "small_cnn"}));
  for (const std::string& model : set->models()) {
    const auto* p = set->Find(model);
    EXPECT_EQ(p->table().partitions_pct, (std::vector<int>{50, 100}));
    EXPECT_EQ(p->table().batches, (std::vector<int>{1, 2}));
    EXPECT_FALSE(p->synthetic());
  }
  std::ifstream in(out / "mlp.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, ::testing::MatchesRegex(
                        "(.|\n)*source: \"tessera-profile on .*, [0-9-]+, median of 6 runs\""
                        "(.|\n)*"));
}

TEST(ProfilerCliTest, DefaultDeviceNameCountsTheCores) {
  const fs::path out = FreshTempDir("one");
  const Result r = RunProfile("--model-repository " + kModels + " --models mlp --out " +
                              out.string() + " --batches 1 --warmup 0 --iterations 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto set = tessera::scheduler::ProfileSet::LoadDirectory(out);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT(set->device().name, ::testing::MatchesRegex("cpu-[0-9]+core"));
  EXPECT_EQ(set->models(), (std::vector<std::string>{"mlp"}));
}

TEST(ProfilerCliTest, UnknownModelIsAClearError) {
  const fs::path out = FreshTempDir("unknown");
  const Result r =
      RunProfile("--model-repository " + kModels + " --models mlp,resnet999 --out " + out.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no model 'resnet999' in repository"));
  EXPECT_THAT(r.output, HasSubstr("mlp, small_cnn"));
  EXPECT_FALSE(fs::exists(out)) << "nothing is written when an input is bad";
}

TEST(ProfilerCliTest, MissingRepositoryIsAClearError) {
  const Result r = RunProfile("--model-repository /nonexistent/models --out " +
                              FreshTempDir("missing").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("/nonexistent/models"));
}

TEST(ProfilerCliTest, BadPartitionListsAreClearErrors) {
  const std::string base =
      "--model-repository " + kModels + " --out " + FreshTempDir("bad").string() + " ";
  Result r = RunProfile(base + "--partitions 50,x,100");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--partitions '50,x,100': 'x' is not an integer"));
  r = RunProfile(base + "--partitions 50,120");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("120 is outside 1..100"));
  r = RunProfile(base + "--partitions 50");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("must contain 100"));
  r = RunProfile(base + "--batches 2,4");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--batches '2,4': must contain 1"));
}

}  // namespace
