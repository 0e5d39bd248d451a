#include "infer_submitter.h"

#include <optional>
#include <string>
#include <utility>

#include "infer_request.h"
#include "tessera/common/clock.h"

namespace tessera::frontend {

InferSubmitter::InferSubmitter(ServerCore* core, bool allow_client_shm,
                               std::unique_ptr<RequestTracer> tracer, uint64_t cache_bytes)
    : core_(core),
      client_shm_(allow_client_shm),
      tracer_(std::move(tracer)),
      cache_(cache_bytes > 0 ? std::make_shared<ResponseCache>(cache_bytes) : nullptr) {}

Status InferSubmitter::ShuttingDown() {
  return absl::UnavailableError(
      "server is shutting down: new requests are refused while accepted ones drain");
}

void InferSubmitter::Refuse(const Finish& finish) {
  last_refusal_ns_.store(MonotonicNs(), std::memory_order_relaxed);
  refused_.fetch_add(1, std::memory_order_relaxed);
  finish(ShuttingDown());
}

void InferSubmitter::Submit(const inference::ModelInferRequest& request,
                            inference::ModelInferResponse* response, Finish finish,
                            CallContext context) {
  const uint64_t arrival_ns = MonotonicNs();
  if (!core_->IsReady()) return Refuse(finish);
  auto model = core_->GetReadyModel(request.model_name(), request.model_version());
  if (!model.ok()) return finish(model.status());

  auto storage = std::make_shared<RequestStorage>();
  auto built = BuildDispatchRequest(request, *model->config, storage.get(), &client_shm_);
  if (!built.ok()) {
    model->stats->RecordFailure("OTHER", MonotonicNs() - arrival_ns);
    return finish(built.status());
  }
  std::unique_ptr<dispatch::Request> dispatch_request = std::move(built).value();
  dispatch::SequenceFlags sequence;
  if (model->sequences) {
    StatusOr<dispatch::SequenceFlags> flags = ReadSequenceFlags(request);
    if (!flags.ok()) {
      model->stats->RecordFailure("OTHER", MonotonicNs() - arrival_ns);
      return finish(flags.status());
    }
    sequence = *std::move(flags);
  }
  dispatch_request->arrival_ns = arrival_ns;
  dispatch_request->cancelled = std::move(context.cancelled);
  std::optional<ResponseCacheKey> cache_key;
  uint64_t lookup_ns = 0;
  if (cache_ && model->config->response_cache) {
    cache_key = ResponseCache::KeyOf(model->name, model->load_id, *dispatch_request);
    std::optional<dispatch::Response> hit = cache_->Lookup(*cache_key);
    lookup_ns = MonotonicNs() - arrival_ns;  // the request's checks included, as in Triton
    if (hit) {
      Status filled = FillInferResponse(model->name, model->version, request.id(), std::move(*hit),
                                        *storage, response);
      const uint64_t request_ns = MonotonicNs() - arrival_ns;
      if (filled.ok()) model->stats->RecordCacheHit(request_ns, request_ns);
      if (!filled.ok()) model->stats->RecordFailure("OTHER", request_ns);
      return finish(filled);
    }
  }
  // Held by a traced request's answer (which may come after the service is gone), null otherwise.
  std::optional<TraceParent> trace_parent;
  if (!context.traceparent.empty() && tracer_->opentelemetry()) {
    trace_parent = ParseTraceParent(context.traceparent, context.tracestate);
  }
  const TraceLevels trace = tracer_->Sample(model->name, trace_parent.has_value());
  std::shared_ptr<RequestTracer> tracer = trace ? tracer_ : nullptr;
  const uint64_t queue_start_ns = tracer ? MonotonicNs() : 0;
  // An ensemble's steps are traced as children of this trace, so its id is taken now.
  uint64_t trace_id = 0;
  if (tracer && !model->config->ensemble_steps.empty()) {
    trace_id = tracer->NewTraceId();
    dispatch_request->trace = {
        std::make_shared<TracedSteps>(tracer, trace, request.id(), trace_id, trace_parent),
        trace_id};
  }
  // Level TENSORS: the inputs as they are queued (client shared memory may change after).
  std::vector<TracedTensor> traced_inputs;
  if (trace.tensors) {
    for (const TensorView& input : dispatch_request->inputs) {
      if (dispatch::IsAbsent(input)) continue;  // an optional input the request leaves out
      traced_inputs.push_back(
          TraceTensor("TENSOR_QUEUE_INPUT", input.name, input.dtype, input.shape,
                      std::string_view(static_cast<const char*>(input.data), input.byte_size)));
    }
  }

  // Set again if a reload moves the request to a newer version before it is queued.
  auto served_version = std::make_shared<int64_t>(model->version);
  // Holds only what the answer needs: capturing the queue would make it own itself.
  // The cache, when the answer is to be kept, and the stats its miss is counted in.
  auto cache = cache_key ? cache_ : nullptr;
  dispatch_request->done = [finish, response, storage, served_version, name = model->name,
                            id = request.id(), tracer = std::move(tracer), trace,
                            traced_inputs = std::move(traced_inputs), arrival_ns, queue_start_ns,
                            received_event = context.received_event, trace_id,
                            trace_parent = std::move(trace_parent), cache, cache_key, lookup_ns,
                            stats = model->stats](StatusOr<dispatch::Response> result) mutable {
    Status status = result.status();
    dispatch::RequestTiming timing;
    std::vector<TracedTensor> traced = std::move(traced_inputs);
    if (result.ok()) {
      timing = result->timing;
      if (trace.tensors) {
        for (const dispatch::OutputTensor& output : result->outputs) {
          traced.push_back(TraceTensor("TENSOR_BACKEND_OUTPUT", output.name, output.dtype,
                                       output.shape, output.bytes));
        }
      }
      if (cache) {
        const uint64_t insert_start = MonotonicNs();
        cache->Insert(*cache_key, *result);
        stats->RecordCacheMiss(lookup_ns + (MonotonicNs() - insert_start));
      }
      status = FillInferResponse(name, *served_version, id, std::move(result).value(), *storage,
                                 response);
    }
    if (tracer) {
      TraceRecord record = MakeTrace(name, *served_version, id, arrival_ns, queue_start_ns,
                                     result.ok() ? &timing : nullptr, status);
      if (!trace.timestamps) record.timestamps.clear();
      record.tensors = std::move(traced);
      record.received_event = received_event;
      record.parent = std::move(trace_parent);
      record.id = trace_id;
      tracer->Record(std::move(record));
    }
    finish(status);
  };
  Status enqueued = model->sequences
                        ? model->sequences->Enqueue(std::move(dispatch_request), sequence)
                        : model->queue->Enqueue(std::move(dispatch_request));
  if (enqueued.code() == absl::StatusCode::kAborted && !core_->IsReady()) {
    // Shutdown began after the check above and closed the queue: refused, not lost.
    return Refuse(finish);
  }
  if (enqueued.code() == absl::StatusCode::kAborted) {
    // The version was swapped out between lookup and enqueue (a reload): the new one serves it.
    auto current = core_->GetReadyModel(request.model_name(), request.model_version());
    if (current.ok()) {
      *served_version = current->version;
      enqueued = current->sequences
                     ? current->sequences->Enqueue(std::move(dispatch_request), sequence)
                     : current->queue->Enqueue(std::move(dispatch_request));
    } else {
      enqueued = current.status();
    }
    if (enqueued.code() == absl::StatusCode::kAborted) {
      enqueued = absl::UnavailableError(enqueued.message());
    }
  }
  if (!enqueued.ok()) {
    // A stateful model's refusals of a request's sequence fields are the client's error.
    model->stats->RecordFailure(
        enqueued.code() == absl::StatusCode::kInvalidArgument ? "OTHER" : "REJECTED",
        MonotonicNs() - arrival_ns);
    finish(enqueued);
  }
}

}  // namespace tessera::frontend
