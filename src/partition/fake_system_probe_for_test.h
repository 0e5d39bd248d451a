// Test doubles for the partition layer: a SystemProbe whose facts a test sets, and a CommandRunner
// that records commands and can pretend to start an MPS daemon.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tessera/partition/partition.h"

namespace tessera::partition {

class FakeSystemProbeForTest : public SystemProbe {
 public:
  std::vector<int> cpus = {0, 1, 2, 3};
  DriverFacts driver;                 // default: no GPU
  std::set<std::string> mps_running;  // pipe directories with a live daemon
  std::set<std::string> on_path;      // executable names found on PATH (as /usr/bin/<name>)

  // Adds `count` GPUs of `sm_count` SMs and compute capability `major`.0 with `driver_version`.
  void AddGpus(int count, int sm_count, int major, int driver_version) {
    driver.driver_version = driver_version;
    driver.no_gpu_reason.clear();
    for (int i = 0; i < count; ++i) {
      GpuFacts gpu;
      gpu.sm_count = sm_count;
      gpu.compute_major = major;
      driver.gpus.push_back(WithGreenGranularity(gpu));
    }
  }

  std::vector<int> AllowedCpus() override { return cpus; }
  DriverFacts Driver() override { return driver; }
  bool MpsDaemonRunning(const std::string& pipe_directory) override {
    return mps_running.count(pipe_directory) > 0;
  }
  std::string FindOnPath(const std::string& name) override {
    return on_path.count(name) ? "/usr/bin/" + name : "";
  }
};

class FakeCommandRunnerForTest : public CommandRunner {
 public:
  struct Call {
    std::vector<std::string> argv;
    std::vector<std::string> env;
    std::string stdin_text;
  };
  // Shared so a test keeps reading it after the runner moved into a manager.
  std::shared_ptr<std::vector<Call>> calls = std::make_shared<std::vector<Call>>();
  // When set, `<binary> -d` marks its CUDA_MPS_PIPE_DIRECTORY as running in this probe and `quit`
  // clears it, as the real daemon would.
  FakeSystemProbeForTest* probe = nullptr;
  Status result = absl::OkStatus();

  Status Run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
             const std::string& stdin_text) override {
    calls->push_back({argv, env, stdin_text});
    if (!result.ok()) return result;
    std::string pipe;
    for (const std::string& kv : env) {
      if (kv.rfind("CUDA_MPS_PIPE_DIRECTORY=", 0) == 0) pipe = kv.substr(kv.find('=') + 1);
    }
    if (probe != nullptr && argv.size() == 2 && argv[1] == "-d") probe->mps_running.insert(pipe);
    if (probe != nullptr && stdin_text == "quit\n") probe->mps_running.erase(pipe);
    return absl::OkStatus();
  }
};

}  // namespace tessera::partition
