#include "executor/executor.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

#include "executor/executor_instance.h"
#include "spdlog/spdlog.h"
#include "tessera/common/bytes_tensor.h"
#include "tessera/common/thread_name.h"

namespace tessera::executor {
namespace {

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Element count of an input, or an error naming it; overflow-checked because the shape comes
// from another process.
StatusOr<uint64_t> CheckedElementCount(const ipc::BatchTensor& t) {
  uint64_t count = 1;
  for (int64_t d : t.shape()) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", t.name(), "': negative dim ", d, " in its shape"));
    }
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(d), &count)) {
      return absl::InvalidArgumentError(absl::StrCat("input '", t.name(), "': shape too large"));
    }
  }
  return count;
}

// Byte size of a dense tensor, or an error naming it.
StatusOr<uint64_t> DenseByteSize(const ipc::BatchTensor& t) {
  const uint64_t element_bytes = DataTypeByteSize(static_cast<DataType>(t.data_type()));
  if (element_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name(), "': data type ",
                                                   t.data_type(), " has no fixed element size"));
  }
  TESSERA_ASSIGN_OR_RETURN(uint64_t bytes, CheckedElementCount(t));
  if (__builtin_mul_overflow(bytes, element_bytes, &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name(), "': shape too large"));
  }
  return bytes;
}

// Results of short batches are held while more work is already there (the next queued batch, or
// more buffered frames), then sent in one write: a burst of tiny batches then wakes the server
// once, not once per batch. A batch that ran long (a real model) never holds its result, and
// nothing is held past kMaxHoldNs.
constexpr uint64_t kShortRunNs = 20'000;
constexpr uint64_t kMaxHoldNs = 50'000;

}  // namespace

StatusOr<std::unique_ptr<Executor>> Executor::Create(
    ExecutorOptions options, std::unique_ptr<ipc::ControlChannel> channel,
    std::unique_ptr<ipc::SharedMemoryRegion> input_ring,
    std::unique_ptr<ipc::SharedMemoryRegion> output_ring) {
  if (!options.loader) return absl::InvalidArgumentError("ExecutorOptions.loader is required");
  if (!channel || !input_ring || !output_ring) {
    return absl::InvalidArgumentError("Executor needs a control channel and both rings");
  }
  return std::unique_ptr<Executor>(new Executor(std::move(options), std::move(channel),
                                                std::move(input_ring), std::move(output_ring)));
}

Executor::Executor(ExecutorOptions options, std::unique_ptr<ipc::ControlChannel> channel,
                   std::unique_ptr<ipc::SharedMemoryRegion> input_ring,
                   std::unique_ptr<ipc::SharedMemoryRegion> output_ring)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      input_ring_(std::move(input_ring)),
      output_ring_(std::move(output_ring)),
      out_ring_(output_ring_->size(), options_.output_alignment) {}

Executor::~Executor() {
  Stop();
  Drain();
}

void Executor::Stop() { channel_->Shutdown(); }

Status Executor::Run() {
  if (ran_) return absl::FailedPreconditionError("Executor::Run called twice");
  ran_ = true;
  loader_thread_ = std::thread(&Executor::LoaderLoop, this);

  if (options_.make_input_mirror) {
    auto mirror = options_.make_input_mirror(input_ring_->data(), input_ring_->size());
    absl::MutexLock lock(&mirror_mu_);
    if (mirror.ok()) {
      mirror_ = *std::move(mirror);
      spdlog::info("{}: staged requests are copied at arrival", mirror_->Describe());
    } else {
      spdlog::warn("no input mirror, batches read the input ring: {}", mirror.status().ToString());
    }
  }
  ipc::ControlMessage hello;
  {
    absl::MutexLock lock(&mirror_mu_);
    hello.mutable_hello()->set_stages_inputs(mirror_ != nullptr);
  }
  hello.mutable_hello()->set_protocol_version(ipc::PROTOCOL_VERSION_CURRENT);
  hello.mutable_hello()->set_executor_id(options_.executor_id);
  hello.mutable_hello()->set_pid(static_cast<int32_t>(getpid()));
  hello.mutable_hello()->set_device(options_.device);
  Status status = channel_->Send(hello);
  if (!status.ok()) {
    Drain();
    return absl::UnavailableError(absl::StrCat("cannot send Hello: ", status.message()));
  }
  spdlog::info("executor {} serving (device {}, input ring {} bytes, output ring {} bytes)",
               options_.executor_id, options_.device, input_ring_->size(), output_ring_->size());

  Status exit_status;
  bool done = false;
  while (!done) {
    ipc::ControlMessage message;
    status = channel_->Receive(&message);
    if (!status.ok()) {
      if (absl::IsUnavailable(status)) {
        spdlog::info("control channel closed ({}); shutting down", status.ToString());
      } else {
        spdlog::error("control channel broken: {}; shutting down", status.ToString());
        exit_status = status;
      }
      break;
    }
    switch (message.body_case()) {
      case ipc::ControlMessage::kLoad:
        HandleLoad(message.load());
        break;
      case ipc::ControlMessage::kExportWeights:
        HandleExportWeights(message.export_weights());
        break;
      case ipc::ControlMessage::kUnload:
        HandleUnload(message.unload());
        break;
      case ipc::ControlMessage::kInfer:
        HandleInfer(message.infer());
        break;
      case ipc::ControlMessage::kRelease:
        HandleRelease(message.release());
        break;
      case ipc::ControlMessage::kInputsStaged:
        HandleInputsStaged(message.inputs_staged());
        break;
      case ipc::ControlMessage::kShutdown:
        spdlog::info("shutdown requested");
        done = true;
        break;
      default:
        spdlog::warn("ignoring unexpected control message (body case {})",
                     static_cast<int>(message.body_case()));
        break;
    }
    if (!inline_results_.empty() &&
        (!channel_->HasBufferedFrame() || NowNs() - first_inline_result_ns_ > kMaxHoldNs)) {
      SendInlineResults();
    }
  }
  SendInlineResults();
  Drain();
  spdlog::info("executor {} stopped ({} batch inputs read from the input mirror)",
               options_.executor_id, mirrored_inputs_.load());
  return exit_status;
}

void Executor::Send(const ipc::ControlMessage& message) {
  Status status = channel_->Send(message);
  if (!status.ok() && !send_failed_.exchange(true)) {
    // The receive loop sees the same broken channel and shuts down; one line is enough.
    spdlog::warn("cannot send to the server: {}", status.ToString());
  }
}

// ---------------------------------------------------------------------------------------------
// Batches

void Executor::HandleInputsStaged(const ipc::InputsStaged& staged) {
  absl::MutexLock lock(&mirror_mu_);
  if (mirror_ == nullptr) return;  // the server only sends these to a mirror; ignore otherwise
  for (const ipc::RingRange& range : staged.ranges()) {
    Status status = mirror_->Stage(range.offset(), range.byte_size());
    // A failed range is not mirrored, and its batch reads the ring: log the first failure only.
    if (!status.ok() && !mirror_failed_) {
      mirror_failed_ = true;
      spdlog::warn("input mirror: {} (batches on such ranges read the input ring)",
                   status.ToString());
    }
  }
}

void Executor::HandleInfer(const ipc::InferBatch& infer) {
  // Instances leave instances_ only on this thread (HandleUnload, Drain), so the pointer stays
  // valid after mu_ is released.
  Instance* run_here = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = instances_.find(infer.instance_key());
    if (it != instances_.end()) {
      Instance& instance = *it->second;
      absl::MutexLock instance_lock(&instance.mu);
      if (options_.inline_run_max_ns == 0 || instance.busy || !instance.queue.empty() ||
          instance.stopping || instance.recent_run_ns > options_.inline_run_max_ns) {
        instance.queue.push_back(infer);
        return;
      }
      instance.busy = true;
      run_here = &instance;
    }
  }
  if (run_here != nullptr) {
    RunInline(*run_here, infer);
    return;
  }
  ipc::ControlMessage message;
  ipc::BatchResult* result = message.mutable_result();
  result->set_batch_id(infer.batch_id());
  result->set_ok(false);
  const Status unknown = absl::NotFoundError(absl::StrCat(
      "unknown instance_key '", infer.instance_key(), "' on executor ", options_.executor_id));
  result->set_error(unknown.ToString());
  result->set_error_code(static_cast<int>(unknown.code()));
  Send(message);
}

void Executor::RunInline(Instance& instance, const ipc::InferBatch& infer) {
  const uint64_t start_ns = NowNs();
  bool no_output_space = false;
  ipc::ControlMessage message;
  *message.mutable_result() = RunBatch(instance, infer, &no_output_space);
  const uint64_t end_ns = NowNs();
  {
    absl::MutexLock lock(&instance.mu);
    instance.busy = false;
    if (no_output_space) {
      // Waiting for space here would also hold up the ReleaseOutputs that frees it: the worker
      // runs the batch again and waits (the inputs stay put until the batch is answered).
      instance.queue.push_back(infer);
      return;
    }
    instance.NoteRunTime(end_ns - start_ns);
  }
  if (!message.result().ok()) {
    spdlog::warn("batch {} on {} failed: {}", infer.batch_id(), instance.key,
                 message.result().error());
  }
  if (inline_results_.empty()) first_inline_result_ns_ = end_ns;
  inline_results_.push_back(std::move(message));
}

void Executor::SendInlineResults() {
  if (inline_results_.empty()) return;
  Status sent = channel_->SendAll(inline_results_);
  if (!sent.ok() && !send_failed_.exchange(true)) {
    spdlog::warn("cannot send to the server: {}", sent.ToString());
  }
  inline_results_.clear();
}

void Executor::InstanceLoop(Instance* instance) {
  SetCurrentThreadName("ts-inst-" + instance->key);
  std::vector<ipc::ControlMessage> held;
  uint64_t first_held_ns = 0;
  auto flush = [&] {
    if (held.empty()) return;
    Status sent = channel_->SendAll(held);
    if (!sent.ok() && !send_failed_.exchange(true)) {
      spdlog::warn("cannot send to the server: {}", sent.ToString());
    }
    held.clear();
  };
  while (true) {
    ipc::InferBatch batch;
    {
      // Held results exist only while a batch is queued (below), so this never waits on them.
      // Not busy from here: the receive thread may run batches itself (it queues none then), but
      // only after this thread's earlier results went out, so results leave in order.
      absl::MutexLock lock(&instance->mu);
      instance->busy = false;
      instance->mu.Await(absl::Condition(
          +[](Instance* i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(i->mu) {
            return (i->stopping || !i->queue.empty()) && !i->busy;
          },
          instance));
      if (instance->queue.empty()) break;
      batch = std::move(instance->queue.front());
      instance->queue.pop_front();
      instance->busy = true;
    }
    const uint64_t start_ns = NowNs();
    ipc::ControlMessage message;
    *message.mutable_result() = RunBatch(*instance, batch);
    if (!message.result().ok()) {
      spdlog::warn("batch {} on {} failed: {}", batch.batch_id(), instance->key,
                   message.result().error());
    }
    const uint64_t end_ns = NowNs();
    if (held.empty()) first_held_ns = end_ns;
    held.push_back(std::move(message));
    bool next_queued;
    {
      absl::MutexLock lock(&instance->mu);
      instance->NoteRunTime(end_ns - start_ns);
      next_queued = !instance->queue.empty();
    }
    if (!next_queued || end_ns - start_ns > kShortRunNs || end_ns - first_held_ns > kMaxHoldNs) {
      flush();
    }
  }
  flush();
  instance->model.reset();
  instance->exited = true;
}

ipc::BatchResult Executor::RunBatch(Instance& instance, const ipc::InferBatch& infer,
                                    bool* no_output_space) {
  ipc::BatchResult result;
  result.set_batch_id(infer.batch_id());
  auto fail = [&](const Status& status) {
    result.set_ok(false);
    result.set_error(status.ToString());
    result.set_error_code(static_cast<int>(status.code()));
    return result;
  };

  const uint64_t t_start = NowNs();
  result.set_started_ns(t_start);
  std::vector<TensorView> views;
  views.reserve(infer.inputs_size());
  const uint64_t ring_bytes = input_ring_->size();
  for (const ipc::BatchTensor& t : infer.inputs()) {
    // BYTES inputs are serialized elements of any size (tessera/common/bytes_tensor.h): their
    // count is checked once the range is known to lie in the ring.
    const bool bytes_tensor = t.data_type() == static_cast<int>(DataType::kString);
    StatusOr<uint64_t> expected = bytes_tensor ? CheckedElementCount(t) : DenseByteSize(t);
    if (!expected.ok()) return fail(expected.status());
    if (!bytes_tensor && t.byte_size() != *expected) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "input '", t.name(), "': byte_size ", t.byte_size(), " does not match shape ",
          ShapeToString(Shape(t.shape().begin(), t.shape().end())), " (", *expected, " bytes)")));
    }
    if (t.offset() > ring_bytes || t.byte_size() > ring_bytes - t.offset()) {
      return fail(absl::OutOfRangeError(
          absl::StrCat("input '", t.name(), "': bytes [", t.offset(), ", +", t.byte_size(),
                       ") lie outside the input ring of ", ring_bytes, " bytes")));
    }
    if (bytes_tensor) {
      Status elements = CheckBytesElements(absl::StrCat("input '", t.name(), "'"),
                                           input_ring_->data() + t.offset(), t.byte_size(),
                                           static_cast<int64_t>(*expected));
      if (!elements.ok()) return fail(elements);
    }
    views.push_back(TensorView{t.name(), static_cast<DataType>(t.data_type()),
                               Shape(t.shape().begin(), t.shape().end()),
                               input_ring_->data() + t.offset(), t.byte_size()});
    absl::MutexLock lock(&mirror_mu_);
    if (mirror_ == nullptr) continue;
    std::optional<MirroredInput> mirrored = mirror_->View(t.offset(), t.byte_size());
    if (!mirrored.has_value()) continue;  // gathered, or not (yet) staged: read the ring
    if (mirrored->on_device) {
      views.back().device_data = mirrored->data;
      views.back().device_ready = mirrored->ready;
    } else {
      views.back().data = const_cast<void*>(mirrored->data);
    }
    mirrored_inputs_.fetch_add(1, std::memory_order_relaxed);
    result.set_mirrored_inputs(result.mirrored_inputs() + 1);
  }
  const uint64_t t_inputs = NowNs();

  std::vector<Tensor> outputs;
  Status status;
  try {
    status = instance.model->Run(views, &outputs);
  } catch (const std::bad_alloc&) {
    status = absl::ResourceExhaustedError(
        "the batch needs more memory than this executor can allocate (a tensor the model makes "
        "from these inputs is too large)");
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat("engine threw: ", e.what()));
  }
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    status = Status(status.code(), absl::StrCat(status.message(), MemoryLimitNote()));
  }
  if (!status.ok()) {
    return fail(Status(status.code(), absl::StrCat(instance.key, ": ", status.message())));
  }
  const uint64_t t_infer = NowNs();

  std::vector<const Tensor*> selected;
  if (infer.outputs_size() == 0) {
    for (const Tensor& t : outputs) selected.push_back(&t);
  } else {
    for (const std::string& name : infer.outputs()) {
      const Tensor* found = nullptr;
      for (const Tensor& t : outputs) {
        if (t.name == name) found = &t;
      }
      if (found == nullptr) {
        return fail(absl::InvalidArgumentError(
            absl::StrCat("requested output '", name, "' is not an output of ", instance.key)));
      }
      selected.push_back(found);
    }
  }
  std::vector<uint64_t> sizes;
  for (const Tensor* t : selected) sizes.push_back(t->bytes.size());
  StatusOr<std::vector<uint64_t>> offsets =
      AllocateOutputs(infer.batch_id(), sizes, no_output_space);
  if (!offsets.ok()) return fail(offsets.status());
  if (no_output_space != nullptr && *no_output_space) {
    return fail(absl::ResourceExhaustedError("no output-ring space without waiting"));
  }

  const uint64_t t_copy = NowNs();
  for (size_t i = 0; i < selected.size(); ++i) {
    const Tensor& t = *selected[i];
    if (!t.bytes.empty()) {
      std::memcpy(output_ring_->data() + (*offsets)[i], t.bytes.data(), t.bytes.size());
    }
    ipc::BatchTensor* out = result.add_outputs();
    out->set_name(t.name);
    out->set_data_type(static_cast<int32_t>(t.dtype));
    for (int64_t d : t.shape) out->add_shape(d);
    out->set_offset((*offsets)[i]);
    out->set_byte_size(t.bytes.size());
  }
  const uint64_t t_done = NowNs();

  result.set_ok(true);
  result.set_compute_input_ns(t_inputs - t_start);
  result.set_compute_infer_ns(t_infer - t_inputs);
  result.set_compute_output_ns(t_done - t_copy);
  return result;
}

StatusOr<std::vector<uint64_t>> Executor::AllocateOutputs(uint64_t batch_id,
                                                          const std::vector<uint64_t>& byte_sizes,
                                                          bool* no_space) {
  absl::MutexLock lock(&out_mu_);
  if (batch_outputs_.count(batch_id) > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("batch ", batch_id, " still holds outputs (no ReleaseOutputs yet)"));
  }
  uint64_t total = 0;
  for (uint64_t bytes : byte_sizes) total += out_ring_.RoundUp(bytes);
  if (total > out_ring_.capacity()) {
    return absl::ResourceExhaustedError(absl::StrCat("outputs of batch ", batch_id, " need ", total,
                                                     " bytes; the output ring holds ",
                                                     out_ring_.capacity()));
  }
  const absl::Time deadline = absl::Now() + absl::Milliseconds(options_.output_wait_timeout_ms);
  while (true) {
    std::vector<uint64_t> offsets;
    for (uint64_t bytes : byte_sizes) {
      std::optional<uint64_t> offset = out_ring_.Allocate(bytes);
      if (!offset) break;
      offsets.push_back(*offset);
    }
    if (offsets.size() == byte_sizes.size()) {
      batch_outputs_.emplace(batch_id, offsets);
      return offsets;
    }
    // All or nothing; releasing newest-first hands the space straight back.
    for (auto it = offsets.rbegin(); it != offsets.rend(); ++it) out_ring_.Release(*it);
    if (out_closed_) {
      return absl::UnavailableError(
          absl::StrCat("executor is shutting down; no output-ring space for batch ", batch_id));
    }
    if (no_space != nullptr) {
      *no_space = true;
      return std::vector<uint64_t>{};
    }
    if (absl::Now() >= deadline) {
      return absl::ResourceExhaustedError(
          absl::StrCat("output ring full for ", options_.output_wait_timeout_ms, " ms (",
                       out_ring_.bytes_in_use(), " of ", out_ring_.capacity(), " bytes held, ",
                       batch_outputs_.size(), " batches not released); batch ", batch_id, " needs ",
                       total, " bytes"));
    }
    out_space_.WaitWithDeadline(&out_mu_, deadline);
  }
}

void Executor::HandleRelease(const ipc::ReleaseOutputs& release) {
  absl::MutexLock lock(&out_mu_);
  for (uint64_t batch_id : release.batch_ids()) {
    auto it = batch_outputs_.find(batch_id);
    if (it == batch_outputs_.end()) {
      spdlog::warn("ReleaseOutputs for batch {} which holds no outputs", batch_id);
      continue;
    }
    for (uint64_t offset : it->second) out_ring_.Release(offset);
    batch_outputs_.erase(it);
  }
  out_space_.SignalAll();
}

// ---------------------------------------------------------------------------------------------
// Shutdown

void Executor::Drain() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (loader_thread_.joinable()) loader_thread_.join();
  {
    absl::MutexLock lock(&out_mu_);
    out_closed_ = true;
    out_space_.SignalAll();
  }
  std::vector<std::unique_ptr<Instance>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, instance] : instances_) all.push_back(std::move(instance));
    instances_.clear();
    for (auto& instance : retired_) all.push_back(std::move(instance));
    retired_.clear();
  }
  for (auto& instance : all) instance->Stop();
  for (auto& instance : all) {
    if (instance->thread.joinable()) instance->thread.join();
  }
}

std::string Executor::MemoryLimitNote() const {
  if (options_.memory_limit_mb <= 0) return "";
  return absl::StrCat("; this executor may allocate at most ", options_.memory_limit_mb,
                      " MiB (executors.memory_limit_mb)");
}

}  // namespace tessera::executor
