#include "baseline_common.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "slo_rules.h"

namespace tessera::scheduler::baseline {
namespace {

Status CheckOptions(const PlannerOptions& o) {
  if (o.partitions_pct.empty()) {
    return absl::InvalidArgumentError("planner options: partitions_pct is empty");
  }
  for (int p : o.partitions_pct) {
    if (p <= 0 || p > 100) {
      return absl::InvalidArgumentError(
          absl::StrCat("planner options: partition ", p, " % is outside (0, 100]"));
    }
  }
  if (o.max_gpulets_per_gpu < 1) {
    return absl::InvalidArgumentError("planner options: max_gpulets_per_gpu must be >= 1");
  }
  if (o.max_models_per_gpulet < 1) {
    return absl::InvalidArgumentError("planner options: max_models_per_gpulet must be >= 1");
  }
  if (o.max_batch < 1) return absl::InvalidArgumentError("planner options: max_batch must be >= 1");
  if (!(o.latency_margin > 0)) {
    return absl::InvalidArgumentError("planner options: latency_margin must be > 0");
  }
  if (!(o.memory_room > 0 && o.memory_room <= 1)) {
    return absl::InvalidArgumentError("planner options: memory_room must be in (0, 1]");
  }
  if (!(o.per_gpulet_overhead_mb >= 0) || !(o.gpu_memory_mb >= 0) || !(o.rate_slack_rps >= 0)) {
    return absl::InvalidArgumentError(
        "planner options: per_gpulet_overhead_mb, gpu_memory_mb and rate_slack_rps must be >= 0");
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<std::vector<Demand>> ResolveDemands(const std::vector<ModelDemand>& demands, int num_gpus,
                                             const ProfileSet& profiles,
                                             const PlannerOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckOptions(options));
  if (num_gpus < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_gpus must be >= 1, got ", num_gpus));
  }
  std::vector<Demand> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < demands.size(); ++i) {
    const ModelDemand& d = demands[i];
    if (d.model.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("demand ", i, " has no model name"));
    }
    if (!seen.insert(d.model).second) {
      return absl::InvalidArgumentError(absl::StrCat("model '", d.model, "' is listed twice"));
    }
    if (!(d.rate_rps >= 0) || !std::isfinite(d.rate_rps)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", d.model, "': rate ", d.rate_rps, " rps is not a rate >= 0"));
    }
    if (!(d.slo_ms > 0) || !std::isfinite(d.slo_ms)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", d.model, "': SLO ", d.slo_ms, " ms must be > 0"));
    }
    TESSERA_ASSIGN_OR_RETURN(const ModelProfile* profile, profiles.Get(d.profile_name()));
    out.push_back({d.model, profile, d.rate_rps, d.slo_ms, static_cast<int>(i),
                   std::max(0.0, d.rate_rps - options.rate_slack_rps)});
  }
  return out;
}

double UsableMemoryMb(const ProfileSet& profiles, const PlannerOptions& options) {
  const double capacity =
      options.gpu_memory_mb > 0 ? options.gpu_memory_mb : profiles.device().memory_mb;
  if (capacity <= 0) return std::numeric_limits<double>::infinity();
  return options.memory_room * capacity;
}

int MaxBatch(const ModelProfile& profile, const PlannerOptions& options) {
  return std::min(options.max_batch, profile.max_batch());
}

const PartitionTable& ProfileCache::Get(const ModelProfile* profile, int partition_pct) {
  auto [it, inserted] = tables_.try_emplace({profile, partition_pct});
  PartitionTable& t = it->second;
  if (inserted) {
    t.profile = profile;
    t.partition_pct = partition_pct;
    t.max_batch = std::min(max_batch_, profile->max_batch());
    t.latency_ms.assign(t.max_batch + 1, 0);
    t.l2_util.assign(t.max_batch + 1, 0);
    t.dram_util.assign(t.max_batch + 1, 0);
    for (int b = 1; b <= t.max_batch; ++b) {
      t.latency_ms[b] = profile->LatencyMs(b, partition_pct);
      t.l2_util[b] = profile->L2Util(b, partition_pct);
      t.dram_util[b] = profile->DramUtil(b, partition_pct);
    }
  }
  return t;
}

Saturated SaturatedOn(const PartitionTable& table, double slo_ms, double factor, double margin) {
  // seed 001 §2.4: saturated rule 2·L(b,p) ≤ SLO, as MaxSaturatedBatch.
  for (int b = table.max_batch; b >= 1; --b) {
    const double latency = table.latency_ms[b] * factor * margin;
    if (2 * latency <= slo_ms) return {b, latency, b * 1000.0 / latency};
  }
  return {};
}

namespace {

int BatchAt(double duty_ms, double rate_rps, bool shared) {
  return RoundBatch(duty_ms, rate_rps, shared);
}

}  // namespace

std::optional<Round> FastFitRound(const std::vector<FastMember>& members, double margin,
                                  RoundChoice choice) {
  if (members.empty()) return std::nullopt;
  double min_slo = std::numeric_limits<double>::infinity();
  // Scratch reused across calls: the ideal search calls this hundreds of thousands of times.
  thread_local std::vector<double> steps;
  thread_local std::vector<int> batches;
  steps.clear();
  const bool shared = members.size() > 1;
  for (const FastMember& m : members) {
    if (m.rate_rps <= 0) return std::nullopt;
    min_slo = std::min(min_slo, m.slo_ms);
    // Each member's steps ascend; merging the runs is cheaper than sorting them.
    const size_t run = steps.size();
    for (int k = 1; k <= m.table->max_batch; ++k) {
      steps.push_back(1000.0 * RoundBatchMaxMean(k, shared) / m.rate_rps);
    }
    std::inplace_merge(steps.begin(), steps.begin() + run, steps.end());
  }

  batches.assign(members.size(), 0);
  // Σ L at duty d, with the batches it implies; negative when a batch exceeds its max.
  auto total_at = [&](double duty) {
    double total = 0;
    for (size_t j = 0; j < members.size(); ++j) {
      const FastMember& m = members[j];
      batches[j] = BatchAt(duty, m.rate_rps, shared);
      if (batches[j] > m.table->max_batch) return -1.0;
      total += m.table->latency_ms[batches[j]] * m.factor * margin;
    }
    return total;
  };
  std::optional<Round> best;
  enum class Verdict { kInfeasible, kFeasible, kDone };
  auto consider = [&](double duty) {
    const double total = total_at(duty);
    if (total < 0 || total > duty || total + duty > min_slo) return Verdict::kInfeasible;
    const double occupancy = total / duty;
    if (!best || occupancy < best->occupancy - 1e-12) {
      Round round;
      round.duty_ms = duty;
      round.batches = batches;
      round.occupancy = occupancy;
      for (size_t j = 0; j < members.size(); ++j) {
        round.latencies_ms.push_back(members[j].table->latency_ms[batches[j]] * members[j].factor *
                                     margin);
      }
      best = std::move(round);
    }
    return choice == RoundChoice::kMinDuty ? Verdict::kDone : Verdict::kFeasible;
  };
  double left = 0;  // batches are constant for duties in (left, step]
  for (double step : steps) {
    if (step == left) continue;  // FitRound drops duplicate steps
    // Every duty beyond min SLO breaks Σ L + d ≤ SLO; FitRound would find nothing more.
    if (left >= min_slo) break;
    const Verdict verdict = consider(step);
    if (verdict == Verdict::kDone) break;
    if (verdict == Verdict::kInfeasible) {
      // As FitRound: when the step fails, the SLO may still allow a shorter round with the same
      // batches, d = min SLO − Σ L, inside (left, step).
      const double total = total_at(step);
      // Batches only grow with the duty: once one exceeds its max, every longer duty fails too.
      if (total < 0) break;
      const double capped = min_slo - total;
      if (capped > left * (1 + 1e-9) && capped < step && consider(capped) == Verdict::kDone) {
        break;
      }
    }
    left = step;
  }
  return best;
}

namespace {

using Factors = std::vector<std::vector<double>>;  // [gpulet][member]

// Evaluates every gpulet with fixed interference factors; nullopt when one fails.
std::optional<std::vector<GpuletEval>> EvaluateWithFactors(const std::vector<GpuletSpec>& gpulets,
                                                           const Factors& factors,
                                                           ProfileCache& cache,
                                                           const PlannerOptions& options,
                                                           RoundChoice choice) {
  std::vector<GpuletEval> evals(gpulets.size());
  const double margin = options.latency_margin;
  for (size_t g = 0; g < gpulets.size(); ++g) {
    const GpuletSpec& spec = gpulets[g];
    GpuletEval& eval = evals[g];
    if (spec.members.empty()) continue;
    if (spec.members.size() == 1 && spec.members[0].saturated) {
      const Demand& d = *spec.members[0].demand;
      const Saturated s =
          SaturatedOn(cache.Get(d.profile, spec.partition_pct), d.slo_ms, factors[g][0], margin);
      if (s.batch == 0) return std::nullopt;
      eval.duty_ms = s.latency_ms;
      eval.occupancy = 1;
      eval.batches = {s.batch};
      eval.latencies_ms = {s.latency_ms};
      eval.rates_rps = {s.throughput_rps};
      continue;
    }
    std::vector<FastMember> members;
    for (size_t j = 0; j < spec.members.size(); ++j) {
      const MemberSpec& m = spec.members[j];
      if (m.saturated) return std::nullopt;  // a saturated member must be alone
      members.push_back({&cache.Get(m.demand->profile, spec.partition_pct), m.rate_rps,
                         m.demand->slo_ms, factors[g][j]});
    }
    std::optional<Round> round = FastFitRound(members, margin, choice);
    if (!round) return std::nullopt;
    eval.duty_ms = round->duty_ms;
    eval.occupancy = round->occupancy;
    eval.batches = round->batches;
    eval.latencies_ms = round->latencies_ms;
    for (const MemberSpec& m : spec.members) eval.rates_rps.push_back(m.rate_rps);
  }
  return evals;
}

// The factors the evaluated batches imply: per member, the max interference from the members of
// the other non-empty gpulets on the GPU (seed 001 §4.4 [R]: max over co-runners), 1 if none.
Factors ImpliedFactors(const std::vector<GpuletSpec>& gpulets, const std::vector<GpuletEval>& evals,
                       ProfileCache& cache, const InterferenceModel& interference) {
  Factors factors(gpulets.size());
  for (size_t g = 0; g < gpulets.size(); ++g) {
    factors[g].assign(gpulets[g].members.size(), 1.0);
    if (interference.kind() == InterferenceModel::Kind::kNone) continue;
    for (size_t j = 0; j < gpulets[g].members.size(); ++j) {
      const PartitionTable& self =
          cache.Get(gpulets[g].members[j].demand->profile, gpulets[g].partition_pct);
      const int b = evals[g].batches[j];
      double factor = 1;
      for (size_t h = 0; h < gpulets.size(); ++h) {
        if (h == g) continue;
        for (size_t k = 0; k < gpulets[h].members.size(); ++k) {
          const PartitionTable& other =
              cache.Get(gpulets[h].members[k].demand->profile, gpulets[h].partition_pct);
          const int bo = evals[h].batches[k];
          factor = std::max(factor, interference.Factor(self.l2_util[b], self.dram_util[b],
                                                        other.l2_util[bo], other.dram_util[bo]));
        }
      }
      factors[g][j] = factor;
    }
  }
  return factors;
}

}  // namespace

std::optional<std::vector<GpuletEval>> EvaluateGpu(const std::vector<GpuletSpec>& gpulets,
                                                   ProfileCache& cache,
                                                   const InterferenceModel& interference,
                                                   const PlannerOptions& options) {
  constexpr int kMaxPasses = 8;
  for (RoundChoice choice : {RoundChoice::kMinOccupancy, RoundChoice::kMinDuty}) {
    // Pessimistic fixed point: evaluate with factors F, compute the factors F' the chosen batches
    // really cause, and accept once F' ≤ F (every latency can only be lower than planned, so all
    // rules still hold); otherwise raise F to max(F, F') and refit.
    Factors factors(gpulets.size());
    for (size_t g = 0; g < gpulets.size(); ++g) factors[g].assign(gpulets[g].members.size(), 1.0);
    for (int pass = 0; pass < kMaxPasses; ++pass) {
      std::optional<std::vector<GpuletEval>> evals =
          EvaluateWithFactors(gpulets, factors, cache, options, choice);
      // Without interference both choices find a round exactly when one exists: nothing to retry.
      if (!evals && pass == 0) return std::nullopt;
      if (!evals) break;
      const Factors implied = ImpliedFactors(gpulets, *evals, cache, interference);
      bool settled = true;
      for (size_t g = 0; g < gpulets.size(); ++g) {
        for (size_t j = 0; j < implied[g].size(); ++j) {
          if (implied[g][j] > factors[g][j]) {
            settled = false;
            factors[g][j] = implied[g][j];
          }
        }
      }
      if (!settled) continue;
      // Report the latencies the real factors give (what CheckPlan recomputes).
      for (size_t g = 0; g < gpulets.size(); ++g) {
        for (size_t j = 0; j < implied[g].size(); ++j) {
          const PartitionTable& t =
              cache.Get(gpulets[g].members[j].demand->profile, gpulets[g].partition_pct);
          (*evals)[g].latencies_ms[j] =
              t.latency_ms[(*evals)[g].batches[j]] * implied[g][j] * options.latency_margin;
        }
      }
      return evals;
    }
    if (interference.kind() == InterferenceModel::Kind::kNone) break;
  }
  return std::nullopt;
}

double GpuMemoryMb(const std::vector<GpuletSpec>& gpulets, const PlannerOptions& options) {
  double total = 0;
  for (const GpuletSpec& g : gpulets) {
    if (g.members.empty()) continue;
    total += options.per_gpulet_overhead_mb;
    for (const MemberSpec& m : g.members) total += m.demand->profile->memory_mb();
  }
  return total;
}

Gpulet MakeGpulet(int gpu, const GpuletSpec& spec, const GpuletEval& eval) {
  Gpulet g;
  g.gpu = gpu;
  g.partition_pct = spec.partition_pct;
  g.duty_ms = eval.duty_ms;
  for (size_t j = 0; j < spec.members.size(); ++j) {
    g.models.push_back(
        {spec.members[j].demand->model, eval.batches[j], eval.rates_rps[j], eval.latencies_ms[j]});
  }
  return g;
}

std::vector<std::string> UncoveredModels(const std::vector<Demand>& demands,
                                         const std::vector<bool>& covered) {
  std::vector<std::string> out;
  for (size_t i = 0; i < demands.size(); ++i) {
    if (demands[i].target_rps > kRateEpsilon && !covered[i]) out.push_back(demands[i].model);
  }
  return out;
}

}  // namespace tessera::scheduler::baseline
