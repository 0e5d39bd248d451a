// Prometheus text endpoint (`GET /metrics`) with Triton's per-model metric names (serving-systems.md
// §3.1), computed at scrape time from the same ModelStats the ModelStatistics RPC reads.
#pragma once

#include <memory>
#include <string>

#include "tessera/common/status.h"
#include "tessera/frontend/server_core.h"

namespace tessera::frontend {

class MetricsEndpoint {
 public:
  // Binds `address:port`; `core` must outlive the endpoint.
  static StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& address, int port,
                                                          const ServerCore* core);
  virtual ~MetricsEndpoint() = default;
};

}  // namespace tessera::frontend
