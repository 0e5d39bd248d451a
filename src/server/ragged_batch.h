// Ragged batching's steps at batch time (Triton's allow_ragged_batch, batch_input and
// batch_output, docs/model-config.md): the flat inputs' shapes, the batch inputs the server makes,
// and the outputs scattered back to the requests by their inputs' shapes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/common/status.h"
#include "tessera/common/tensor.h"
#include "tessera/dispatch/request.h"
#include "tessera/repository/model_config.h"

namespace tessera::server {

// What a model's batches need for ragged batching, resolved from its config.
struct RaggedBatching {
  // By model-file input index: the model takes the input flat, the batch's elements back to back.
  std::vector<bool> flat_inputs;
  struct MadeInput {
    repository::BatchInputConfig config;
    size_t source = 0;  // index of its source input in a request's inputs
  };
  std::vector<MadeInput> batch_inputs;
  struct Scatter {
    std::string output;
    size_t source = 0;  // index of its source input in a request's inputs
    Shape dims;         // the output's dims, batch dim (-1) first
  };
  std::vector<Scatter> scatters;

  const Scatter* FindScatter(const std::string& output) const;
};

// Null when the model has no ragged batching (config.ragged_batching() false).
std::shared_ptr<const RaggedBatching> MakeRaggedBatching(const repository::ModelConfig& config);

// A tensor the server makes for a batch.
struct MadeTensor {
  DataType dtype = DataType::kInvalid;
  Shape shape;
  std::string bytes;
};

// The batch input `config` for a batch whose requests' source input has `source_shapes` (each
// with its batch dim first), as repository::BatchInputConfig describes per kind.
MadeTensor MakeBatchInput(const repository::BatchInputConfig& config,
                          const std::vector<Shape>& source_shapes);

// One request's part of a scattered output: `dims` (batch dim first) with each -1 taken from the
// same dim of `source_shape`.
Shape ScatterShape(const Shape& dims, const Shape& source_shape);

// Splits `data` (`byte_size` bytes of `dtype`, the model's flat output `scatter.output` for the
// batch `requests`) into each request's part, appended to `responses[i].outputs`. INTERNAL naming
// both sizes when the output's size is not the sum of the parts.
Status ScatterOutput(const RaggedBatching::Scatter& scatter, const std::string& model_name,
                     DataType dtype, const char* data, uint64_t byte_size,
                     const std::vector<const dispatch::Request*>& requests,
                     std::vector<dispatch::Response>& responses);

}  // namespace tessera::server
