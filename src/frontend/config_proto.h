// repository::ModelConfig -> inference::ModelConfig (Triton's shape), for the ModelConfig RPC.
#pragma once

#include "inference/model_config.pb.h"
#include "tessera/repository/model_config.h"

namespace tessera::frontend {

// Normalized as Triton does: dynamic batching without preferred sizes reports [max_batch_size];
// Tessera-only keys (slo_ms, precision) appear under `parameters`.
inference::ModelConfig ToTritonModelConfig(const repository::ModelConfig& config);

}  // namespace tessera::frontend
