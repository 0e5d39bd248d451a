// Partition mechanisms: how a device is split into the partitions executor processes run in
// (glossary: Partition, docs/architecture.md).
//
//   cpu    CPU core shares: an executor is pinned to a set of cores (`--cpus`) and runs that many
//          compute threads. Used when serving on the CPU.
//   mps    NVIDIA MPS: the executor is an MPS client started with
//          CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = its share of the GPU's SMs.
//   green  CUDA green contexts (driver >= 12.4): the executor creates a context limited to a group
//          of SMs (`--green-sms N`, N a multiple of the device's SM-group granularity).
//   none   no cap: executors time-share the whole device.
//
// The server reads `executors.partition_mechanism` (auto|mps|green|none) and creates one
// PartitionManager at start. `auto` picks the best mechanism the machine has and says why
// (reason()); an explicit mechanism the machine lacks is a startup error, never a silent fallback
// to running uncapped. The manager hands out ExecutorPlacements: what launching one executor in a
// partition needs (env vars, extra arguments, compute threads).
//
// System facts (cores, GPUs, driver, MPS daemon) come from a SystemProbe so the decision logic is
// tested without a GPU; an MPS control daemon is started through a CommandRunner for the same
// reason.
//
// Thread-safety: PartitionManager's methods may be called from any thread. SystemProbe and
// CommandRunner implementations are used by one manager at a time, under its lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "tessera/common/status.h"

namespace tessera::partition {

enum class Mechanism { kCpu, kMps, kGreen, kNone };
std::string_view MechanismName(Mechanism mechanism);

// Driver version (cuDriverGetVersion) from which green contexts exist: CUDA 12.4.
inline constexpr int kGreenContextMinDriverVersion = 12040;

// One GPU as the partition layer sees it.
struct GpuFacts {
  int sm_count = 0;
  int compute_major = 0;
  int compute_minor = 0;
  // Green-context SM groups: at least `green_min_sms`, in steps of `green_sm_step` SMs.
  int green_min_sms = 1;
  int green_sm_step = 1;
};

// The documented green-context granularity for a compute capability (CUDA 12.4 guideline):
// 6.x: 1 SM; 7.x: min 2, step 2; 8.x: min 4, step 2; 9.0 and later: min 8, step 8.
GpuFacts WithGreenGranularity(GpuFacts facts);

// "12.4" for 12040.
std::string DriverVersionString(int driver_version);

struct DriverFacts {
  int driver_version = 0;      // cuDriverGetVersion; 0 = no driver
  std::vector<GpuFacts> gpus;  // empty = no GPU
  std::string no_gpu_reason;   // why `gpus` is empty ("libcuda.so.1 not found: ..."), for logs
};

// Facts about the machine. The real one (CreateSystemProbe) reads sched_getaffinity, loads
// libcuda.so.1 with dlopen (no link-time CUDA dependency), and looks at the MPS pipe directory.
class SystemProbe {
 public:
  virtual ~SystemProbe() = default;
  // The CPU cores this process may run on (sched_getaffinity), ascending.
  virtual std::vector<int> AllowedCpus() = 0;
  virtual DriverFacts Driver() = 0;
  // Whether an MPS control daemon answers on `<pipe_directory>/control`.
  virtual bool MpsDaemonRunning(const std::string& pipe_directory) = 0;
  // Full path of executable `name` found on PATH, or "" when absent.
  virtual std::string FindOnPath(const std::string& name) = 0;
};
std::unique_ptr<SystemProbe> CreateSystemProbe();

// Runs a helper command to completion (used for nvidia-cuda-mps-control).
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Runs `argv` (argv[0] a path) with `extra_env` ("K=V") added to this process's environment and
  // `stdin_text` on its standard input. Non-OK when it cannot start, times out, or exits non-zero;
  // the message names the command and its exit status.
  virtual Status Run(const std::vector<std::string>& argv,
                     const std::vector<std::string>& extra_env, const std::string& stdin_text) = 0;
};
std::unique_ptr<CommandRunner> CreateCommandRunner();

struct PartitionOptions {
  std::string mechanism = "auto";  // auto | mps | green | none (executors.partition_mechanism)
  std::string devices = "auto";    // auto | cpu | gpu (executors.devices)
  // MPS (executors.mps.*). Empty pipe directory = $CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps,
  // for finding a running daemon; a daemon the manager starts then gets a private directory.
  bool mps_start_daemon = false;
  std::string mps_pipe_directory;
  std::string mps_control_binary = "nvidia-cuda-mps-control";  // looked up on PATH
  int64_t mps_start_timeout_ms = 5000;  // wait for a started daemon's control socket
};

// What launching one executor in a partition needs.
struct ExecutorPlacement {
  int64_t id = 0;  // pass to Release
  Mechanism mechanism = Mechanism::kNone;
  int device = -1;                // GPU ordinal; -1 for the CPU
  int percent = 0;                // the share asked for
  std::vector<std::string> env;   // "K=V" added to the executor's environment
  std::vector<std::string> args;  // added to the executor's command line
  int compute_threads = 0;        // CPU compute threads; 0 = not decided by the partition (GPU)
  std::vector<int> cpus;          // cpu: the cores it is pinned to
  int green_sms = 0;              // green: SMs in its group
  std::string describe;           // for logs: "cpu cores 0-1 (50 %)", "mps 40 % of GPU 0"
};

class PartitionManager {
 public:
  // Chooses the mechanism (see the file comment), starting an MPS daemon when the options allow
  // and none runs. FAILED_PRECONDITION names what is missing for an explicit mechanism.
  static StatusOr<std::unique_ptr<PartitionManager>> Create(const PartitionOptions& options,
                                                            std::unique_ptr<SystemProbe> probe,
                                                            std::unique_ptr<CommandRunner> runner);
  // With the real probe and command runner.
  static StatusOr<std::unique_ptr<PartitionManager>> Create(const PartitionOptions& options);
  // Stops an MPS daemon this manager started (`quit` on the control binary's stdin).
  ~PartitionManager();

  PartitionManager(const PartitionManager&) = delete;
  PartitionManager& operator=(const PartitionManager&) = delete;

  Mechanism mechanism() const { return mechanism_; }
  // Why this mechanism, for the server's startup log.
  const std::string& reason() const { return reason_; }
  bool on_gpu() const { return !driver_.gpus.empty() && mechanism_ != Mechanism::kCpu; }
  int gpu_count() const { return static_cast<int>(driver_.gpus.size()); }
  const std::vector<int>& allowed_cpus() const { return cpus_; }
  // MPS: the pipe directory clients use; "" otherwise.
  const std::string& mps_pipe_directory() const { return mps_pipe_directory_; }
  bool started_mps_daemon() const { return started_daemon_; }

  // A partition of `percent` (1..100) of `device` (GPU ordinal; ignored on the CPU).
  // cpu: max(1, round(percent/100 * cores)) cores, the least used first, so concurrent placements
  // are disjoint while cores last; when oversubscribed they overlap and `describe` says so.
  StatusOr<ExecutorPlacement> Place(int device, int percent);
  // Returns a placement's cores. NOT_FOUND for an unknown or already released id.
  Status Release(int64_t placement_id);

 private:
  PartitionManager() = default;
  Status Choose(const PartitionOptions& options);
  Status TryMps(const PartitionOptions& options, bool explicit_mps, std::string* why_not);
  Status StartMpsDaemon(const PartitionOptions& options, const std::string& binary);
  void StopMpsDaemon();
  StatusOr<ExecutorPlacement> PlaceCpu(int percent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<SystemProbe> probe_;
  std::unique_ptr<CommandRunner> runner_;
  Mechanism mechanism_ = Mechanism::kNone;
  std::string reason_;
  DriverFacts driver_;
  std::vector<int> cpus_;
  std::string mps_pipe_directory_;
  std::string mps_control_binary_;     // full path, when this manager started the daemon
  std::string private_mps_directory_;  // created by this manager; removed after quit
  bool started_daemon_ = false;

  std::mutex mu_;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int, int> cpu_users_ ABSL_GUARDED_BY(mu_);              // core -> placements using it
  std::map<int64_t, std::vector<int>> live_ ABSL_GUARDED_BY(mu_);  // id -> cores (empty on GPU)
};

// CPU lists as taskset/cpuset write them: "0,2,4-7". Parse rejects anything else with a message
// naming the bad part; cores must be >= 0.
StatusOr<std::vector<int>> ParseCpuList(std::string_view text);
std::string FormatCpuList(const std::vector<int>& cpus);  // compact ranges: "0-3,6"

// Pins the calling thread (and so every thread it creates afterwards) to `cpus`. Call it in main
// before any thread exists. INVALID_ARGUMENT names cores the process may not use.
Status PinCurrentThreadToCpus(const std::vector<int>& cpus);

}  // namespace tessera::partition
