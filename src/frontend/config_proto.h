// repository::ModelConfig -> inference::ModelConfig (Triton's shape), for the ModelConfig RPC.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inference/grpc_service.pb.h"
#include "inference/model_config.pb.h"
#include "tessera/repository/model_config.h"

namespace tessera::frontend {

// Normalized as Triton does: dynamic batching without preferred sizes reports [max_batch_size];
// Tessera-only keys (slo_ms, precision) appear under `parameters`.
inference::ModelConfig ToTritonModelConfig(const repository::ModelConfig& config);

// The ModelMetadata answer: the tensors in the config's dims (not a reshape's), with a leading -1
// when the model batches.
void FillModelMetadata(const std::string& name, const std::vector<int64_t>& versions,
                       const repository::ModelConfig& config,
                       inference::ModelMetadataResponse* response);

// The ServerMetadata answer: name, version, and the protocol extensions served.
void FillServerMetadata(const std::string& version, bool client_shm,
                        inference::ServerMetadataResponse* response);

}  // namespace tessera::frontend
