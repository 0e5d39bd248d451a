// What /metrics shows beside the per-model metrics (which the frontend reads from the model
// statistics): the control loop's plans and switches, each executor's input pool, and the host's
// CPU and memory.
#pragma once

#include "control_loop.h"
#include "executor_pool.h"
#include "host_metrics.h"
#include "tessera/frontend/metrics.h"

namespace tessera::server {

// Read at each scrape. Null `control` (no control loop) or `host` (CPU metrics off) leave their
// part out; what is given must outlive the source.
frontend::MetricsSource ServerMetrics(const ControlLoop* control, const ExecutorPool* pool,
                                      const HostMetrics* host);

}  // namespace tessera::server
