// Temporal-only baseline: Nexus-style squishy bin packing (seed 001 §2.2; digest §2.8). See
// baseline_planners.h for the contract.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "baseline_common.h"
#include "baseline_planners.h"

namespace tessera::scheduler {
namespace {

using baseline::Demand;
using baseline::FastFitRound;
using baseline::FastMember;

// One whole GPU of the plan: a saturated model, or residues time-sharing in rounds.
struct Node {
  bool saturated = false;
  std::vector<int> models;    // demand indices
  std::vector<double> rates;  // residue rates (round members)
  double memory_mb = 0;
  double occupancy = 1;
};

class TemporalPlanner final : public Planner {
 public:
  TemporalPlanner(const ProfileSet* profiles, PlannerOptions options)
      : profiles_(profiles), options_(std::move(options)), cache_(options_.max_batch) {}

  std::string name() const override { return "temporal"; }
  StatusOr<Plan> MakePlan(const std::vector<ModelDemand>& demands, int num_gpus) override;

 private:
  // The GPUs `models` (demand indices) need, or nullopt if one of them cannot run even alone on a
  // whole GPU (its SLO or its memory).
  std::optional<std::vector<Node>> Pack(const std::vector<int>& models);
  // The round of `members` on a whole GPU; nullopt when infeasible or over the model limit or
  // memory.
  std::optional<double> RoundOccupancy(const std::vector<int>& models,
                                       const std::vector<double>& rates, double memory_mb);
  std::optional<Node> Merge(const Node& a, const Node& b);

  const ProfileSet* profiles_;
  PlannerOptions options_;
  baseline::ProfileCache cache_;
  // Per MakePlan call.
  std::vector<Demand> demands_;
  double memory_limit_mb_ = 0;
};

std::optional<double> TemporalPlanner::RoundOccupancy(const std::vector<int>& models,
                                                      const std::vector<double>& rates,
                                                      double memory_mb) {
  if (static_cast<int>(models.size()) > options_.max_models_per_gpulet) return std::nullopt;
  if (memory_mb > memory_limit_mb_) return std::nullopt;
  std::vector<FastMember> members;
  for (size_t i = 0; i < models.size(); ++i) {
    const Demand& d = demands_[models[i]];
    members.push_back({&cache_.Get(d.profile, 100), rates[i], d.slo_ms, 1.0});
  }
  std::optional<Round> round = FastFitRound(members, options_.latency_margin);
  if (!round) return std::nullopt;
  return round->occupancy;
}

std::optional<Node> TemporalPlanner::Merge(const Node& a, const Node& b) {
  Node merged = a;
  merged.models.insert(merged.models.end(), b.models.begin(), b.models.end());
  merged.rates.insert(merged.rates.end(), b.rates.begin(), b.rates.end());
  // One process per GPU: the overhead is paid once.
  merged.memory_mb = a.memory_mb + b.memory_mb - options_.per_gpulet_overhead_mb;
  std::optional<double> occupancy = RoundOccupancy(merged.models, merged.rates, merged.memory_mb);
  if (!occupancy) return std::nullopt;
  merged.occupancy = *occupancy;
  return merged;
}

std::optional<std::vector<Node>> TemporalPlanner::Pack(const std::vector<int>& models) {
  std::vector<Node> saturated;
  std::vector<Node> residues;
  for (int m : models) {
    const Demand& d = demands_[m];
    const double memory = d.profile->memory_mb() + options_.per_gpulet_overhead_mb;
    if (memory > memory_limit_mb_) return std::nullopt;
    // Nexus: ⌊r/T⌋ GPUs at the saturated batch, then one residue (seed 001 §2.2, §2.4).
    const baseline::Saturated sat =
        baseline::SaturatedOn(cache_.Get(d.profile, 100), d.slo_ms, 1.0, options_.latency_margin);
    if (sat.batch == 0) return std::nullopt;
    const int full = static_cast<int>(std::floor(d.target_rps / sat.throughput_rps));
    for (int i = 0; i < full; ++i) saturated.push_back({true, {m}, {}, memory, 1.0});
    const double residue = d.target_rps - full * sat.throughput_rps;
    if (residue <= baseline::kRateEpsilon) continue;
    Node node{false, {m}, {residue}, memory, 1.0};
    std::optional<double> occupancy = RoundOccupancy(node.models, node.rates, memory);
    if (!occupancy) return std::nullopt;  // cannot happen below T, kept as a guard
    node.occupancy = *occupancy;
    residues.push_back(std::move(node));
  }

  // Nexus' best-fit decreasing: residues by occupancy, each into the bin it fills most.
  std::vector<Node> sorted = residues;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Node& a, const Node& b) { return a.occupancy > b.occupancy; });
  std::vector<Node> bfd;
  for (const Node& node : sorted) {
    std::optional<Node> best;
    size_t best_bin = 0;
    for (size_t i = 0; i < bfd.size(); ++i) {
      std::optional<Node> merged = Merge(bfd[i], node);
      if (merged && (!best || merged->occupancy > best->occupancy)) {
        best = std::move(merged);
        best_bin = i;
      }
    }
    if (best) {
      bfd[best_bin] = *std::move(best);
    } else {
      bfd.push_back(node);
    }
  }

  // seed 001 §2.2: compare all eligible pairs, merge the best, repeat until none merges.
  std::vector<Node> pairwise = residues;
  while (true) {
    std::optional<Node> best;
    size_t bi = 0, bj = 0;
    for (size_t i = 0; i < pairwise.size(); ++i) {
      for (size_t j = i + 1; j < pairwise.size(); ++j) {
        std::optional<Node> merged = Merge(pairwise[i], pairwise[j]);
        if (merged && (!best || merged->occupancy > best->occupancy)) {
          best = std::move(merged);
          bi = i;
          bj = j;
        }
      }
    }
    if (!best) break;
    pairwise[bi] = *std::move(best);
    pairwise.erase(pairwise.begin() + bj);
  }

  std::vector<Node>& merged = pairwise.size() < bfd.size() ? pairwise : bfd;
  saturated.insert(saturated.end(), merged.begin(), merged.end());
  return saturated;
}

StatusOr<Plan> TemporalPlanner::MakePlan(const std::vector<ModelDemand>& demands, int num_gpus) {
  TESSERA_ASSIGN_OR_RETURN(demands_,
                           baseline::ResolveDemands(demands, num_gpus, *profiles_, options_));
  if (std::find(options_.partitions_pct.begin(), options_.partitions_pct.end(), 100) ==
      options_.partitions_pct.end()) {
    return absl::InvalidArgumentError(
        "temporal planner: partitions_pct must contain 100 (it only uses whole GPUs)");
  }
  memory_limit_mb_ = baseline::UsableMemoryMb(*profiles_, options_);

  // Admission order when not everything fits: Alg. 1's rate×SLO ascending (seed 001 §4.3 l.2).
  std::vector<int> order;
  for (size_t i = 0; i < demands_.size(); ++i) {
    if (demands_[i].target_rps > baseline::kRateEpsilon) order.push_back(static_cast<int>(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return demands_[a].rate_rps * demands_[a].slo_ms < demands_[b].rate_rps * demands_[b].slo_ms;
  });
  std::vector<int> accepted;
  std::vector<Node> nodes;
  std::optional<std::vector<Node>> all = Pack(order);
  if (all && static_cast<int>(all->size()) <= num_gpus) {
    accepted = order;
    nodes = *std::move(all);
  } else {
    for (int m : order) {
      std::vector<int> candidate = accepted;
      candidate.push_back(m);
      std::optional<std::vector<Node>> packed = Pack(candidate);
      if (packed && static_cast<int>(packed->size()) <= num_gpus) {
        accepted = std::move(candidate);
        nodes = *std::move(packed);
      }
    }
  }

  Plan plan;
  plan.policy = name();
  plan.num_gpus = num_gpus;
  plan.partitions_exclusive = true;
  const InterferenceModel none;  // one gpulet per GPU: nothing co-runs
  for (size_t gpu = 0; gpu < nodes.size(); ++gpu) {
    const Node& node = nodes[gpu];
    baseline::GpuletSpec spec{100, {}};
    for (size_t i = 0; i < node.models.size(); ++i) {
      spec.members.push_back(
          {&demands_[node.models[i]], node.saturated, node.saturated ? 0.0 : node.rates[i]});
    }
    auto evals = baseline::EvaluateGpu({spec}, cache_, none, options_);
    if (!evals) {
      return absl::InternalError(absl::StrCat("temporal planner: GPU ", gpu,
                                              " failed re-evaluation; this is a planner bug"));
    }
    plan.gpulets.push_back(baseline::MakeGpulet(static_cast<int>(gpu), spec, (*evals)[0]));
  }
  std::vector<bool> covered(demands_.size(), false);
  for (int m : accepted) covered[m] = true;
  plan.unschedulable = baseline::UncoveredModels(demands_, covered);
  return plan;
}

}  // namespace

std::unique_ptr<Planner> CreateTemporalPlanner(const ProfileSet* profiles,
                                               InterferenceModel /*interference*/,
                                               PlannerOptions options) {
  // Whole GPUs only: no two gpulets share a GPU, so interference never applies.
  return std::make_unique<TemporalPlanner>(profiles, std::move(options));
}

}  // namespace tessera::scheduler
