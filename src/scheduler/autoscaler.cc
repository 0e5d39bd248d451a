#include "tessera/scheduler/autoscaler.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tessera/scheduler/rate_monitor.h"

namespace tessera::scheduler {
namespace {

bool SamePlan(const Plan& a, const Plan& b) {
  if (a.num_gpus != b.num_gpus || a.gpulets.size() != b.gpulets.size() ||
      a.unschedulable != b.unschedulable) {
    return false;
  }
  for (size_t i = 0; i < a.gpulets.size(); ++i) {
    const Gpulet& x = a.gpulets[i];
    const Gpulet& y = b.gpulets[i];
    if (x.gpu != y.gpu || x.partition_pct != y.partition_pct || x.duty_ms != y.duty_ms ||
        x.models.size() != y.models.size()) {
      return false;
    }
    for (size_t j = 0; j < x.models.size(); ++j) {
      if (x.models[j].model != y.models[j].model || x.models[j].batch != y.models[j].batch ||
          x.models[j].rate_rps != y.models[j].rate_rps) {
        return false;
      }
    }
  }
  return true;
}

// What executors a plan needs: (gpu, partition, models) per gpulet, order-free.
std::multiset<std::tuple<int, int, std::set<std::string>>> Partitioning(const Plan& plan) {
  std::multiset<std::tuple<int, int, std::set<std::string>>> out;
  for (const Gpulet& g : plan.gpulets) {
    std::set<std::string> models;
    for (const GpuletModel& m : g.models) models.insert(m.model);
    out.insert({g.gpu, g.partition_pct, std::move(models)});
  }
  return out;
}

}  // namespace

std::string UnschedulableEvent::ToString() const {
  std::string out = absl::StrCat("unschedulable on ", gpu_limit, " GPUs:");
  for (size_t i = 0; i < models.size(); ++i) {
    absl::StrAppendFormat(&out, "%s %s (%.1f rps, SLO %.0f ms)", i == 0 ? "" : ",", models[i].model,
                          models[i].rate_rps, models[i].slo_ms);
  }
  return out;
}

StatusOr<Autoscaler> Autoscaler::Create(Planner* planner, std::vector<ModelDemand> models,
                                        AutoscalerOptions options) {
  if (planner == nullptr) return absl::InvalidArgumentError("autoscaler needs a planner");
  if (options.gpu_limit < 1 || options.initial_gpus < 1 ||
      options.initial_gpus > options.gpu_limit) {
    return absl::InvalidArgumentError(absl::StrCat("autoscaler: need 1 ≤ initial_gpus (",
                                                   options.initial_gpus, ") ≤ gpu_limit (",
                                                   options.gpu_limit, ")"));
  }
  if (options.scale_down_epochs < 1 || !(options.scale_down_fall >= 0)) {
    return absl::InvalidArgumentError(
        "autoscaler: scale_down_epochs must be ≥ 1 and scale_down_fall ≥ 0");
  }
  std::set<std::string> names;
  for (const ModelDemand& m : models) {
    if (m.model.empty() || !names.insert(m.model).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("autoscaler: model name '", m.model, "' is empty or repeated"));
    }
    if (!(m.slo_ms > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("autoscaler: model '", m.model, "': SLO must be > 0 ms"));
    }
  }
  return Autoscaler(planner, std::move(models), options);
}

Autoscaler::Autoscaler(Planner* planner, std::vector<ModelDemand> models, AutoscalerOptions options)
    : planner_(planner), models_(std::move(models)), options_(options) {}

StatusOr<AutoscaleDecision> Autoscaler::Step(double now_ms,
                                             const std::map<std::string, double>& measured_rps) {
  for (const auto& [name, rate] : measured_rps) {
    const bool known = std::any_of(models_.begin(), models_.end(),
                                   [&](const ModelDemand& m) { return m.model == name; });
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("autoscaler: rate for unknown model '", name, "'"));
    }
    if (!(rate >= 0) || !std::isfinite(rate)) {
      return absl::InvalidArgumentError(
          absl::StrCat("autoscaler: model '", name, "': rate ", rate, " rps is not ≥ 0"));
    }
  }
  AutoscaleDecision decision;
  for (ModelDemand target : models_) {
    auto it = measured_rps.find(target.model);
    const double measured = it == measured_rps.end() ? 0 : it->second;
    target.rate_rps = options_.poisson_headroom ? PoissonHeadroomRps(measured) : measured;
    decision.targets.push_back(std::move(target));
  }
  const std::vector<ModelDemand>& targets = decision.targets;

  // Alg. 2 l.2–7: the GPUs held now first (incrementally), then one more at a time.
  const int held = plan_ ? num_gpus_ : options_.initial_gpus;
  StatusOr<Plan> attempt =
      plan_ ? planner_->Replan(*plan_, targets, held) : planner_->MakePlan(targets, held);
  if (!attempt.ok()) return attempt.status();
  int gpus = held;
  while (!attempt->schedulable() && gpus < options_.gpu_limit) {
    ++gpus;
    attempt = planner_->MakePlan(targets, gpus);
    if (!attempt.ok()) return attempt.status();
  }

  if (!attempt->schedulable()) {
    // l.8: report, and keep serving what was running if it ever fit everything.
    UnschedulableEvent event;
    event.time_ms = now_ms;
    event.gpu_limit = options_.gpu_limit;
    for (const ModelDemand& t : targets) {
      if (std::find(attempt->unschedulable.begin(), attempt->unschedulable.end(), t.model) !=
          attempt->unschedulable.end()) {
        event.models.push_back(t);
      }
    }
    decision.event = std::move(event);
    quiet_epochs_ = 0;
    if (!plan_ || !plan_schedulable_) {
      decision.replanned = !plan_ || !SamePlan(*plan_, *attempt);
      decision.repartitioned = !plan_ || Partitioning(*plan_) != Partitioning(*attempt);
      decision.scaled = plan_ && gpus > num_gpus_ ? 1 : 0;
      plan_ = *attempt;
      num_gpus_ = gpus;
      plan_schedulable_ = false;
    }
    decision.plan = *plan_;
    decision.num_gpus = num_gpus_;
    return decision;
  }

  Plan chosen = *std::move(attempt);
  if (gpus > held) {
    decision.scaled = 1;
    quiet_epochs_ = 0;
  } else if (gpus > 1) {
    // Scale-down hysteresis (header, rule 4): the targets with scale_down_fall more must fit on
    // one GPU less, K epochs in a row. The margin keeps a load just under N − 1 GPUs' capacity
    // from flapping between N − 1 and N; the K epochs keep one quiet epoch from giving back a GPU
    // the next one needs. (A "fell by 10 % since scale-up" reference would never release GPUs
    // that the first epoch over-provisioned, nor a second GPU after the first.)
    std::vector<ModelDemand> raised = targets;
    for (ModelDemand& d : raised) d.rate_rps *= 1 + options_.scale_down_fall;
    StatusOr<Plan> smaller = planner_->MakePlan(raised, gpus - 1);
    if (!smaller.ok()) return smaller.status();
    quiet_epochs_ = smaller->schedulable() ? quiet_epochs_ + 1 : 0;
    if (quiet_epochs_ >= options_.scale_down_epochs) {
      StatusOr<Plan> down = planner_->MakePlan(targets, gpus - 1);
      if (!down.ok()) return down.status();
      if (down->schedulable()) {
        chosen = *std::move(down);
        --gpus;
        decision.scaled = -1;
      }
      quiet_epochs_ = 0;
    }
  } else {
    quiet_epochs_ = 0;
  }
  decision.replanned = !plan_ || !SamePlan(*plan_, chosen);
  decision.repartitioned = !plan_ || Partitioning(*plan_) != Partitioning(chosen);
  plan_ = chosen;
  plan_schedulable_ = true;
  num_gpus_ = gpus;
  decision.plan = std::move(chosen);
  decision.num_gpus = gpus;
  return decision;
}

}  // namespace tessera::scheduler
