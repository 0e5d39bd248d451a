// The SLO feasibility rules every planner shares (seed 001 §2.2, §2.4; Nexus SBP).
//
// A model served in rounds of d ms waits at most one round for its batch to form, then runs, so
// its worst-case latency is d + (the round's execution). Rules, with L the scheduled latency
// L(b,p)·interference·margin:
//   saturated (one model, back-to-back batches, d = L):  2·L(b) ≤ SLO, throughput b·1000/L(b);
//   residue   (one model, rate r below saturation):      d = 1000·b/r, L(b) ≤ d, L(b) + d ≤ SLO;
//   round     (models j time-sharing, rates r_j):        b_j = RoundBatch(d, r_j) (⌈d·r_j/1000⌉
//                                                        plus a burst slot for tiny batches, our
//                                                        rule, below), Σ L_j ≤ d,
//                                                        Σ L_j + d ≤ SLO_j for every j.
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <vector>

#include "tessera/scheduler/profile.h"

namespace tessera::scheduler {

// L(b,p)·factor·margin, in ms.
double ScheduledLatencyMs(const ModelProfile& profile, int batch, int partition_pct,
                          double interference_factor, double margin);

// Largest b in [1, max_batch] with 2·L(b) ≤ slo_ms, or 0 when even b = 1 misses.
int MaxSaturatedBatch(const ModelProfile& profile, int partition_pct, double slo_ms,
                      double interference_factor, double margin, int max_batch);

// b·1000 / L(b): requests per second of back-to-back batches of b.
double SaturatedThroughputRps(const ModelProfile& profile, int batch, int partition_pct,
                              double interference_factor, double margin);

// Largest b in [1, max_batch] with L(b) ≤ 1000·b/rate and L(b) + 1000·b/rate ≤ slo_ms, or 0.
int MaxResidueBatch(const ModelProfile& profile, int partition_pct, double rate_rps, double slo_ms,
                    double interference_factor, double margin, int max_batch);

// Burst-aware round batch: our rule, not the paper's (seed 001 §2.4 sizes b = ⌈d·r/1000⌉, the
// mean arrivals per round). With m = d·r/1000, in a round of two or more models (`shared`):
//   b = 1       when m ≤ m₁ = 0.1486 (P(N ≤ 1) ≥ kBurstQuantile for N ~ Poisson(m));
//   b = ⌈m⌉ + 1 when m₁ < m and ⌈m⌉ ≤ kSpareSlotMaxBatch (one spare slot for a Poisson burst);
//   b = ⌈m⌉     above, and always for a lone model.
// Why: with tiny batches the lowest-occupancy round often has Σ L + d = SLO and occupancy ≈ 1, so
// a second request in a round of batch 1 waits a whole round and misses (tessera-sim, scen1 at
// 200 rps: bert_base + googlenet, d = 11 ms, batch 1 each, 7 % of bert late). The per-second
// Poisson headroom of the peak search does not cover this: the relative spread of a round's count,
// 1/√m, is large only for small m. Alternatives measured in tessera-sim (docs/simulator.md,
// "Burst-aware round batch"): b = the Poisson 99 % quantile of the round's count (capped at 3 or 4)
// costs temporal 5-7 % of its peak on traffic and scen3; a spare slot only while ⌈m⌉ = 1 leaves
// bert at 1.1-1.4 % late; this rule keeps every model ≥ 99.6 % within SLO on scen1 and costs at
// most 2.6 % of any peak. Large batches are unchanged. A lone model needs no spare slot: its
// dispatcher starts the next round as soon as a full batch waits (the overflow waits one batch
// latency, not a whole duty; a shared round waits its duty unless every member's batch is full).
inline constexpr double kBurstQuantile = 0.99;
inline constexpr int kSpareSlotMaxBatch = 2;

// The batch a member of a round of `duty_ms` at `rate_rps` plans for (the rule above), ≥ 1.
// Non-decreasing in duty and rate.
int RoundBatch(double duty_ms, double rate_rps, bool shared);

// The largest mean arrivals per round m at which RoundBatch's batch is ≤ k (k ≥ 1): the duties
// where a member's batch steps are d = 1000·RoundBatchMaxMean(k)/r. m₁ for k = 1, k − 1 for
// 2 ≤ k ≤ kSpareSlotMaxBatch, k above; k when not `shared`.
double RoundBatchMaxMean(int k, bool shared);

struct RoundMember {
  const ModelProfile* profile = nullptr;
  double rate_rps = 0;
  double slo_ms = 0;
  double interference_factor = 1;
  // Optional: profile->LatencyMs(b, partition_pct) at index b, precomputed by a caller that
  // evaluates many rounds at one partition (same values, no interpolation).
  const std::vector<double>* latency_by_batch = nullptr;
};

struct Round {
  double duty_ms = 0;
  std::vector<int> batches;          // per member, in member order
  std::vector<double> latencies_ms;  // scheduled latency per member
  double occupancy = 0;              // Σ latency / duty, in (0, 1]
};

// The feasible round with the lowest occupancy (ties: shorter duty), or nullopt when none exists.
// Candidate duties are those at which some member's batch RoundBatch(d, r_j) steps,
// d = 1000·RoundBatchMaxMean(k)/r_j, and,
// between two such steps, the longest duty the SLOs allow, d = min_j SLO_j − Σ L (a round
// shorter than the inter-arrival time, batch 1, for tight SLOs at low rates).
std::optional<Round> FitRound(const std::vector<RoundMember>& members, int partition_pct,
                              double margin, int max_batch);

}  // namespace tessera::scheduler
