// The KServe v2 HTTP/REST endpoint (Triton's port 8000): health, server and model metadata, model
// readiness, configuration and statistics, inference (JSON and binary tensor data), repository
// index/load/unload, system shared memory, and log and trace settings, each answering as Triton's
// HTTP endpoint does, with errors as {"error": message}. Inference runs through the same
// InferSubmitter as gRPC.
//
// Served by civetweb (the library prometheus-cpp serves /metrics with): one worker thread per
// request in progress, which waits for its answer. HTTP/1.1 allows one request in flight per
// connection, so the thread count caps the busy connections, not the queued requests.
#pragma once

#include <cstdint>
#include <memory>

#include "infer_submitter.h"
#include "tessera/common/status.h"
#include "tessera/frontend/frontend.h"

namespace tessera::frontend {

class HttpEndpoint {
 public:
  // Listens on options.http_address:http_port; `core` and `submitter` must outlive the endpoint.
  static StatusOr<std::unique_ptr<HttpEndpoint>> Start(const FrontendOptions& options,
                                                       ServerCore* core, InferSubmitter* submitter);
  virtual ~HttpEndpoint() = default;

  virtual int port() const = 0;
  // Stops accepting; requests still waiting for their answer after `deadline_ms` get the
  // shutdown refusal.
  virtual void Shutdown(int64_t deadline_ms) = 0;
};

}  // namespace tessera::frontend
