// dispatch::ModelStats -> inference::ModelStatistics (Triton's shape), for the ModelStatistics RPC.
#pragma once

#include "inference/grpc_service.pb.h"
#include "tessera/frontend/server_core.h"

namespace tessera::frontend {

// One model version's counters and durations, and its per-batch-size execution statistics.
void FillModelStatistics(const ModelStatsEntry& entry, inference::ModelStatistics* out);

}  // namespace tessera::frontend
