// The "ideal" planner (seed 001 §5.2): exhaustive search over partition layouts and assignments
// for ≤ 4 GPUs, stopping at the first schedule that serves every model. What it searches and
// where it approximates: ideal_search.h. When no schedule exists (or the search's node guard
// trips, logged as a warning), the plan has no gpulets and lists every model with rate > 0 as
// unschedulable: the ideal answers "schedulable or not", it does not look for the best partial
// schedule.
#include "absl/strings/str_cat.h"
#include "baseline_common.h"
#include "baseline_planners.h"
#include "ideal_search.h"
#include "spdlog/spdlog.h"

namespace tessera::scheduler {
namespace {

using baseline::Demand;

class IdealPlanner final : public Planner {
 public:
  static constexpr int kMaxGpus = 4;

  IdealPlanner(const ProfileSet* profiles, InterferenceModel interference, PlannerOptions options)
      : profiles_(profiles),
        interference_(std::move(interference)),
        options_(std::move(options)),
        cache_(options_.max_batch) {}

  std::string name() const override { return "ideal"; }

  StatusOr<Plan> MakePlan(const std::vector<ModelDemand>& demands, int num_gpus) override {
    TESSERA_ASSIGN_OR_RETURN(std::vector<Demand> resolved,
                             baseline::ResolveDemands(demands, num_gpus, *profiles_, options_));
    if (num_gpus > kMaxGpus) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ideal planner: exhaustive search is limited to ", kMaxGpus, " GPUs, got ", num_gpus));
    }
    Plan plan;
    plan.policy = name();
    plan.num_gpus = num_gpus;
    plan.partitions_exclusive = true;
    baseline::IdealSearch search(resolved, num_gpus, cache_, interference_, options_,
                                 baseline::UsableMemoryMb(*profiles_, options_));
    std::optional<std::vector<Gpulet>> gpulets = search.Run();
    if (search.stats().node_limit_hit) {
      spdlog::warn(
          "ideal planner: search stopped after {} placements without an answer; "
          "reporting unschedulable",
          search.stats().nodes);
    }
    if (gpulets) {
      plan.gpulets = *std::move(gpulets);
    } else {
      plan.unschedulable =
          baseline::UncoveredModels(resolved, std::vector<bool>(resolved.size(), false));
    }
    return plan;
  }

 private:
  const ProfileSet* profiles_;
  InterferenceModel interference_;
  PlannerOptions options_;
  baseline::ProfileCache cache_;
};

}  // namespace

std::unique_ptr<Planner> CreateIdealPlanner(const ProfileSet* profiles,
                                            InterferenceModel interference,
                                            PlannerOptions options) {
  return std::make_unique<IdealPlanner>(profiles, std::move(interference), std::move(options));
}

}  // namespace tessera::scheduler
