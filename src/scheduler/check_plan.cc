// CheckPlan: the rules every plan must keep, whoever made it (contract in planner.h).
//
// Choices the contract leaves open, and why:
//  - A gpulet with no models is a reserved but idle partition: it counts toward a GPU's Σ % and
//    gpulet count (it holds SMs), but not toward memory (no executor process runs for it).
//  - Comparisons allow a relative 1e-9 (plus 1e-9 absolute) of floating-point noise, and batches
//    are checked at rate·duty/1000 − 1e-6: planners derive duties as 1000·k/r, which rounds.
//  - A round's batch must be at least RoundBatch's (slo_rules.h: b ≥ rate·duty/1000, plus a spare
//    slot for tiny batches in rounds of two or more models).
//  - Non-exclusive plans (Triton-like) run one process per GPU: the per-gpulet overhead is
//    charged once per GPU there.
//  - Unknown device memory (neither options.gpu_memory_mb nor the profile set's device gives it)
//    disables the memory rule rather than failing every plan.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "slo_rules.h"
#include "tessera/scheduler/planner.h"

namespace tessera::scheduler {
namespace {

constexpr double kRelativeTolerance = 1e-9;
constexpr double kBatchTolerance = 1e-6;

bool AtMost(double a, double b) {
  return a <= b + kRelativeTolerance * std::max(std::fabs(a), std::fabs(b)) + kRelativeTolerance;
}

std::string Name(const Plan& plan, size_t index) {
  const Gpulet& g = plan.gpulets[index];
  return absl::StrCat("gpulet #", index, " (gpu ", g.gpu, ", ", g.partition_pct, "%)");
}

Status Violation(const std::string& what) { return absl::FailedPreconditionError(what); }

struct ModelInfo {
  const ModelDemand* demand = nullptr;
  const ModelProfile* profile = nullptr;
};

}  // namespace

Status CheckPlan(const Plan& plan, const std::vector<ModelDemand>& demands,
                 const ProfileSet& profiles, const InterferenceModel& interference,
                 const PlannerOptions& options) {
  std::map<std::string, ModelInfo, std::less<>> models;
  for (const ModelDemand& d : demands) {
    TESSERA_ASSIGN_OR_RETURN(const ModelProfile* profile, profiles.Get(d.profile_name()));
    if (!models.emplace(d.model, ModelInfo{&d, profile}).second) {
      return absl::InvalidArgumentError(absl::StrCat("model '", d.model, "' is demanded twice"));
    }
  }
  std::set<std::string, std::less<>> unschedulable;
  for (const std::string& m : plan.unschedulable) {
    if (!models.contains(m)) {
      return Violation(absl::StrCat("unschedulable model '", m, "' is not in the demands"));
    }
    unschedulable.insert(m);
  }

  // Per-gpulet shape rules.
  const std::set<int> allowed(options.partitions_pct.begin(), options.partitions_pct.end());
  std::map<int, std::vector<size_t>> by_gpu;
  for (size_t i = 0; i < plan.gpulets.size(); ++i) {
    const Gpulet& g = plan.gpulets[i];
    if (g.gpu < 0 || g.gpu >= plan.num_gpus) {
      return Violation(
          absl::StrCat(Name(plan, i), ": gpu ", g.gpu, " is outside [0, ", plan.num_gpus, ")"));
    }
    if (!allowed.contains(g.partition_pct)) {
      return Violation(
          absl::StrCat(Name(plan, i), ": partition ", g.partition_pct, "% is not an allowed size"));
    }
    if (!(g.duty_ms >= 0) || !std::isfinite(g.duty_ms)) {
      return Violation(absl::StrCat(Name(plan, i), ": duty ", g.duty_ms, " ms is not ≥ 0"));
    }
    if (static_cast<int>(g.models.size()) > options.max_models_per_gpulet) {
      return Violation(absl::StrCat(Name(plan, i), ": ", g.models.size(), " models, more than the ",
                                    options.max_models_per_gpulet, " allowed per gpulet"));
    }
    std::set<std::string_view> seen;
    for (const GpuletModel& m : g.models) {
      if (!models.contains(m.model)) {
        return Violation(
            absl::StrCat(Name(plan, i), ": model '", m.model, "' is not in the demands"));
      }
      if (!seen.insert(m.model).second) {
        return Violation(absl::StrCat(Name(plan, i), ": model '", m.model, "' appears twice"));
      }
      if (m.batch < 1 || m.batch > options.max_batch) {
        return Violation(absl::StrCat(Name(plan, i), ": model '", m.model, "': batch ", m.batch,
                                      " is outside [1, ", options.max_batch, "]"));
      }
      if (!(m.rate_rps >= 0) || !std::isfinite(m.rate_rps)) {
        return Violation(absl::StrCat(Name(plan, i), ": model '", m.model, "': rate ", m.rate_rps,
                                      " rps is not ≥ 0"));
      }
    }
    by_gpu[g.gpu].push_back(i);
  }

  // Per-GPU rules: partition sum, gpulet count, memory admission (seed 001 §1.3 [R]).
  const double gpu_memory_mb =
      options.gpu_memory_mb > 0 ? options.gpu_memory_mb : profiles.device().memory_mb;
  for (const auto& [gpu, indices] : by_gpu) {
    if (plan.partitions_exclusive) {
      int sum = 0;
      for (size_t i : indices) sum += plan.gpulets[i].partition_pct;
      if (sum > 100) {
        return Violation(absl::StrCat("gpu ", gpu, ": partitions add up to ", sum, "% > 100%"));
      }
      if (static_cast<int>(indices.size()) > options.max_gpulets_per_gpu) {
        return Violation(absl::StrCat("gpu ", gpu, ": ", indices.size(), " gpulets, more than the ",
                                      options.max_gpulets_per_gpu, " allowed"));
      }
    }
    if (gpu_memory_mb > 0) {
      double used_mb = 0;
      bool process_counted = false;
      for (size_t i : indices) {
        const Gpulet& g = plan.gpulets[i];
        if (g.models.empty()) continue;
        // Without exclusive partitions (Triton-like) one server process per GPU holds every
        // instance, so its overhead is paid once per GPU.
        if (plan.partitions_exclusive || !process_counted) {
          used_mb += options.per_gpulet_overhead_mb;
        }
        process_counted = true;
        for (const GpuletModel& m : g.models)
          used_mb += models.find(m.model)->second.profile->memory_mb();
      }
      const double room_mb = options.memory_room * gpu_memory_mb;
      if (!AtMost(used_mb, room_mb)) {
        return Violation(
            absl::StrFormat("gpu %d: memory %.0f MB (models + %.0f MB per gpulet) exceeds %.0f MB "
                            "(%.2f of %.0f MB)",
                            gpu, used_mb, options.per_gpulet_overhead_mb, room_mb,
                            options.memory_room, gpu_memory_mb));
      }
    }
  }

  // SLO rules of a round (seed 001 §2.4), latencies recomputed under interference from the other
  // gpulets of the same GPU.
  for (const auto& [gpu, indices] : by_gpu) {
    for (size_t i : indices) {
      const Gpulet& g = plan.gpulets[i];
      if (g.duty_ms == 0 || g.models.empty()) continue;
      std::vector<double> latencies;
      double total = 0;
      for (const GpuletModel& m : g.models) {
        const ModelProfile& self = *models.find(m.model)->second.profile;
        double factor = 1;
        for (size_t k : indices) {
          if (k == i) continue;
          const Gpulet& other = plan.gpulets[k];
          for (const GpuletModel& o : other.models) {
            factor = std::max(factor, interference.Factor(self, m.batch, g.partition_pct,
                                                          *models.find(o.model)->second.profile,
                                                          o.batch, other.partition_pct));
          }
        }
        const double latency =
            ScheduledLatencyMs(self, m.batch, g.partition_pct, factor, options.latency_margin);
        latencies.push_back(latency);
        total += latency;
        // The batch rule (RoundBatch: a spare slot in time-shared rounds), evaluated a hair
        // below the planned mean.
        const double mean = m.rate_rps * g.duty_ms / 1000.0;
        const int needed =
            RoundBatch(std::max(0.0, mean - kBatchTolerance), 1000.0, g.models.size() > 1);
        if (m.rate_rps > 0 && m.batch < needed) {
          return Violation(absl::StrFormat(
              "%s: model '%s': batch %d is below the %d the round rule asks for %.3f requests "
              "arriving per %.3f ms round at %.2f rps (RoundBatch: Poisson bursts)",
              Name(plan, i), m.model, m.batch, needed, mean, g.duty_ms, m.rate_rps));
        }
      }
      if (!AtMost(total, g.duty_ms)) {
        return Violation(absl::StrFormat("%s: Σ latency %.3f ms exceeds the duty cycle %.3f ms",
                                         Name(plan, i), total, g.duty_ms));
      }
      for (const GpuletModel& m : g.models) {
        const double slo = models.find(m.model)->second.demand->slo_ms;
        if (!AtMost(total + g.duty_ms, slo)) {
          return Violation(absl::StrFormat(
              "%s: model '%s': Σ latency %.3f ms + duty %.3f ms exceeds its SLO %.3f ms",
              Name(plan, i), m.model, total, g.duty_ms, slo));
        }
      }
    }
  }

  // Every schedulable model's rate is routed somewhere.
  for (const ModelDemand& d : demands) {
    if (unschedulable.contains(d.model)) continue;
    const double assigned = plan.AssignedRate(d.model);
    if (!AtMost(d.rate_rps - options.rate_slack_rps, assigned)) {
      return Violation(absl::StrFormat(
          "model '%s': %.3f rps routed to gpulets, less than its rate %.3f rps (slack %.3f)",
          d.model, assigned, d.rate_rps, options.rate_slack_rps));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::scheduler
