// ExecutorProcess's batch path: placing a batch's inputs (input pool or gather space), the batches
// waiting for gather space, the writes to the executor, and splitting its answers per request.
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "executor_process.h"
#include "tessera/common/bytes_tensor.h"
#include "tessera/common/clock.h"
#include "tessera/common/data_type.h"

namespace tessera::server {

void ExecutorProcess::Flush(Outbox& out, std::vector<uint64_t>* release) {
  if (release != nullptr && !release->empty()) {
    ipc::ControlMessage message;
    for (uint64_t id : *release) message.mutable_release()->add_batch_ids(id);
    release->clear();
    out.messages.insert(out.messages.begin(), std::move(message));
  }
  if (out.messages.empty()) return;
  Status sent = channel_->SendAll(out.messages);
  out.messages.clear();
  std::vector<uint64_t> ids;
  ids.swap(out.batch_ids);
  if (sent.ok()) return;
  // Whatever the reader's HandleExit has not failed yet fails here, each exactly once.
  for (uint64_t id : ids) {
    std::optional<PendingBatch> pending = TakePending(id);
    if (!pending) continue;
    ReleaseGathered(*pending);
    pending->done(absl::UnavailableError(absl::StrCat(Describe(), ": ", sent.message())));
  }
}


bool ExecutorProcess::AllocateGatherLocked(const std::vector<uint64_t>& bytes,
                                          std::vector<uint64_t>* offsets) {
  offsets->clear();
  for (uint64_t size : bytes) {
    std::optional<uint64_t> offset = input_allocator_.Allocate(size);
    if (!offset) {
      // All or nothing; releasing newest-first hands the space straight back.
      for (auto it = offsets->rbegin(); it != offsets->rend(); ++it) input_allocator_.Release(*it);
      offsets->clear();
      return false;
    }
    offsets->push_back(*offset);
  }
  return true;
}

void ExecutorProcess::StartBatch(BatchJob job, Outbox& out) {
  const uint64_t start_ns = MonotonicNs();
  // Ragged batching's batch inputs are made now, for the gather space: a batch that has them is
  // always gathered.
  const bool makes_inputs = job.ragged && !job.ragged->batch_inputs.empty();
  if (makes_inputs) {
    for (const RaggedBatching::MadeInput& made : job.ragged->batch_inputs) {
      std::vector<Shape> shapes;
      shapes.reserve(job.requests.size());
      for (const dispatch::Request* request : job.requests) {
        shapes.push_back(request->inputs[made.source].shape);
      }
      job.batch_inputs.push_back(MakeBatchInput(made.config, shapes));
    }
  }
  // Pooled: every request was staged here, back to back per input, so the pool already holds each
  // input as one tensor. Otherwise gather: each input becomes one contiguous tensor in the gather
  // part of the input ring, requests in batch order.
  std::optional<PooledRun> pooled;
  if (!makes_inputs) {
    std::vector<const PooledInputs*> staged;
    staged.reserve(job.requests.size());
    for (const dispatch::Request* request : job.requests) {
      const auto* handle = dynamic_cast<const PooledInputs*>(request->staged.get());
      if (handle == nullptr) break;
      staged.push_back(handle);
    }
    if (staged.size() == job.requests.size()) {
      pooled = input_pool_->ContiguousRun(job.pool_key.empty() ? job.instance_key : job.pool_key,
                                          staged);
    }
    if (pooled && pooled->runs.size() != job.input_count) pooled.reset();
  }
  if (pooled) {
    if (!pooled->spills.empty()) CopySpills(pooled->spills, out);
    QueueBatch(std::move(job), pooled->runs, {}, start_ns, out);
    return;
  }

  job.gather_bytes.assign(job.input_count, 0);
  uint64_t reserved = 0;
  for (size_t k = 0; k < job.input_count; ++k) {
    for (const dispatch::Request* request : job.requests) {
      job.gather_bytes[k] += request->inputs[k].byte_size;
    }
    reserved += input_allocator_.RoundUp(job.gather_bytes[k]);  // RoundUp reads constants only
  }
  for (const MadeTensor& made : job.batch_inputs) {
    job.gather_bytes.push_back(made.bytes.size());
    reserved += input_allocator_.RoundUp(made.bytes.size());
  }
  std::vector<uint64_t> offsets;
  {
    std::lock_guard lock(ring_mu_);
    if (reserved > input_allocator_.capacity()) {
      // Even an empty ring would not hold it: waiting could never end.
      job.done(absl::ResourceExhaustedError(absl::StrCat(
          "batch inputs of ", reserved, " bytes do not fit the gather part of the executor input ",
          "ring (", input_allocator_.capacity(), " of ", options_.input_ring_bytes,
          " bytes; the rest is the input pool): raise executors.input_ring_bytes")));
      return;
    }
    if (ring_closed_) {
      job.done(absl::UnavailableError(absl::StrCat(Describe(), " is not running")));
      return;
    }
    // Behind a batch already waiting, or no room now: wait in order. The reader finishes the
    // batches that hold the room (it takes ring_mu_ to free it), then sends the waiting ones.
    if (!deferred_.empty() || !AllocateGatherLocked(job.gather_bytes, &offsets)) {
      deferred_.push_back(std::move(job));
      deferred_count_ = deferred_.size();
      return;
    }
  }
  QueueBatch(std::move(job), {}, std::move(offsets), start_ns, out);
}

void ExecutorProcess::CopySpills(const std::vector<SpillCopy>& spills, Outbox& out) {
  // The destination is the batch's alone (input_pool.h, "Spill areas"): no lock for the copy.
  auto* ring = reinterpret_cast<char*>(input_ring_->data());
  ipc::ControlMessage message;
  for (const SpillCopy& spill : spills) {
    std::memcpy(ring + spill.to, ring + spill.from, spill.bytes);
    spill_bytes_ += spill.bytes;
    if (spill.bytes == 0) continue;
    ipc::RingRange* range = message.mutable_inputs_staged()->add_ranges();
    range->set_offset(spill.to);
    range->set_byte_size(spill.bytes);
  }
  ++batches_spilled_;
  // The mirror copies the moved head before the batch's InferBatch, queued after this, needs it.
  if (stages_inputs_ && message.has_inputs_staged()) out.messages.push_back(std::move(message));
}

void ExecutorProcess::StartDeferred(Outbox& out) {
  while (true) {
    BatchJob job;
    std::vector<uint64_t> offsets;
    {
      std::lock_guard lock(ring_mu_);
      if (deferred_.empty() || !AllocateGatherLocked(deferred_.front().gather_bytes, &offsets)) {
        return;
      }
      job = std::move(deferred_.front());
      deferred_.pop_front();
      deferred_count_ = deferred_.size();
    }
    QueueBatch(std::move(job), {}, std::move(offsets), MonotonicNs(), out);
  }
}

void ExecutorProcess::QueueBatch(BatchJob job, const std::vector<PoolRange>& pooled,
                                 std::vector<uint64_t> gather_offsets, uint64_t start_ns,
                                 Outbox& out) {
  const bool gathered = pooled.empty();
  int64_t total_rows = 0;
  for (const dispatch::Request* request : job.requests) total_rows += request->batch_size;
  PendingBatch pending;
  pending.model_name = job.model_name;
  pending.batched = job.batched;
  pending.total_rows = total_rows;
  pending.requests = job.requests;
  pending.ragged = job.ragged;
  pending.gather_allocations = std::move(gather_offsets);

  ipc::InferBatch infer;
  infer.set_batch_id(next_batch_id_++);
  infer.set_instance_key(job.instance_key);
  uint64_t gathered_bytes = 0;
  auto* ring = reinterpret_cast<char*>(input_ring_->data());
  for (size_t k = 0; k < job.input_count; ++k) {
    // An optional input the batch's requests leave out (ShapeKey keeps them apart from those
    // that give it) is not sent: the model runs with its default.
    const TensorView& first = job.requests.front()->inputs[k];
    if (dispatch::IsAbsent(first)) continue;
    uint64_t ring_offset;
    uint64_t bytes;
    if (gathered) {
      ring_offset = gather_base_ + pending.gather_allocations[k];
      bytes = job.gather_bytes[k];
      // The range is this batch's alone until it is answered: no lock needed for the copy.
      char* dst = ring + ring_offset;
      for (const dispatch::Request* request : job.requests) {
        std::memcpy(dst, request->inputs[k].data, request->inputs[k].byte_size);
        dst += request->inputs[k].byte_size;
      }
      gathered_bytes += bytes;
    } else {
      ring_offset = pooled[k].offset;
      bytes = pooled[k].bytes;
    }
    auto* tensor = infer.add_inputs();
    tensor->set_name(first.name);
    tensor->set_data_type(static_cast<int>(first.dtype));
    if (job.ragged && job.ragged->flat_inputs[k]) {
      int64_t elements = 0;
      for (const dispatch::Request* request : job.requests) {
        elements += ElementCount(request->inputs[k].shape);
      }
      tensor->add_shape(elements);
    } else {
      for (size_t d = 0; d < first.shape.size(); ++d) {
        tensor->add_shape(job.batched && d == 0 ? total_rows : first.shape[d]);
      }
    }
    tensor->set_offset(ring_offset);
    tensor->set_byte_size(bytes);
  }
  // Made batch inputs follow the inputs in the gather space; each of a batch input's targets
  // reads the same bytes.
  for (size_t j = 0; j < job.batch_inputs.size(); ++j) {
    const MadeTensor& made = job.batch_inputs[j];
    const uint64_t ring_offset = gather_base_ + pending.gather_allocations[job.input_count + j];
    if (!made.bytes.empty()) std::memcpy(ring + ring_offset, made.bytes.data(), made.bytes.size());
    gathered_bytes += made.bytes.size();
    for (const std::string& target : job.ragged->batch_inputs[j].config.target_names) {
      auto* tensor = infer.add_inputs();
      tensor->set_name(target);
      tensor->set_data_type(static_cast<int>(made.dtype));
      for (int64_t dim : made.shape) tensor->add_shape(dim);
      tensor->set_offset(ring_offset);
      tensor->set_byte_size(made.bytes.size());
    }
  }
  if (gathered) {
    ++batches_gathered_;
    gather_bytes_ += gathered_bytes;
  } else {
    ++batches_pooled_;
  }
  pending.prep_ns = MonotonicNs() - start_ns;
  (gathered ? prep_ns_gathered_ : prep_ns_pooled_) += pending.prep_ns;
  pending.done = std::move(job.done);
  pending.sent_ns = MonotonicNs();
  const uint64_t id = infer.batch_id();
  {
    std::lock_guard lock(mu_);
    if (!exited_) {
      pending_batches_.emplace(id, std::move(pending));
      out.batch_ids.push_back(id);
      *out.messages.emplace_back().mutable_infer() = std::move(infer);
      return;
    }
  }
  ReleaseGathered(pending);
  pending.done(absl::UnavailableError(absl::StrCat(Describe(), " is not running")));
}

void ExecutorProcess::ReleaseGathered(const PendingBatch& pending) {
  if (pending.gather_allocations.empty()) return;
  std::lock_guard lock(ring_mu_);
  for (uint64_t offset : pending.gather_allocations) input_allocator_.Release(offset);
}

void ExecutorProcess::SubmitBatches(const std::string& instance_key,
                                    const repository::ModelConfig& config,
                                    const std::vector<std::vector<const dispatch::Request*>>& batches,
                                    std::vector<BatchDone> done, const std::string& pool_key) {
  const bool on_reader = reader_of_ == this;
  Outbox local;
  Outbox& out = on_reader ? reader_outbox_ : local;
  const std::shared_ptr<const RaggedBatching> ragged = MakeRaggedBatching(config);
  for (size_t i = 0; i < batches.size(); ++i) {
    if (!alive_) {
      done[i](absl::UnavailableError(absl::StrCat(Describe(), " is not running")));
      continue;
    }
    BatchJob job;
    job.instance_key = instance_key;
    job.pool_key = pool_key;
    job.model_name = config.name;
    job.batched = config.max_batch_size > 0;
    job.input_count = repository::ModelFileInputCount(config);
    job.requests = batches[i];
    job.done = std::move(done[i]);
    job.ragged = ragged;
    StartBatch(std::move(job), out);
  }
  if (!on_reader) Flush(local);  // the reader writes its outbox when its burst ends
}

StatusOr<std::vector<dispatch::Response>> ExecutorProcess::FinishBatch(
    PendingBatch& pending, const ipc::BatchResult& result) {
  // The executor is done reading inputs once it answered. Pooled slots are released later, when
  // the queue destroys the requests.
  ReleaseGathered(pending);
  pending.gather_allocations.clear();
  if (result.ok() && result.mirrored_inputs() > 0) ++batches_mirrored_;
  if (!result.ok()) {
    // The frontend checked the requests against the config, so a model that refuses their inputs
    // (a size it cannot run) says so to the client; any other failure is the server's.
    const auto code = static_cast<absl::StatusCode>(result.error_code());
    const bool passed_on = code == absl::StatusCode::kInvalidArgument ||
                           code == absl::StatusCode::kResourceExhausted ||
                           code == absl::StatusCode::kUnimplemented;
    return absl::Status(passed_on ? code : absl::StatusCode::kInternal,
                        absl::StrCat("model '", pending.model_name, "' failed on ", Describe(),
                                     ": ", result.error()));
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
    if (const RaggedBatching::Scatter* scatter =
            pending.ragged ? pending.ragged->FindScatter(output.name()) : nullptr) {
      split_status = ScatterOutput(
          *scatter, pending.model_name, static_cast<DataType>(output.data_type()),
          out_base + output.offset(), output.byte_size(), pending.requests, responses);
      if (!split_status.ok()) break;
      continue;
    }
    Shape shape(output.shape().begin(), output.shape().end());
    if (pending.batched && (shape.empty() || shape[0] != pending.total_rows)) {
      split_status = absl::InternalError(absl::StrCat(
          "model '", pending.model_name, "' output '", output.name(), "' has shape ",
          ShapeToString(shape), ", but a batch of ", pending.total_rows,
          " rows needs it as the leading dim (max_batch_size > 0 models must batch every output",
          pending.ragged ? "; a ragged model that gives a row per request needs requests of one "
                           "row, or the output as a batch_output"
                         : "",
          ")"));
      break;
    }
    const uint64_t row_bytes =
        pending.batched && pending.total_rows > 0 ? output.byte_size() / static_cast<uint64_t>(pending.total_rows) : 0;
    // A BYTES output's rows differ in size: request i's rows run between element boundaries.
    std::vector<size_t> element_offsets;
    int64_t elements_per_row = 0;
    if (pending.batched && output.data_type() == static_cast<int>(DataType::kString)) {
      StatusOr<std::vector<size_t>> offsets =
          BytesElementOffsets(out_base + output.offset(), output.byte_size());
      const int64_t elements = ElementCount(shape);
      if (offsets.ok() && static_cast<int64_t>(offsets->size()) - 1 != elements) {
        offsets = absl::InvalidArgumentError(
            absl::StrCat("holds ", offsets->size() - 1, " elements for ", elements));
      }
      if (!offsets.ok()) {
        split_status = absl::InternalError(
            absl::StrCat(Describe(), " returned BYTES output '", output.name(), "' of shape ",
                         ShapeToString(shape), " that ", offsets.status().message()));
        break;
      }
      element_offsets = std::move(*offsets);
      elements_per_row = pending.total_rows > 0 ? elements / pending.total_rows : 0;
    }
    int64_t row_begin = 0;
    for (size_t i = 0; i < pending.requests.size(); ++i) {
      const dispatch::Request* request = pending.requests[i];
      dispatch::OutputTensor tensor;
      tensor.name = output.name();
      tensor.dtype = static_cast<DataType>(output.data_type());
      tensor.shape = shape;
      if (pending.batched && !tensor.shape.empty()) {
        tensor.shape[0] = request->batch_size;
        if (!element_offsets.empty()) {
          const size_t begin = element_offsets[row_begin * elements_per_row];
          const size_t end = element_offsets[(row_begin + request->batch_size) * elements_per_row];
          tensor.bytes.assign(out_base + output.offset() + begin, end - begin);
        } else {
          tensor.bytes.assign(out_base + output.offset() + row_begin * row_bytes,
                              request->batch_size * row_bytes);
        }
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

}  // namespace tessera::server
