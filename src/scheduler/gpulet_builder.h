// Internal to the gpulet planner: seed 001 Alg. 1 (elastic partitioning) on a set of GPUs.
//
// The builder places each model's rate chunk by chunk (Alg. 1 l.4–10): a saturated gpulet at the
// knee p_eff while the remaining rate exceeds what one serves, then one residue; a residue first
// tries to time-share an existing gpulet, then to grow one into free capacity on its GPU, then a
// new gpulet by best fit (FindBestFit, l.14–26), and as a last resort the largest free capacity
// left serves part of the rate. Placing next to a gpulet slows it (interference); throughput it
// loses goes back to its model's pending rate and is placed again. A model is placed as a
// transaction: if its rate (and the rate it made others lose) cannot all be placed, the GPUs go
// back to how they were and the model is reported unschedulable.
//
// Thread-compatible; deterministic for a given input.
#pragma once

#include <vector>

#include "gpulet_state.h"

namespace tessera::scheduler::gpulet {

enum class KneeRule {
  kArtifact,  // steepest throughput gain per %, never the (80,100) pair (seed 001 §2.5 [R])
  kWholeGpu,  // the same, the (80,100) pair included
  kGpuPair,   // the size p ≤ 50 % whose pair p / 100 − p serves the most (see PairKneeIndex)
};

struct Variant {
  // Alg. 1 l.2 sorts by rate × SLO ascending; descending is first-fit-decreasing order.
  bool ascending = true;
  KneeRule knee = KneeRule::kArtifact;
};

// Derives sat_batch, sat_rps, knee and pct_per_rps of `info` (knee per the artifact: no last
// pair). Called once per model per plan.
void DeriveModelInfo(const Context& context, ModelInfo& info);

// p_eff (seed 001 §2.3, §2.5 [R] getMaxReturnPart): over adjacent pairs of allowed sizes, the high
// side of the pair with the steepest standalone saturated-throughput gain per %; a pair whose
// throughput rises < 5 % is skipped. `include_last_pair` also considers the pair ending at 100 %.
// Index into context.partitions, or -1 when no size meets the SLO.
int KneeIndex(const Context& context, const ModelInfo& info, bool include_last_pair);

// Not in the paper: with two gpulets per GPU, a model that needs many saturated gpulets gets
// them in pairs p / 100 − p (the rest of a split GPU is the next saturated gpulet's best fit).
// The size p ≤ 50 % maximising sat(p) + sat(100 − p), or 100 % when a whole GPU serves more;
// ties keep the smaller p. -1 when no size meets the SLO.
int PairKneeIndex(const Context& context, const ModelInfo& info);

// p_req (seed 001 §2.3, §2.5 [R] getMinPart): the smallest size ≤ partitions[knee] whose
// standalone saturated throughput covers `rate_rps`: the smallest gpulet on which the residue
// rule holds. Index into context.partitions; `knee` when none smaller does.
int MinRequiredIndex(const Context& context, const ModelInfo& info, int knee, double rate_rps);

class Builder {
 public:
  Builder(const Context* context, int num_gpus, Variant variant);
  // Starts from existing GPUs (incremental re-plan); `pending` per model is what is left to place.
  Builder(const Context* context, std::vector<Gpu> gpus, std::vector<double> pending,
          Variant variant);

  // The models in Alg. 1 order (l.2): rate × SLO, ties by name.
  std::vector<int> Order() const;

  // Places all pending rate of `model`, then any rate that placement made others lose.
  // All or nothing; false leaves the GPUs as they were.
  bool PlaceModel(int model);

  const std::vector<Gpu>& gpus() const { return gpus_; }
  double pending(int model) const { return pending_[model]; }

 private:
  bool Done(int model) const;
  bool PlaceChunk(int model);
  bool TryTimeShare(int model);
  bool TryGrow(int model);
  bool TryNewSlot(int model, int need_pct, bool saturated);
  bool TryFallback(int model);
  // Solves `after` as the new state of GPU `g` and, if `model` gains, no memory rule breaks and
  // the rate others lose is worth less than what `model` gains (in % of a GPU at their knees),
  // fills *gain. `full` demands that `model` gets all its pending rate and nobody loses any.
  bool Evaluate(int g, Gpu& after, int model, bool full, double* gain) const;
  void Commit(int g, Gpu after);

  const Context* c_;
  Variant variant_;
  std::vector<int> knee_;  // per model, for this variant
  std::vector<Gpu> gpus_;
  std::vector<double> pending_;
  // Models whose placement began (or that the initial GPUs hold): only their lost throughput is
  // placed again as part of another model's transaction.
  std::vector<char> started_;
  int steps_left_ = 0;  // bounds the lost-rate ping-pong of one PlaceModel
};

}  // namespace tessera::scheduler::gpulet
