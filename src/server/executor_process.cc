#include "executor_process.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "tessera/common/clock.h"
#include "tessera/common/data_type.h"
#include "tessera/common/thread_name.h"

namespace tessera::server {
namespace {

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return absl::StrCat("killed by signal ", sig, " (", strsignal(sig), ")");
  }
  return absl::StrCat("ended with wait status ", status);
}

// Bytes of the input ring kept for the input pool: the configured fraction, in whole pages.
uint64_t InputPoolBytes(const ExecutorLaunchOptions& options) {
  const double fraction = std::clamp(options.input_pool_fraction, 0.0, 1.0);
  const auto bytes =
      static_cast<uint64_t>(static_cast<double>(options.input_ring_bytes) * fraction);
  return std::min(bytes / 4096 * 4096, options.input_ring_bytes);
}

InputPoolOptions PoolOptions(const ExecutorLaunchOptions& options) {
  InputPoolOptions pool;
  pool.base = 0;
  pool.bytes = InputPoolBytes(options);
  pool.regions = options.input_pool_instances;
  pool.spill_share = options.input_pool_spill_share;
  return pool;
}

}  // namespace

ExecutorProcess::ExecutorProcess(const ExecutorLaunchOptions& options,
                                 std::function<void(const std::string&)> on_exit)
    : options_(options),
      on_exit_(std::move(on_exit)),
      input_pool_(InputPool::Create(PoolOptions(options))),
      gather_base_(InputPoolBytes(options)),
      input_allocator_(options.input_ring_bytes - InputPoolBytes(options)) {}

StatusOr<std::unique_ptr<ExecutorProcess>> ExecutorProcess::Start(
    const ExecutorLaunchOptions& options, std::function<void(const std::string&)> on_exit) {
  std::unique_ptr<ExecutorProcess> process(new ExecutorProcess(options, std::move(on_exit)));
  TESSERA_RETURN_IF_ERROR(process->Spawn());
  return process;
}

Status ExecutorProcess::Spawn() {
  const std::string tag =
      absl::StrCat("tessera-", getpid(), "-", options_.executor_id, "-", options_.generation);
  // Both rings live in /dev/shm; a failure says how much the executor needs there in all.
  auto ring_error = [&](const Status& status) {
    constexpr uint64_t kMiB = 1 << 20;
    return Status(status.code(),
                  absl::StrCat(status.message(), "; executor ", options_.executor_id, " needs ",
                               (options_.input_ring_bytes + options_.output_ring_bytes) / kMiB,
                               " MiB of /dev/shm for its rings (executors.input_ring_bytes + "
                               "executors.output_ring_bytes)"));
  };
  auto input_ring = ipc::SharedMemoryRegion::Create("/" + tag + "-in", options_.input_ring_bytes);
  if (!input_ring.ok()) return ring_error(input_ring.status());
  input_ring_ = *std::move(input_ring);
  auto output_ring =
      ipc::SharedMemoryRegion::Create("/" + tag + "-out", options_.output_ring_bytes);
  if (!output_ring.ok()) return ring_error(output_ring.status());
  output_ring_ = *std::move(output_ring);
  const char* tmp = getenv("TMPDIR");
  socket_path_ = absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/", tag, ".sock");
  TESSERA_ASSIGN_OR_RETURN(listener_, ipc::ControlListener::Listen(socket_path_));

  // One flag and its value per line.
  // clang-format off
  std::vector<std::string> args = {options_.binary,
                                   "--executor-id", absl::StrCat(options_.executor_id),
                                   "--control-socket", socket_path_,
                                   "--input-shm", input_ring_->name(),
                                   "--input-bytes", absl::StrCat(options_.input_ring_bytes),
                                   "--output-shm", output_ring_->name(),
                                   "--output-bytes", absl::StrCat(options_.output_ring_bytes),
                                   "--device", options_.device,
                                   "--threads", absl::StrCat(options_.threads),
                                   "--inline-run-max-us", absl::StrCat(options_.inline_run_max_us),
                                   "--memory-limit-mb", absl::StrCat(options_.memory_limit_mb),
                                   "--input-mirror", options_.input_mirror,
                                   "--log-verbose", absl::StrCat(options_.log_verbose)};
  // clang-format on
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // The server's environment with the partition's entries (MPS percentage, pipe directory) put
  // over it; built before fork, as the child may only make async-signal-safe calls.
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view key = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& extra : options_.extra_env) {
      replaced = replaced || std::string_view(extra).substr(0, extra.find('=')) == key;
    }
    if (!replaced) env.emplace_back(entry);
  }
  env.insert(env.end(), options_.extra_env.begin(), options_.extra_env.end());
  std::vector<char*> envp;
  for (std::string& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);

  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork failed: ", strerror(errno)));
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec. The executor must not outlive the
    // server: an orphan would hold GPU memory and shared memory forever.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  pid_ = pid;

  auto accepted = listener_->Accept(static_cast<int>(options_.handshake_timeout_ms));
  if (!accepted.ok()) {
    kill(pid_, SIGKILL);
    std::string how = WaitForExitDescription(2000);
    return absl::UnavailableError(absl::StrCat("executor ", options_.executor_id, " (",
                                               options_.binary, ") did not connect: ", how, "; ",
                                               accepted.status().message()));
  }
  channel_ = std::move(accepted).value();
  ipc::ControlMessage hello;
  Status received = channel_->Receive(&hello);
  if (!received.ok() || !hello.has_hello()) {
    kill(pid_, SIGKILL);
    return absl::UnavailableError(absl::StrCat("executor ", options_.executor_id,
                                               " sent no Hello: ", received.message()));
  }
  if (hello.hello().protocol_version() != ipc::PROTOCOL_VERSION_CURRENT) {
    kill(pid_, SIGKILL);
    return absl::FailedPreconditionError(
        absl::StrCat("executor ", options_.executor_id, " speaks protocol version ",
                     hello.hello().protocol_version(), ", the server ",
                     static_cast<int>(ipc::PROTOCOL_VERSION_CURRENT)));
  }
  // The executor opened both rings before its Hello: their names can go, so that the memory is
  // freed with the two processes however they end.
  for (ipc::SharedMemoryRegion* ring : {input_ring_.get(), output_ring_.get()}) {
    if (Status unlinked = ring->Unlink(); !unlinked.ok()) spdlog::warn("{}", unlinked.message());
  }
  stages_inputs_ = hello.hello().stages_inputs();
  alive_ = true;
  reader_ = std::thread([this] { ReaderLoop(); });
  watchdog_ = std::thread([this] { WatchdogLoop(); });
  spdlog::info("{} started on {} with {} thread(s)", Describe(), options_.device, options_.threads);
  return absl::OkStatus();
}

uint64_t ExecutorProcess::gather_capacity_bytes() const {
  return options_.input_ring_bytes - InputPoolBytes(options_);
}

std::string ExecutorProcess::Describe() const {
  return absl::StrCat("executor ", options_.executor_id, " (pid ", pid_, ")");
}

std::string ExecutorProcess::WaitForExitDescription(int64_t timeout_ms) {
  // The reader thread and Stop() may both get here; only one may reap the child.
  std::lock_guard reap_lock(reap_mu_);
  {
    std::lock_guard lock(mu_);
    if (reaped_) return exit_description_;
  }
  const uint64_t deadline = MonotonicNs() + static_cast<uint64_t>(timeout_ms) * 1000000;
  int status = 0;
  while (true) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (r < 0) return "exited (status unknown)";
    if (MonotonicNs() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string description = DescribeWaitStatus(status);
  std::lock_guard lock(mu_);
  reaped_ = true;
  exit_description_ = description;
  return description;
}

thread_local const ExecutorProcess* ExecutorProcess::reader_of_ = nullptr;

void ExecutorProcess::ReaderLoop() {
  SetCurrentThreadName("ts-exec-reader");
  reader_of_ = this;
  while (true) {
    ipc::ControlMessage message;
    Status status = channel_->Receive(&message);
    if (!status.ok()) break;
    if (message.has_result()) {
      const ipc::BatchResult& result = message.result();
      if (std::optional<PendingBatch> pending = TakePending(result.batch_id())) {
        StatusOr<std::vector<dispatch::Response>> responses = FinishBatch(*pending, result);
        // Outputs are copied out: given back with the burst's write.
        if (result.ok()) reader_release_.push_back(result.batch_id());
        pending->done(std::move(responses));  // may submit the next batches (reader_outbox_)
      }
    } else if (message.has_weights_export()) {
      FinishExport(message.weights_export());
    } else if (message.has_load_result()) {
      const ipc::LoadResult& result = message.load_result();
      if (result.ok() && result.weights_shared()) {
        spdlog::info("{}: '{}' maps weights another executor exported", Describe(),
                     result.instance_key());
      } else if (result.ok() && !result.weights_not_shared().empty()) {
        spdlog::info("{}: '{}' loaded its own weights: {}", Describe(), result.instance_key(),
                     result.weights_not_shared());
      }
      std::lock_guard lock(mu_);
      auto it = pending_loads_.find(result.instance_key());
      if (it != pending_loads_.end()) {
        if (result.ok() && result.weights_shared()) shared_loads_.insert(result.instance_key());
        // Out of memory, and a model the executor's engine cannot run (which the model manager
        // may load on the CPU instead), keep their codes; any other refusal is the model's.
        const auto code = static_cast<absl::StatusCode>(result.error_code());
        const bool kept = code == absl::StatusCode::kResourceExhausted ||
                          code == absl::StatusCode::kUnimplemented;
        it->second.set_value(result.ok() ? absl::OkStatus()
                             : kept      ? absl::Status(code, result.error())
                                         : absl::InvalidArgumentError(result.error()));
        pending_loads_.erase(it);
      }
    } else {
      spdlog::warn("{} sent an unexpected message: {}", Describe(), message.ShortDebugString());
    }
    if (deferred_count_.load() > 0) StartDeferred(reader_outbox_);
    // One write per burst of results: the releases and the batches submitted meanwhile.
    if (!channel_->HasBufferedFrame()) Flush(reader_outbox_, &reader_release_);
  }
  HandleExit();
}

std::optional<ExecutorProcess::PendingBatch> ExecutorProcess::TakePending(uint64_t batch_id) {
  std::lock_guard lock(mu_);
  auto it = pending_batches_.find(batch_id);
  if (it == pending_batches_.end()) return std::nullopt;
  std::optional<PendingBatch> pending = std::move(it->second);
  pending_batches_.erase(it);
  return pending;
}

void ExecutorProcess::WatchdogLoop() {
  SetCurrentThreadName("ts-exec-watch");
  const auto period = std::chrono::milliseconds(
      std::clamp<int64_t>(options_.batch_timeout_ms / 4, 1, 1000));
  const uint64_t timeout_ns = static_cast<uint64_t>(options_.batch_timeout_ms) * 1'000'000;
  std::unique_lock lock(mu_);
  while (!exited_ && !stopping_) {
    watchdog_cv_.wait_for(lock, period);
    const uint64_t now = MonotonicNs();
    for (const auto& [id, pending] : pending_batches_) {
      if (now - pending.sent_ns <= timeout_ns) continue;
      // A hung executor is treated like a crashed one: killing it fails its batches through
      // HandleExit, and the pool restarts it.
      spdlog::error("{} did not answer batch {} of '{}' within {} ms; killing it", Describe(), id,
                    pending.model_name, options_.batch_timeout_ms);
      kill(pid_, SIGKILL);
      return;
    }
  }
}

void ExecutorProcess::HandleExit() {
  alive_ = false;
  std::string how = WaitForExitDescription(stopping_ ? 5000 : 2000);
  const std::string description = absl::StrCat(Describe(), " ", how);
  std::map<uint64_t, PendingBatch> batches;
  std::map<std::string, std::promise<Status>> loads;
  std::map<uint64_t, std::promise<StatusOr<SharedWeightsHandle>>> exports;
  {
    std::lock_guard lock(mu_);
    exited_ = true;
    batches.swap(pending_batches_);
    loads.swap(pending_loads_);
    exports.swap(pending_exports_);
  }
  watchdog_cv_.notify_all();
  std::deque<BatchJob> parked;
  {
    std::lock_guard lock(ring_mu_);
    ring_closed_ = true;
    parked.swap(deferred_);
    deferred_count_ = 0;
  }
  reader_outbox_ = Outbox{};  // its batches are pending_batches_ entries, failed below
  reader_release_.clear();
  for (auto& [id, pending] : batches) {
    ReleaseGathered(pending);
    pending.done(absl::UnavailableError(
        absl::StrCat(description, " while running this request's batch")));
  }
  for (BatchJob& job : parked) {
    job.done(absl::UnavailableError(
        absl::StrCat(description, " before this request's batch could be sent")));
  }
  for (auto& [key, promise] : loads) {
    promise.set_value(
        absl::UnavailableError(absl::StrCat(description, " while loading '", key, "'")));
  }
  for (auto& [id, promise] : exports) {
    promise.set_value(
        absl::UnavailableError(absl::StrCat(description, " while exporting weights")));
  }
  if (!stopping_) {
    spdlog::error("{}", description);
    if (on_exit_) on_exit_(description);
  }
}

Status ExecutorProcess::Load(const ipc::LoadModel& load, int64_t timeout_ms,
                             const SharedWeightsHandle* shared_weights, bool* weights_shared) {
  if (weights_shared != nullptr) *weights_shared = false;
  std::future<Status> future;
  {
    std::lock_guard lock(mu_);
    if (exited_) return absl::UnavailableError(absl::StrCat(Describe(), " is not running"));
    auto [it, inserted] = pending_loads_.try_emplace(load.instance_key());
    if (!inserted) {
      return absl::AlreadyExistsError(absl::StrCat("'", load.instance_key(), "' is already loading"));
    }
    future = it->second.get_future();
  }
  ipc::ControlMessage message;
  *message.mutable_load() = load;
  Status sent;
  if (shared_weights != nullptr && shared_weights->fd.valid()) {
    ipc::SharedWeights* shared = message.mutable_load()->mutable_shared_weights();
    shared->set_bytes(shared_weights->bytes);
    shared->set_layout(shared_weights->layout);
    shared->set_source(shared_weights->source);
    sent = channel_->SendWithFd(message, shared_weights->fd.get());
  } else {
    message.mutable_load()->clear_shared_weights();
    sent = channel_->Send(message);
  }
  if (!sent.ok()) {
    std::lock_guard lock(mu_);
    pending_loads_.erase(load.instance_key());
    return absl::UnavailableError(absl::StrCat(Describe(), ": ", sent.message()));
  }
  if (future.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    return absl::DeadlineExceededError(absl::StrCat(Describe(), " did not finish loading '",
                                                    load.instance_key(), "' within ",
                                                    timeout_ms, " ms"));
  }
  Status loaded = future.get();
  {
    std::lock_guard lock(mu_);
    const bool shared = shared_loads_.erase(load.instance_key()) > 0;
    if (weights_shared != nullptr) *weights_shared = shared;
  }
  if (loaded.ok()) {
    std::vector<PoolInputSpec> inputs;
    for (const ipc::TensorSpec& spec : load.inputs()) {
      PoolInputSpec input;
      input.element_bytes = DataTypeByteSize(static_cast<DataType>(spec.data_type()));
      // 0 (unknown) for a wildcard dim, or a row too large to count (the model file's dims).
      const Shape row(spec.dims().begin(), spec.dims().end());
      input.row_bytes = DenseByteSize(row, input.element_bytes).value_or(0);
      inputs.push_back(input);
    }
    input_pool_->DeclareInstance(load.instance_key(), inputs);
  }
  return loaded;
}

StatusOr<SharedWeightsHandle> ExecutorProcess::ExportWeights(const std::string& instance_key,
                                                             int64_t timeout_ms) {
  std::future<StatusOr<SharedWeightsHandle>> future;
  ipc::ControlMessage message;
  {
    std::lock_guard lock(mu_);
    if (exited_) return absl::UnavailableError(absl::StrCat(Describe(), " is not running"));
    const uint64_t id = next_export_id_++;
    future = pending_exports_[id].get_future();
    message.mutable_export_weights()->set_request_id(id);
    message.mutable_export_weights()->set_instance_key(instance_key);
  }
  Status sent = channel_->Send(message);
  if (!sent.ok()) {
    std::lock_guard lock(mu_);
    pending_exports_.erase(message.export_weights().request_id());
    return absl::UnavailableError(absl::StrCat(Describe(), ": ", sent.message()));
  }
  if (future.wait_for(std::chrono::milliseconds(timeout_ms)) != std::future_status::ready) {
    std::lock_guard lock(mu_);
    pending_exports_.erase(message.export_weights().request_id());
    return absl::DeadlineExceededError(absl::StrCat(Describe(), " did not export the weights of '",
                                                    instance_key, "' within ", timeout_ms, " ms"));
  }
  StatusOr<SharedWeightsHandle> exported = future.get();
  if (exported.ok()) exported->source = absl::StrCat(Describe(), " (instance ", instance_key, ")");
  return exported;
}

void ExecutorProcess::FinishExport(const ipc::WeightsExport& reply) {
  StatusOr<SharedWeightsHandle> result = absl::UnknownError("unset");
  if (reply.ok()) {
    // The descriptor came with this frame; take it even if nobody waits any more (it closes).
    SharedWeightsHandle handle;
    handle.fd = channel_->TakeReceivedFd();
    handle.bytes = reply.bytes();
    handle.layout = reply.layout();
    if (handle.fd.valid()) {
      result = std::move(handle);
    } else {
      result = absl::InternalError("the executor's weight export came without its descriptor");
    }
  } else {
    const auto code = static_cast<absl::StatusCode>(reply.error_code());
    result = Status(code == absl::StatusCode::kOk ? absl::StatusCode::kInternal : code,
                    absl::StrCat(Describe(), ": ", reply.error()));
  }
  std::lock_guard lock(mu_);
  auto it = pending_exports_.find(reply.request_id());
  if (it == pending_exports_.end()) return;  // timed out meanwhile
  it->second.set_value(std::move(result));
  pending_exports_.erase(it);
}

std::unique_ptr<dispatch::StagedInputs> ExecutorProcess::Stage(
    const std::string& instance_key, const repository::ModelConfig& config,
    const dispatch::Request& request) {
  if (!alive_ || request.inputs.size() != repository::ModelFileInputCount(config)) return nullptr;
  std::vector<uint64_t> bytes;
  bytes.reserve(request.inputs.size());
  for (const TensorView& input : request.inputs) {
    // An absent optional input: its batch sends the executor no tensor for it, so gather.
    if (dispatch::IsAbsent(input)) return nullptr;
    if (input.data == nullptr && input.byte_size > 0) return nullptr;
    bytes.push_back(input.byte_size);
  }
  std::unique_ptr<PooledInputs> staged = input_pool_->Reserve(instance_key, bytes);
  if (!staged) return nullptr;
  // The slots are this handle's alone until it is destroyed: no lock needed for the copy.
  auto* base = reinterpret_cast<char*>(input_ring_->data());
  for (size_t k = 0; k < bytes.size(); ++k) {
    if (bytes[k] > 0) {
      std::memcpy(base + staged->slots()[k].offset, request.inputs[k].data, bytes[k]);
    }
  }
  if (stages_inputs_) {
    // The executor copies these slots to its mirror now, long before their batch (E²bird). This
    // frame goes out before the batch's, which is submitted only after Stage returned.
    ipc::ControlMessage message;
    ipc::InputsStaged* announced = message.mutable_inputs_staged();
    for (size_t k = 0; k < bytes.size(); ++k) {
      if (bytes[k] == 0) continue;
      ipc::RingRange* range = announced->add_ranges();
      range->set_offset(staged->slots()[k].offset);
      range->set_byte_size(bytes[k]);
    }
    // Not sent (the executor died): its batches fail anyway, and a restarted one starts afresh.
    if (announced->ranges_size() > 0) channel_->Send(message).IgnoreError();
  }
  return staged;
}

InputPoolCounters ExecutorProcess::input_pool_counters() const {
  InputPoolStats stats = input_pool_->stats();
  InputPoolCounters counters;
  counters.batches_pooled = batches_pooled_.load();
  counters.batches_gathered = batches_gathered_.load();
  counters.requests_staged = stats.requests_staged;
  counters.requests_not_staged = stats.requests_not_staged;
  counters.gather_bytes = gather_bytes_.load();
  counters.batches_spilled = batches_spilled_.load();
  counters.spill_bytes = spill_bytes_.load();
  counters.batches_mirrored = batches_mirrored_.load();
  counters.prep_ns_pooled = prep_ns_pooled_.load();
  counters.prep_ns_gathered = prep_ns_gathered_.load();
  return counters;
}

void ExecutorProcess::Unload(const std::string& instance_key) {
  // Slots still held by queued requests stay valid; the region is reused once they are gone.
  input_pool_->RemoveInstance(instance_key);
  ipc::ControlMessage message;
  message.mutable_unload()->set_instance_key(instance_key);
  channel_->Send(message).IgnoreError();  // a dead executor holds nothing to unload
}

void ExecutorProcess::Stop(int64_t timeout_ms) {
  if (stopping_.exchange(true)) {
    if (reader_.joinable() && reader_.get_id() != std::this_thread::get_id()) reader_.join();
    return;
  }
  if (alive_) {
    ipc::ControlMessage message;
    message.mutable_shutdown();
    channel_->Send(message).IgnoreError();
  }
  if (pid_ > 0) WaitForExitDescription(timeout_ms);
  if (channel_) channel_->Shutdown();
  if (reader_.joinable() && reader_.get_id() != std::this_thread::get_id()) reader_.join();
  {
    std::lock_guard lock(mu_);
    watchdog_cv_.notify_all();
  }
  if (watchdog_.joinable()) watchdog_.join();
}

ExecutorProcess::~ExecutorProcess() {
  Stop(5000);
  if (reader_.joinable()) reader_.detach();
  if (watchdog_.joinable()) watchdog_.join();
}

}  // namespace tessera::server
