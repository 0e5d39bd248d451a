// Load-time check that a model config (as sent in LoadModel) agrees with the model file.
#pragma once

#include "tessera/common/status.h"
#include "tessera/engine/engine.h"
#include "tessera/executor.pb.h"

namespace tessera::executor {

// OK when every tensor the config declares exists in the model with the same data type and
// compatible dims, and (if the config lists inputs at all) every model input without a default
// (engine::TensorInfo::has_default) is in the config.
// Config dims exclude the batch dim when max_batch_size > 0, in which case the model's first dim is
// the batch dim: dynamic (-1) or at least max_batch_size; a `flat` tensor (ragged batching) has no
// batch dim. Dims are compatible when equal or when
// either is -1. Outputs may be a subset of the model's. INVALID_ARGUMENT names the tensor and shows
// both shapes/data types.
Status CheckModelSignature(const ipc::LoadModel& config, const engine::Model& model);

// Logs a warning for each optional config input the model has no default for: the load goes on,
// as in Triton, and a request that leaves such an input out fails with the engine's error.
void WarnOfOptionalInputsWithoutDefault(const ipc::LoadModel& config, const engine::Model& model);

}  // namespace tessera::executor
