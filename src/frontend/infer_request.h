// Turns a wire ModelInferRequest into a validated dispatch::Request, and dispatch responses back
// into ModelInferResponse. Every check names the tensor and what is wrong, so a client sees
// "input 'x': shape [1, 63] does not match the model's [-1, 64]" rather than a generic failure.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "inference/grpc_service.pb.h"
#include "tessera/common/status.h"
#include "tessera/dispatch/request.h"
#include "tessera/repository/model_config.h"

namespace tessera::frontend {

// Bytes converted from typed `contents` (when the client did not send raw bytes). Owned by the RPC
// and kept alive until the request completes, since the dispatch::Request only views them.
using ConvertedInputs = std::vector<std::string>;

// Validates `wire` against `config` and builds the request (without `done` / `arrival_ns`).
// Errors are INVALID_ARGUMENT (UNIMPLEMENTED for BYTES tensors). The views point into `wire` and
// `storage`, which must outlive the request.
StatusOr<std::unique_ptr<dispatch::Request>> BuildDispatchRequest(
    const inference::ModelInferRequest& wire, const repository::ModelConfig& config,
    ConvertedInputs* storage);

// Fills `wire` with the outputs as raw_output_contents (one per output, same order), moving bytes.
void FillInferResponse(const std::string& model_name, int64_t version, const std::string& id,
                       dispatch::Response response, inference::ModelInferResponse* wire);

}  // namespace tessera::frontend
