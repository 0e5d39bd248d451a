#include "executor_batch_runner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tessera/common/data_type.h"

namespace tessera::server {
namespace {

ipc::TensorSpec ToSpec(const repository::TensorConfig& tensor) {
  ipc::TensorSpec spec;
  spec.set_name(tensor.name);
  spec.set_data_type(static_cast<int>(tensor.data_type));
  for (int64_t dim : tensor.dims) spec.add_dims(dim);
  return spec;
}

}  // namespace

ipc::LoadModel BuildLoadModel(const repository::ModelConfig& config, int64_t version,
                              const std::string& model_path, const std::string& instance_key) {
  ipc::LoadModel load;
  load.set_instance_key(instance_key);
  load.set_model_name(config.name);
  load.set_version(version);
  load.set_model_path(model_path);
  load.set_max_batch_size(config.max_batch_size);
  for (const auto& tensor : config.inputs) *load.add_inputs() = ToSpec(tensor);
  for (const auto& tensor : config.outputs) *load.add_outputs() = ToSpec(tensor);
  return load;
}

StatusOr<std::vector<dispatch::Response>> ExecutorBatchRunner::Run(
    const std::vector<const dispatch::Request*>& batch) {
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<ExecutorProcess> process, pool_->Acquire(slot_, key_));
  return process->RunBatch(key_, *config_, batch, pool_key_);
}

int ExecutorBatchRunner::max_in_flight() const {
  return std::max(1, pool_->base_launch().batches_in_flight);
}

void ExecutorBatchRunner::Submit(const std::vector<std::vector<const dispatch::Request*>>& batches,
                                 std::vector<dispatch::BatchOutcomeCallback> done) {
  StatusOr<std::shared_ptr<ExecutorProcess>> process = pool_->Acquire(slot_, key_);
  if (!process.ok()) {
    for (auto& callback : done) callback(process.status());
    return;
  }
  (*process)->SubmitBatches(key_, *config_, batches, std::move(done), pool_key_);
}

bool ExecutorBatchRunner::TrySubmit(
    const std::vector<std::vector<const dispatch::Request*>>& batches,
    std::vector<dispatch::BatchOutcomeCallback>& done) {
  std::shared_ptr<ExecutorProcess> process = pool_->TryAcquire(slot_, key_);
  if (!process) return false;
  process->SubmitBatches(key_, *config_, batches, std::move(done), pool_key_);
  return true;
}

void ExecutorBatchRunner::Stage(dispatch::Request& request) {
  if (pool_key_.empty()) return;
  // Never waits: a restarting executor means this request gathers at batch time instead.
  std::shared_ptr<ExecutorProcess> process = pool_->Current(slot_);
  if (process) request.staged = process->Stage(pool_key_, *config_, request);
}

std::string ExecutorBatchRunner::Describe() const {
  return absl::StrCat(key_, " on executor ", slot_);
}

StatusOr<std::vector<dispatch::Response>> GpuletBatchRunner::Run(
    const std::vector<const dispatch::Request*>& batch) {
  std::lock_guard turn(*round_gate_);
  return ExecutorBatchRunner::Run(batch);
}

void GpuletBatchRunner::Stage(dispatch::Request& request) {
  // Never waits: a restarting executor means this request gathers at batch time instead.
  std::shared_ptr<ExecutorProcess> process = pool_->Current(slot_);
  if (process) request.staged = process->Stage(key_, *config_, request);
}

std::string GpuletBatchRunner::Describe() const {
  return absl::StrCat(key_, " on ", gpulet_label_, " (executor ", slot_, ")");
}

Status WarmUp(ExecutorProcess& process, const std::string& instance_key,
              const repository::ModelConfig& config, int64_t rows) {
  const bool batched = config.max_batch_size > 0;
  rows = batched ? std::clamp<int64_t>(rows, 1, config.max_batch_size) : 1;
  std::vector<std::string> buffers;
  buffers.reserve(config.inputs.size());  // views point into these: no reallocation
  dispatch::Request request;
  request.batch_size = rows;
  struct Input {
    Shape shape;
    uint64_t bytes;
  };
  std::vector<Input> inputs;
  uint64_t total_bytes = 0;
  for (const repository::TensorConfig& input : config.inputs) {
    Shape shape;
    if (batched) shape.push_back(rows);
    for (int64_t dim : input.dims) {
      if (dim < 0) return absl::OkStatus();
      shape.push_back(dim);
    }
    // Checked before anything is allocated: the dims come from a config or a model file.
    std::optional<uint64_t> bytes = DenseByteSize(shape, DataTypeByteSize(input.data_type));
    if (!bytes || __builtin_add_overflow(total_bytes, *bytes, &total_bytes) ||
        total_bytes > process.gather_capacity_bytes()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "warm-up of ", instance_key, " (batch ", rows, "): input '", input.name, "' of shape ",
          ShapeToString(shape), " is ",
          bytes ? absl::StrCat(*bytes, " bytes") : std::string("more than 2^64 bytes"),
          "; a batch's inputs must fit the executor input ring's ",
          process.gather_capacity_bytes(), " bytes (executors.input_ring_bytes)"));
    }
    inputs.push_back(Input{std::move(shape), *bytes});
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const repository::TensorConfig& input = config.inputs[k];
    buffers.emplace_back(inputs[k].bytes, '\0');
    request.inputs.push_back(TensorView{input.name, input.data_type, std::move(inputs[k].shape),
                                        buffers.back().data(), buffers.back().size()});
  }
  std::vector<const dispatch::Request*> batch = {&request};
  // Twice: an engine prepares a shape on its first run and settles on the second (CPU: the first
  // run plans the activation arena; CUDA: the second captures the CUDA graph later runs replay),
  // so the first live batch of this size already takes the fast path (GSLICE §4.6: a shadow is
  // warm before it takes over).
  for (int run = 0; run < 2; ++run) {
    auto result = process.RunBatch(instance_key, config, batch);
    if (!result.ok()) {
      return absl::Status(result.status().code(),
                          absl::StrCat("warm-up of ", instance_key, " (batch ", rows, "): ",
                                       result.status().message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::server
