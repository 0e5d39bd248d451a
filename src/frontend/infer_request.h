// Turns a wire ModelInferRequest into a validated dispatch::Request, and dispatch responses back
// into ModelInferResponse. Every check names the tensor and what is wrong, so a client sees
// "input 'x': shape [1, 63] does not match the model's [-1, 64]" rather than a generic failure.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "classification.h"
#include "client_shm.h"
#include "inference/grpc_service.pb.h"
#include "tessera/common/status.h"
#include "tessera/dispatch/request.h"
#include "tessera/dispatch/sequence_batcher.h"
#include "tessera/repository/model_config.h"

namespace tessera::frontend {

// An output the client asked to receive in one of its shared-memory regions.
struct ShmOutput {
  std::string name;
  ClientShmSlice slice;
};

// What a request's views point into besides the wire message, owned by the RPC and kept alive until
// the request completes (the dispatch::Request only views its inputs).
struct RequestStorage {
  std::vector<std::string> converted;  // bytes converted from typed `contents`
  // Inputs given in client shared memory, copied out of it (the client may truncate its object).
  std::vector<std::unique_ptr<std::byte[]>> shm_input_copies;
  std::vector<ShmOutput> shm_outputs;
  std::vector<ClassifiedOutput> classified;  // outputs answered as their top classes
  // The model's outputs whose config has a `reshape`: answered in the config's dims.
  std::vector<repository::TensorConfig> reshaped_outputs;
  bool batched = false;  // the model's first dim is the batch dim
};

// Validates `wire` against `config` and builds the request (without `done` / `arrival_ns`).
// BYTES inputs stay in their serialized form (tessera/common/bytes_tensor.h), their element count
// checked against the shape. Errors are INVALID_ARGUMENT (NOT_FOUND or PERMISSION_DENIED
// for a shared-memory region that is not registered or not allowed). Inputs come from
// raw_input_contents, typed contents or a region of `shm` (null: none is registered). The views
// point into `wire` and `storage`, which must outlive the request.
StatusOr<std::unique_ptr<dispatch::Request>> BuildDispatchRequest(
    const inference::ModelInferRequest& wire, const repository::ModelConfig& config,
    RequestStorage* storage, const ClientShmRegistry* shm = nullptr);

// A stateful model's request parameters: `sequence_id` (an unsigned integer or a string),
// `sequence_start` and `sequence_end` (bools). INVALID_ARGUMENT naming a parameter of the wrong
// type. Absent ones stay 0 / false; other models never read them (as in Triton).
StatusOr<dispatch::SequenceFlags> ReadSequenceFlags(const inference::ModelInferRequest& wire);

// Fills `wire` with the outputs: raw_output_contents has one entry per output in the same order
// (moved bytes), left empty for an output written into client shared memory (`storage`), as
// Triton does; an output asked for as a classification is its top classes (classification.h).
// INVALID_ARGUMENT when an output is larger than the window given for it.
Status FillInferResponse(const std::string& model_name, int64_t version, const std::string& id,
                         dispatch::Response response, const RequestStorage& storage,
                         inference::ModelInferResponse* wire);

}  // namespace tessera::frontend
