// A model's configuration: `<repository>/<model>/config.yaml`, or Triton's `config.pbtxt` unchanged
// (format: docs/model-config.md). Field names follow Triton's ModelConfig where the meaning is the
// same, so a Triton user reads a Tessera config at once; Tessera's own keys (slo_ms, precision) sit
// beside them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/common/data_type.h"
#include "tessera/common/sequence_tensors.h"
#include "tessera/common/status.h"
#include "tessera/common/tensor.h"

namespace tessera::repository {

struct TensorConfig {
  std::string name;
  DataType data_type = DataType::kInvalid;
  // Without the batch dim when max_batch_size > 0. -1 = any size.
  Shape dims;
  // Outputs only: a file in the model's folder with one class label per line, for Triton's
  // classification extension (a request asks for an output's top k classes).
  std::string label_filename = {};
  // Its lines, read by the repository scan; shared so a request can hold them cheaply.
  std::shared_ptr<const std::vector<std::string>> labels = nullptr;
  // Triton's `reshape`: the shape the model file itself takes or gives (without the batch dim),
  // where clients see `dims`. Same element count; the k-th -1 of `dims` is the k-th -1 here
  // (CheckReshape). Unset = the model's shape is `dims`.
  std::optional<Shape> reshape = std::nullopt;
  // Inputs only, Triton's allow_ragged_batch: requests whose shapes of it differ still batch
  // together, and the model takes it flat, as one 1-D tensor of the batch's elements back to back
  // (the backends' rule in Triton's ragged_batching.md); the batch inputs say where each request's
  // part lies.
  bool allow_ragged_batch = false;
  // Inputs only, Triton's `optional`: a request may leave it out. The model then runs with the
  // model file's default for it (an ONNX initializer of the input's name, as ONNX Runtime does).
  bool optional = false;
};

// The tensor's shape in the model file, without the batch dim: `reshape` when set, else `dims`.
const Shape& ModelDims(const TensorConfig& tensor);

// Triton's rule for a `reshape`: every dim > 0 or -1; the same element count as `dims` (an empty
// reshape goes with dims of one element); where there are variable dims, the runs of fixed dims
// between them have equal element counts in both ([2, 4, -1, 6] -> [8, -1, 1, 6]). The error says
// which part fails, for the caller to prefix with the tensor's place in the config.
Status CheckReshape(const Shape& dims, const Shape& reshape);

// A request's shape (batch dim first when `batched`) as the model takes it: `reshape` with its
// -1s filled from the request's variable dims. Unchanged without a reshape. `client_shape` must
// already match `dims`.
Shape ToModelShape(const TensorConfig& tensor, const Shape& client_shape, bool batched);

// The reverse, for an output: the shape a client sees for the model's `model_shape`. Nullopt when
// `model_shape` does not fit `reshape` (rank or a fixed dim differs).
std::optional<Shape> ToClientShape(const TensorConfig& tensor, const Shape& model_shape,
                                   bool batched);

enum class InstanceKind { kAuto, kGpu, kCpu };

struct InstanceGroupConfig {
  std::string name;
  InstanceKind kind = InstanceKind::kAuto;
  int count = 1;
  std::vector<int> gpus;  // empty = all GPUs
};

struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific };
  Kind kind = Kind::kLatest;
  int latest_num_versions = 1;           // for kLatest
  std::vector<int64_t> specific_versions;  // for kSpecific
};

// Triton's ModelQueuePolicy: what the queue of one priority level admits, and how long a request
// may wait in it.
struct QueuePolicy {
  uint32_t max_queue_size = 0;  // requests waiting at this level; 0 = unbounded
  // A request still queued this long after it arrived is answered UNAVAILABLE instead of being run
  // (timeout_action REJECT); 0 = never. With allow_timeout_override a request's own `timeout`
  // parameter may shorten it (or set one when there is no default). DELAY never rejects
  // (Triton's delayed requests still run).
  uint64_t default_timeout_microseconds = 0;
  bool allow_timeout_override = false;
  bool timeout_delays = false;

  // The queue timeout for a request that asks for `request_timeout_us` (0 = none asked), in
  // microseconds; 0 = none.
  uint64_t QueueTimeoutMicroseconds(uint64_t request_timeout_us) const {
    if (timeout_delays) return 0;
    if (allow_timeout_override && request_timeout_us > 0 &&
        (default_timeout_microseconds == 0 || request_timeout_us < default_timeout_microseconds)) {
      return request_timeout_us;
    }
    return default_timeout_microseconds;
  }
};

struct DynamicBatchingConfig {
  bool enabled = false;  // true when the `dynamic_batching` key is present
  std::vector<int> preferred_batch_sizes;
  uint64_t max_queue_delay_microseconds = 0;
  // Every level's policy but those priority_queue_policy gives (without levels, the one queue's).
  QueuePolicy default_queue_policy;
  std::map<uint32_t, QueuePolicy> priority_queue_policy;  // by level, 1..priority_levels
  // Triton's priority levels: requests of level 1 are batched first, then 2, ... up to
  // priority_levels; a request without a `priority` parameter (or 0, or one above the levels)
  // gets default_priority_level. 0 levels = arrival order.
  uint32_t priority_levels = 0;
  uint32_t default_priority_level = 0;

  // The level a request asking for `requested` (0 = none) is queued at; 0 without levels.
  uint32_t PriorityLevel(uint64_t requested) const {
    if (!enabled || priority_levels == 0) return 0;
    return requested == 0 || requested > priority_levels ? default_priority_level
                                                         : static_cast<uint32_t>(requested);
  }

  // The policy of `level` (PriorityLevel's answer).
  const QueuePolicy& PolicyFor(uint32_t level) const {
    auto it = priority_queue_policy.find(level);
    return it == priority_queue_policy.end() ? default_queue_policy : it->second;
  }

  // The queue timeout of a request at `level` that asks for `request_timeout_us` (0 = none
  // asked), in microseconds; 0 = none.
  uint64_t QueueTimeoutMicroseconds(uint64_t request_timeout_us, uint32_t level) const {
    return enabled ? PolicyFor(level).QueueTimeoutMicroseconds(request_timeout_us) : 0;
  }
};

// One warm-up request (Triton's ModelWarmup): run at load, before the model reports READY, in
// place of the default warm-up, so models with variable dims are warmed at the shapes they will
// see. Checked against the model's inputs at load.
struct WarmupInput {
  std::string name;
  DataType data_type = DataType::kInvalid;
  Shape dims;  // without the batch dim when max_batch_size > 0; every dim > 0
  // random_data: FP32 inputs get values uniform in [0, 1); other types get zeros (random integers
  // would be out of range for index inputs such as token ids).
  bool random_data = false;
  // Triton's input_data_file: a file in the model folder's warmup/ folder holding one batch row
  // of this input, raw and row-major (BYTES: serialized elements), repeated for every row of the
  // sample. Read by the repository scan into `data`; its size is checked against dims at load.
  std::string input_data_file = {};
  std::shared_ptr<const std::string> data = nullptr;
};

struct WarmupSample {
  std::string name;
  int64_t batch_size = 1;
  int count = 0;  // runs of this sample; 0 = once (Triton's default)
  std::vector<WarmupInput> inputs;  // one per model input
};

// One step of an ensemble (Triton's ensemble_scheduling.step): a composing model, the ensemble
// tensors that feed its inputs and the ones its outputs become.
struct EnsembleStep {
  std::string model_name;
  int64_t model_version = -1;  // -1 = the composing model's latest ready version
  // (model's tensor, ensemble tensor) pairs, sorted by the model's tensor name.
  std::vector<std::pair<std::string, std::string>> input_map;
  std::vector<std::pair<std::string, std::string>> output_map;
};

// Triton's sequence_batching: the model is stateful. Each request names its sequence
// (`sequence_id`, with `sequence_start` / `sequence_end`); a sequence's requests run one at a time,
// in order, with the control and state inputs below added (dispatch/sequence_batcher.h). Both
// strategies batch different sequences' requests together and keep the state in the server, so
// they differ only in the batching rule they pass on.
struct SequenceBatchingConfig {
  bool enabled = false;  // true when the `sequence_batching` key is present
  bool oldest = false;   // the strategy written: `oldest`, else `direct` (Triton's default)
  uint64_t max_sequence_idle_microseconds = 1'000'000;  // Triton's default: 1 s
  uint64_t max_queue_delay_microseconds = 0;
  std::vector<int> preferred_batch_sizes;  // oldest only
  int max_candidate_sequences = 0;         // oldest only; shown, not acted on
  std::vector<SequenceControl> controls;
  std::vector<SequenceState> states;
};

// Triton's BatchInput: a model input the server makes for each batch, from the shapes of one
// config input in the batch's requests (model_config.proto's kinds; N = the batch's requests,
// e_i = request i's element count of the source input, rows = the batch's rows):
//   kElementCount                   [N]      e_1, ..., e_N
//   kAccumulatedElementCount        [N]      e_1, e_1 + e_2, ...
//   kAccumulatedElementCountWithZero [N + 1] 0, e_1, e_1 + e_2, ...
//   kMaxElementCountAsShape         [max e_i] zeros: only the shape carries the information
//   kItemShape                      [rows, r] each row's shape without the batch dim (r = its rank)
//   kItemShapeFlatten               [rows * r] the same, flat
struct BatchInputConfig {
  enum class Kind {
    kElementCount,
    kAccumulatedElementCount,
    kAccumulatedElementCountWithZero,
    kMaxElementCountAsShape,
    kItemShape,
    kItemShapeFlatten,
  };
  Kind kind = Kind::kElementCount;
  std::vector<std::string> target_names;    // model inputs that each get the tensor
  DataType data_type = DataType::kInvalid;  // TYPE_INT32, TYPE_INT64 or TYPE_FP32
  std::string source_input;                 // a config input
};

// Triton's BatchOutput (kind BATCH_SCATTER_WITH_INPUT_SHAPE, the only one): the model gives these
// outputs flat for the whole batch, and each request's part has the output's dims (batch dim
// first) with every -1 taken from the same dim of the request's `source_input` shape.
struct BatchOutputConfig {
  std::vector<std::string> target_names;  // config outputs
  std::string source_input;               // a config input
};

// The names of the kinds as config files write them (BATCH_ELEMENT_COUNT, ...), in enum order.
std::string_view BatchInputKindName(BatchInputConfig::Kind kind);

struct ModelConfig {
  std::string name;
  std::string platform = "onnx";
  int max_batch_size = 0;  // 0 = no batching: dims are the exact request shape
  std::vector<TensorConfig> inputs;
  std::vector<TensorConfig> outputs;
  DynamicBatchingConfig dynamic_batching;
  std::vector<InstanceGroupConfig> instance_groups;  // empty = one instance, kind auto
  VersionPolicy version_policy;
  std::string default_model_filename = "model.onnx";

  // Tessera's own keys.
  double slo_ms = 0;               // latency SLO; 0 = none
  std::string precision = "fp32";  // fp32 | fp16 | bf16
  // Multi-granularity workers (E²bird): one instance per size, all on one executor (sharing the
  // weights), each taking batches of at most its size; empty = instance_group's instances. Each a
  // power of two ≤ max_batch_size, no duplicates, in the order written.
  std::vector<int> worker_batch_sizes;
  // Triton's model_warmup; empty = warm every instance at batch 1 and max_batch_size (the inputs'
  // fixed dims only).
  std::vector<WarmupSample> model_warmup;
  // platform "ensemble": the steps as written (they run as their inputs become ready; the parser
  // checks that the data flow has no cycle and reaches every output). Empty for other platforms.
  std::vector<EnsembleStep> ensemble_steps;
  // Triton's response_cache.enable: answers are kept in the server's response cache (when the
  // server has one: --cache-config) and a repeated request is answered from it.
  bool response_cache = false;
  SequenceBatchingConfig sequence_batching;
  // Triton's metric_tags: each becomes a label "_<key>" on the model's /metrics series. Keys are
  // letters, digits and '_', not starting with '_' (so the label is valid and not reserved).
  std::map<std::string, std::string> metric_tags;
  // Triton's ragged batching (with the inputs' allow_ragged_batch); max_batch_size > 0 only.
  std::vector<BatchInputConfig> batch_inputs;
  std::vector<BatchOutputConfig> batch_outputs;

  bool is_ensemble() const { return platform == "ensemble"; }
  // Whether batches need the ragged-batching steps: flat inputs, batch inputs, scattered outputs.
  bool ragged_batching() const {
    return !batch_inputs.empty() || !batch_outputs.empty() ||
           std::any_of(inputs.begin(), inputs.end(),
                       [](const TensorConfig& t) { return t.allow_ragged_batch; });
  }

  // config.pbtxt only: the Triton fields that were read but are not acted on, one line each
  // ("models/m/config.pbtxt:12: optimization: ignored (...)"), for the load log.
  std::vector<std::string> notes;
};

// The tensors the model file takes and gives: the config's inputs and outputs, and for a stateful
// model also its control and state inputs and its state outputs, which clients never send or see.
std::vector<TensorConfig> ModelFileInputs(const ModelConfig& config);
std::vector<TensorConfig> ModelFileOutputs(const ModelConfig& config);
// ModelFileInputs(config).size(), without building the list (per batch).
inline size_t ModelFileInputCount(const ModelConfig& config) {
  return config.inputs.size() + config.sequence_batching.controls.size() +
         config.sequence_batching.states.size();
}
// The state whose input is `input_name`, or null.
const SequenceState* FindStateInput(const SequenceBatchingConfig& sequence,
                                    const std::string& input_name);
// The tensor named `name` in `tensors`; null when there is none.
const TensorConfig* FindTensor(const std::vector<TensorConfig>& tensors, const std::string& name);
// Whether `name` is the target of one of the config's batch outputs.
bool IsBatchOutput(const ModelConfig& config, const std::string& name);
// Whether `name` is a control or state tensor of a stateful model (an input or an output).
bool IsSequenceTensor(const SequenceBatchingConfig& sequence, const std::string& name);

// Parses and validates config YAML text. `source` names the file in error messages. Every error
// names the file, the line, the key and the reason ("models/mlp/config.yaml:7: input[0].dimz:
// unknown key"). `expected_name` (the model's folder name) is checked against `name` when
// non-empty, and fills it when `name` is absent.
StatusOr<ModelConfig> ParseModelConfig(const std::string& yaml_text, const std::string& source,
                                       const std::string& expected_name);

// Parses Triton's config.pbtxt (protobuf text of inference.ModelConfig) into the same ModelConfig,
// through the same checks as config.yaml, so both formats accept and refuse the same things. Errors
// name the file, the line, the field and the reason. Tessera's own keys come from `parameters`
// (slo_ms, precision, worker_batch_sizes, as string values). Triton fields that would change what a
// client sees (shape tensors, optional inputs, decoupled models) are refused with the reason; hints
// that do not (optimization, response cache, metric tags, ...) are ignored and listed in `notes`.
StatusOr<ModelConfig> ParseTritonModelConfig(const std::string& pbtxt, const std::string& source,
                                             const std::string& expected_name);

// The same for Triton's ModelConfig in protobuf's JSON form (a load request's "config" parameter,
// or what a ModelConfig call answered as JSON). Errors name `source` and the field, without a line.
StatusOr<ModelConfig> ParseTritonJsonModelConfig(const std::string& json, const std::string& source,
                                                 const std::string& expected_name);

// Reads and parses `path` (a config.yaml). A missing/unreadable file is NOT_FOUND naming the path.
StatusOr<ModelConfig> LoadModelConfigFile(const std::string& path, const std::string& expected_name);

}  // namespace tessera::repository
