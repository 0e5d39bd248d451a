// What the frontend hands the dispatcher and gets back: one inference request and its response.
// Independent of gRPC so the dispatcher is testable without a network.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/common/status.h"
#include "tessera/common/tensor.h"

namespace tessera::dispatch {

struct OutputTensor {
  std::string name;
  DataType dtype = DataType::kInvalid;
  Shape shape;
  std::string bytes;  // std::string so the frontend can move it into raw_output_contents
};

// Durations of one request's life inside the server, in nanoseconds (Triton's statistics split).
struct RequestTiming {
  uint64_t queue_ns = 0;           // enqueue -> its batch starts
  uint64_t compute_input_ns = 0;   // gathering inputs into the executor's ring (+ executor input)
  uint64_t compute_infer_ns = 0;   // the model run
  uint64_t compute_output_ns = 0;  // outputs into the ring and out to this response
};

struct Response {
  std::vector<OutputTensor> outputs;  // in the order requested (all model outputs when none named)
  RequestTiming timing;
  int64_t batch_size = 0;  // rows in the executed batch this request was part of
};

// Called exactly once per request, from any thread.
using CompletionCallback = std::function<void(StatusOr<Response>)>;

// A request's inputs copied ahead of its batch into an executor's input pool (E²bird, seed 002):
// made by BatchRunner::Stage, read by the same runner's Run. Destroying it gives the pool space
// back, so a request dropped or moved to another runner never leaks a slot. Opaque to the queue.
class StagedInputs {
 public:
  virtual ~StagedInputs() = default;
};

struct Request {
  // One view per model input, in the model's declared input order, already validated by the
  // frontend (dtype, shape, byte size). Non-owning: the caller keeps the bytes alive until `done`.
  std::vector<TensorView> inputs;
  // Output names to return; empty = every output of the model.
  std::vector<std::string> requested_outputs;
  // Rows along the leading batch dim when the model batches (max_batch_size > 0); 1 otherwise.
  int64_t batch_size = 1;
  uint64_t arrival_ns = 0;  // MonotonicNs() at arrival
  CompletionCallback done;
  // Whether the client has given up on the request (its call was cancelled, or its deadline
  // passed): one still queued is then answered CANCELLED instead of being run. Empty = never.
  // Called from the queue's threads while the request is queued.
  std::function<bool()> cancelled;
  // The model's queue timeout for this request (default_queue_policy): still queued this long
  // after `arrival_ns`, it is answered UNAVAILABLE instead of being run. 0 = never.
  uint64_t queue_timeout_ns = 0;
  // Triton's priority level: 1 is served first, then 2, ...; requests of one level in arrival
  // order. 0 = the model has no priority levels (plain arrival order).
  uint32_t priority = 0;
  // Set by the runner the request was routed to, when it copied the inputs ahead; null otherwise
  // (Run then gathers from `inputs`).
  std::unique_ptr<StagedInputs> staged;
};

}  // namespace tessera::dispatch
