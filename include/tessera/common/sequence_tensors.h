// The tensors a stateful model (Triton's sequence_batching) takes beside a client's own: read from
// the model's config (repository) and filled per request by the sequence batcher (dispatch).
#pragma once

#include <memory>
#include <string>

#include "tessera/common/data_type.h"
#include "tessera/common/tensor.h"

namespace tessera {

// One control input (Triton's sequence_batching.control_input). Its tensor is [1] per request
// ([1, 1] with the batch dim).
struct SequenceControl {
  enum class Kind { kStart, kEnd, kReady, kCorrelationId };
  std::string input_name;
  Kind kind = Kind::kStart;
  // Flags: INT32, FP32 or BOOL, with the values for false and true. The correlation ID: UINT64,
  // INT64, UINT32 or INT32.
  DataType data_type = DataType::kInt32;
  double false_value = 0;
  double true_value = 1;
};

// One implicit state: the model takes it as `input_name` and gives the next one as `output_name`.
// The first request of a sequence gets zeros, or `initial_data`, of `initial_dims`.
struct SequenceState {
  std::string input_name;
  std::string output_name;
  DataType data_type = DataType::kFp32;
  // Without the batch dim; > 0, or -1 for a dim whose size the model may change from request to
  // request (each request gets the shape the one before it gave).
  Shape dims;
  // The initial_state's dims (every dim > 0); empty = none given (StartShape).
  Shape initial_dims = {};
  // Triton's initial_state data_file: a file in the model folder's initial_state/ folder, raw and
  // row-major; read (and its size checked) by the repository scan into `initial_data`.
  std::string initial_data_file = {};
  std::shared_ptr<const std::string> initial_data = nullptr;
};

// The shape of a sequence's first state: the initial_state's dims, else `dims` with each -1 as 1
// (as Triton starts a variable state).
inline Shape StartShape(const SequenceState& state) {
  if (!state.initial_dims.empty()) return state.initial_dims;
  Shape shape = state.dims;
  for (int64_t& dim : shape) dim = dim < 0 ? 1 : dim;
  return shape;
}

}  // namespace tessera
