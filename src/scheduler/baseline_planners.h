// The planners gpulet is compared against (seed 001 §2.2, §2.3, §5.1–5.2; digest §2.8, §5.5),
// built to be as good as their published designs so that the comparison is fair. All share the
// SLO rules of slo_rules.h (saturated 2·L ≤ SLO, residue / time-shared rounds), the latency
// margin, max batch and memory admission of PlannerOptions; rate-0 demands get nothing.
//
// temporal — Nexus-style squishy bin packing (SBP), seed 001 §2.2: whole GPUs only (one gpulet of
//   100 % per GPU, so no interference). Per model, ⌊r/T⌋ saturated GPUs (T = throughput of the
//   largest batch with 2·L(b,100) ≤ SLO), then a residue served by a round. Residues are merged
//   onto shared GPUs when FitRound finds a round for the merged set (≤ max_models_per_gpulet
//   models, memory permitting). Two merge orders are tried and the one using fewer GPUs kept:
//   Nexus' best-fit decreasing (residues by occupancy, each into the bin it fills most) and the
//   pairwise merging seed 001 §2.2 describes (merge the pair with the highest merged occupancy
//   until no pair merges). When the plan needs more than num_gpus GPUs, models are admitted in
//   rate×SLO ascending order (Alg. 1's order) while they fit; the rest are unschedulable.
//
// spatial — greedy best fit, seed 001 §2.3 (GSLICE-like): no time sharing, one model per gpulet.
//   A model whose rate exceeds what one gpulet of the most productive size p* serves gets
//   saturated gpulets of size p* first. Its remaining rate gets the smallest allowed partition
//   p_need at which one gpulet serves it under the SLO (the round with the largest batch that
//   meets it: FitRound's lowest occupancy), placed by best fit: among GPUs with room (≤
//   max_gpulets_per_gpu gpulets, Σ ≤ 100 %; the last gpulet of a GPU takes all that is left), the
//   smallest partition ≥ p_need, then the fullest GPU. A placement must pass memory admission and,
//   under the interference model, keep every gpulet of that GPU within its SLO; otherwise the
//   next candidate is tried. Models go in best-fit-decreasing order (largest p_need first).
//
// triton — Triton-like: one instance of every model with rate > 0 on every GPU, no partitions
//   (Plan::partitions_exclusive = false, every gpulet 100 %, duty_ms = 0: eager dynamic
//   batching), the rate split evenly over the GPUs, max batch = the largest b with
//   2·L(b,100) ≤ SLO (1 if none). Triton does not know SLOs, so only memory refuses a model: one
//   process per GPU (per_gpulet_overhead_mb charged once per GPU) holds every model; models are
//   admitted in demand order while they fit.
//
// ideal — exhaustive search, seed 001 §5.2, for num_gpus ≤ 4 (more is INVALID_ARGUMENT); see
//   ideal_search.h for exactly what it searches and where it approximates. When no schedule
//   exists the plan has no gpulets and lists every model with rate > 0 as unschedulable.
//
// Thread-safety: as Planner. `profiles` must outlive the planner.
#pragma once

#include <memory>

#include "tessera/scheduler/interference.h"
#include "tessera/scheduler/planner.h"
#include "tessera/scheduler/profile.h"

namespace tessera::scheduler {

std::unique_ptr<Planner> CreateTemporalPlanner(const ProfileSet* profiles,
                                               InterferenceModel interference,
                                               PlannerOptions options);
std::unique_ptr<Planner> CreateSpatialPlanner(const ProfileSet* profiles,
                                              InterferenceModel interference,
                                              PlannerOptions options);
std::unique_ptr<Planner> CreateTritonPlanner(const ProfileSet* profiles,
                                             InterferenceModel interference,
                                             PlannerOptions options);
std::unique_ptr<Planner> CreateIdealPlanner(const ProfileSet* profiles,
                                            InterferenceModel interference, PlannerOptions options);

}  // namespace tessera::scheduler
