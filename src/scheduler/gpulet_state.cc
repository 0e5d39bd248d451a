#include "gpulet_state.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "gpulet_builder.h"
#include "slo_rules.h"

namespace tessera::scheduler::gpulet {
namespace {

// Iterations of the interference fixed point. Factors only grow, so a pair of gpulets usually
// settles in two or three; more means batches keep shrinking each other and the GPU is refused.
constexpr int kMaxFactorIterations = 6;

// The saturated round of a lone member: the largest batch with 2·L ≤ SLO, run back to back
// (seed 001 §2.4 [R] getMaxBatch). Serves min(want, capacity).
bool SolveSaturated(const Context& c, int pct, Member& m, double& duty_ms) {
  const ModelInfo& info = c.models[m.model];
  const std::vector<double>* table = LatencyTable(c, m.model, pct);
  int batch = 0;
  double latency = 0;
  if (table != nullptr) {
    // MaxSaturatedBatch over the precomputed L(b, pct), same arithmetic.
    for (int b = std::min<int>(c.options.max_batch, table->size() - 1); b >= 1; --b) {
      latency = (*table)[b] * m.factor * c.options.latency_margin;
      if (2 * latency <= info.slo_ms) {
        batch = b;
        break;
      }
    }
  } else {
    batch = MaxSaturatedBatch(*info.profile, pct, info.slo_ms, m.factor, c.options.latency_margin,
                              c.options.max_batch);
    if (batch > 0) {
      latency = ScheduledLatencyMs(*info.profile, batch, pct, m.factor, c.options.latency_margin);
    }
  }
  if (batch == 0) return false;
  m.batch = batch;
  m.latency_ms = latency;
  // Keep the capacity a hair under b·1000/L so that b ≥ rate·duty/1000 survives rounding.
  const double capacity = batch * 1000.0 / m.latency_ms * (1 - 1e-12);
  m.rate_rps = std::min(m.want_rps, capacity);
  duty_ms = m.latency_ms;
  return true;
}

bool SolveSlot(const Context& c, Slot& slot) {
  if (slot.members.size() == 1 && slot.members[0].saturated) {
    return SolveSaturated(c, slot.pct, slot.members[0], slot.duty_ms);
  }
  std::vector<RoundMember> round_members;
  for (const Member& m : slot.members) {
    const ModelInfo& info = c.models[m.model];
    round_members.push_back(
        {info.profile, m.want_rps, info.slo_ms, m.factor, LatencyTable(c, m.model, slot.pct)});
  }
  std::optional<Round> round =
      FitRound(round_members, slot.pct, c.options.latency_margin, c.options.max_batch);
  if (!round) {
    // A lone model can always fall back to serving what its saturated round holds.
    return slot.members.size() == 1 && SolveSaturated(c, slot.pct, slot.members[0], slot.duty_ms);
  }
  slot.duty_ms = round->duty_ms;
  for (size_t i = 0; i < slot.members.size(); ++i) {
    Member& m = slot.members[i];
    m.batch = round->batches[i];
    m.latency_ms = round->latencies_ms[i];
    m.rate_rps = m.want_rps;
  }
  return true;
}

}  // namespace

Status ValidatePlannerOptions(const PlannerOptions& o) {
  if (o.partitions_pct.empty()) return absl::InvalidArgumentError("no partition sizes allowed");
  for (int p : o.partitions_pct) {
    if (p <= 0 || p > 100) {
      return absl::InvalidArgumentError(
          absl::StrCat("partition size ", p, "% is outside (0, 100]"));
    }
  }
  if (o.max_gpulets_per_gpu < 1 || o.max_models_per_gpulet < 1 || o.max_batch < 1) {
    return absl::InvalidArgumentError(
        "max_gpulets_per_gpu, max_models_per_gpulet and max_batch must be ≥ 1");
  }
  if (!(o.latency_margin > 0) || !(o.memory_room > 0) || !(o.per_gpulet_overhead_mb >= 0) ||
      !(o.gpu_memory_mb >= 0) || !(o.rate_slack_rps >= 0)) {
    return absl::InvalidArgumentError(
        "latency_margin and memory_room must be > 0; memory sizes and rate slack ≥ 0");
  }
  return absl::OkStatus();
}

StatusOr<Context> BuildContext(const ProfileSet& profiles, const InterferenceModel* interference,
                               const PlannerOptions& options,
                               const std::vector<ModelDemand>& demands) {
  TESSERA_RETURN_IF_ERROR(ValidatePlannerOptions(options));
  Context c;
  c.interference = interference;
  c.options = options;
  std::set<int> sizes(options.partitions_pct.begin(), options.partitions_pct.end());
  c.partitions.assign(sizes.begin(), sizes.end());
  c.gpu_memory_mb = options.gpu_memory_mb > 0 ? options.gpu_memory_mb : profiles.device().memory_mb;
  std::set<std::string> names;
  for (const ModelDemand& d : demands) {
    if (d.model.empty()) return absl::InvalidArgumentError("a demand has an empty model name");
    if (!names.insert(d.model).second) {
      return absl::InvalidArgumentError(absl::StrCat("model '", d.model, "' is demanded twice"));
    }
    if (!(d.rate_rps >= 0) || !std::isfinite(d.rate_rps)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", d.model, "': rate ", d.rate_rps, " rps is not ≥ 0"));
    }
    if (!(d.slo_ms > 0) || !std::isfinite(d.slo_ms)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", d.model, "': SLO ", d.slo_ms, " ms is not > 0"));
    }
    TESSERA_ASSIGN_OR_RETURN(const ModelProfile* profile, profiles.Get(d.profile_name()));
    ModelInfo info;
    info.name = d.model;
    info.profile = profile;
    info.rate_rps = d.rate_rps;
    info.slo_ms = d.slo_ms;
    DeriveModelInfo(c, info);
    c.models.push_back(std::move(info));
  }
  return c;
}

const std::vector<double>* LatencyTable(const Context& c, int model, int pct) {
  const auto it = std::lower_bound(c.partitions.begin(), c.partitions.end(), pct);
  if (it == c.partitions.end() || *it != pct) return nullptr;
  return &c.models[model].latency_ms[it - c.partitions.begin()];
}

int Gpu::UsedPct() const {
  int used = 0;
  for (const Slot& s : slots) used += s.pct;
  return used;
}

bool SolveGpu(const Context& c, Gpu& gpu) {
  // Without interference, or with a constant slowdown, factors do not depend on batches: one
  // pass with the final factors. A linear model starts from 1 and iterates.
  const bool alone = gpu.slots.size() <= 1;
  const InterferenceModel::Kind kind = c.interference->kind();
  const bool fixed = alone || kind != InterferenceModel::Kind::kLinear;
  const double initial = alone || kind != InterferenceModel::Kind::kConstant
                             ? 1.0
                             : c.interference->Factor(0, 0, 0, 0);
  for (Slot& s : gpu.slots) {
    for (Member& m : s.members) m.factor = initial;
  }
  for (int iteration = 0; iteration < kMaxFactorIterations; ++iteration) {
    for (Slot& s : gpu.slots) {
      if (!SolveSlot(c, s)) return false;
    }
    if (fixed) return true;
    // The factor of a member is the max over the members of the other slots (seed 001 §4.4 [R]),
    // each side at its solved batch and partition.
    bool grew = false;
    for (size_t i = 0; i < gpu.slots.size(); ++i) {
      Slot& s = gpu.slots[i];
      for (Member& m : s.members) {
        double factor = 1;
        for (size_t k = 0; k < gpu.slots.size(); ++k) {
          if (k == i) continue;
          for (const Member& o : gpu.slots[k].members) {
            factor = std::max(factor, c.interference->Factor(*c.models[m.model].profile, m.batch,
                                                             s.pct, *c.models[o.model].profile,
                                                             o.batch, gpu.slots[k].pct));
          }
        }
        if (factor > m.factor * (1 + 1e-12)) {
          m.factor = factor;
          grew = true;
        }
      }
    }
    if (!grew) return true;
  }
  return false;
}

bool MemoryFits(const Context& c, const Gpu& gpu) {
  if (c.gpu_memory_mb <= 0) return true;
  double used = 0;
  for (const Slot& s : gpu.slots) {
    used += c.options.per_gpulet_overhead_mb;
    for (const Member& m : s.members) used += c.models[m.model].profile->memory_mb();
  }
  return used <= c.options.memory_room * c.gpu_memory_mb;
}

double LostRps(const Gpu& gpu, int model) {
  double lost = 0;
  for (const Slot& s : gpu.slots) {
    for (const Member& m : s.members) {
      if (m.model == model) lost += m.want_rps - m.rate_rps;
    }
  }
  return lost;
}

std::vector<Gpulet> ToGpulets(const Context& c, const std::vector<Gpu>& gpus) {
  std::vector<Gpulet> gpulets;
  for (size_t g = 0; g < gpus.size(); ++g) {
    for (const Slot& s : gpus[g].slots) {
      Gpulet gpulet;
      gpulet.gpu = static_cast<int>(g);
      gpulet.partition_pct = s.pct;
      gpulet.duty_ms = s.duty_ms;
      for (const Member& m : s.members) {
        gpulet.models.push_back({c.models[m.model].name, m.batch, m.rate_rps, m.latency_ms});
      }
      gpulets.push_back(std::move(gpulet));
    }
  }
  return gpulets;
}

}  // namespace tessera::scheduler::gpulet
