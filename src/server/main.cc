// tessera-server: the KServe v2 gRPC and HTTP frontend, the model repository, the dispatcher and
// the executor processes that run models. Flags follow tritonserver's names where the meaning is
// the same; every setting can also come from --config (configs/server.yaml), flags win.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_join.h"
#include "control_loop.h"
#include "executor_pool.h"
#include "host_metrics.h"
#include "model_manager.h"
#include "server_metrics.h"
#include "spdlog/spdlog.h"
#include "tessera/common/logging.h"
#include "tessera/common/mutex_mode.h"
#include "tessera/common/server_config.h"
#include "tessera/frontend/frontend.h"
#include "tessera/frontend/metrics.h"
#include "tessera/partition/partition.h"
#include "triton_flags.h"

namespace {

using tessera::ModelControlMode;
using tessera::ServerConfig;

// After the queues drain, the endpoint stays up refusing inference calls until none has come for
// this long (a loopback or LAN round trip is far shorter), and at most kShutdownRefusalMaxMs, so a
// client that retries in a loop cannot hold the shutdown.
constexpr int64_t kShutdownQuietMs = 50;
constexpr int64_t kShutdownRefusalMaxMs = 1000;

std::string DefaultExecutorBinary() {
  std::error_code error;
  auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "tessera-executor";
  return (self.parent_path() / "tessera-executor").string();
}

// Every client connection holds a descriptor, and the soft limit most systems start a process
// with (1024) would refuse connections long before anything else runs out. Raised to the hard
// limit, as most servers and the Go runtime do.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  // An unlimited hard limit cannot be set as such for descriptors (the kernel caps at nr_open).
  const rlim_t target = std::min<rlim_t>(limit.rlim_max, rlim_t{1} << 20);
  if (limit.rlim_cur >= target) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = target;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    spdlog::info("open-file limit raised from {} to {}", before, target);
  } else {
    spdlog::warn("open-file limit stays at {} (raising it to {} failed: {})", before, target,
                 std::strerror(errno));
  }
}

int Run(int argc, char** argv) {
  CLI::App app{"tessera-server: a KServe v2 / Triton-compatible inference server"};
  std::string config_path;
  std::vector<std::string> repositories;
  std::string control_mode;
  int grpc_port = 0, http_port = 0, metrics_port = 0, poll_secs = 0, log_verbose = 0,
      cpu_executors = 0;
  std::vector<std::string> load_models;
  app.add_option("--config", config_path, "Server YAML (configs/server.yaml); flags override it")
      ->check(CLI::ExistingFile);
  app.add_option("--model-repository", repositories,
                 "Model repository folder (default configs/models); repeat it to serve several "
                 "as one");
  app.add_option("--grpc-port", grpc_port, "gRPC port for inference.GRPCInferenceService (default 8001; 0 = any free port)");
  app.add_option("--http-port", http_port,
                 "KServe v2 HTTP/REST port (default 8000; 0 = any free port; -1 = off)");
  app.add_option("--metrics-port", metrics_port, "Prometheus /metrics port (default 8002; -1 = off)");
  app.add_option("--model-control-mode", control_mode,
                 "none: load all at start; poll: also follow repository changes; explicit: "
                 "load/unload by RPC (default poll)")
      ->check(CLI::IsMember({"none", "poll", "explicit"}));
  app.add_option("--repository-poll-secs", poll_secs, "Seconds between repository polls (default 5)");
  app.add_option("--load-model", load_models,
                 "Model to load at start in explicit mode (repeatable; '*' = all)");
  app.add_option("--cpu-executors", cpu_executors, "Executor processes on a machine with no GPU (default 1)");
  app.add_option("--log-verbose", log_verbose, "0 = info, 1 = debug, 2 = trace");
  bool allow_client_shm = false;
  bool disable_auto_complete = false;
  app.add_flag("--disable-auto-complete-config", disable_auto_complete,
               "Refuse models whose config lists no input/output instead of completing it from "
               "the model file (as tritonserver's flag)");
  app.add_flag("--allow-client-shm", allow_client_shm,
               "Let clients register POSIX shared memory for inputs and outputs (the "
               "system_shared_memory extension; off by default, as in Triton)");
  bool allow_log_settings = false;
  app.add_flag("--allow-log-settings", allow_log_settings,
               "Let clients change the log settings, the log file included (LogSettings RPC)");
  std::string trace_file;
  std::vector<std::string> trace_levels;
  int64_t trace_rate = 0;
  app.add_option("--trace-file", trace_file, "Write request traces (JSON) here");
  app.add_option("--trace-level", trace_levels,
                 "Request tracing: OFF, TIMESTAMPS or TENSORS (repeat it for both)")
      ->check(CLI::IsMember({"OFF", "TIMESTAMPS", "TENSORS"}));
  app.add_option("--trace-rate", trace_rate,
                 "Trace one request in this many (default 1000; 0: only requests carrying an "
                 "OpenTelemetry traceparent, in mode opentelemetry)")
      ->check(CLI::NonNegativeNumber);
  // Triton's TLS flags (grpc.tls in server.yaml): a certificate turns TLS on, --grpc-use-ssl only
  // insists on one; --grpc-root-cert verifies client certificates with --grpc-use-ssl-mutual.
  bool grpc_use_ssl = false, grpc_use_ssl_mutual = false;
  std::string grpc_server_cert, grpc_server_key, grpc_root_cert;
  app.add_flag("--grpc-use-ssl", grpc_use_ssl,
               "Serve gRPC over TLS (needs a certificate and key: the flags below or grpc.tls)");
  app.add_flag("--grpc-use-ssl-mutual", grpc_use_ssl_mutual,
               "Serve gRPC over TLS and require client certificates signed by --grpc-root-cert");
  app.add_option("--grpc-server-cert", grpc_server_cert, "PEM certificate chain for gRPC's TLS");
  app.add_option("--grpc-server-key", grpc_server_key, "PEM private key for gRPC's TLS");
  app.add_option("--grpc-root-cert", grpc_root_cert,
                 "PEM CA certificates that client certificates must be signed by (mutual TLS)");
  // Triton's access restriction (grpc.restricted / http.restricted in server.yaml); repeatable.
  std::vector<std::string> grpc_restricted, http_restricted;
  app.add_option("--grpc-restricted-protocol", grpc_restricted,
                 "<api>,<api>,...:<header>=<value>: only gRPC calls with metadata "
                 "triton-grpc-protocol-<header>: <value> may use these APIs (health, metadata, "
                 "inference, shared-memory, model-config, model-repository, statistics, trace, "
                 "logging)")
      ->allow_extra_args(false);  // one group per flag, as Triton's
  app.add_option("--http-restricted-api", http_restricted,
                 "<api>,<api>,...:<header>=<value>: only HTTP requests with the header "
                 "<header>: <value> may use these APIs")
      ->allow_extra_args(false);
  std::string cache_config;
  app.add_option("--cache-config", cache_config,
                 "Response cache for models that enable response_cache: local,size=<bytes> "
                 "(as tritonserver's flag)");
  tessera::server::TritonFlags triton_flags(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0; a flag's bad value is a wrong setting like any other: exit code 2.
    return app.exit(e) == 0 ? 0 : 2;
  }

  ServerConfig config;
  if (!config_path.empty()) {
    auto loaded = tessera::LoadServerConfigFile(config_path);
    if (!loaded.ok()) {
      std::cerr << "tessera-server: " << loaded.status().message() << "\n";
      return 2;
    }
    config = std::move(loaded).value();
  }
  if (app.count("--model-repository")) config.model_repositories = repositories;
  if (app.count("--grpc-port")) config.grpc_port = grpc_port;
  if (app.count("--http-port")) config.http_port = std::max(http_port, -1);
  if (app.count("--metrics-port")) config.metrics_port = metrics_port < 0 ? 0 : metrics_port;
  if (app.count("--model-control-mode")) {
    config.model_control_mode = tessera::ParseModelControlMode(control_mode).value();
  }
  if (app.count("--repository-poll-secs")) config.repository_poll_secs = poll_secs;
  if (app.count("--cpu-executors")) config.cpu_executors = cpu_executors;
  if (app.count("--log-verbose")) config.log_verbose = log_verbose;
  if (app.count("--allow-client-shm")) config.allow_client_shm = allow_client_shm;
  if (disable_auto_complete) config.auto_complete_config = false;
  if (app.count("--allow-log-settings")) config.allow_log_settings = allow_log_settings;
  if (app.count("--trace-file")) config.trace_file = trace_file;
  if (app.count("--trace-level")) {
    tessera::StatusOr<std::string> level = tessera::CanonicalTraceLevel(trace_levels);
    if (!level.ok()) {
      std::cerr << "tessera-server: --trace-level: " << level.status().message() << "\n";
      return 2;
    }
    config.trace_level = *std::move(level);
  }
  if (app.count("--trace-rate")) config.trace_rate = trace_rate;
  if (app.count("--grpc-server-cert")) config.grpc_tls.cert = grpc_server_cert;
  if (app.count("--grpc-server-key")) config.grpc_tls.key = grpc_server_key;
  if (grpc_use_ssl_mutual) {
    if (!grpc_root_cert.empty()) config.grpc_tls.client_ca = grpc_root_cert;
    if (config.grpc_tls.client_ca.empty()) {
      std::cerr << "tessera-server: --grpc-use-ssl-mutual needs --grpc-root-cert (or "
                   "grpc.tls.client_ca in server.yaml)\n";
      return 2;
    }
  } else if (!grpc_root_cert.empty()) {
    std::cerr << "tessera-server: --grpc-root-cert is only used with --grpc-use-ssl-mutual\n";
    return 2;
  }
  if ((grpc_use_ssl || grpc_use_ssl_mutual || config.grpc_tls.enabled()) &&
      (config.grpc_tls.cert.empty() || config.grpc_tls.key.empty())) {
    std::cerr << "tessera-server: gRPC TLS needs both a certificate and a key (--grpc-server-cert "
                 "and --grpc-server-key, or grpc.tls.cert and grpc.tls.key)\n";
    return 2;
  }
  for (auto [flag, texts, groups] :
       {std::tuple("--grpc-restricted-protocol", &grpc_restricted, &config.grpc_restricted),
        std::tuple("--http-restricted-api", &http_restricted, &config.http_restricted)}) {
    if (texts->empty()) continue;
    groups->clear();  // the flags replace the file's groups
    for (const std::string& text : *texts) {
      auto group = tessera::ParseRestrictedApisFlag(text, flag);
      if (!group.ok()) {
        std::cerr << "tessera-server: " << group.status().message() << "\n";
        return 2;
      }
      groups->push_back(*std::move(group));
    }
    if (tessera::Status overlap = tessera::CheckRestrictedApis(*groups, flag); !overlap.ok()) {
      std::cerr << "tessera-server: " << overlap.message() << "\n";
      return 2;
    }
  }
  if (app.count("--cache-config")) {
    auto bytes = tessera::ParseCacheConfig(cache_config);
    if (!bytes.ok()) {
      std::cerr << "tessera-server: " << bytes.status().message() << "\n";
      return 2;
    }
    config.response_cache_bytes = *bytes;
  }
  tessera::LogSettingsUpdate start_log;
  std::vector<std::string> unused_flags;
  if (tessera::Status applied = triton_flags.Apply(&config, &start_log, &unused_flags);
      !applied.ok()) {
    std::cerr << "tessera-server: " << applied.message() << "\n";
    return 2;
  }
  if (tessera::Status traced = tessera::CheckTraceConfig(config, "tessera-server"); !traced.ok()) {
    std::cerr << traced.message() << "\n";
    return 2;
  }
  std::optional<tessera::frontend::OtlpExportSettings> otlp;
  if (config.trace_mode == "opentelemetry") {
    auto resolved = tessera::frontend::ResolveOtlpExport(
        config.trace_otel, [](const char* name) -> const char* { return std::getenv(name); });
    if (!resolved.ok()) {
      std::cerr << "tessera-server: " << resolved.status().message() << "\n";
      return 2;
    }
    otlp = *std::move(resolved);
  }
  if (!load_models.empty() && config.model_control_mode != ModelControlMode::kExplicit) {
    std::cerr << "tessera-server: --load-model needs --model-control-mode=explicit\n";
    return 2;
  }

  tessera::InitLogging(config.log_verbose, "server");
  if (tessera::Status logging = tessera::UpdateLogSettings(start_log); !logging.ok()) {
    spdlog::error("{}", logging.message());
    return 2;
  }
  for (const std::string& line : unused_flags) spdlog::info("{}", line);
  tessera::Status tls = tessera::frontend::CheckTlsFiles(config.grpc_tls, "grpc.tls");
  if (tls.ok() && config.http_port >= 0) {
    tls = tessera::frontend::CheckTlsFiles(config.http_tls, "http.tls");
  }
  if (!tls.ok()) {
    spdlog::error("{}", tls.message());
    return 2;
  }
  for (const std::string& repository : config.model_repositories) {
    if (!std::filesystem::is_directory(repository)) {
      spdlog::error("model repository '{}' is not a folder", repository);
      return 2;
    }
  }
#ifndef TESSERA_HAVE_CUDA_ENGINE
  if (config.devices == "gpu") {
    spdlog::error("devices: gpu was asked for, but this build has no CUDA backend (configure with "
                  "-DTESSERA_CUDA=ON on a machine with nvcc)");
    return 2;
  }
#endif
  tessera::partition::PartitionOptions partition_options;
  partition_options.mechanism = config.partition_mechanism;
  partition_options.devices = config.devices;
  partition_options.mps_start_daemon = config.mps_start_daemon;
  partition_options.mps_pipe_directory = config.mps_pipe_directory;
  auto partitions = tessera::partition::PartitionManager::Create(partition_options);
  if (!partitions.ok()) {
    spdlog::error("{}", partitions.status().message());
    return 2;
  }
  spdlog::info("partitions: {}", (*partitions)->reason());
  // Executors run the engine's CUDA backend on GPU 0 when the partitions are on a GPU (`gpu`, or
  // `auto` finding one) and the build has the backend; else the CPU engine.
#ifdef TESSERA_HAVE_CUDA_ENGINE
  const bool on_gpu = (*partitions)->on_gpu();
#else
  const bool on_gpu = false;
  if ((*partitions)->on_gpu()) {
    spdlog::warn(
        "this build has no CUDA backend: models run on the CPU engine although {} GPU(s) "
        "are present (configure with -DTESSERA_CUDA=ON on a machine with nvcc)",
        (*partitions)->gpu_count());
  }
#endif
  if (on_gpu) {
    spdlog::info("serving on GPU 0 with the CUDA backend (executors.devices: {})", config.devices);
  } else {
    spdlog::info("serving on the CPU ({} executor(s))", config.cpu_executors);
  }

  // Block the stop signals in every thread; the main thread takes them with sigwait below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  RaiseOpenFileLimit();

  tessera::server::ExecutorPoolOptions pool_options;
  pool_options.executors = std::max(1, config.cpu_executors);
  pool_options.launch.binary =
      config.executor_binary.empty() ? DefaultExecutorBinary() : config.executor_binary;
  pool_options.launch.device = on_gpu ? "cuda:0" : "cpu";
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  pool_options.launch.threads = config.threads_per_executor > 0
                                    ? config.threads_per_executor
                                    : std::max(1, cores / pool_options.executors);
  pool_options.launch.input_ring_bytes = static_cast<uint64_t>(config.input_ring_bytes);
  pool_options.launch.output_ring_bytes = static_cast<uint64_t>(config.output_ring_bytes);
  pool_options.launch.batches_in_flight = config.batches_in_flight;
  pool_options.launch.inline_run_max_us = config.inline_run_max_us;
  pool_options.launch.input_mirror = config.input_mirror;
  pool_options.launch.memory_limit_mb = config.executor_memory_limit_mb;
  if (pool_options.launch.memory_limit_mb < 0) {
    const int64_t machine_mb = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) *
                               sysconf(_SC_PAGE_SIZE) / (1 << 20);
    pool_options.launch.memory_limit_mb = machine_mb * 3 / 4;
  }
  if (!on_gpu) {
    spdlog::info("CPU executors may allocate {} (executors.memory_limit_mb)",
                 pool_options.launch.memory_limit_mb > 0
                     ? std::to_string(pool_options.launch.memory_limit_mb) + " MiB"
                     : std::string("without limit"));
  }
  pool_options.launch.log_verbose = config.log_verbose;
  auto pool = tessera::server::ExecutorPool::Start(pool_options);
  if (!pool.ok()) {
    spdlog::error("cannot start executors: {}", pool.status().message());
    return 1;
  }

  tessera::server::ModelManagerOptions manager_options;
  manager_options.repository_roots = config.model_repositories;
  manager_options.scan.config_name = config.model_config_name;
  manager_options.control_mode = config.model_control_mode;
  manager_options.auto_complete_config = config.auto_complete_config;
  manager_options.drain_timeout_ms = int64_t{config.shutdown_drain_secs} * 1000;
  manager_options.slo_drop = config.scheduler_slo_drop;
  manager_options.response_cache = config.response_cache_bytes > 0;
  manager_options.strict_readiness = config.strict_readiness;
  if (config.metrics_port > 0 && config.metrics_summary_latencies) {
    for (const tessera::SummaryQuantileSpec& q : config.metrics_summary_quantiles) {
      manager_options.latency_summary_quantiles.push_back({q.quantile, q.error});
    }
  }
  if (on_gpu) {
    // Instance groups that ask for KIND_CPU, or name a GPU other than 0, get an executor of
    // their own, started with the first such instance (instance_placement.h).
    manager_options.gpu_count = (*partitions)->gpu_count();
    manager_options.add_executor = [&pool, &config, launch = pool_options.launch,
                                    cores](const std::string& device) -> tessera::StatusOr<int> {
      tessera::server::ExecutorLaunchOptions added = launch;
      added.device = device;
      added.extra_env.clear();  // a gpulet's partition settings are not this executor's
      added.extra_args.clear();
      if (device == "cpu") {
        added.threads = config.threads_per_executor > 0 ? config.threads_per_executor : cores;
      }
      return (*pool)->AddExecutor(added);
    };
  }
  tessera::server::ModelManager manager(manager_options, pool->get());
  const std::vector<std::string> failed = manager.LoadAtStartup(load_models);
  if (config.exit_on_error && !failed.empty()) {
    spdlog::error(
        "exiting: {} model(s) failed to load at start and exit_on_error is set "
        "(--exit-on-error=false or repository.exit_on_error: false serves the others): {}",
        failed.size(), absl::StrJoin(failed, "; "));
    return 1;
  }

  std::unique_ptr<tessera::server::ControlLoop> control;
  if (config.scheduler_policy != "triton") {
    tessera::server::ControlLoopOptions control_options;
    control_options.policy = config.scheduler_policy;
    control_options.profiles_dir = config.scheduler_profiles;
    control_options.epoch_ms = config.scheduler_epoch_secs * 1000;
    control_options.window_ms = config.scheduler_rate_window_ms;
    control_options.devices = 1;  // the CPU; GPU devices come with the CUDA backend
    control_options.applier = tessera::server::PlacedBy(partitions->get());
    auto created = tessera::server::ControlLoop::Create(control_options, &manager, pool->get());
    if (!created.ok()) {
      spdlog::error("{}", created.status().message());
      return 2;
    }
    control = std::move(created).value();
    control->Start();
  }

  tessera::frontend::FrontendOptions frontend_options;
  frontend_options.grpc_address = config.grpc_address;
  frontend_options.grpc_port = config.grpc_port;
  frontend_options.max_message_bytes = config.max_grpc_message_bytes;
  frontend_options.max_inflating_bytes = config.max_inflating_bytes;
  frontend_options.grpc_keepalive = config.grpc_keepalive;
  frontend_options.grpc_response_compression = config.grpc_response_compression;
  frontend_options.grpc_reuse_port = config.grpc_reuse_port;
  frontend_options.http_reuse_port = config.http_reuse_port;
  if (frontend_options.max_inflating_bytes == 0) {
    frontend_options.max_inflating_bytes =
        static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE) / 4;
  }
  frontend_options.http_address = config.http_address;
  frontend_options.http_port = config.http_port;
  frontend_options.http_threads = config.http_threads;
  frontend_options.http_idle_timeout_s = config.http_idle_timeout_s;
  frontend_options.grpc_tls = config.grpc_tls;
  frontend_options.http_tls = config.http_tls;
  frontend_options.grpc_restricted = config.grpc_restricted;
  frontend_options.http_restricted = config.http_restricted;
  frontend_options.allow_client_shm = config.allow_client_shm;
  frontend_options.allow_log_settings = config.allow_log_settings;
  frontend_options.trace = {config.trace_level, config.trace_rate, config.trace_count,
                            config.trace_log_frequency, config.trace_file};
  frontend_options.otlp = std::move(otlp);
  if (frontend_options.otlp) {
    spdlog::info("request traces go as OpenTelemetry spans to {}", frontend_options.otlp->url);
  }
  frontend_options.server_version = TESSERA_VERSION;
  frontend_options.response_cache_bytes = static_cast<uint64_t>(config.response_cache_bytes);
  auto frontend = tessera::frontend::Frontend::Start(frontend_options, &manager);
  if (!frontend.ok()) {
    spdlog::error("{}", frontend.status().message());
    return 1;
  }
  // grpc.health.v1.Health follows strict readiness as ServerReady does.
  manager.SetHealthListener([f = frontend->get()] { f->RefreshHealth(); });
  // Whichever way Run returns, no call reaches the frontend once it is gone (it is destroyed
  // before the manager, whose unloads notify).
  absl::Cleanup forget_health = [&manager] { manager.SetHealthListener(nullptr); };
  (*frontend)->RefreshHealth();
  std::unique_ptr<tessera::server::HostMetrics> host_metrics;
  std::unique_ptr<tessera::frontend::MetricsEndpoint> metrics;
  if (config.metrics_port > 0) {
    std::unique_ptr<tessera::server::GpuMetrics> gpus;
    if (config.gpu_metrics) {
      auto nvml = tessera::server::LoadNvml();
      auto opened = nvml.ok() ? tessera::server::GpuMetrics::Open(*nvml)
                              : decltype(tessera::server::GpuMetrics::Open(*nvml))(nvml.status());
      if (opened.ok()) {
        gpus = std::move(opened).value();
        spdlog::info("GPU metrics (nv_gpu_*) from NVML");
      } else {
        spdlog::info("no GPU metrics: {}", opened.status().message());
      }
    }
    if (config.cpu_metrics || gpus) {
      host_metrics = std::make_unique<tessera::server::HostMetrics>(
          config.metrics_interval_ms, config.cpu_metrics, std::move(gpus));
    }
    auto server_metrics =
        tessera::server::ServerMetrics(control.get(), pool->get(), host_metrics.get());
    tessera::frontend::MetricsOptions metrics_options;
    metrics_options.address = config.metrics_address;
    metrics_options.port = config.metrics_port;
    metrics_options.counter_latencies = config.metrics_counter_latencies;
    auto started =
        tessera::frontend::MetricsEndpoint::Start(metrics_options, &manager, server_metrics);
    if (!started.ok()) {
      spdlog::error("{}", started.status().message());
      return 1;
    }
    metrics = std::move(started).value();
    spdlog::info("Prometheus metrics on http://{}:{}/metrics", config.metrics_address,
                 config.metrics_port);
  }

  std::mutex poll_mu;
  std::condition_variable poll_cv;
  bool stop_polling = false;
  std::thread poller;
  if (config.model_control_mode == ModelControlMode::kPoll) {
    poller = std::thread([&] {
      std::unique_lock lock(poll_mu);
      while (!poll_cv.wait_for(lock, std::chrono::seconds(std::max(1, config.repository_poll_secs)),
                               [&] { return stop_polling; })) {
        lock.unlock();
        manager.PollOnce();
        lock.lock();
      }
    });
  }

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("received {}; draining in-flight requests (up to {} s)", strsignal(signal_number),
               config.shutdown_drain_secs);
  {
    std::lock_guard lock(poll_mu);
    stop_polling = true;
  }
  poll_cv.notify_all();
  if (poller.joinable()) poller.join();
  if (control) control->StopLoop();
  const auto drain_deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(config.shutdown_drain_secs);
  manager.BeginShutdown();
  (*frontend)->StopServing();
  const bool drained = manager.WaitIdle(int64_t{config.shutdown_drain_secs} * 1000);
  // Idle queues do not mean idle clients: calls already on the wire at the signal would be cut
  // off (CANCELLED, broken pipe) by the transport's shutdown. Keep refusing them clearly until
  // none has come for a while.
  const int64_t drain_left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    drain_deadline - std::chrono::steady_clock::now())
                                    .count();
  (*frontend)->RefuseUntilQuiet(kShutdownQuietMs, std::clamp<int64_t>(drain_left_ms, 0,
                                                                      kShutdownRefusalMaxMs));
  (*frontend)->Shutdown(2000);
  metrics.reset();
  manager.UnloadAll();
  if (control) control->Stop();
  (*pool)->Stop();
  spdlog::info("stopped{}", drained ? "" : " (some requests did not finish in time)");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tessera::DisableMutexDeadlockDetection();
  return Run(argc, argv);
}
