// Internal to the gpulet planner: seed 001 Alg. 1 (elastic partitioning) on a set of GPUs.
//
// The builder places each model's rate chunk by chunk (Alg. 1 l.4–10). Each chunk, in order:
//  1. top-up: spare capacity of the model's own gpulets (not in the paper; a residue that took a
//     GPU's last gpulet whole often has room);
//  2. while the remaining rate exceeds what one saturated gpulet at the knee p_eff serves: a new
//     saturated gpulet at p_eff by best fit (FindBestFit, l.14–26, splitting a whole GPU);
//  3. else the residue: time-share an existing gpulet (§4.3 temporal scheduling), else grow one
//     into free capacity of its GPU (not in the paper), else a new gpulet of size p_req by best
//     fit;
//  4. last resort (the artifact's readjust): the largest free capacity left serves what it can.
// Every candidate is solved with its GPU's interference (SolveGpu) and must pass memory
// admission. Placing next to a gpulet slows it; a time-shared gpulet of the same model on that GPU
// absorbs what it can, the rest goes back to its model's pending rate and is placed again (the
// artifact's neighbour re-check). A candidate is refused when what others lose (in % of a GPU at
// their knees) exceeds what it gains. A model is placed as a transaction: if its rate (and the
// rate it made others lose) cannot all be placed, the GPUs go back to how they were and the model
// is reported unschedulable.
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
  // FindBestFit order: false = the paper's smallest free capacity first; true = the smallest
  // resulting gpulet first (split a whole GPU rather than take a larger remainder).
  bool tight_fit = false;
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

  // The models in Alg. 1 order (l.2): rate × SLO, ties by name; the models given to
  // PlaceFirst before all others.
  std::vector<int> Order() const;
  // Not in the paper: a greedy pass that left models out is repeated with them placed first.
  void PlaceFirst(std::vector<int> models) { first_ = std::move(models); }

  // Places all pending rate of `model`, then any rate that placement made others lose.
  // All or nothing; false leaves the GPUs as they were.
  bool PlaceModel(int model);

  const std::vector<Gpu>& gpus() const { return gpus_; }
  double pending(int model) const { return pending_[model]; }

 private:
  bool Done(int model) const;
  bool PlaceChunk(int model);
  bool TryTopUp(int model);
  bool TryTimeShare(int model);
  bool TryGrow(int model);
  bool TryNewSlot(int model, int need_pct, bool saturated);
  bool TryFallback(int model);
  // What a candidate must achieve for `model` and the others on its GPU. Throughput others lose
  // is weighed in % of a GPU at their knees and must stay below what `model` gains.
  enum class Accept {
    kAll,         // all of the pending rate
    kAllNoLoss,   // all of it, nobody else loses any
    kPartNoLoss,  // some of it, nobody else loses any
    kNetGain,     // some of it
  };
  struct Outcome {
    double gain = 0;      // rate `model` gains, requests/s
    double lost_pct = 0;  // what the others lose, in % of a GPU
  };
  // Solves `after` as the new state of GPU `g`; true (and *outcome) when memory fits, every round
  // is feasible and `accept` holds.
  bool Evaluate(int g, Gpu& after, int model, Accept accept, Outcome* outcome) const;
  void AbsorbLosses(Gpu& gpu) const;
  void Commit(int g, Gpu after);

  const Context* c_;
  Variant variant_;
  std::vector<int> knee_;   // per model, for this variant
  std::vector<int> first_;  // models placed before the others
  std::vector<Gpu> gpus_;
  std::vector<double> pending_;
  // Models whose placement began (or that the initial GPUs hold): only their lost throughput is
  // placed again as part of another model's transaction.
  std::vector<char> started_;
  int steps_left_ = 0;  // bounds the lost-rate ping-pong of one PlaceModel
};

}  // namespace tessera::scheduler::gpulet
