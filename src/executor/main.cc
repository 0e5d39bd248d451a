// tessera-executor: one process per device partition, started by tessera-server
// (docs/executor-protocol.md). Exit status 0 after Shutdown or when the server goes away; 1 when it
// cannot start or the control stream is corrupt.
#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "CLI/CLI.hpp"
#include "executor/executor.h"
#include "executor/load_options.h"
#include "partition/green_context.h"
#include "spdlog/spdlog.h"
#include "tessera/common/logging.h"
#include "tessera/common/mutex_mode.h"
#include "tessera/engine/engine.h"
#include "tessera/partition/partition.h"

namespace {

int Main(int argc, char** argv) {
  int executor_id = 0;
  std::string control_socket;
  std::string input_shm;
  std::string output_shm;
  size_t input_bytes = 0;
  size_t output_bytes = 0;
  std::string device = "cpu";
  int threads = 1;
  int inline_run_max_us = 50;
  int64_t memory_limit_mb = 0;
  int log_verbose = 0;
  std::string cpus;
  int green_sms = 0;
  std::string input_mirror = "auto";

  CLI::App app{"Tessera executor: runs model batches for tessera-server"};
  app.add_option("--executor-id", executor_id, "Executor id assigned by the server")->required();
  app.add_option("--control-socket", control_socket, "Unix socket path to connect to")->required();
  app.add_option("--input-shm", input_shm, "Input ring shared-memory name")->required();
  app.add_option("--input-bytes", input_bytes, "Input ring size in bytes")->required();
  app.add_option("--output-shm", output_shm, "Output ring shared-memory name")->required();
  app.add_option("--output-bytes", output_bytes, "Output ring size in bytes")->required();
  app.add_option("--device", device, "Device: cpu or cuda:N")->capture_default_str();
  app.add_option("--threads", threads, "CPU threads per model instance")->capture_default_str();
  app.add_option("--inline-run-max-us", inline_run_max_us,
                 "CPU: a batch of an idle instance whose recent runs took at most this many "
                 "microseconds runs on the receive thread (0 = never)")
      ->check(CLI::Range(0, 1'000'000))
      ->capture_default_str();
  app.add_option("--memory-limit-mb", memory_limit_mb,
                 "CPU: the most this process may allocate, in MiB (RLIMIT_DATA; 0 = no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--input-mirror", input_mirror,
                 "Copy of the input pool made as requests arrive: auto (on the GPU for cuda:N, "
                 "none on the CPU), host (a host copy, for tests) or off")
      ->check(CLI::IsMember({"auto", "host", "off"}))
      ->capture_default_str();
  app.add_option("--log-verbose", log_verbose, "0 info, 1 debug, 2 trace")->capture_default_str();
  app.add_option("--cpus", cpus, "CPU partition: pin to these cores (e.g. 0,1 or 0-3)");
  app.add_option("--green-sms", green_sms, "GPU partition: run in a green context of N SMs");
  CLI11_PARSE(app, argc, argv);

  // Pin before anything starts a thread (logging, the engine's pool): threads inherit the
  // affinity of the thread that creates them, so pinning main pins the whole executor.
  tessera::Status pinned = absl::OkStatus();
  if (!cpus.empty()) {
    auto list = tessera::partition::ParseCpuList(cpus);
    pinned = list.ok() ? tessera::partition::PinCurrentThreadToCpus(*list) : list.status();
  }
  tessera::InitLogging(log_verbose, "executor-" + std::to_string(executor_id));
  if (!pinned.ok()) {
    spdlog::error("--cpus {}: {}", cpus, pinned.ToString());
    return 1;
  }
  if (!cpus.empty()) spdlog::info("pinned to cores {}", cpus);
  // Sends use MSG_NOSIGNAL already; this also covers anything else that writes to a dead pipe.
  signal(SIGPIPE, SIG_IGN);

  tessera::engine::ModelOptions model_options;
  if (device == "cpu") {
    model_options.backend = tessera::engine::Backend::kCpu;
  } else if (int ordinal = -1;
             std::sscanf(device.c_str(), "cuda:%d", &ordinal) == 1 && ordinal >= 0) {
    model_options.backend = tessera::engine::Backend::kCuda;
    model_options.cuda_device = ordinal;
  } else {
    spdlog::error("unknown --device '{}' (expected cpu or cuda:N)", device);
    return 1;
  }
  model_options.num_threads = threads > 0 ? threads : 1;
  // A model asking for more memory than the machine has (a huge constant folded at load, a
  // tensor sized by a request) then fails that load or batch with RESOURCE_EXHAUSTED; without
  // the limit the kernel's OOM killer would end this process and every model on it. Only on the
  // CPU: the CUDA driver maps far more address space than it uses.
  if (memory_limit_mb > 0 && model_options.backend == tessera::engine::Backend::kCpu) {
#if defined(__SANITIZE_ADDRESS__)
    spdlog::warn("--memory-limit-mb {} not applied: AddressSanitizer maps terabytes of shadow",
                 memory_limit_mb);
    memory_limit_mb = 0;
#else
    const rlim_t bytes = static_cast<rlim_t>(memory_limit_mb) << 20;
    const rlimit limit{bytes, bytes};
    if (setrlimit(RLIMIT_DATA, &limit) != 0) {
      spdlog::error("--memory-limit-mb {}: setrlimit: {}", memory_limit_mb, std::strerror(errno));
      return 1;
    }
#endif
  } else {
    memory_limit_mb = 0;
  }
  if (green_sms != 0) {
    // The context is current on this thread; the CPU engine ignores it.
    int ordinal = -1;
    if (model_options.backend != tessera::engine::Backend::kCuda ||
        std::sscanf(device.c_str(), "cuda:%d", &ordinal) != 1) {
      spdlog::error("--green-sms needs --device cuda:N, got --device {}", device);
      return 1;
    }
    auto granted = tessera::partition::EnterGreenContext(ordinal, green_sms);
    if (!granted.ok()) {
      spdlog::error("--green-sms {}: {}", green_sms, granted.status().ToString());
      return 1;
    }
    spdlog::info("green context of {} SMs on GPU {} (asked {})", *granted, ordinal, green_sms);
    // Naming the device would make the engine switch to the device's primary context.
    model_options.cuda_device = -1;
  }

  auto input = tessera::ipc::SharedMemoryRegion::Open(input_shm, input_bytes);
  if (!input.ok()) {
    spdlog::error("{}", input.status().ToString());
    return 1;
  }
  auto output = tessera::ipc::SharedMemoryRegion::Open(output_shm, output_bytes);
  if (!output.ok()) {
    spdlog::error("{}", output.status().ToString());
    return 1;
  }
  auto channel = tessera::ipc::ControlChannel::Connect(control_socket);
  if (!channel.ok()) {
    spdlog::error("{}", channel.status().ToString());
    return 1;
  }

  tessera::executor::ExecutorOptions options;
  options.executor_id = executor_id;
  options.device = device;
  options.memory_limit_mb = memory_limit_mb;
  // On the CPU a thread hand-off costs more than a batch of a tiny model (tens of microseconds);
  // GPU instances keep their threads until this is checked on one.
  if (model_options.backend == tessera::engine::Backend::kCpu) {
    options.inline_run_max_ns = static_cast<uint64_t>(inline_run_max_us) * 1000;
  }
  options.loader = [model_options](const tessera::ipc::LoadModel& request,
                                   const tessera::engine::WeightImport* shared_weights)
      -> tessera::StatusOr<std::unique_ptr<tessera::engine::Model>> {
    TESSERA_ASSIGN_OR_RETURN(
        tessera::engine::ModelOptions options,
        tessera::executor::LoadOptionsFor(request, model_options, shared_weights));
    return tessera::engine::LoadOnnxModel(request.model_path(), options);
  };
  if (input_mirror == "host") {
    options.make_input_mirror =
        [](void* ring,
           uint64_t bytes) -> tessera::StatusOr<std::unique_ptr<tessera::executor::InputMirror>> {
      return tessera::executor::MakeHostInputMirror(ring, bytes);
    };
  } else if (input_mirror == "auto" && model_options.backend == tessera::engine::Backend::kCuda) {
    // Made on this thread, the receive loop's, where the device (or green context) is current.
    options.make_input_mirror = [ordinal = model_options.cuda_device](void* ring, uint64_t bytes) {
      return tessera::executor::MakeCudaInputMirror(ring, bytes, ordinal);
    };
  }
  auto executor = tessera::executor::Executor::Create(std::move(options), *std::move(channel),
                                                      *std::move(input), *std::move(output));
  if (!executor.ok()) {
    spdlog::error("{}", executor.status().ToString());
    return 1;
  }
  tessera::Status status = (*executor)->Run();
  if (!status.ok()) {
    spdlog::error("executor {} exiting: {}", executor_id, status.ToString());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tessera::engine::EnsurePassiveOpenMpWait(argv);
  tessera::DisableMutexDeadlockDetection();
  return Main(argc, argv);
}
