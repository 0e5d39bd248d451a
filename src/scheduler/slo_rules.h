// The SLO feasibility rules every planner shares (seed 001 §2.2, §2.4; Nexus SBP).
//
// A model served in rounds of d ms waits at most one round for its batch to form, then runs, so
// its worst-case latency is d + (the round's execution). Rules, with L the scheduled latency
// L(b,p)·interference·margin:
//   saturated (one model, back-to-back batches, d = L):  2·L(b) ≤ SLO, throughput b·1000/L(b);
//   residue   (one model, rate r below saturation):      d = 1000·b/r, L(b) ≤ d, L(b) + d ≤ SLO;
//   round     (models j time-sharing, rates r_j):        b_j = ⌈d·r_j/1000⌉, Σ L_j ≤ d,
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
// Candidate duties are those at which some member's batch ⌈d·r/1000⌉ steps, d = 1000·k/r_j, and,
// between two such steps, the longest duty the SLOs allow, d = min_j SLO_j − Σ L (a round
// shorter than the inter-arrival time, batch 1, for tight SLOs at low rates).
std::optional<Round> FitRound(const std::vector<RoundMember>& members, int partition_pct,
                              double margin, int max_batch);

}  // namespace tessera::scheduler
