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
  TESSERA_ASSIGN_OR_RETURN(input_ring_,
                           ipc::SharedMemoryRegion::Create("/" + tag + "-in", options_.input_ring_bytes));
  TESSERA_ASSIGN_OR_RETURN(
      output_ring_, ipc::SharedMemoryRegion::Create("/" + tag + "-out", options_.output_ring_bytes));
  const char* tmp = getenv("TMPDIR");
  socket_path_ = absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/", tag, ".sock");
  TESSERA_ASSIGN_OR_RETURN(listener_, ipc::ControlListener::Listen(socket_path_));

  std::vector<std::string> args = {options_.binary,
                                   "--executor-id", absl::StrCat(options_.executor_id),
                                   "--control-socket", socket_path_,
                                   "--input-shm", input_ring_->name(),
                                   "--input-bytes", absl::StrCat(options_.input_ring_bytes),
                                   "--output-shm", output_ring_->name(),
                                   "--output-bytes", absl::StrCat(options_.output_ring_bytes),
                                   "--device", options_.device,
                                   "--threads", absl::StrCat(options_.threads),
                                   "--log-verbose", absl::StrCat(options_.log_verbose)};
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
  alive_ = true;
  reader_ = std::thread([this] { ReaderLoop(); });
  watchdog_ = std::thread([this] { WatchdogLoop(); });
  spdlog::info("{} started on {} with {} thread(s)", Describe(), options_.device, options_.threads);
  return absl::OkStatus();
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

void ExecutorProcess::ReaderLoop() {
  // Outputs copied out and not yet given back: one ReleaseOutputs per burst of results.
  std::vector<uint64_t> to_release;
  while (true) {
    ipc::ControlMessage message;
    Status status = channel_->Receive(&message);
    if (!status.ok()) break;
    if (message.has_result()) {
      const ipc::BatchResult& result = message.result();
      if (std::optional<PendingBatch> pending = TakePending(result.batch_id())) {
        StatusOr<std::vector<dispatch::Response>> responses = FinishBatch(*pending, result);
        if (result.ok()) to_release.push_back(result.batch_id());
        pending->done(std::move(responses));
      }
    } else if (message.has_load_result()) {
      const ipc::LoadResult& result = message.load_result();
      std::lock_guard lock(mu_);
      auto it = pending_loads_.find(result.instance_key());
      if (it != pending_loads_.end()) {
        it->second.set_value(result.ok() ? absl::OkStatus()
                                         : absl::InvalidArgumentError(result.error()));
        pending_loads_.erase(it);
      }
    } else {
      spdlog::warn("{} sent an unexpected message: {}", Describe(), message.ShortDebugString());
    }
    if (!to_release.empty() && !channel_->HasBufferedFrame()) {
      ipc::ControlMessage release;
      for (uint64_t id : to_release) release.mutable_release()->add_batch_ids(id);
      channel_->Send(release).IgnoreError();  // a dead executor holds nothing any more
      to_release.clear();
    }
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
  {
    std::lock_guard lock(mu_);
    exited_ = true;
    batches.swap(pending_batches_);
    loads.swap(pending_loads_);
  }
  watchdog_cv_.notify_all();
  for (auto& [id, pending] : batches) {
    ReleaseGathered(pending);
    pending.done(absl::UnavailableError(
        absl::StrCat(description, " while running this request's batch")));
  }
  for (auto& [key, promise] : loads) {
    promise.set_value(
        absl::UnavailableError(absl::StrCat(description, " while loading '", key, "'")));
  }
  if (!stopping_) {
    spdlog::error("{}", description);
    if (on_exit_) on_exit_(description);
  }
}

Status ExecutorProcess::Load(const ipc::LoadModel& load, int64_t timeout_ms) {
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
  Status sent = channel_->Send(message);
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
  if (loaded.ok()) {
    std::vector<PoolInputSpec> inputs;
    for (const ipc::TensorSpec& spec : load.inputs()) {
      PoolInputSpec input;
      input.element_bytes = DataTypeByteSize(static_cast<DataType>(spec.data_type()));
      input.row_bytes = input.element_bytes;
      for (int64_t dim : spec.dims()) input.row_bytes = dim >= 0 ? input.row_bytes * dim : 0;
      inputs.push_back(input);
    }
    if (!input_pool_->AddInstance(load.instance_key(), inputs)) {
      spdlog::info("{}: '{}' has no input pool region; its batches are gathered", Describe(),
                   load.instance_key());
    }
  }
  return loaded;
}

std::unique_ptr<dispatch::StagedInputs> ExecutorProcess::Stage(
    const std::string& instance_key, const repository::ModelConfig& config,
    const dispatch::Request& request) {
  if (!alive_ || request.inputs.size() != config.inputs.size()) return nullptr;
  std::vector<uint64_t> bytes;
  bytes.reserve(request.inputs.size());
  for (const TensorView& input : request.inputs) {
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

StatusOr<uint64_t> ExecutorProcess::AllocateInput(uint64_t bytes,
                                                  const std::function<void()>& before_wait) {
  if (before_wait) {
    {
      std::lock_guard lock(ring_mu_);
      if (std::optional<uint64_t> offset = input_allocator_.Allocate(bytes)) return *offset;
    }
    // Space comes back only when sent batches are answered: send those held back first.
    before_wait();
  }
  std::unique_lock lock(ring_mu_);
  if (input_allocator_.RoundUp(bytes) > input_allocator_.capacity()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "batch input of ", bytes, " bytes does not fit the gather part of the executor input ",
        "ring (", input_allocator_.capacity(), " of ", options_.input_ring_bytes,
        " bytes; the rest is the input pool): raise executors.input_ring_bytes"));
  }
  std::optional<uint64_t> offset;
  const bool got = ring_cv_.wait_for(lock, std::chrono::seconds(30), [&] {
    offset = input_allocator_.Allocate(bytes);
    return offset.has_value() || !alive_.load();
  });
  if (!got || !offset) {
    return absl::UnavailableError(absl::StrCat(Describe(), ": no input ring space for ", bytes,
                                               " bytes"));
  }
  return *offset;
}

void ExecutorProcess::ReleaseInput(uint64_t offset) {
  {
    std::lock_guard lock(ring_mu_);
    input_allocator_.Release(offset);
  }
  ring_cv_.notify_all();
}

StatusOr<ipc::InferBatch> ExecutorProcess::PrepareBatch(
    const std::string& instance_key, const repository::ModelConfig& config,
    const std::vector<const dispatch::Request*>& batch, const std::string& pool_key,
    const std::function<void()>& before_wait, PendingBatch* pending) {
  const uint64_t gather_start = MonotonicNs();
  const bool batched = config.max_batch_size > 0;
  int64_t total_rows = 0;
  for (const dispatch::Request* request : batch) total_rows += request->batch_size;
  pending->model_name = config.name;
  pending->batched = batched;
  pending->total_rows = total_rows;
  pending->requests = batch;

  // Pooled: every request was staged here, back to back per input, so the pool already holds each
  // input as one tensor. Otherwise gather: each input becomes one contiguous tensor in the gather
  // part of the input ring, requests in batch order.
  std::optional<std::vector<PoolRange>> pooled;
  {
    std::vector<const PooledInputs*> staged;
    staged.reserve(batch.size());
    for (const dispatch::Request* request : batch) {
      const auto* handle = dynamic_cast<const PooledInputs*>(request->staged.get());
      if (handle == nullptr) break;
      staged.push_back(handle);
    }
    if (staged.size() == batch.size()) {
      pooled = input_pool_->ContiguousRun(pool_key.empty() ? instance_key : pool_key, staged);
    }
    if (pooled && pooled->size() != config.inputs.size()) pooled.reset();
  }
  ipc::InferBatch infer;
  infer.set_batch_id(next_batch_id_++);
  infer.set_instance_key(instance_key);
  std::vector<uint64_t>& allocations = pending->gather_allocations;
  auto release_inputs = [&] {
    for (uint64_t offset : allocations) ReleaseInput(offset);
    allocations.clear();
  };
  uint64_t gathered_bytes = 0;
  for (size_t k = 0; k < config.inputs.size(); ++k) {
    uint64_t bytes = 0;
    for (const dispatch::Request* request : batch) bytes += request->inputs[k].byte_size;
    uint64_t ring_offset;
    if (pooled) {
      ring_offset = (*pooled)[k].offset;
    } else {
      auto offset = AllocateInput(bytes, before_wait);
      if (!offset.ok()) {
        release_inputs();
        return offset.status();
      }
      allocations.push_back(*offset);
      ring_offset = gather_base_ + *offset;
      auto* dst = reinterpret_cast<char*>(input_ring_->data()) + ring_offset;
      for (const dispatch::Request* request : batch) {
        std::memcpy(dst, request->inputs[k].data, request->inputs[k].byte_size);
        dst += request->inputs[k].byte_size;
      }
      gathered_bytes += bytes;
    }
    const TensorView& first = batch.front()->inputs[k];
    auto* tensor = infer.add_inputs();
    tensor->set_name(first.name);
    tensor->set_data_type(static_cast<int>(first.dtype));
    for (size_t d = 0; d < first.shape.size(); ++d) {
      tensor->add_shape(batched && d == 0 ? total_rows : first.shape[d]);
    }
    tensor->set_offset(ring_offset);
    tensor->set_byte_size(bytes);
  }
  if (pooled) {
    ++batches_pooled_;
  } else {
    ++batches_gathered_;
    gather_bytes_ += gathered_bytes;
  }

  pending->prep_ns = MonotonicNs() - gather_start;
  (pooled ? prep_ns_pooled_ : prep_ns_gathered_) += pending->prep_ns;
  return infer;
}

void ExecutorProcess::ReleaseGathered(const PendingBatch& pending) {
  for (uint64_t offset : pending.gather_allocations) ReleaseInput(offset);
}

void ExecutorProcess::SubmitBatches(const std::string& instance_key,
                                    const repository::ModelConfig& config,
                                    const std::vector<std::vector<const dispatch::Request*>>& batches,
                                    std::vector<BatchDone> done, const std::string& pool_key) {
  std::vector<ipc::ControlMessage> messages;
  std::vector<uint64_t> message_ids;
  auto send = [&] {
    if (messages.empty()) return;
    Status sent = channel_->SendAll(messages);
    messages.clear();
    std::vector<uint64_t> ids;
    ids.swap(message_ids);
    if (sent.ok()) return;
    // Whatever the reader's HandleExit has not failed yet fails here, each exactly once.
    for (uint64_t id : ids) {
      std::optional<PendingBatch> pending = TakePending(id);
      if (!pending) continue;
      ReleaseGathered(*pending);
      pending->done(absl::UnavailableError(absl::StrCat(Describe(), ": ", sent.message())));
    }
  };
  for (size_t i = 0; i < batches.size(); ++i) {
    if (!alive_) {
      done[i](absl::UnavailableError(absl::StrCat(Describe(), " is not running")));
      continue;
    }
    PendingBatch pending;
    StatusOr<ipc::InferBatch> infer =
        PrepareBatch(instance_key, config, batches[i], pool_key, send, &pending);
    if (!infer.ok()) {
      done[i](infer.status());
      continue;
    }
    pending.done = std::move(done[i]);
    pending.sent_ns = MonotonicNs();
    const uint64_t id = infer->batch_id();
    {
      std::lock_guard lock(mu_);
      if (!exited_) {
        pending_batches_.emplace(id, std::move(pending));
        message_ids.push_back(id);
        *messages.emplace_back().mutable_infer() = *std::move(infer);
        continue;
      }
    }
    ReleaseGathered(pending);
    pending.done(absl::UnavailableError(absl::StrCat(Describe(), " is not running")));
  }
  send();
}

StatusOr<std::vector<dispatch::Response>> ExecutorProcess::FinishBatch(
    PendingBatch& pending, const ipc::BatchResult& result) {
  // The executor is done reading inputs once it answered. Pooled slots are released later, when
  // the queue destroys the requests.
  ReleaseGathered(pending);
  pending.gather_allocations.clear();
  if (!result.ok()) {
    return absl::InternalError(absl::StrCat("model '", pending.model_name, "' failed on ",
                                            Describe(), ": ", result.error()));
  }

  // Split: request i gets rows [row_begin, row_begin + rows) of every output.
  const uint64_t split_start = MonotonicNs();
  std::vector<dispatch::Response> responses(pending.requests.size());
  const auto* out_base = reinterpret_cast<const char*>(output_ring_->data());
  Status split_status;
  for (const ipc::BatchTensor& output : result.outputs()) {
    if (output.offset() + output.byte_size() > output_ring_->size()) {
      split_status = absl::InternalError(absl::StrCat(Describe(), " returned output '",
                                                      output.name(), "' outside its ring"));
      break;
    }
    Shape shape(output.shape().begin(), output.shape().end());
    if (pending.batched && (shape.empty() || shape[0] != pending.total_rows)) {
      split_status = absl::InternalError(absl::StrCat(
          "model '", pending.model_name, "' output '", output.name(), "' has shape ",
          ShapeToString(shape), ", but a batch of ", pending.total_rows,
          " rows needs it as the leading dim (max_batch_size > 0 models must batch every output)"));
      break;
    }
    const uint64_t row_bytes =
        pending.batched && pending.total_rows > 0 ? output.byte_size() / static_cast<uint64_t>(pending.total_rows) : 0;
    int64_t row_begin = 0;
    for (size_t i = 0; i < pending.requests.size(); ++i) {
      const dispatch::Request* request = pending.requests[i];
      dispatch::OutputTensor tensor;
      tensor.name = output.name();
      tensor.dtype = static_cast<DataType>(output.data_type());
      tensor.shape = shape;
      if (pending.batched && !tensor.shape.empty()) {
        tensor.shape[0] = request->batch_size;
        tensor.bytes.assign(out_base + output.offset() + row_begin * row_bytes,
                            request->batch_size * row_bytes);
      } else {
        tensor.bytes.assign(out_base + output.offset(), output.byte_size());
      }
      row_begin += request->batch_size;
      responses[i].outputs.push_back(std::move(tensor));
    }
  }
  TESSERA_RETURN_IF_ERROR(split_status);

  // Keep only what each request asked for, in the order it asked.
  const uint64_t split_ns = MonotonicNs() - split_start;
  for (size_t i = 0; i < pending.requests.size(); ++i) {
    dispatch::Response& response = responses[i];
    if (!pending.requests[i]->requested_outputs.empty()) {
      std::vector<dispatch::OutputTensor> selected;
      for (const std::string& name : pending.requests[i]->requested_outputs) {
        for (auto& tensor : response.outputs) {
          if (tensor.name == name) selected.push_back(std::move(tensor));
        }
      }
      response.outputs = std::move(selected);
    }
    // Queued behind an earlier batch in the executor: the queue adds its own wait to this.
    response.timing.queue_ns =
        result.started_ns() > pending.sent_ns ? result.started_ns() - pending.sent_ns : 0;
    response.timing.compute_input_ns = pending.prep_ns + result.compute_input_ns();
    response.timing.compute_infer_ns = result.compute_infer_ns();
    response.timing.compute_output_ns = result.compute_output_ns() + split_ns;
  }
  return responses;
}

StatusOr<std::vector<dispatch::Response>> ExecutorProcess::RunBatch(
    const std::string& instance_key, const repository::ModelConfig& config,
    const std::vector<const dispatch::Request*>& batch, const std::string& pool_key) {
  std::promise<StatusOr<std::vector<dispatch::Response>>> promise;
  std::future<StatusOr<std::vector<dispatch::Response>>> future = promise.get_future();
  std::vector<BatchDone> done;
  done.push_back([&promise](StatusOr<std::vector<dispatch::Response>> result) {
    promise.set_value(std::move(result));
  });
  SubmitBatches(instance_key, config, {batch}, std::move(done), pool_key);
  return future.get();  // the watchdog bounds the wait: a hung executor is killed
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
