// Triton-like baseline: every model on every GPU, no partitions, eager dynamic batching. See
// baseline_planners.h for the contract.
#include "baseline_common.h"
#include "baseline_planners.h"
#include "slo_rules.h"

namespace tessera::scheduler {
namespace {

using baseline::Demand;

class TritonPlanner final : public Planner {
 public:
  TritonPlanner(const ProfileSet* profiles, PlannerOptions options)
      : profiles_(profiles), options_(std::move(options)) {}

  std::string name() const override { return "triton"; }

  StatusOr<Plan> MakePlan(const std::vector<ModelDemand>& demands, int num_gpus) override {
    TESSERA_ASSIGN_OR_RETURN(std::vector<Demand> resolved,
                             baseline::ResolveDemands(demands, num_gpus, *profiles_, options_));
    const double memory_limit = baseline::UsableMemoryMb(*profiles_, options_);
    Plan plan;
    plan.policy = name();
    plan.num_gpus = num_gpus;
    plan.partitions_exclusive = false;
    // One server process per GPU holds every loaded model; models load in config order until
    // the GPU is full (what a Triton instance_group of KIND_GPU does: a model that does not fit
    // fails to load).
    double memory = options_.per_gpulet_overhead_mb;
    std::vector<bool> covered(resolved.size(), false);
    std::vector<GpuletModel> loaded;
    for (size_t i = 0; i < resolved.size(); ++i) {
      const Demand& d = resolved[i];
      if (d.rate_rps <= 0) continue;
      if (memory + d.profile->memory_mb() > memory_limit) continue;
      memory += d.profile->memory_mb();
      covered[i] = true;
      // Max batch size: the largest that could meet the SLO if batches ran back to back on the
      // whole GPU (2·L(b,100) ≤ SLO, seed 001 §2.4), as an operator would configure it; Triton
      // itself never checks the SLO.
      int batch = MaxSaturatedBatch(*d.profile, 100, d.slo_ms, 1.0, options_.latency_margin,
                                    options_.max_batch);
      if (batch == 0) batch = 1;
      loaded.push_back({d.model, batch, d.rate_rps / num_gpus,
                        ScheduledLatencyMs(*d.profile, batch, 100, 1.0, options_.latency_margin)});
    }
    for (int gpu = 0; gpu < num_gpus; ++gpu) {
      for (const GpuletModel& m : loaded) {
        Gpulet g;
        g.gpu = gpu;
        g.partition_pct = 100;
        g.duty_ms = 0;  // eager: a batch leaves as soon as the instance is free
        g.models = {m};
        plan.gpulets.push_back(std::move(g));
      }
    }
    for (size_t i = 0; i < resolved.size(); ++i) {
      if (resolved[i].rate_rps > 0 && !covered[i]) plan.unschedulable.push_back(resolved[i].model);
    }
    return plan;
  }

 private:
  const ProfileSet* profiles_;
  PlannerOptions options_;
};

}  // namespace

std::unique_ptr<Planner> CreateTritonPlanner(const ProfileSet* profiles,
                                             InterferenceModel /*interference*/,
                                             PlannerOptions options) {
  // Triton knows neither SLOs nor interference: the simulator models the contention.
  return std::make_unique<TritonPlanner>(profiles, std::move(options));
}

}  // namespace tessera::scheduler
