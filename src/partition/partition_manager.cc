#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "tessera/partition/partition.h"

namespace tessera::partition {
namespace {

constexpr char kDefaultMpsPipeDirectory[] = "/tmp/nvidia-mps";

std::string DefaultMpsPipeDirectory() {
  const char* env = getenv("CUDA_MPS_PIPE_DIRECTORY");
  return env && *env ? env : kDefaultMpsPipeDirectory;
}

std::string GpuList(const DriverFacts& d) {
  std::string out =
      absl::StrCat(d.gpus.size(), " GPU(s), driver ", DriverVersionString(d.driver_version));
  return out;
}

// Nearest multiple of `step` to `sms`, within [min_sms, the largest multiple of step <= total].
int RoundGreenSms(double sms, const GpuFacts& gpu) {
  const int step = std::max(1, gpu.green_sm_step);
  const int most = std::max(gpu.green_min_sms, gpu.sm_count / step * step);
  int rounded = static_cast<int>(std::lround(sms / step)) * step;
  return std::clamp(rounded, gpu.green_min_sms, most);
}

// The daemon's own account of a failed start; the private directory holding it is removed.
std::string LastLines(const std::string& path, int count) {
  std::ifstream in(path);
  if (!in) return "(no log)";
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (static_cast<int>(lines.size()) > count) lines.pop_front();
  }
  return lines.empty() ? "(empty)" : absl::StrJoin(lines, " | ");
}

}  // namespace

StatusOr<std::unique_ptr<PartitionManager>> PartitionManager::Create(
    const PartitionOptions& options) {
  return Create(options, CreateSystemProbe(), CreateCommandRunner());
}

StatusOr<std::unique_ptr<PartitionManager>> PartitionManager::Create(
    const PartitionOptions& options, std::unique_ptr<SystemProbe> probe,
    std::unique_ptr<CommandRunner> runner) {
  if (probe == nullptr || runner == nullptr) {
    return absl::InvalidArgumentError("PartitionManager needs a SystemProbe and a CommandRunner");
  }
  std::unique_ptr<PartitionManager> manager(new PartitionManager());
  manager->probe_ = std::move(probe);
  manager->runner_ = std::move(runner);
  TESSERA_RETURN_IF_ERROR(manager->Choose(options));
  return manager;
}

PartitionManager::~PartitionManager() { StopMpsDaemon(); }

Status PartitionManager::Choose(const PartitionOptions& options) {
  const std::string& want = options.mechanism;
  if (want != "auto" && want != "mps" && want != "green" && want != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("partition mechanism must be auto, mps, green or none, got \"", want, "\""));
  }
  cpus_ = probe_->AllowedCpus();
  if (cpus_.empty()) return absl::InternalError("this process may run on no CPU core");

  if (options.devices == "cpu") {
    mechanism_ = Mechanism::kCpu;
    reason_ = absl::StrCat("executors.devices is cpu: CPU core shares of ", cpus_.size(),
                           " core(s) (", FormatCpuList(cpus_), ")");
    if (want == "mps" || want == "green") {
      reason_ += absl::StrCat("; partition_mechanism ", want, " applies to GPUs only");
    }
    return absl::OkStatus();
  }
  driver_ = probe_->Driver();
  if (driver_.gpus.empty()) {
    if (options.devices == "gpu") {
      return absl::FailedPreconditionError(
          absl::StrCat("executors.devices is gpu but there is no GPU: ", driver_.no_gpu_reason));
    }
    if (want == "mps" || want == "green") {
      return absl::FailedPreconditionError(absl::StrCat(
          "partition_mechanism ", want, " needs a GPU and there is none (", driver_.no_gpu_reason,
          "); use auto (CPU core shares) or executors.devices: cpu"));
    }
    mechanism_ = Mechanism::kCpu;
    reason_ = absl::StrCat("no GPU (", driver_.no_gpu_reason, "): CPU core shares of ",
                           cpus_.size(), " core(s) (", FormatCpuList(cpus_), ")");
    if (want == "none") {
      mechanism_ = Mechanism::kNone;
      reason_ = absl::StrCat("partition_mechanism none: executors time-share all ", cpus_.size(),
                             " core(s), unpinned (no GPU: ", driver_.no_gpu_reason, ")");
    }
    return absl::OkStatus();
  }

  if (want == "none") {
    mechanism_ = Mechanism::kNone;
    reason_ = absl::StrCat("partition_mechanism none: executors time-share each GPU uncapped (",
                           GpuList(driver_), ")");
    return absl::OkStatus();
  }
  std::string why_not_mps;
  if (want == "auto" || want == "mps") {
    Status mps = TryMps(options, want == "mps", &why_not_mps);
    if (!mps.ok()) return mps;
    if (mechanism_ == Mechanism::kMps) return absl::OkStatus();
  }
  const bool green_ok = driver_.driver_version >= kGreenContextMinDriverVersion;
  const std::string green_why = absl::StrCat(
      "driver ", DriverVersionString(driver_.driver_version), green_ok ? " >= " : " < ",
      DriverVersionString(kGreenContextMinDriverVersion), " needed for green contexts");
  if (want == "green" && !green_ok) {
    return absl::FailedPreconditionError(absl::StrCat(
        "partition_mechanism green is not available: ", green_why, "; use mps, none or auto"));
  }
  if (green_ok) {
    mechanism_ = Mechanism::kGreen;
    reason_ = want == "green" ? absl::StrCat("partition_mechanism green (", GpuList(driver_), ")")
                              : absl::StrCat(why_not_mps, "; green contexts: ", green_why, " (",
                                             GpuList(driver_), ")");
    return absl::OkStatus();
  }
  mechanism_ = Mechanism::kNone;
  reason_ =
      absl::StrCat(why_not_mps, "; no green contexts: ", green_why,
                   " => time sharing only, partitions are NOT capped (", GpuList(driver_), ")");
  return absl::OkStatus();
}

// Sets mechanism_ to kMps when a daemon runs or could be started. Otherwise leaves it, explains
// why in `why_not`, and fails only for an explicit `mps`.
Status PartitionManager::TryMps(const PartitionOptions& options, bool explicit_mps,
                                std::string* why_not) {
  const std::string pipe =
      options.mps_pipe_directory.empty() ? DefaultMpsPipeDirectory() : options.mps_pipe_directory;
  if (probe_->MpsDaemonRunning(pipe)) {
    mechanism_ = Mechanism::kMps;
    mps_pipe_directory_ = pipe;
    reason_ =
        absl::StrCat("MPS control daemon running at ", pipe, "/control (", GpuList(driver_), ")");
    return absl::OkStatus();
  }
  std::string binary;
  if (!options.mps_start_daemon) {
    *why_not = absl::StrCat("no MPS control daemon at ", pipe,
                            "/control and executors.mps.start_daemon is false");
  } else if ((binary = probe_->FindOnPath(options.mps_control_binary)).empty()) {
    *why_not = absl::StrCat("no MPS control daemon at ", pipe, "/control and ",
                            options.mps_control_binary, " is not on PATH");
  } else {
    Status started = StartMpsDaemon(options, binary);
    if (started.ok()) return absl::OkStatus();
    *why_not = absl::StrCat("starting the MPS control daemon failed: ", started.message());
  }
  if (explicit_mps) {
    return absl::FailedPreconditionError(absl::StrCat(
        "partition_mechanism mps: ", *why_not,
        ". Start one (nvidia-cuda-mps-control -d), set executors.mps.start_daemon: true, or choose "
        "auto, green or none"));
  }
  return absl::OkStatus();
}

Status PartitionManager::StartMpsDaemon(const PartitionOptions& options,
                                        const std::string& binary) {
  std::string pipe = options.mps_pipe_directory;
  std::string log;
  if (pipe.empty()) {
    // A private directory: a daemon of ours never collides with one another user runs.
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-mps-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create ", tmpl, ": ", strerror(errno)));
    }
    private_mps_directory_ = tmpl;
    pipe = tmpl + "/pipe";
    log = tmpl + "/log";
  } else {
    log = pipe + "-log";
  }
  // The log directory must not be <pipe>/log: the daemon makes a FIFO of that name in its pipe
  // directory (seen on an H100, driver 580).
  std::error_code ec;
  for (const std::string& dir : {pipe, log}) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  // The daemon is NVIDIA's binary: it gets the system's libraries, not a library path set for
  // Tessera's own processes (a carried bundle's libstdc++ and the like).
  const std::vector<std::string> env = {"CUDA_MPS_PIPE_DIRECTORY=" + pipe,
                                        "CUDA_MPS_LOG_DIRECTORY=" + log,
                                        "LD_LIBRARY_PATH=", "LD_PRELOAD="};
  Status run = runner_->Run({binary, "-d"}, env, "");
  if (run.ok()) {
    // -d returns once the daemon forked; its control socket appears shortly after.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options.mps_start_timeout_ms);
    while (!probe_->MpsDaemonRunning(pipe)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        run = absl::DeadlineExceededError(absl::StrCat(
            binary, " -d started but no control socket appeared at ", pipe, "/control within ",
            options.mps_start_timeout_ms, " ms; ", log, "/control.log ends: ",
            LastLines(log + "/control.log", 3)));
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (!run.ok()) {
    if (!private_mps_directory_.empty()) {
      std::filesystem::remove_all(private_mps_directory_, ec);
      private_mps_directory_.clear();
    }
    return run;
  }
  mechanism_ = Mechanism::kMps;
  started_daemon_ = true;
  mps_control_binary_ = binary;
  mps_pipe_directory_ = pipe;
  reason_ = absl::StrCat("started an MPS control daemon (", binary, " -d) with pipe directory ",
                         pipe, " (", GpuList(driver_), ")");
  return absl::OkStatus();
}

void PartitionManager::StopMpsDaemon() {
  if (!started_daemon_) return;
  started_daemon_ = false;
  Status quit = runner_->Run({mps_control_binary_},
                             {"CUDA_MPS_PIPE_DIRECTORY=" + mps_pipe_directory_}, "quit\n");
  if (!quit.ok()) {
    spdlog::warn("stopping the MPS control daemon at {} failed: {}", mps_pipe_directory_, quit);
  }
  if (!private_mps_directory_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(private_mps_directory_, ec);
  }
}

StatusOr<ExecutorPlacement> PartitionManager::Place(int device, int percent) {
  if (percent < 1 || percent > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("a partition is 1..100 % of a device, got ", percent, " %"));
  }
  std::lock_guard lock(mu_);
  if (mechanism_ == Mechanism::kCpu) return PlaceCpu(percent);

  ExecutorPlacement p;
  p.mechanism = mechanism_;
  p.percent = percent;
  if (!on_gpu()) {
    // `none` on a machine serving on the CPU: a thread share, no pinning.
    p.compute_threads = std::max(
        1, static_cast<int>(std::lround(percent / 100.0 * static_cast<double>(cpus_.size()))));
    p.describe = absl::StrCat("cpu ", p.compute_threads, " thread(s), unpinned (", percent,
                              " % planned; no partition)");
  } else {
    if (device < 0 || device >= gpu_count()) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPU ", device, " does not exist (", gpu_count(), " GPU(s))"));
    }
    p.device = device;
    const GpuFacts& gpu = driver_.gpus[device];
    switch (mechanism_) {
      case Mechanism::kMps:
        p.env = {absl::StrCat("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=", percent),
                 "CUDA_MPS_PIPE_DIRECTORY=" + mps_pipe_directory_};
        p.describe = absl::StrCat("mps ", percent, " % of GPU ", device);
        break;
      case Mechanism::kGreen: {
        p.green_sms = RoundGreenSms(percent / 100.0 * gpu.sm_count, gpu);
        p.args = {"--green-sms", absl::StrCat(p.green_sms)};
        p.describe =
            absl::StrCat("green ", p.green_sms, " of ", gpu.sm_count, " SMs of GPU ", device, " (",
                         percent, " % asked, groups of ", gpu.green_sm_step, ")");
        break;
      }
      default:
        p.describe = absl::StrCat("GPU ", device, " time-shared, uncapped (", percent,
                                  " % planned; no partition mechanism)");
        break;
    }
  }
  p.id = next_id_++;
  live_[p.id] = {};
  return p;
}

StatusOr<ExecutorPlacement> PartitionManager::PlaceCpu(int percent) {
  const int n = static_cast<int>(cpus_.size());
  const int want =
      std::clamp(static_cast<int>(std::lround(percent / 100.0 * static_cast<double>(n))), 1, n);
  // Least used cores first, then lower numbers: concurrent placements stay disjoint while cores
  // last, and a placement made while another is briefly alive (a shadow during a swap) overlaps
  // as little as possible.
  std::vector<int> order = cpus_;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return cpu_users_[a] < cpu_users_[b]; });
  std::vector<int> chosen(order.begin(), order.begin() + want);
  std::sort(chosen.begin(), chosen.end());
  int shared = 0;
  int others = 0;
  for (int c : chosen) {
    if (cpu_users_[c] > 0) ++shared;
    others = std::max(others, cpu_users_[c]);
    ++cpu_users_[c];
  }
  ExecutorPlacement p;
  p.id = next_id_++;
  p.mechanism = Mechanism::kCpu;
  p.percent = percent;
  p.cpus = chosen;
  p.compute_threads = want;
  std::string list;
  for (int c : chosen) absl::StrAppend(&list, list.empty() ? "" : ",", c);
  p.args = {"--cpus", list};
  p.describe = absl::StrCat("cpu cores ", FormatCpuList(chosen), " (", percent, " %)");
  if (shared > 0) {
    absl::StrAppend(&p.describe, ", oversubscribed: ", shared, " core(s) shared with up to ",
                    others, " other partition(s)");
  }
  live_[p.id] = chosen;
  return p;
}

Status PartitionManager::Release(int64_t placement_id) {
  std::lock_guard lock(mu_);
  auto it = live_.find(placement_id);
  if (it == live_.end()) {
    return absl::NotFoundError(
        absl::StrCat("placement ", placement_id, " is not held (never placed or released)"));
  }
  for (int c : it->second) --cpu_users_[c];
  live_.erase(it);
  return absl::OkStatus();
}

}  // namespace tessera::partition
