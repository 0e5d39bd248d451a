// Prometheus text endpoint (`GET /metrics`) with Triton's per-model metric names (serving-systems.md
// §3.1), computed at scrape time from the same ModelStats the ModelStatistics RPC reads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/common/status.h"
#include "tessera/frontend/server_core.h"

namespace tessera::frontend {

// One sample of a server-wide metric (the control loop's plans and switches), read at scrape time.
struct MetricSample {
  std::string name;  // samples with one name form one family; help/counter from its first sample
  std::string help;
  bool counter = false;  // false: gauge
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
};
using MetricsSource = std::function<std::vector<MetricSample>()>;

struct MetricsOptions {
  std::string address = "0.0.0.0";
  int port = 8002;
  // false: no cumulative latency counters (nv_inference_*_duration_us, nv_cache_*_per_model), as
  // Triton's --metrics-config counter_latencies=false. The quantile summaries are shown for the
  // model versions whose ModelStats keep them.
  bool counter_latencies = true;
};

class MetricsEndpoint {
 public:
  // Binds `options.address:port`; `core` (and what `extra` reads) must outlive the endpoint.
  static StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const MetricsOptions& options,
                                                          const ServerCore* core,
                                                          MetricsSource extra = {});
  virtual ~MetricsEndpoint() = default;
};

}  // namespace tessera::frontend
