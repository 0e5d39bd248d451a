// Triton's config auto-completion for ONNX models: a model whose config leaves out `input` or
// `output` (or a model folder with no config file at all) gets them from the model file, the way
// Triton's ONNX Runtime backend completes a config.pbtxt.
//
// Only the model file's graph inputs and outputs are read: the weights are skipped by seeking, so
// completing a config costs a few reads whatever the model's size.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tessera/common/status.h"
#include "tessera/repository/model_config.h"

namespace tessera::repository {

// Triton's default for a completed max_batch_size (its --backend-config default-max-batch-size).
inline constexpr int kCompletedMaxBatchSize = 4;

// A graph input or output as the ONNX file declares it. dims: -1 where the file gives a symbolic or
// no size.
struct OnnxTensorSignature {
  std::string name;
  DataType data_type = DataType::kInvalid;
  Shape dims;
};

struct OnnxSignature {
  std::vector<OnnxTensorSignature> inputs;  // graph inputs that are not initializers
  std::vector<OnnxTensorSignature> outputs;
  // The main graph's node op types, each once (no domain): for load-time notes such as
  // QuantizesOverTheBatch.
  std::set<std::string> op_types;
};

// Whether the model takes an activation's 8-bit range over the whole tensor (DynamicQuantizeLinear,
// what quantize_dynamic writes), so that in a server-side batch every request's outputs depend on
// the others'.
bool QuantizesOverTheBatch(const OnnxSignature& signature);

// The graph inputs and outputs of the ONNX model at `path`. NOT_FOUND when the file cannot be
// opened; INVALID_ARGUMENT naming the file when it is not an ONNX model, or naming the tensor when
// its element type has no Tessera data type or it has no shape.
StatusOr<OnnxSignature> ReadOnnxSignature(const std::string& path);

// True when `config` leaves out inputs or outputs, to be completed from the model file.
bool NeedsCompletion(const ModelConfig& config);

// `config` completed from `signature` (the rules are Triton's): inputs and outputs the config
// leaves out are the model's; when max_batch_size is 0 and every model input and output has a
// dynamic first dim, max_batch_size becomes kCompletedMaxBatchSize; then with max_batch_size > 1
// and no dynamic_batching, dynamic batching is turned on (no delay). `notes` says what was filled
// in, one line each (the config file's own notes are dropped: they were logged when it was read). INVALID_ARGUMENT naming `model_path` when the config cannot be completed (a
// max_batch_size > 0 the model's first dims cannot carry; batching settings that need a larger
// max_batch_size than the model allows).
StatusOr<ModelConfig> CompleteFromSignature(const ModelConfig& config,
                                            const OnnxSignature& signature,
                                            const std::string& model_path);

// ReadOnnxSignature + CompleteFromSignature when NeedsCompletion, else `config` unchanged.
StatusOr<ModelConfig> CompleteFromModelFile(const ModelConfig& config,
                                            const std::string& model_path);

}  // namespace tessera::repository
