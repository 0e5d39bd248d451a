// The inference path both network endpoints share (gRPC and HTTP): a wire ModelInferRequest is
// validated, looked up in the response cache, queued on its model, and answered into a
// ModelInferResponse. The endpoints differ only in how bytes reach that message and leave it.
// Also holds what the endpoints must see alike: the client shared-memory regions (a region
// registered over HTTP serves a gRPC request), the request tracer, and the shutdown refusals.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "client_shm.h"
#include "inference/grpc_service.pb.h"
#include "request_tracer.h"
#include "response_cache.h"
#include "tessera/common/status.h"
#include "tessera/frontend/server_core.h"

namespace tessera::frontend {

class InferSubmitter {
 public:
  // `core` must outlive the submitter; `cache_bytes` 0 = no response cache.
  InferSubmitter(ServerCore* core, bool allow_client_shm, std::unique_ptr<RequestTracer> tracer,
                 uint64_t cache_bytes);

  using Finish = std::function<void(const Status&)>;

  // What an endpoint knows of a request besides its message.
  struct CallContext {
    // Whether the client has gone (may be empty): a request still queued is then dropped.
    std::function<bool()> cancelled;
    // Its trace's event for the request having been read: "GRPC_WAITREAD_END", "HTTP_RECV_END".
    const char* received_event = "";
    // The W3C trace context headers it carried ("" when absent); read in mode opentelemetry.
    std::string traceparent;
    std::string tracestate;
  };

  // Validates and queues one inference; `finish` runs exactly once, after `response` is filled,
  // or at once with the error. `request` and `response` must stay alive until then.
  void Submit(const inference::ModelInferRequest& request, inference::ModelInferResponse* response,
              Finish finish, CallContext context);

  // Answers `finish` with the shutdown refusal, counted for RefuseUntilQuiet.
  void Refuse(const Finish& finish);
  // The refusal: worded apart from every error an accepted request can get, so that a client (and
  // the drain test) can tell "refused at the door" from "accepted, then lost".
  static Status ShuttingDown();

  uint64_t last_refusal_ns() const { return last_refusal_ns_.load(std::memory_order_relaxed); }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

  ClientShmRegistry& client_shm() { return client_shm_; }
  RequestTracer& tracer() { return *tracer_; }
  Status FlushTraces() { return tracer_->Flush(); }

 private:
  ServerCore* const core_;
  ClientShmRegistry client_shm_;
  const std::shared_ptr<RequestTracer> tracer_;
  const std::shared_ptr<ResponseCache> cache_;  // null: no response cache
  std::atomic<uint64_t> last_refusal_ns_{0};
  std::atomic<uint64_t> refused_{0};
};

}  // namespace tessera::frontend
