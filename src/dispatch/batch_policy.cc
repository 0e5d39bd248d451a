#include "tessera/dispatch/batch_policy.h"

#include <algorithm>
#include <cstddef>
#include <optional>

namespace tessera::dispatch {

BatchDecision DecideBatch(const std::vector<PendingRequest>& pending, uint64_t now_ns,
                          const BatchPolicyOptions& options) {
  BatchDecision decision;
  if (pending.empty()) return decision;
  if (!options.batching || options.max_batch_size <= 0) {
    decision.count = 1;
    return decision;
  }

  const int64_t max_rows = options.max_batch_size;
  const int64_t largest_preferred =
      options.preferred_batch_sizes.empty() ? max_rows : options.preferred_batch_sizes.back();

  // Scan in arrival order while the batch still fits and shapes agree; remember the longest
  // prefix whose row count is a preferred size.
  int64_t rows = 0;
  size_t count = 0;
  size_t preferred_count = 0;
  bool blocked = false;  // the next request cannot join (overflow or different shape)
  for (const PendingRequest& request : pending) {
    if (rows + request.rows > max_rows || request.shape_key != pending.front().shape_key) {
      blocked = true;
      break;
    }
    rows += request.rows;
    ++count;
    if (std::find(options.preferred_batch_sizes.begin(), options.preferred_batch_sizes.end(),
                  rows) != options.preferred_batch_sizes.end()) {
      preferred_count = count;
    }
  }
  if (count == 0) {
    // The oldest request alone exceeds max_batch_size; the frontend rejects those, but never stall.
    decision.count = 1;
    return decision;
  }

  const uint64_t oldest_arrival = pending.front().arrival_ns;
  const uint64_t age_ns = now_ns > oldest_arrival ? now_ns - oldest_arrival : 0;
  const bool delay_expired = age_ns >= options.max_queue_delay_ns;

  if (preferred_count > 0 && !delay_expired && !options.preferred_batch_sizes.empty()) {
    decision.count = preferred_count;
    return decision;
  }
  if (blocked || rows >= largest_preferred || options.max_queue_delay_ns == 0 || delay_expired) {
    decision.count = count;
    return decision;
  }
  decision.wake_at_ns = oldest_arrival + options.max_queue_delay_ns;
  return decision;
}

BatchDecision DecideDutyCycleBatch(const std::vector<PendingRequest>& pending, uint64_t now_ns,
                                   uint64_t build_start_ns, const DutyCyclePolicy& policy) {
  BatchDecision decision;
  if (pending.empty()) return decision;
  const int64_t max_rows = std::max<int64_t>(policy.max_rows, 1);
  int64_t rows = 0;
  size_t count = 0;
  bool blocked = false;
  for (const PendingRequest& request : pending) {
    if (request.shape_key != pending.front().shape_key ||
        (count > 0 && rows + request.rows > max_rows)) {
      blocked = true;
      break;
    }
    rows += request.rows;
    ++count;
    if (rows >= max_rows) break;
  }
  const uint64_t round_end = build_start_ns + policy.duty_ns;
  if (blocked || rows >= max_rows || policy.duty_ns == 0 || now_ns >= round_end) {
    decision.count = count;
    return decision;
  }
  decision.wake_at_ns = round_end;
  return decision;
}

SizedDecision DecideSizedBatches(const std::vector<PendingRequest>& pending,
                                 const std::vector<SizedWorker>& workers, const BatchRule& rule) {
  SizedDecision decision;
  std::vector<bool> idle(workers.size());
  int64_t largest_any = 0;
  for (size_t w = 0; w < workers.size(); ++w) {
    idle[w] = workers[w].idle;
    largest_any = std::max(largest_any, workers[w].batch_size);
  }
  size_t next = 0;  // first pending request not handed out yet
  while (next < pending.size()) {
    // R: rows of the leading run of the oldest request's shape, counted only as far as matters.
    int64_t ready = 0;
    for (size_t i = next; i < pending.size() && ready <= largest_any; ++i) {
      if (pending[i].shape_key != pending[next].shape_key) break;
      ready += pending[i].rows;
    }
    // Largest idle ≤ R; else the smallest idle.
    std::optional<size_t> pick;
    for (size_t w = 0; w < workers.size(); ++w) {
      if (!idle[w] || workers[w].batch_size > ready) continue;
      if (!pick || workers[w].batch_size > workers[*pick].batch_size) pick = w;
    }
    if (!pick) {
      for (size_t w = 0; w < workers.size(); ++w) {
        if (idle[w] && (!pick || workers[w].batch_size < workers[*pick].batch_size)) pick = w;
      }
    }
    if (!pick) break;  // nobody idle
    const int64_t oldest_rows = pending[next].rows;
    if (oldest_rows > workers[*pick].batch_size) {
      std::optional<size_t> fits;
      for (size_t w = 0; w < workers.size(); ++w) {
        if (idle[w] && workers[w].batch_size >= oldest_rows &&
            (!fits || workers[w].batch_size < workers[*fits].batch_size)) {
          fits = w;
        }
      }
      if (fits) {
        pick = fits;
      } else if (largest_any >= oldest_rows) {
        break;  // a busy worker can take it when it finishes
      } else {
        for (size_t w = 0; w < workers.size(); ++w) {
          if (idle[w] && workers[w].batch_size > workers[*pick].batch_size) pick = w;
        }
      }
    }
    const int64_t size = workers[*pick].batch_size;
    // The rule needs at most size + 1 requests to decide (each has ≥ 1 row).
    const size_t end = std::min(pending.size(), next + static_cast<size_t>(size) + 1);
    const std::vector<PendingRequest> window(pending.begin() + static_cast<ptrdiff_t>(next),
                                             pending.begin() + static_cast<ptrdiff_t>(end));
    const BatchDecision batch = rule(window, size);
    if (batch.count == 0) {
      decision.wake_at_ns = batch.wake_at_ns;
      break;
    }
    decision.handouts.push_back(SizedHandout{*pick, batch.count});
    idle[*pick] = false;
    next += batch.count;
  }
  return decision;
}

bool MissesSlo(uint64_t arrival_ns, uint64_t now_ns, uint64_t slo_ns, uint64_t expected_run_ns) {
  if (slo_ns == 0 || expected_run_ns == 0) return false;
  return now_ns + expected_run_ns > arrival_ns + slo_ns;
}

}  // namespace tessera::dispatch
