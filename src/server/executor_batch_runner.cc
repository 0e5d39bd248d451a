#include "executor_batch_runner.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "tessera/common/bytes_tensor.h"
#include "tessera/common/data_type.h"
#include "tessera/common/float16.h"

namespace tessera::server {
namespace {

ipc::TensorSpec ToSpec(const repository::TensorConfig& tensor) {
  ipc::TensorSpec spec;
  spec.set_name(tensor.name);
  spec.set_data_type(static_cast<int>(tensor.data_type));
  // The executor sees the model file's shapes (the frontend reshapes requests and answers).
  for (int64_t dim : repository::ModelDims(tensor)) spec.add_dims(dim);
  spec.set_optional(tensor.optional);
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
  load.set_precision(config.precision);
  // What the model file takes and gives: a stateful model's control and state tensors too.
  for (const auto& tensor : repository::ModelFileInputs(config)) {
    ipc::TensorSpec& spec = *load.add_inputs() = ToSpec(tensor);
    if (tensor.allow_ragged_batch) {
      spec.clear_dims();
      spec.add_dims(-1);
      spec.set_flat(true);
    }
  }
  for (const repository::BatchInputConfig& batch_input : config.batch_inputs) {
    for (const std::string& target : batch_input.target_names) {
      ipc::TensorSpec& spec = *load.add_batch_inputs();
      spec.set_name(target);
      spec.set_data_type(static_cast<int>(batch_input.data_type));
      spec.add_dims(-1);
      if (batch_input.kind == repository::BatchInputConfig::Kind::kItemShape) {
        spec.add_dims(static_cast<int64_t>(
            repository::FindTensor(config.inputs, batch_input.source_input)->dims.size()));
      }
      spec.set_flat(true);
    }
  }
  for (const auto& tensor : repository::ModelFileOutputs(config)) {
    ipc::TensorSpec& spec = *load.add_outputs() = ToSpec(tensor);
    spec.set_flat(repository::IsBatchOutput(config, tensor.name));
  }
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

namespace {

// One warm-up input: its name, type and full shape (batch dim included), and whether FP inputs
// get random values in [0, 1) instead of zeros.
struct WarmUpInput {
  std::string name;
  DataType data_type;
  Shape shape;
  bool random_data = false;
  // One row's bytes from an input_data_file, repeated for every row; null = zeros or random.
  std::shared_ptr<const std::string> row_data = nullptr;
  // An optional input the sample leaves out: sent as a client leaving it out would.
  bool absent = false;
};

// Bytes of `rows` copies of a `row_bytes` row, or nullopt past 2^64.
std::optional<uint64_t> CheckedRowsBytes(int64_t rows, uint64_t row_bytes) {
  uint64_t total = 0;
  if (rows < 0 || __builtin_mul_overflow(static_cast<uint64_t>(rows), row_bytes, &total)) {
    return std::nullopt;
  }
  return total;
}

// OK when an input_data_file's bytes are one row of `input` at `dims` (its type's size for
// each element, or that many serialized BYTES elements).
Status CheckRowData(const std::string& label, const repository::WarmupInput& input,
                    const std::string& row) {
  const std::string what =
      absl::StrCat(label, ": input '", input.name, "': input_data_file ", input.input_data_file);
  const int64_t elements = ElementCount(input.dims);
  if (input.data_type == DataType::kString) {
    return CheckBytesElements(what, row.data(), row.size(), elements);
  }
  std::optional<uint64_t> wanted = DenseByteSize(input.dims, DataTypeByteSize(input.data_type));
  if (!wanted || *wanted != row.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " holds ", row.size(), " bytes; one row of dims ", ShapeToString(input.dims), " of ",
        std::string(DataTypeToConfigName(input.data_type)), " is ",
        wanted ? absl::StrCat(*wanted, " bytes") : std::string("more than 2^64 bytes")));
  }
  return absl::OkStatus();
}

// Runs one batch made of `inputs` `runs` times: one request of `rows` rows, or with
// `row_requests` `rows` requests of one row each. `label` says which warm-up in errors.
Status RunWarmUpBatch(ExecutorProcess& process, const std::string& instance_key,
                      const repository::ModelConfig& config, const std::string& label, int64_t rows,
                      std::vector<WarmUpInput> inputs, int runs, bool row_requests = false) {
  uint64_t total_bytes = 0;
  std::vector<uint64_t> sizes;
  for (const WarmUpInput& input : inputs) {
    if (input.absent) {
      sizes.push_back(0);
      continue;
    }
    // Checked before anything is allocated: the dims come from a config or a model file.
    // A BYTES input's zeros are empty strings: each element its 4-byte zero length.
    std::optional<uint64_t> bytes =
        input.row_data ? CheckedRowsBytes(rows, input.row_data->size())
                       : DenseByteSize(input.shape, input.data_type == DataType::kString
                                                        ? kBytesLengthPrefix
                                                        : DataTypeByteSize(input.data_type));
    if (!bytes || __builtin_add_overflow(total_bytes, *bytes, &total_bytes) ||
        total_bytes > process.gather_capacity_bytes()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          label, ": input '", input.name, "' of shape ", ShapeToString(input.shape), " is ",
          bytes ? absl::StrCat(*bytes, " bytes") : std::string("more than 2^64 bytes"),
          "; a batch's inputs must fit the executor input ring's ",
          process.gather_capacity_bytes(), " bytes (executors.input_ring_bytes)"));
    }
    sizes.push_back(*bytes);
  }
  std::vector<std::string> buffers;
  buffers.reserve(inputs.size());  // views point into these: no reallocation
  dispatch::Request request;
  request.batch_size = rows;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].absent) {
      request.inputs.push_back(dispatch::AbsentInput(inputs[k].name, inputs[k].data_type));
      continue;
    }
    buffers.emplace_back(sizes[k], '\0');
    if (inputs[k].row_data) {
      const std::string& row = *inputs[k].row_data;
      for (size_t at = 0; at + row.size() <= sizes[k] && !row.empty(); at += row.size()) {
        std::memcpy(buffers.back().data() + at, row.data(), row.size());
      }
    } else if (inputs[k].random_data && inputs[k].data_type == DataType::kFp32) {
      auto* values = reinterpret_cast<float*>(buffers.back().data());
      for (size_t i = 0; i < sizes[k] / sizeof(float); ++i) values[i] = uniform(rng);
    } else if (inputs[k].random_data &&
               (inputs[k].data_type == DataType::kFp16 || inputs[k].data_type == DataType::kBf16)) {
      auto* values = reinterpret_cast<uint16_t*>(buffers.back().data());
      const bool fp16 = inputs[k].data_type == DataType::kFp16;
      for (size_t i = 0; i < sizes[k] / sizeof(uint16_t); ++i) {
        values[i] = fp16 ? FloatToFp16(uniform(rng)) : FloatToBf16(uniform(rng));
      }
    }
    request.inputs.push_back(TensorView{inputs[k].name, inputs[k].data_type,
                                        std::move(inputs[k].shape), buffers.back().data(),
                                        buffers.back().size()});
  }
  std::vector<const dispatch::Request*> batch = {&request};
  // Every row is the same size: zeros, random floats or one repeated row (BYTES zeros are empty
  // strings, one 4-byte length each).
  std::vector<dispatch::Request> row_batch;
  if (row_requests && rows > 1) {
    row_batch.resize(static_cast<size_t>(rows));
    batch.clear();
    for (int64_t r = 0; r < rows; ++r) {
      dispatch::Request& one = row_batch[static_cast<size_t>(r)];
      for (const TensorView& view : request.inputs) {
        if (dispatch::IsAbsent(view)) {
          one.inputs.push_back(view);
          continue;
        }
        const size_t row_bytes = view.byte_size / static_cast<size_t>(rows);
        Shape shape = view.shape;
        shape[0] = 1;
        one.inputs.push_back(TensorView{view.name, view.dtype, std::move(shape),
                                        static_cast<char*>(view.data) + r * row_bytes, row_bytes});
      }
      batch.push_back(&one);
    }
  }
  for (int run = 0; run < runs; ++run) {
    auto result = process.RunBatch(instance_key, config, batch);
    if (!result.ok()) {
      return absl::Status(result.status().code(),
                          absl::StrCat(label, ": ", result.status().message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

Status WarmUp(ExecutorProcess& process, const std::string& instance_key,
              const repository::ModelConfig& config, int64_t rows) {
  const bool batched = config.max_batch_size > 0;
  rows = batched ? std::clamp<int64_t>(rows, 1, config.max_batch_size) : 1;
  std::vector<WarmUpInput> inputs;
  for (const repository::TensorConfig& input : repository::ModelFileInputs(config)) {
    Shape shape;
    if (batched) shape.push_back(rows);
    // A state as a sequence's first request gets it (its -1 dims are the server's to fill).
    const SequenceState* state = repository::FindStateInput(config.sequence_batching, input.name);
    for (int64_t dim : state != nullptr ? StartShape(*state) : repository::ModelDims(input)) {
      if (dim < 0) return absl::OkStatus();
      shape.push_back(dim);
    }
    inputs.push_back(WarmUpInput{input.name, input.data_type, std::move(shape)});
  }
  // Twice: an engine prepares a shape on its first run and settles on the second (CPU: the first
  // run plans the activation arena; CUDA: the second captures the CUDA graph later runs replay),
  // so the first live batch of this size already takes the fast path (GSLICE §4.6: a shadow is
  // warm before it takes over).
  // A ragged model's batch inputs describe requests: warm it with one request per row, as its
  // clients send them (a model made for ragged batching often takes one row per request).
  return RunWarmUpBatch(process, instance_key, config,
                        absl::StrCat("warm-up of ", instance_key, " (batch ", rows, ")"), rows,
                        std::move(inputs), 2, config.ragged_batching() && batched);
}

Status WarmUpSample(ExecutorProcess& process, const std::string& instance_key,
                    const repository::ModelConfig& config,
                    const repository::WarmupSample& sample) {
  const std::string label =
      absl::StrCat("model_warmup \"", sample.name, "\" on ", instance_key);
  const bool batched = config.max_batch_size > 0;
  std::vector<WarmUpInput> inputs;
  for (const repository::TensorConfig& input : config.inputs) {
    auto given = std::find_if(sample.inputs.begin(), sample.inputs.end(),
                              [&](const repository::WarmupInput& w) { return w.name == input.name; });
    if (given == sample.inputs.end()) {
      if (input.optional) {
        inputs.push_back(WarmUpInput{.name = input.name,
                                     .data_type = input.data_type,
                                     .shape = {},
                                     .row_data = nullptr,
                                     .absent = true});
        continue;
      }
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": gives no data for the model's input '", input.name, "'"));
    }
    if (given->data_type != input.data_type) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": input '", input.name, "' is ",
          std::string(DataTypeToConfigName(given->data_type)), ", the model's is ",
          std::string(DataTypeToConfigName(input.data_type))));
    }
    bool fits = given->dims.size() == input.dims.size();
    for (size_t d = 0; fits && d < input.dims.size(); ++d) {
      fits = input.dims[d] < 0 || input.dims[d] == given->dims[d];
    }
    if (!fits) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": input '", input.name, "' dims ", ShapeToString(given->dims),
          " do not fit the model's ", ShapeToString(input.dims)));
    }
    Shape shape;
    if (batched) shape.push_back(sample.batch_size);
    shape.insert(shape.end(), given->dims.begin(), given->dims.end());
    if (given->data) TESSERA_RETURN_IF_ERROR(CheckRowData(label, *given, *given->data));
    // A sample is given in the config's dims, as a client would send it.
    inputs.push_back(WarmUpInput{input.name, input.data_type,
                                 repository::ToModelShape(input, shape, batched),
                                 given->random_data, given->data});
  }
  for (const repository::WarmupInput& w : sample.inputs) {
    const bool known = std::any_of(config.inputs.begin(), config.inputs.end(),
                                   [&](const repository::TensorConfig& t) { return t.name == w.name; });
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": the model has no input '", w.name, "'"));
    }
  }
  // A stateful model's control and state inputs are the server's: zeros, as at a START.
  for (const repository::TensorConfig& input : repository::ModelFileInputs(config)) {
    if (!repository::IsSequenceTensor(config.sequence_batching, input.name)) continue;
    const SequenceState* state = repository::FindStateInput(config.sequence_batching, input.name);
    Shape shape = state != nullptr ? StartShape(*state) : input.dims;
    if (batched) shape.insert(shape.begin(), sample.batch_size);
    inputs.push_back(WarmUpInput{input.name, input.data_type, std::move(shape)});
  }
  // At least twice, for the reason WarmUp gives.
  return RunWarmUpBatch(process, instance_key, config, label, batched ? sample.batch_size : 1,
                        std::move(inputs), std::max(2, sample.count));
}

}  // namespace tessera::server
