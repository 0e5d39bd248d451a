// What the frontend hands the dispatcher and gets back: one inference request and its response.
// Independent of gRPC so the dispatcher is testable without a network.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
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

struct Request;

// Where a traced request's sub-requests report: the steps an ensemble makes of it, and their own
// steps in turn (Triton traces each as a child of the request it serves). The frontend's request
// tracer stands behind it. Shared by a request and its steps; called from any thread.
class StepTraceSink {
 public:
  virtual ~StepTraceSink() = default;
  // The trace id of a new step.
  virtual uint64_t NewStepId() = 0;
  // Step `step_id` of the trace `parent_id`, a request `step` to `model` version `version`, was
  // answered with `result`. `step.inputs` still point at the step's tensors.
  virtual void StepDone(uint64_t step_id, uint64_t parent_id, const std::string& model,
                        int64_t version, const Request& step, const StatusOr<Response>& result) = 0;
};

// A traced request's place in its trace: empty `sink` = not traced.
struct RequestTrace {
  std::shared_ptr<StepTraceSink> sink;
  uint64_t id = 0;  // the trace id its steps name as their parent
};

// A request's inputs copied ahead of its batch into an executor's input pool (E²bird, seed 002):
// made by BatchRunner::Stage, read by the same runner's Run. Destroying it gives the pool space
// back, so a request dropped or moved to another runner never leaks a slot. Opaque to the queue.
class StagedInputs {
 public:
  virtual ~StagedInputs() = default;
};

// An optional input (repository::TensorConfig::optional) that a request leaves out: its name and
// data type, no shape, no bytes. Requests that leave out different inputs never share a batch
// (ShapeKey), so a batch either has an input or runs without it.
inline TensorView AbsentInput(std::string name, DataType dtype) {
  return TensorView{std::move(name), dtype, {}, nullptr, 0};
}
// A given input always has a shape or bytes: a scalar has one element's bytes.
inline bool IsAbsent(const TensorView& input) {
  return input.data == nullptr && input.byte_size == 0 && input.shape.empty();
}

struct Request {
  // One view per model input, in the model's declared input order, already validated by the
  // frontend (dtype, shape, byte size); an optional input left out is an AbsentInput.
  // Non-owning: the caller keeps the bytes alive until `done`.
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
  // Set when the request is traced, so that the requests made for it (ensemble steps) are too.
  RequestTrace trace;
};

}  // namespace tessera::dispatch
