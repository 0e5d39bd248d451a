// The dynamic-batching decision, as a pure function so every rule is unit-testable.
// Semantics follow Triton's dynamic batcher (../shared/reference/serving-systems.md §3.2): a batch
// is formed when an instance is free, from requests in arrival order, never past max_batch_size and
// never mixing non-batch shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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

// A planned gpulet lane's round (seed 001 §2.2, Fig. 2; docs/architecture.md "Round"): the batch
// that builds while the previous one runs collects requests for at most `duty_ns`, or until it
// holds `max_rows` rows (the plan's batch size), whichever comes first.
struct DutyCyclePolicy {
  int64_t max_rows = 1;  // planned batch size, ≥ 1
  uint64_t duty_ns = 0;  // round length; 0 = no round: dispatch as soon as the lane is free
};

// The duty-cycle decision for a lane whose runner is free now. `build_start_ns` is when the batch
// now building began collecting: the later of the lane's previous dispatch and the oldest pending
// arrival. Requests join in arrival order while shapes agree and rows stay ≤ max_rows; a single
// request larger than max_rows still runs, alone (the frontend bounds it by max_batch_size).
BatchDecision DecideDutyCycleBatch(const std::vector<PendingRequest>& pending, uint64_t now_ns,
                                   uint64_t build_start_ns, const DutyCyclePolicy& policy);

// Multi-granularity workers (E²bird, seed 002 §1.4–1.5): a lane with several workers of fixed
// batch sizes ("granularities", powers of two) hands batches out E²bird-style. With R rows ready
// (the leading run of requests of the oldest one's shape), the idle worker with the largest size
// ≤ R takes the first requests up to its size; the next-largest idle worker takes from the rest,
// and so on, each batch the next consecutive run of the queue. When R is below every idle worker's
// size, the smallest idle worker takes what is there under the lane's normal rule (`rule`, called
// with that worker's size as its row limit: a queue delay or duty cycle may make it wait). An
// oldest request larger than the chosen worker waits for the smallest worker it fits (idle now,
// or busy: then nothing is handed out until one finishes); a request larger than every worker
// runs alone on the largest idle one, as in the other rules.
struct SizedWorker {
  int64_t batch_size = 1;  // rows, ≥ 1
  bool idle = true;
};
struct SizedHandout {
  size_t worker = 0;  // index into the workers
  size_t count = 0;   // the next `count` pending requests, after the earlier handouts'
};
struct SizedDecision {
  std::vector<SizedHandout> handouts;  // in queue order
  uint64_t wake_at_ns = 0;             // as BatchDecision, when the rule made the last one wait
};
// The lane's batching rule for a prefix of the queue, with a row limit: DecideBatch or
// DecideDutyCycleBatch with that limit.
using BatchRule =
    std::function<BatchDecision(const std::vector<PendingRequest>& pending, int64_t max_rows)>;
SizedDecision DecideSizedBatches(const std::vector<PendingRequest>& pending,
                                 const std::vector<SizedWorker>& workers, const BatchRule& rule);

// SLO-aware dropping: true when a request that arrived at `arrival_ns` can no longer finish within
// `slo_ns` if its batch starts now and runs for `expected_run_ns`. Never with slo_ns == 0 (no SLO)
// or expected_run_ns == 0 (no planned latency to judge by).
bool MissesSlo(uint64_t arrival_ns, uint64_t now_ns, uint64_t slo_ns, uint64_t expected_run_ns);

}  // namespace tessera::dispatch
