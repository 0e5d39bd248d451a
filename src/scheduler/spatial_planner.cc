// Spatial-only baseline: greedy best fit, one model per gpulet (seed 001 §2.3; digest §2.8). See
// baseline_planners.h for the contract.
#include <algorithm>
#include <optional>
#include <tuple>

#include "baseline_common.h"
#include "baseline_planners.h"

namespace tessera::scheduler {
namespace {

using baseline::Demand;
using baseline::GpuletEval;
using baseline::GpuletSpec;
using baseline::MemberSpec;

struct GpuState {
  std::vector<GpuletSpec> gpulets;
  std::vector<int> owners;  // demand index per gpulet
  std::vector<GpuletEval> evals;

  int UsedPct() const {
    int used = 0;
    for (const GpuletSpec& g : gpulets) used += g.partition_pct;
    return used;
  }
};

class SpatialPlanner final : public Planner {
 public:
  SpatialPlanner(const ProfileSet* profiles, InterferenceModel interference, PlannerOptions options)
      : profiles_(profiles),
        interference_(std::move(interference)),
        options_(std::move(options)),
        cache_(options_.max_batch) {
    std::sort(options_.partitions_pct.begin(), options_.partitions_pct.end());
    options_.partitions_pct.erase(
        std::unique(options_.partitions_pct.begin(), options_.partitions_pct.end()),
        options_.partitions_pct.end());
  }

  std::string name() const override { return "spatial"; }
  StatusOr<Plan> MakePlan(const std::vector<ModelDemand>& demands, int num_gpus) override;

 private:
  // Serves demand `m`: saturated gpulets while one gpulet cannot hold the rest, then the rest.
  bool PlaceModel(int m);
  // Places one gpulet for demand `m` (saturated, or a round at `rate_rps`) of size ≥ min_pct by
  // best fit; the rate it serves, or nullopt when no GPU takes it.
  std::optional<double> Place(int m, bool saturated, double rate_rps, int min_pct);
  // Removes demand m's gpulets (a model that could not be fully placed).
  void Remove(int m);
  // Smallest allowed partition where one gpulet serves `rate_rps` of demand m alone (no
  // interference), or nullopt.
  std::optional<int> MinPartition(const Demand& d, double rate_rps);

  const ProfileSet* profiles_;
  InterferenceModel interference_;
  PlannerOptions options_;
  baseline::ProfileCache cache_;
  // Per MakePlan call.
  std::vector<Demand> demands_;
  std::vector<GpuState> gpus_;
  double memory_limit_mb_ = 0;
};

std::optional<int> SpatialPlanner::MinPartition(const Demand& d, double rate_rps) {
  for (int p : options_.partitions_pct) {
    baseline::FastMember member{&cache_.Get(d.profile, p), rate_rps, d.slo_ms, 1.0};
    if (baseline::FastFitRound({member}, options_.latency_margin)) return p;
  }
  return std::nullopt;
}

std::optional<double> SpatialPlanner::Place(int m, bool saturated, double rate_rps, int min_pct) {
  struct Candidate {
    int size;
    int free;
    int gpu;
  };
  std::vector<Candidate> candidates;
  for (size_t g = 0; g < gpus_.size(); ++g) {
    const GpuState& gpu = gpus_[g];
    const int count = static_cast<int>(gpu.gpulets.size());
    if (count >= options_.max_gpulets_per_gpu) continue;
    const int free = 100 - gpu.UsedPct();
    const bool last = count == options_.max_gpulets_per_gpu - 1;
    // The last gpulet of a GPU takes everything left (seed 001 Alg. 1 l.18: split into p and
    // 100 − p); earlier ones may be any allowed size that leaves room.
    int largest = 0;
    for (int p : options_.partitions_pct) {
      if (p <= free) largest = p;
    }
    for (int p : options_.partitions_pct) {
      if (p < min_pct || p > free || (last && p != largest)) continue;
      candidates.push_back({p, free, static_cast<int>(g)});
    }
  }
  // Best fit: the smallest gpulet that is big enough, then the fullest GPU.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.size, a.free, a.gpu) < std::tie(b.size, b.free, b.gpu);
  });
  for (const Candidate& c : candidates) {
    GpuState& gpu = gpus_[c.gpu];
    std::vector<GpuletSpec> specs = gpu.gpulets;
    specs.push_back({c.size, {MemberSpec{&demands_[m], saturated, rate_rps}}});
    if (baseline::GpuMemoryMb(specs, options_) > memory_limit_mb_) continue;
    // Interference-aware check of the new gpulet and of its neighbours (seed 001 Alg. 1 l.20,
    // and the artifact's neighbour check).
    auto evals = baseline::EvaluateGpu(specs, cache_, interference_, options_);
    if (!evals) continue;
    // A saturated neighbour serves what it serves: interference must not take throughput that
    // its model counts on.
    bool neighbours_keep_rate = true;
    for (size_t i = 0; i < gpu.gpulets.size(); ++i) {
      const GpuletSpec& old_spec = gpu.gpulets[i];
      if (old_spec.members[0].saturated &&
          (*evals)[i].rates_rps[0] < gpu.evals[i].rates_rps[0] * (1 - 1e-12)) {
        neighbours_keep_rate = false;
      }
    }
    if (!neighbours_keep_rate) continue;
    const double served = evals->back().rates_rps[0];
    gpu.gpulets = std::move(specs);
    gpu.owners.push_back(m);
    gpu.evals = *std::move(evals);
    return served;
  }
  return std::nullopt;
}

void SpatialPlanner::Remove(int m) {
  for (GpuState& gpu : gpus_) {
    GpuState kept;
    for (size_t i = 0; i < gpu.gpulets.size(); ++i) {
      if (gpu.owners[i] == m) continue;
      kept.gpulets.push_back(gpu.gpulets[i]);
      kept.owners.push_back(gpu.owners[i]);
      kept.evals.push_back(gpu.evals[i]);
    }
    if (kept.gpulets.size() == gpu.gpulets.size()) continue;
    // Less interference now; the old evaluations stay valid if the refit were to fail.
    if (auto evals = baseline::EvaluateGpu(kept.gpulets, cache_, interference_, options_)) {
      kept.evals = *std::move(evals);
    }
    gpu = std::move(kept);
  }
}

bool SpatialPlanner::PlaceModel(int m) {
  const Demand& d = demands_[m];
  // The most productive single gpulet: the size whose saturated throughput is highest.
  int best_pct = 0;
  double best_throughput = 0;
  for (int p : options_.partitions_pct) {
    const baseline::Saturated s =
        baseline::SaturatedOn(cache_.Get(d.profile, p), d.slo_ms, 1.0, options_.latency_margin);
    if (s.batch > 0 && s.throughput_rps > best_throughput * (1 + 1e-12)) {
      best_pct = p;
      best_throughput = s.throughput_rps;
    }
  }
  if (best_pct == 0) return false;  // no partition meets the SLO even at batch 1
  double remaining = d.target_rps;
  while (remaining > best_throughput) {
    std::optional<double> served = Place(m, /*saturated=*/true, 0, best_pct);
    if (!served || *served <= 0) return false;
    remaining -= *served;
  }
  if (remaining <= baseline::kRateEpsilon) return true;
  std::optional<int> min_pct = MinPartition(d, remaining);
  if (!min_pct) return false;
  return Place(m, /*saturated=*/false, remaining, *min_pct).has_value();
}

StatusOr<Plan> SpatialPlanner::MakePlan(const std::vector<ModelDemand>& demands, int num_gpus) {
  TESSERA_ASSIGN_OR_RETURN(demands_,
                           baseline::ResolveDemands(demands, num_gpus, *profiles_, options_));
  memory_limit_mb_ = baseline::UsableMemoryMb(*profiles_, options_);
  gpus_.assign(num_gpus, {});

  // Best-fit decreasing: the models needing the largest partition first (more than one gpulet
  // counts as 101 %), then the higher rate.
  std::vector<std::pair<int, int>> order;  // (need, demand index)
  for (size_t i = 0; i < demands_.size(); ++i) {
    const Demand& d = demands_[i];
    if (d.target_rps <= baseline::kRateEpsilon) continue;
    order.emplace_back(MinPartition(d, d.target_rps).value_or(101), static_cast<int>(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return demands_[a.second].target_rps > demands_[b.second].target_rps;
  });
  std::vector<bool> covered(demands_.size(), false);
  for (const auto& [need, m] : order) {
    if (PlaceModel(m)) {
      covered[m] = true;
    } else {
      Remove(m);
    }
  }

  Plan plan;
  plan.policy = name();
  plan.num_gpus = num_gpus;
  plan.partitions_exclusive = true;
  for (size_t g = 0; g < gpus_.size(); ++g) {
    for (size_t i = 0; i < gpus_[g].gpulets.size(); ++i) {
      plan.gpulets.push_back(
          baseline::MakeGpulet(static_cast<int>(g), gpus_[g].gpulets[i], gpus_[g].evals[i]));
    }
  }
  plan.unschedulable = baseline::UncoveredModels(demands_, covered);
  return plan;
}

}  // namespace

std::unique_ptr<Planner> CreateSpatialPlanner(const ProfileSet* profiles,
                                              InterferenceModel interference,
                                              PlannerOptions options) {
  return std::make_unique<SpatialPlanner>(profiles, std::move(interference), std::move(options));
}

}  // namespace tessera::scheduler
