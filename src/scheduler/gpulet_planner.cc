#include "gpulet_planner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gpulet_builder.h"
#include "gpulet_state.h"

namespace tessera::scheduler {
namespace {

using gpulet::Builder;
using gpulet::Context;
using gpulet::Gpu;
using gpulet::Member;
using gpulet::ModelInfo;
using gpulet::Slot;
using gpulet::Variant;

// Alg. 1 as printed first, then first-fit-decreasing, each with both knee rules (see header).
constexpr Variant kVariants[] = {
    {/*ascending=*/true, gpulet::KneeRule::kArtifact},
    {/*ascending=*/false, gpulet::KneeRule::kArtifact},
    {/*ascending=*/true, gpulet::KneeRule::kWholeGpu},
    {/*ascending=*/false, gpulet::KneeRule::kWholeGpu},
    {/*ascending=*/true, gpulet::KneeRule::kGpuPair},
    {/*ascending=*/false, gpulet::KneeRule::kGpuPair},
};

// The plan-ranking key: fewest unschedulable models, then fewest GPUs, then least Σ partition.
std::tuple<size_t, int, int> Rank(const Plan& plan) {
  return {plan.unschedulable.size(), plan.GpusUsed(), plan.PartitionSum()};
}

class GpuletPlanner : public Planner {
 public:
  GpuletPlanner(const ProfileSet* profiles, InterferenceModel interference, PlannerOptions options)
      : profiles_(profiles), interference_(interference), options_(std::move(options)) {}

  std::string name() const override {
    return interference_.kind() != InterferenceModel::Kind::kNone ? "gpulet+int" : "gpulet";
  }

  StatusOr<Plan> MakePlan(const std::vector<ModelDemand>& demands, int num_gpus) override {
    TESSERA_ASSIGN_OR_RETURN(Context context, MakeContext(demands, num_gpus));
    std::optional<Plan> best;
    for (const Variant& variant : kVariants) {
      Builder builder(&context, num_gpus, variant);
      std::vector<std::string> unschedulable;
      for (int m : builder.Order()) {
        if (!builder.PlaceModel(m)) unschedulable.push_back(context.models[m].name);
      }
      Plan plan = ToPlan(context, builder, num_gpus, std::move(unschedulable));
      if (!best || Rank(plan) < Rank(*best)) best = std::move(plan);
      // Nothing beats a plan that fits everything on one GPU; save the other variants' time.
      if (best->unschedulable.empty() && best->GpusUsed() <= 1) break;
    }
    TESSERA_RETURN_IF_ERROR(Verify(*best, demands));
    return *std::move(best);
  }

  StatusOr<Plan> Replan(const Plan& current, const std::vector<ModelDemand>& demands,
                        int num_gpus) override {
    TESSERA_ASSIGN_OR_RETURN(Context context, MakeContext(demands, num_gpus));
    std::optional<Plan> incremental = Incremental(context, current, num_gpus);
    if (incremental && incremental->unschedulable.empty() && Verify(*incremental, demands).ok()) {
      return *std::move(incremental);
    }
    return MakePlan(demands, num_gpus);
  }

 private:
  StatusOr<Context> MakeContext(const std::vector<ModelDemand>& demands, int num_gpus) const {
    if (num_gpus < 0) {
      return absl::InvalidArgumentError(absl::StrCat("number of GPUs ", num_gpus, " is < 0"));
    }
    return gpulet::BuildContext(*profiles_, &interference_, options_, demands);
  }

  Plan ToPlan(const Context& c, const Builder& builder, int num_gpus,
              std::vector<std::string> unschedulable) const {
    Plan plan;
    plan.policy = name();
    plan.num_gpus = num_gpus;
    plan.partitions_exclusive = true;
    plan.gpulets = gpulet::ToGpulets(c, builder.gpus());
    std::sort(unschedulable.begin(), unschedulable.end());
    plan.unschedulable = std::move(unschedulable);
    return plan;
  }

  Status Verify(const Plan& plan, const std::vector<ModelDemand>& demands) const {
    Status status = CheckPlan(plan, demands, *profiles_, interference_, options_);
    if (status.ok()) return status;
    return absl::InternalError(
        absl::StrCat(name(), " planner made a plan that breaks a rule: ", status.message()));
  }

  // The incremental re-plan (header): nullopt when the current plan cannot be the start.
  std::optional<Plan> Incremental(const Context& c, const Plan& current, int num_gpus) const {
    if (current.policy != name() || !current.partitions_exclusive) return std::nullopt;
    std::map<std::string, int, std::less<>> index;
    for (size_t m = 0; m < c.models.size(); ++m) index[c.models[m].name] = static_cast<int>(m);
    const std::set<std::string, std::less<>> was_unschedulable(current.unschedulable.begin(),
                                                               current.unschedulable.end());
    // Which models keep their gpulets, and the factor that rescales their routed rates.
    std::vector<double> scale(c.models.size(), 0);
    std::vector<double> pending(c.models.size(), 0);
    for (size_t m = 0; m < c.models.size(); ++m) {
      const ModelInfo& info = c.models[m];
      const double assigned = current.AssignedRate(info.name);
      bool keep = assigned > 0 && !was_unschedulable.contains(info.name) &&
                  info.rate_rps <= assigned * (1 + kReplanKeepRise);
      for (const Gpulet& g : current.gpulets) {
        for (const GpuletModel& gm : g.models) {
          if (gm.model == info.name && g.gpu >= num_gpus) keep = false;
        }
      }
      if (keep) {
        scale[m] = info.rate_rps / assigned;
      } else {
        pending[m] = info.rate_rps;
      }
    }
    std::vector<Gpu> gpus(std::max(0, num_gpus));
    for (const Gpulet& g : current.gpulets) {
      if (g.gpu < 0 || g.gpu >= num_gpus) continue;
      Slot slot{g.partition_pct, g.duty_ms, {}};
      for (const GpuletModel& gm : g.models) {
        auto it = index.find(gm.model);
        if (it == index.end() || scale[it->second] <= 0) continue;
        Member member;
        member.model = it->second;
        member.want_rps = gm.rate_rps * scale[it->second];
        // A lone model whose round is as long as its batch runs back to back: saturated.
        member.saturated = g.models.size() == 1 &&
                           std::fabs(g.duty_ms - gm.latency_ms) <= 1e-6 * std::max(1.0, g.duty_ms);
        if (member.want_rps > 0) slot.members.push_back(member);
      }
      if (!slot.members.empty()) gpus[g.gpu].slots.push_back(std::move(slot));
    }
    for (Gpu& gpu : gpus) {
      if (gpu.UsedPct() > 100 ||
          static_cast<int>(gpu.slots.size()) > c.options.max_gpulets_per_gpu ||
          !gpulet::MemoryFits(c, gpu) || !gpulet::SolveGpu(c, gpu)) {
        return std::nullopt;
      }
      // What a kept gpulet cannot hold any more (a rise, or less interference headroom) is
      // placed again with the changed models.
      for (Slot& s : gpu.slots) {
        for (Member& m : s.members) {
          pending[m.model] += m.want_rps - m.rate_rps;
          m.want_rps = m.rate_rps;
        }
      }
    }
    Builder builder(&c, std::move(gpus), std::move(pending), kVariants[0]);
    std::vector<std::string> unschedulable;
    for (int m : builder.Order()) {
      if (!builder.PlaceModel(m)) unschedulable.push_back(c.models[m].name);
    }
    return ToPlan(c, builder, num_gpus, std::move(unschedulable));
  }

  const ProfileSet* profiles_;
  InterferenceModel interference_;
  PlannerOptions options_;
};

}  // namespace

std::unique_ptr<Planner> CreateGpuletPlanner(const ProfileSet* profiles,
                                             InterferenceModel interference,
                                             PlannerOptions options) {
  return std::make_unique<GpuletPlanner>(profiles, interference, std::move(options));
}

}  // namespace tessera::scheduler
