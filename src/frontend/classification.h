// Triton's classification extension: a request asks for an output's top k classes
// (`parameters["classification"]` on a requested output, tritonclient's `class_count`), and the
// answer is a BYTES tensor of "value:index" strings, or "value:index:label" when the output has a
// label_filename, highest value first.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inference/grpc_service.pb.h"
#include "tessera/common/status.h"
#include "tessera/dispatch/request.h"
#include "tessera/repository/model_config.h"

namespace tessera::frontend {

struct ClassifiedOutput {
  std::string name;
  int64_t count = 0;     // classes per row asked for
  bool batched = false;  // the first dim is the batch: one row per batch item
  std::shared_ptr<const std::vector<std::string>> labels;  // null: no label_filename
};

// The classification asked for on `requested`, or nullopt when there is none. INVALID_ARGUMENT
// naming the output when the count is not a positive integer or the output's data type is not a
// number Tessera classifies (FP32, FP64, and the integer types).
StatusOr<std::optional<ClassifiedOutput>> ReadClassification(
    const inference::ModelInferRequest::InferRequestedOutputTensor& requested,
    const repository::TensorConfig& output, bool batched);

// Replaces `output` by its classification: BYTES, shape [rows, k] (batched) or [k], with k the
// count asked for, at most the number of classes. Ties go to the lower index.
Status Classify(const ClassifiedOutput& classified, dispatch::OutputTensor& output);

}  // namespace tessera::frontend
