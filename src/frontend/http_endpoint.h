// The KServe v2 HTTP/REST endpoint (Triton's port 8000): health, server and model metadata, model
// readiness, configuration and statistics, inference (JSON and binary tensor data), repository
// index/load/unload, system shared memory, and log and trace settings, each answering as Triton's
// HTTP endpoint does, with errors as {"error": message}. Inference runs through the same
// InferSubmitter as gRPC.
//
// Served by libmicrohttpd's epoll loop (a few I/O threads): a connection holds no thread while its
// client is slow or idle. A whole request is suspended from that loop and handed to a worker
// (http.threads), which inflates, parses and routes it; an inference then holds no thread until its
// answer comes, when a worker renders it and the connection resumes to send it. The routes
// themselves are in http_routes.h.
#pragma once

#include <cstdint>
#include <memory>

#include "infer_submitter.h"
#include "inflate_budget.h"
#include "tessera/common/status.h"
#include "tessera/frontend/frontend.h"

namespace tessera::frontend {

class HttpEndpoint {
 public:
  // Listens on options.http_address:http_port; `core`, `submitter` and `inflate_budget` (what
  // compressed bodies may take while inflated) must outlive the endpoint.
  static StatusOr<std::unique_ptr<HttpEndpoint>> Start(const FrontendOptions& options,
                                                       ServerCore* core, InferSubmitter* submitter,
                                                       InflateBudget* inflate_budget);
  virtual ~HttpEndpoint() = default;

  virtual int port() const = 0;
  // Stops accepting; requests still waiting for their answer after `deadline_ms` get the
  // shutdown refusal.
  virtual void Shutdown(int64_t deadline_ms) = 0;
};

}  // namespace tessera::frontend
