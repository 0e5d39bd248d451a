// The exhaustive search behind the "ideal" planner (seed 001 §5.2: every partition layout of ≤ 4
// GPUs, stopping at the first viable schedule). Internal to src/scheduler.
//
// Stronger than the paper's ideal: the gpulet artifact's full search (standalone_scheduler
// --full_search, seed 001 [R]) enumerates the layouts but fills each with the same greedy
// assignment gpulet uses; this one also searches the assignments. "gpulet reaches x % of the
// ideal" therefore compares against a higher bar than the paper's 92.6 %.
//
// What is searched, exactly:
//  - Layouts. Each GPU is whole (one 100 % gpulet) or split into two gpulets (p, q): p ≤ q both
//    allowed, q the largest allowed size ≤ 100 − p (with the default sizes: (20,80), (40,60),
//    (50,50), (100) — the paper's 4 options). Splits only when max_gpulets_per_gpu ≥ 2; never
//    more than two gpulets per GPU (the paper's space). GPUs are identical, so layouts are
//    multisets: GPUs are opened in index order, a layout chosen when the first gpulet on it is
//    used, and a search state is keyed by its sorted GPU contents. A gpulet may stay empty.
//  - Assignments. A model must be served r = rate − rate_slack_rps. It gets any number of
//    saturated gpulets (alone, back-to-back batches of its largest batch with 2·L·f·margin ≤ SLO,
//    serving that throughput under the interference its neighbour causes), each on a gpulet that
//    might not serve all that is left by itself (more is left than it serves under the worst
//    interference a neighbour could cause; on a whole GPU, than it serves alone), plus one
//    residue share r − Σ saturated as a member of a round in any gpulet holding
//    < max_models_per_gpulet other round members (FitRound's rules). Every GPU is
//    evaluated exactly as CheckPlan judges it (EvaluateGpu: interference from the other gpulet at
//    the chosen batches, fixed point), saturated throughput lost to interference moves to the
//    model's residue, and memory admission applies per GPU.
//  - Not searched (the approximation): a model's rate split over two or more rounds, a saturated
//    share that also time-shares, a gpulet smaller than its layout slot, a third gpulet per GPU,
//    and round batches other than FitRound's lowest-occupancy choice (or the shortest duty when
//    interference rejects that). Every plan the temporal and spatial planners make, and the
//    shapes gpulet's Alg. 1 makes (saturated gpulets at p_eff, residues, merged rounds), are in
//    the space.
//  - Pruning (exact, never loses a schedule in the space): a capacity bound — every model needs at
//    least min_p p·occupancy(r, p) % (its cheapest single-gpulet round, or r·min_p p/T(p) when it
//    may use saturated gpulets), and only gpulets of a size it can run on supply it, checked as
//    Hall's condition over the nested size thresholds — symmetry (identical GPUs and slots are
//    tried once), and a memo of states already proven to fail.
//
// Single-threaded; one search per MakePlan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "baseline_common.h"

namespace tessera::scheduler::baseline {

struct IdealStats {
  int64_t nodes = 0;  // placements tried
  bool node_limit_hit = false;
};

class IdealSearch {
 public:
  // Stop and report "not found" after this many placements (never reached on 9 models × 4 GPUs
  // in practice; a guard against pathological inputs).
  static constexpr int64_t kNodeLimit = 5'000'000;

  IdealSearch(const std::vector<Demand>& demands, int num_gpus, ProfileCache& cache,
              const InterferenceModel& interference, const PlannerOptions& options,
              double memory_limit_mb);

  // The gpulets of the first schedule found for every demand with rate > 0, or nullopt.
  std::optional<std::vector<Gpulet>> Run();
  const IdealStats& stats() const { return stats_; }

 private:
  struct Member {
    int model = 0;  // demand index
    bool saturated = false;
    double rate_rps = 0;         // round members
    double alone_occupancy = 0;  // round members: cheapest occupancy of this share alone
  };
  struct Slot {
    int size = 0;
    std::vector<Member> members;
    const GpuletEval* eval = nullptr;  // into eval_cache_ (stable); null while empty
  };
  struct Gpu {
    std::vector<Slot> slots;  // empty = not opened
    double memory_mb = 0;
  };
  struct State {
    std::vector<Gpu> gpus;
    int opened = 0;
    // Per demand: its round share and where it is (gpu −1: none), and whether all its shares
    // are placed.
    std::vector<double> residue_rate;
    std::vector<int> residue_gpu;
    std::vector<int> residue_slot;
    std::vector<bool> complete;
  };
  // A gpulet to put a share into: an existing slot, or slot `slot` of the next GPU opened with
  // layout `layout`.
  struct Target {
    int gpu = 0;
    int slot = 0;
    int layout = -1;  // ≥ 0: open GPU `gpu` with this layout first
    int size = 0;
    double order_key = 0;
  };

  bool Search(int pos);
  bool PlaceModel(int pos, int m, double remaining, int min_chunk_index);
  std::vector<Target> ResidueTargets(int m, double rate);
  std::vector<Target> ChunkTargets(int m, double remaining, int min_chunk_index);
  // Puts the share into the target and re-evaluates what it touches; false if infeasible.
  bool Apply(const Target& t, const Member& member);
  // Re-evaluates the GPUs in `dirty` and moves saturated throughput lost to interference onto
  // residues until nothing changes; false if some GPU fails.
  bool Propagate(std::vector<int> dirty);
  const std::optional<std::vector<GpuletEval>>& EvaluateCached(int gpu);
  bool BoundHolds(int pos) const;
  std::string GpuKey(const Gpu& gpu) const;
  std::string SlotKey(const Slot& slot) const;
  std::string StateKey(int pos) const;
  // Whether `rate` of demand m fits alone in a gpulet of `size` without interference; its
  // lowest occupancy there in *occupancy.
  bool AloneFits(int m, int size, double rate, double* occupancy);
  double GpuMemory(const Gpu& gpu) const;
  // Per demand, an upper bound on the interference factor any neighbour can cause it (1 without
  // interference; for the linear model, the max of its own terms plus the max of any placed
  // model's terms, over batches and slot sizes).
  std::vector<double> WorstFactors();

  const std::vector<Demand>& demands_;
  int num_gpus_;
  ProfileCache& cache_;
  const InterferenceModel& interference_;
  const PlannerOptions& options_;
  double memory_limit_mb_;
  std::vector<std::vector<int>> layouts_;  // slot sizes per layout, smallest first
  std::vector<int> sizes_;                 // distinct slot sizes, ascending
  std::vector<int> order_;                 // demands with rate > 0, hardest first
  std::vector<double> need_units_;         // per demand: lower bound on Σ partition·occupancy
  std::vector<int> min_size_;              // per demand: smallest size it can run on at all
  std::vector<std::vector<double>> saturated_rps_;        // [demand][size index], no interference
  std::vector<std::vector<double>> saturated_worst_rps_;  // the same under WorstFactors()
  State state_;
  std::unordered_map<std::string, std::optional<std::vector<GpuletEval>>> eval_cache_;
  std::unordered_map<std::string, double> alone_cache_;  // AloneFits: occupancy, −1 = no fit
  std::unordered_set<std::string> failed_;
  IdealStats stats_;
};

}  // namespace tessera::scheduler::baseline
