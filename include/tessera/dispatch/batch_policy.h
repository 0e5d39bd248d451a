// The dynamic-batching decision, as a pure function so every rule is unit-testable.
// Semantics follow Triton's dynamic batcher (../shared/reference/serving-systems.md §3.2): a batch
// is formed when an instance is free, from requests in arrival order, never past max_batch_size and
// never mixing non-batch shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::dispatch {

struct BatchPolicyOptions {
  bool batching = false;  // false: each request runs alone (no dynamic_batching in the config)
  int64_t max_batch_size = 0;
  std::vector<int64_t> preferred_batch_sizes;  // ascending; empty = only max_batch_size
  uint64_t max_queue_delay_ns = 0;
};

// What the batcher knows about a pending request.
struct PendingRequest {
  int64_t rows = 1;        // its batch_size
  uint64_t arrival_ns = 0;
  uint64_t shape_key = 0;  // equal keys = equal non-batch shapes (batchable together)
};

struct BatchDecision {
  // > 0: dispatch the first `count` pending requests now.
  size_t count = 0;
  // When count == 0: re-decide at this time even if nothing arrives (0 = only on arrival).
  uint64_t wake_at_ns = 0;
};

BatchDecision DecideBatch(const std::vector<PendingRequest>& pending, uint64_t now_ns,
                          const BatchPolicyOptions& options);

}  // namespace tessera::dispatch
