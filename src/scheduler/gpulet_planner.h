// The gpulet planner: seed 001 Alg. 1, elastic spatio-temporal partitioning.
//
// MakePlan sorts the models by rate × SLO, gives each saturated gpulets at its knee p_eff and one
// residue (time-shared onto an existing gpulet when the round rules allow, else a new gpulet by
// best fit, splitting a whole GPU into p and 100 − p), with batches chosen under the interference
// of the neighbouring gpulet (gpulet_builder.h has the steps). It runs Alg. 1 in six variants —
// the paper's ascending order and first-fit-decreasing order, each with three knee rules (the
// artifact's, never 100 %; the same with the (80,100) pair; the best p / 100 − p pair of a split
// GPU) — and returns the plan that leaves the fewest
// models unschedulable, then uses the fewest GPUs, then the least Σ partition. Every plan it
// returns passes CheckPlan under the planner's interference model and options.
//
// Replan keeps the gpulets of models whose rate rose by at most kReplanKeepRise (5 %), rescaling
// their rates, and re-places only the others into the free capacity and onto existing gpulets; if
// that leaves a model unplaced it falls back to a full MakePlan.
//
// Thread-compatible (one thread at a time); `profiles` must outlive the planner.
#pragma once

#include <memory>

#include "tessera/scheduler/planner.h"

namespace tessera::scheduler {

// A model whose rate rose by more than this fraction since the current plan is re-placed from
// scratch by Replan; smaller rises are absorbed by its existing gpulets where they can
// (the artifact re-schedules on a rise of > 5 %, seed 001 §4 [R]).
inline constexpr double kReplanKeepRise = 0.05;

// name() is "gpulet+int" when interference.kind() != kNone, else "gpulet".
std::unique_ptr<Planner> CreateGpuletPlanner(const ProfileSet* profiles,
                                             InterferenceModel interference,
                                             PlannerOptions options);

}  // namespace tessera::scheduler
