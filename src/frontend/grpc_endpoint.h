// The KServe v2 / Triton gRPC endpoint (inference.GRPCInferenceService): every RPC, Triton's
// streaming, statistics, repository, shared-memory, log and trace extensions. Async (grpc++
// callback API): no thread is held per request while it waits in a queue.
#pragma once

#include <cstdint>
#include <memory>

#include "infer_submitter.h"
#include "inflate_budget.h"
#include "tessera/common/status.h"
#include "tessera/frontend/frontend.h"

namespace tessera::frontend {

class GrpcEndpoint {
 public:
  // Listens on options.grpc_address:grpc_port; `core`, `submitter` and `inflate_budget` (what
  // compressed requests may take while inflated) must outlive the endpoint.
  static StatusOr<std::unique_ptr<GrpcEndpoint>> Start(const FrontendOptions& options,
                                                       ServerCore* core, InferSubmitter* submitter,
                                                       InflateBudget* inflate_budget);
  virtual ~GrpcEndpoint() = default;

  virtual int port() const = 0;
  // grpc.health.v1.Health answers NOT_SERVING from now on (the shutdown's drain has begun).
  virtual void StopServing() = 0;
  // grpc.health.v1.Health answers SERVING or NOT_SERVING (ServerCore::HealthReady); ignored once
  // StopServing was called.
  virtual void SetHealth(bool serving) = 0;
  // Ends open streams with the shutdown refusal, stops accepting new RPCs, waits up to
  // `deadline_ms` for running ones, then cancels the rest.
  virtual void Shutdown(int64_t deadline_ms) = 0;
};

}  // namespace tessera::frontend
