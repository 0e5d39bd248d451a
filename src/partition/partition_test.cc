#include "tessera/partition/partition.h"

#include <sched.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partition/cuda_driver.h"
#include "partition/fake_system_probe_for_test.h"
#include "partition/green_context.h"

namespace tessera::partition {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Made {
  std::unique_ptr<PartitionManager> manager;
  std::shared_ptr<std::vector<FakeCommandRunnerForTest::Call>> calls;
};

// Builds a manager over a copy of `probe`; the runner flips the copy's MPS state like a daemon.
StatusOr<Made> Make(const PartitionOptions& options, const FakeSystemProbeForTest& probe,
                    Status runner_result = absl::OkStatus()) {
  auto fake = std::make_unique<FakeSystemProbeForTest>(probe);
  auto runner = std::make_unique<FakeCommandRunnerForTest>();
  runner->probe = fake.get();
  runner->result = runner_result;
  auto calls = runner->calls;
  TESSERA_ASSIGN_OR_RETURN(auto manager,
                           PartitionManager::Create(options, std::move(fake), std::move(runner)));
  return Made{std::move(manager), calls};
}

PartitionOptions Opts(const std::string& mechanism) {
  PartitionOptions options;
  options.mechanism = mechanism;
  options.mps_pipe_directory = "/fake/mps";
  options.mps_start_timeout_ms = 50;
  return options;
}

FakeSystemProbeForTest H100(int driver_version = 12080) {
  FakeSystemProbeForTest probe;
  probe.AddGpus(1, 132, 9, driver_version);
  return probe;
}

// --- auto ---------------------------------------------------------------------------------

TEST(PartitionAutoTest, NoGpuPicksCpuCoreShares) {
  FakeSystemProbeForTest probe;
  probe.driver.no_gpu_reason = "no CUDA driver: cannot load libcuda.so.1";
  auto made = Make(Opts("auto"), probe);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->manager->mechanism(), Mechanism::kCpu);
  EXPECT_FALSE(made->manager->on_gpu());
  EXPECT_THAT(made->manager->reason(), HasSubstr("no GPU (no CUDA driver"));
  EXPECT_THAT(made->manager->reason(), HasSubstr("4 core(s) (0-3)"));
}

TEST(PartitionAutoTest, DevicesCpuPicksCpuEvenWithAGpu) {
  PartitionOptions options = Opts("auto");
  options.devices = "cpu";
  auto made = Make(options, H100());
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->manager->mechanism(), Mechanism::kCpu);
  EXPECT_THAT(made->manager->reason(), HasSubstr("executors.devices is cpu"));
}

TEST(PartitionAutoTest, RunningMpsDaemonWins) {
  FakeSystemProbeForTest probe = H100();
  probe.mps_running.insert("/fake/mps");
  auto made = Make(Opts("auto"), probe);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->manager->mechanism(), Mechanism::kMps);
  EXPECT_THAT(made->manager->reason(),
              HasSubstr("MPS control daemon running at /fake/mps/control"));
  EXPECT_FALSE(made->manager->started_mps_daemon());
  EXPECT_TRUE(made->calls->empty());
}

TEST(PartitionAutoTest, StartsMpsDaemonWhenAllowedAndStopsItOnDestruction) {
  FakeSystemProbeForTest probe = H100();
  probe.on_path.insert("nvidia-cuda-mps-control");
  PartitionOptions options = Opts("auto");
  options.mps_start_daemon = true;
  auto made = Make(options, probe);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->manager->mechanism(), Mechanism::kMps);
  EXPECT_TRUE(made->manager->started_mps_daemon());
  EXPECT_THAT(made->manager->reason(), HasSubstr("started an MPS control daemon"));
  ASSERT_EQ(made->calls->size(), 1u);
  EXPECT_THAT((*made->calls)[0].argv, ElementsAre("/usr/bin/nvidia-cuda-mps-control", "-d"));
  EXPECT_THAT((*made->calls)[0].env, ElementsAre("CUDA_MPS_PIPE_DIRECTORY=/fake/mps",
                                                 "CUDA_MPS_LOG_DIRECTORY=/fake/mps-log",
                                                 "LD_LIBRARY_PATH=", "LD_PRELOAD="));
  made->manager.reset();
  ASSERT_EQ(made->calls->size(), 2u);
  EXPECT_THAT((*made->calls)[1].argv, ElementsAre("/usr/bin/nvidia-cuda-mps-control"));
  EXPECT_EQ((*made->calls)[1].stdin_text, "quit\n");
  EXPECT_THAT((*made->calls)[1].env, ElementsAre("CUDA_MPS_PIPE_DIRECTORY=/fake/mps"));
}

TEST(PartitionAutoTest, StartedDaemonGetsAPrivateDirectoryRemovedAfterQuit) {
  FakeSystemProbeForTest probe = H100();
  probe.on_path.insert("nvidia-cuda-mps-control");
  PartitionOptions options = Opts("mps");
  options.mps_pipe_directory = "";
  options.mps_start_daemon = true;
  auto made = Make(options, probe);
  ASSERT_TRUE(made.ok()) << made.status();
  const std::string dir = made->manager->mps_pipe_directory();
  EXPECT_THAT(dir, HasSubstr("tessera-mps-"));
  // The daemon makes a FIFO named "log" in its pipe directory: the logs go beside it, not there.
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_FALSE(std::filesystem::exists(dir + "/log"));
  const std::string root = std::filesystem::path(dir).parent_path().string();
  EXPECT_TRUE(std::filesystem::is_directory(root + "/log"));
  made->manager.reset();
  EXPECT_FALSE(std::filesystem::exists(root));
}

TEST(PartitionAutoTest, WithoutMpsPicksGreenOnANewDriver) {
  auto made = Make(Opts("auto"), H100(12040));
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->manager->mechanism(), Mechanism::kGreen);
  EXPECT_THAT(made->manager->reason(), HasSubstr("start_daemon is false"));
  EXPECT_THAT(made->manager->reason(), HasSubstr("green contexts: driver 12.4 >= 12.4"));
}

TEST(PartitionAutoTest, StartAllowedButNoBinaryFallsToGreen) {
  PartitionOptions options = Opts("auto");
  options.mps_start_daemon = true;
  auto made = Make(options, H100());
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->manager->mechanism(), Mechanism::kGreen);
  EXPECT_THAT(made->manager->reason(), HasSubstr("nvidia-cuda-mps-control is not on PATH"));
  EXPECT_TRUE(made->calls->empty());
}

TEST(PartitionAutoTest, FailedDaemonStartFallsToGreenAndSaysWhy) {
  FakeSystemProbeForTest probe = H100();
  probe.on_path.insert("nvidia-cuda-mps-control");
  PartitionOptions options = Opts("auto");
  options.mps_start_daemon = true;
  auto made = Make(options, probe, absl::InternalError("exited with status 1"));
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->manager->mechanism(), Mechanism::kGreen);
  EXPECT_THAT(made->manager->reason(), HasSubstr("starting the MPS control daemon failed"));
  EXPECT_FALSE(made->manager->started_mps_daemon());
}

TEST(PartitionAutoTest, OldDriverWithoutMpsIsNoneAndSaysUncapped) {
  auto made = Make(Opts("auto"), H100(12020));
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->manager->mechanism(), Mechanism::kNone);
  EXPECT_THAT(made->manager->reason(), HasSubstr("driver 12.2 < 12.4"));
  EXPECT_THAT(made->manager->reason(), HasSubstr("NOT capped"));
}

// --- explicit -----------------------------------------------------------------------------

TEST(PartitionExplicitTest, MpsAbsentAndNotStartableIsAnError) {
  auto made = Make(Opts("mps"), H100());
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(made.status().message()),
              HasSubstr("partition_mechanism mps: no MPS control daemon at /fake/mps/control"));
  EXPECT_THAT(std::string(made.status().message()), HasSubstr("start_daemon"));
}

TEST(PartitionExplicitTest, MpsStartAllowedButMissingBinaryIsAnError) {
  PartitionOptions options = Opts("mps");
  options.mps_start_daemon = true;
  auto made = Make(options, H100());
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(std::string(made.status().message()), HasSubstr("not on PATH"));
}

TEST(PartitionExplicitTest, MpsDaemonThatNeverOpensItsSocketIsAnError) {
  FakeSystemProbeForTest probe = H100();
  probe.on_path.insert("nvidia-cuda-mps-control");
  PartitionOptions options = Opts("mps");
  options.mps_start_daemon = true;
  auto fake = std::make_unique<FakeSystemProbeForTest>(probe);
  auto runner = std::make_unique<FakeCommandRunnerForTest>();  // no probe: socket never appears
  auto made = PartitionManager::Create(options, std::move(fake), std::move(runner));
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(std::string(made.status().message()), HasSubstr("no control socket appeared"));
}

TEST(PartitionExplicitTest, MpsWithoutGpuIsAnError) {
  auto made = Make(Opts("mps"), FakeSystemProbeForTest());
  ASSERT_FALSE(made.ok());
  EXPECT_THAT(std::string(made.status().message()), HasSubstr("needs a GPU"));
}

TEST(PartitionExplicitTest, GreenOnAnOldDriverIsAnError) {
  auto made = Make(Opts("green"), H100(12030));
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(made.status().message()),
              HasSubstr("green is not available: driver 12.3 < 12.4"));
}

TEST(PartitionExplicitTest, GreenIgnoresARunningMpsDaemon) {
  FakeSystemProbeForTest probe = H100();
  probe.mps_running.insert("/fake/mps");
  auto made = Make(Opts("green"), probe);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->manager->mechanism(), Mechanism::kGreen);
}

TEST(PartitionExplicitTest, DevicesGpuWithoutGpuAndUnknownMechanismAreErrors) {
  PartitionOptions options = Opts("auto");
  options.devices = "gpu";
  EXPECT_EQ(Make(options, FakeSystemProbeForTest()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Make(Opts("mig"), H100()).status().code(), absl::StatusCode::kInvalidArgument);
}

// --- placements ---------------------------------------------------------------------------

TEST(PartitionPlaceTest, CpuSharesAreDisjointWhileCoresLast) {
  auto made = Make(Opts("auto"), FakeSystemProbeForTest());  // 4 cores, no GPU
  ASSERT_TRUE(made.ok());
  PartitionManager& m = *made->manager;
  auto a = m.Place(0, 50);
  auto b = m.Place(0, 25);
  auto c = m.Place(0, 25);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_THAT(a->cpus, ElementsAre(0, 1));
  EXPECT_THAT(b->cpus, ElementsAre(2));
  EXPECT_THAT(c->cpus, ElementsAre(3));
  EXPECT_EQ(a->compute_threads, 2);
  EXPECT_THAT(a->args, ElementsAre("--cpus", "0,1"));
  EXPECT_TRUE(a->env.empty());
  EXPECT_EQ(a->describe, "cpu cores 0-1 (50 %)");
  EXPECT_EQ(a->device, -1);
  EXPECT_NE(a->id, b->id);
}

TEST(PartitionPlaceTest, CpuRoundingAndMinimumOneCore) {
  FakeSystemProbeForTest probe;
  probe.cpus = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto made = Make(Opts("auto"), probe);
  ASSERT_TRUE(made.ok());
  PartitionManager& m = *made->manager;
  for (auto [percent, cores] : std::vector<std::pair<int, int>>{
           {1, 1}, {4, 1}, {15, 2}, {24, 2}, {25, 3}, {34, 3}, {100, 10}}) {
    auto p = m.Place(0, percent);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(static_cast<int>(p->cpus.size()), cores) << percent << " %";
    EXPECT_EQ(p->compute_threads, cores);
    ASSERT_TRUE(m.Release(p->id).ok());
  }
  EXPECT_EQ(m.Place(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Place(0, 101).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PartitionPlaceTest, CpuOversubscriptionOverlapsTheLeastUsedAndSaysSo) {
  FakeSystemProbeForTest probe;
  probe.cpus = {2, 3};  // allowed cores need not start at 0
  auto made = Make(Opts("auto"), probe);
  ASSERT_TRUE(made.ok());
  PartitionManager& m = *made->manager;
  auto active = m.Place(0, 50);
  ASSERT_TRUE(active.ok());
  EXPECT_THAT(active->cpus, ElementsAre(2));
  auto other = m.Place(0, 50);
  ASSERT_TRUE(other.ok());
  EXPECT_THAT(other->cpus, ElementsAre(3));
  // A shadow executor while both are alive: must overlap, and the description says so.
  auto shadow = m.Place(0, 100);
  ASSERT_TRUE(shadow.ok());
  EXPECT_THAT(shadow->cpus, ElementsAre(2, 3));
  EXPECT_THAT(shadow->describe, HasSubstr("cpu cores 2-3 (100 %), oversubscribed: 2 core(s)"));
  // Once the active one is released, core 2 is the least used again.
  ASSERT_TRUE(m.Release(active->id).ok());
  auto next = m.Place(0, 50);
  ASSERT_TRUE(next.ok());
  EXPECT_THAT(next->cpus, ElementsAre(2));
  EXPECT_THAT(next->describe, HasSubstr("oversubscribed"));  // core 2 still has the shadow
  EXPECT_EQ(m.Release(active->id).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m.Release(12345).code(), absl::StatusCode::kNotFound);
}

TEST(PartitionPlaceTest, ReleasedCoresAreReusedWithoutOverlap) {
  auto made = Make(Opts("auto"), FakeSystemProbeForTest());
  ASSERT_TRUE(made.ok());
  PartitionManager& m = *made->manager;
  auto a = m.Place(0, 50);
  auto b = m.Place(0, 50);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(m.Release(a->id).ok());
  auto c = m.Place(0, 50);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cpus, a->cpus);
  EXPECT_THAT(c->describe, ::testing::Not(HasSubstr("oversubscribed")));
}

TEST(PartitionPlaceTest, MpsSetsPercentageAndPipeDirectory) {
  FakeSystemProbeForTest probe = H100();
  probe.AddGpus(1, 132, 9, 12080);  // a second GPU
  probe.mps_running.insert("/fake/mps");
  auto made = Make(Opts("auto"), probe);
  ASSERT_TRUE(made.ok());
  auto p = made->manager->Place(1, 40);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->mechanism, Mechanism::kMps);
  EXPECT_EQ(p->device, 1);
  EXPECT_THAT(p->env, ElementsAre("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40",
                                  "CUDA_MPS_PIPE_DIRECTORY=/fake/mps"));
  EXPECT_TRUE(p->args.empty());
  EXPECT_EQ(p->compute_threads, 0);
  EXPECT_EQ(p->describe, "mps 40 % of GPU 1");
  EXPECT_EQ(made->manager->Place(2, 40).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PartitionPlaceTest, GreenRoundsToTheSmGroupGranularity) {
  auto made = Make(Opts("green"), H100());  // 132 SMs, groups of 8
  ASSERT_TRUE(made.ok());
  PartitionManager& m = *made->manager;
  for (auto [percent, sms] :
       std::vector<std::pair<int, int>>{{50, 64},     // 66 -> 64
                                        {1, 8},       // 1.32 -> the minimum group
                                        {10, 16},     // 13.2 -> 16
                                        {100, 128},   // 132 -> at most the whole groups
                                        {35, 48}}) {  // 46.2 -> 48
    auto p = m.Place(0, percent);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->green_sms, sms) << percent << " %";
    EXPECT_THAT(p->args, ElementsAre("--green-sms", std::to_string(sms)));
    EXPECT_TRUE(p->env.empty());
  }
}

TEST(PartitionPlaceTest, GreenGranularityFollowsComputeCapability) {
  FakeSystemProbeForTest probe;
  probe.AddGpus(1, 108, 8, 12040);  // A100: min 4, step 2
  auto made = Make(Opts("green"), probe);
  ASSERT_TRUE(made.ok());
  auto p = made->manager->Place(0, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->green_sms, 4);
  auto q = made->manager->Place(0, 30);  // 32.4 -> 32
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->green_sms, 32);
  EXPECT_THAT(q->describe, HasSubstr("green 32 of 108 SMs of GPU 0"));
}

TEST(PartitionPlaceTest, NoneAddsNothingButSaysUncapped) {
  auto made = Make(Opts("none"), H100());
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(made->manager->mechanism(), Mechanism::kNone);
  auto p = made->manager->Place(0, 30);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->env.empty());
  EXPECT_TRUE(p->args.empty());
  EXPECT_THAT(p->describe, HasSubstr("uncapped"));
}

// --- helpers and the real probe -------------------------------------------------------------

TEST(CpuListTest, ParseAndFormat) {
  EXPECT_THAT(*ParseCpuList("0,2,4-6"), ElementsAre(0, 2, 4, 5, 6));
  EXPECT_THAT(*ParseCpuList("3,1,1"), ElementsAre(1, 3));
  for (const char* bad : {"", "a", "1,", "-1", "3-1", "1-2-3", "+1", "1--2", "0,x-2"}) {
    EXPECT_EQ(ParseCpuList(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(std::string(ParseCpuList("0,zz").status().message()), HasSubstr("\"zz\""));
  EXPECT_EQ(FormatCpuList({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(FormatCpuList({3}), "3");
}

TEST(CpuListTest, PinningToAForbiddenCoreIsRefused) {
  Status s = PinCurrentThreadToCpus({CPU_SETSIZE - 1});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("this process may only use"));
}

TEST(RealProbeTest, ReportsCpusAndNoGpuWithoutADriver) {
  auto probe = CreateSystemProbe();
  std::vector<int> cpus = probe->AllowedCpus();
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(static_cast<int>(cpus.size()), CPU_COUNT(&set));
  if (LoadCudaDriver().ok()) GTEST_SKIP() << "this machine has a CUDA driver";
  DriverFacts driver = probe->Driver();
  EXPECT_TRUE(driver.gpus.empty());
  EXPECT_EQ(driver.driver_version, 0);
  EXPECT_THAT(driver.no_gpu_reason, HasSubstr("libcuda.so.1"));
  // And a manager on auto then serves on CPU core shares.
  auto manager = PartitionManager::Create(PartitionOptions{});
  ASSERT_TRUE(manager.ok()) << manager.status();
  EXPECT_EQ((*manager)->mechanism(), Mechanism::kCpu);
}

TEST(RealProbeTest, MissingLibraryAndNoDaemonAreReportedCleanly) {
  auto driver = LoadCudaDriver("libtessera-no-such-cuda.so.1");
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(driver.status().message()), HasSubstr("libtessera-no-such-cuda.so.1"));
  auto green = EnterGreenContext(0, 8, "libtessera-no-such-cuda.so.1");
  EXPECT_EQ(green.status().code(), absl::StatusCode::kUnavailable);
  auto probe = CreateSystemProbe();
  EXPECT_FALSE(probe->MpsDaemonRunning("/nonexistent/tessera-mps"));
  EXPECT_EQ(probe->FindOnPath("tessera-no-such-binary"), "");
  EXPECT_NE(probe->FindOnPath("sh"), "");
}

TEST(RealRunnerTest, PassesEnvAndStdinAndReportsExitStatus) {
  auto runner = CreateCommandRunner();
  const std::string out = ::testing::TempDir() + "/tessera_partition_runner_test.txt";
  Status ok = runner->Run({"/bin/sh", "-c", "read line; echo \"$TESSERA_X $line\" > " + out},
                          {"TESSERA_X=hello"}, "quit\n");
  ASSERT_TRUE(ok.ok()) << ok;
  std::string text;
  {
    FILE* f = fopen(out.c_str(), "r");
    ASSERT_NE(f, nullptr);
    char buf[64] = {};
    fgets(buf, sizeof(buf), f);
    fclose(f);
    text = buf;
  }
  EXPECT_EQ(text, "hello quit\n");
  Status failed = runner->Run({"/bin/sh", "-c", "exit 3"}, {}, "");
  EXPECT_THAT(std::string(failed.message()), HasSubstr("exited with status 3"));
  EXPECT_FALSE(runner->Run({"/nonexistent/mps-control"}, {}, "").ok());
}

// The real probe against real sockets of the type the MPS control daemon listens on: on an H100
// (driver 580) its control socket refuses a stream connect (EPROTOTYPE), which once made a
// running daemon look absent.
TEST(SystemProbeTest, MpsDaemonRunningSeesALiveListenerOfAnySocketTypeButNotAStaleFile) {
  char dir_template[] = "/tmp/tessera-mps-probe-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  auto probe = CreateSystemProbe();
  EXPECT_FALSE(probe->MpsDaemonRunning(dir));  // no file
  for (int type : {SOCK_SEQPACKET, SOCK_STREAM}) {
    SCOPED_TRACE(type == SOCK_STREAM ? "stream" : "seqpacket");
    const std::string path = dir + "/control";
    int fd = socket(AF_UNIX, type, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(fd, 4), 0);
    EXPECT_TRUE(probe->MpsDaemonRunning(dir));
    close(fd);  // the file stays, as after a crashed daemon
    EXPECT_FALSE(probe->MpsDaemonRunning(dir));
    unlink(path.c_str());
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::partition
