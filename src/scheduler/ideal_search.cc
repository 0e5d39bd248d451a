#include "ideal_search.h"

#include <algorithm>
#include <limits>
#include <set>

namespace tessera::scheduler::baseline {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

template <typename T>
void AppendBytes(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

}  // namespace

IdealSearch::IdealSearch(const std::vector<Demand>& demands, int num_gpus, ProfileCache& cache,
                         const InterferenceModel& interference, const PlannerOptions& options,
                         double memory_limit_mb)
    : demands_(demands),
      num_gpus_(num_gpus),
      cache_(cache),
      interference_(interference),
      options_(options),
      memory_limit_mb_(memory_limit_mb) {
  std::vector<int> allowed = options.partitions_pct;
  std::sort(allowed.begin(), allowed.end());
  allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
  // A whole GPU, then the splits (p, q): q the largest allowed size ≤ 100 − p, p ≤ q.
  layouts_.push_back({allowed.back()});
  if (options.max_gpulets_per_gpu >= 2) {
    for (int p : allowed) {
      int q = 0;
      for (int c : allowed) {
        if (c <= 100 - p) q = c;
      }
      if (q >= p) layouts_.push_back({p, q});
    }
  }
  for (const auto& layout : layouts_) sizes_.insert(sizes_.end(), layout.begin(), layout.end());
  std::sort(sizes_.begin(), sizes_.end());
  sizes_.erase(std::unique(sizes_.begin(), sizes_.end()), sizes_.end());

  const double margin = options.latency_margin;
  for (size_t m = 0; m < demands.size(); ++m) {
    if (demands[m].target_rps > kRateEpsilon) order_.push_back(static_cast<int>(m));
  }
  const std::vector<double> worst_factor = WorstFactors();
  need_units_.assign(demands.size(), 0);
  min_size_.assign(demands.size(), -1);
  saturated_rps_.assign(demands.size(), std::vector<double>(sizes_.size(), 0));
  saturated_worst_rps_ = saturated_rps_;
  for (int m : order_) {
    const Demand& d = demands[m];
    const double rate = d.target_rps;
    // Lower bound on the compute share (Σ partition·occupancy) any schedule gives this model:
    // alone, its cheapest round; with saturated gpulets, r at the best throughput per %
    // (a round member's occupancy is ≥ its rate / saturated throughput, seed 001 §2.4).
    double alone = kInf;
    double per_rps = kInf;
    bool may_split = false;
    for (size_t i = 0; i < sizes_.size(); ++i) {
      const PartitionTable& t = cache.Get(d.profile, sizes_[i]);
      const double sat = SaturatedOn(t, d.slo_ms, 1.0, margin).throughput_rps;
      saturated_rps_[m][i] = sat;
      saturated_worst_rps_[m][i] = SaturatedOn(t, d.slo_ms, worst_factor[m], margin).throughput_rps;
      if (sat <= 0) continue;
      if (min_size_[m] < 0) min_size_[m] = sizes_[i];
      per_rps = std::min(per_rps, sizes_[i] / sat);
      if (saturated_worst_rps_[m][i] < rate) may_split = true;
      if (auto round = FastFitRound({{&t, rate, d.slo_ms, 1.0}}, margin)) {
        alone = std::min(alone, sizes_[i] * round->occupancy);
      }
    }
    need_units_[m] = may_split ? std::min(alone, rate * per_rps) : alone;
  }
  // Fail first: the models needing the most compute are placed first.
  std::stable_sort(order_.begin(), order_.end(),
                   [&](int a, int b) { return need_units_[a] > need_units_[b]; });
  state_.gpus.assign(num_gpus, {});
  state_.residue_rate.assign(demands.size(), 0);
  state_.residue_gpu.assign(demands.size(), -1);
  state_.residue_slot.assign(demands.size(), -1);
  state_.complete.assign(demands.size(), false);
}

std::optional<std::vector<Gpulet>> IdealSearch::Run() {
  for (int m : order_) {
    const Demand& d = demands_[m];
    // A model that cannot meet its SLO anywhere, or does not fit in a GPU's memory alone.
    if (min_size_[m] < 0 || need_units_[m] == kInf) return std::nullopt;
    if (d.profile->memory_mb() + options_.per_gpulet_overhead_mb > memory_limit_mb_) {
      return std::nullopt;
    }
  }
  if (!Search(0)) return std::nullopt;
  std::vector<Gpulet> out;
  for (int g = 0; g < state_.opened; ++g) {
    for (const Slot& slot : state_.gpus[g].slots) {
      if (slot.members.empty()) continue;
      GpuletSpec spec{slot.size, {}};
      for (const Member& m : slot.members) {
        spec.members.push_back({&demands_[m.model], m.saturated, m.rate_rps});
      }
      out.push_back(MakeGpulet(g, spec, *slot.eval));
    }
  }
  return out;
}

std::vector<double> IdealSearch::WorstFactors() {
  std::vector<double> worst(demands_.size(), 1.0);
  if (interference_.kind() == InterferenceModel::Kind::kNone) return worst;
  if (interference_.kind() == InterferenceModel::Kind::kConstant) {
    worst.assign(demands_.size(), interference_.Factor(0, 0, 0, 0));
    return worst;
  }
  // factor = c1·l2_self + c2·l2_other + c3·dram_self + c4·dram_other + c5 (seed 001 §4.4): the
  // max of the self terms plus the max of the other terms bounds it, whatever the signs.
  const InterferenceCoefficients& c = interference_.coefficients();
  auto max_terms = [&](int m, double c_l2, double c_dram) {
    double best = -kInf;
    for (int size : sizes_) {
      const PartitionTable& t = cache_.Get(demands_[m].profile, size);
      for (int b = 1; b <= t.max_batch; ++b) {
        best = std::max(best, c_l2 * t.l2_util[b] + c_dram * t.dram_util[b]);
      }
    }
    return best;
  };
  double other = -kInf;
  for (int m : order_) other = std::max(other, max_terms(m, c.l2_other, c.dram_other));
  for (int m : order_) {
    worst[m] = std::max(1.0, max_terms(m, c.l2_self, c.dram_self) + other + c.constant);
  }
  return worst;
}

bool IdealSearch::Search(int pos) {
  if (pos == static_cast<int>(order_.size())) return true;
  if (!BoundHolds(pos)) return false;
  std::string key = StateKey(pos);
  if (failed_.count(key)) return false;
  const int m = order_[pos];
  if (PlaceModel(pos, m, demands_[m].target_rps, 0)) return true;
  if (!stats_.node_limit_hit) failed_.insert(std::move(key));
  return false;
}

bool IdealSearch::PlaceModel(int pos, int m, double remaining, int min_chunk_index) {
  // All that is left as one round share.
  for (const Target& t : ResidueTargets(m, remaining)) {
    if (++stats_.nodes > kNodeLimit) stats_.node_limit_hit = true;
    if (stats_.node_limit_hit) return false;
    State saved = state_;
    state_.complete[m] = true;
    if (Apply(t, Member{m, false, remaining, 0}) && Search(pos + 1)) return true;
    state_ = std::move(saved);
  }
  // Or a saturated gpulet first, on a size that cannot hold all that is left.
  for (const Target& t : ChunkTargets(m, remaining, min_chunk_index)) {
    if (++stats_.nodes > kNodeLimit) stats_.node_limit_hit = true;
    if (stats_.node_limit_hit) return false;
    State saved = state_;
    if (Apply(t, Member{m, true, 0, 1})) {
      const double left = remaining - state_.gpus[t.gpu].slots[t.slot].eval->rates_rps[0];
      bool found;
      if (left <= kRateEpsilon) {
        state_.complete[m] = true;
        found = Propagate({}) && Search(pos + 1);
      } else {
        found = PlaceModel(pos, m, left, t.gpu * 2 + t.slot + 1);
      }
      if (found) return true;
    }
    state_ = std::move(saved);
    if (stats_.node_limit_hit) return false;
  }
  return false;
}

bool IdealSearch::AloneFits(int m, int size, double rate, double* occupancy) {
  std::string key;
  AppendBytes(&key, m);
  AppendBytes(&key, size);
  AppendBytes(&key, rate);
  auto [it, inserted] = alone_cache_.try_emplace(std::move(key), -1.0);
  if (inserted) {
    const Demand& d = demands_[m];
    std::optional<Round> round = FastFitRound({{&cache_.Get(d.profile, size), rate, d.slo_ms, 1.0}},
                                              options_.latency_margin);
    if (round) it->second = round->occupancy;
  }
  if (it->second < 0) return false;
  if (occupancy) *occupancy = it->second;
  return true;
}

std::vector<IdealSearch::Target> IdealSearch::ResidueTargets(int m, double rate) {
  std::vector<Target> targets;
  std::set<std::string> seen;
  for (int g = 0; g < state_.opened; ++g) {
    const Gpu& gpu = state_.gpus[g];
    const std::string gpu_key = GpuKey(gpu);
    for (size_t s = 0; s < gpu.slots.size(); ++s) {
      const Slot& slot = gpu.slots[s];
      if (static_cast<int>(slot.members.size()) >= options_.max_models_per_gpulet) continue;
      if (!slot.members.empty() && slot.members[0].saturated) continue;
      double key;
      if (slot.members.empty()) {
        if (!AloneFits(m, slot.size, rate, nullptr)) continue;
        key = 10 + slot.size;  // empty gpulets already opened, smallest first
      } else {
        key = -slot.eval->occupancy;  // time-share first, fullest gpulet first
      }
      if (!seen.insert(gpu_key + '#' + SlotKey(slot)).second) continue;
      targets.push_back({g, static_cast<int>(s), -1, slot.size, key});
    }
  }
  if (state_.opened < num_gpus_) {
    for (size_t l = 0; l < layouts_.size(); ++l) {
      for (size_t s = 0; s < layouts_[l].size(); ++s) {
        const int size = layouts_[l][s];
        if (s > 0 && size == layouts_[l][s - 1]) continue;  // (50, 50): one slot is enough
        if (!AloneFits(m, size, rate, nullptr)) continue;
        targets.push_back({state_.opened, static_cast<int>(s), static_cast<int>(l), size,
                           1000.0 + size + (layouts_[l].size() == 1 ? 0.5 : 0)});
      }
    }
  }
  std::stable_sort(targets.begin(), targets.end(),
                   [](const Target& a, const Target& b) { return a.order_key < b.order_key; });
  return targets;
}

std::vector<IdealSearch::Target> IdealSearch::ChunkTargets(int m, double remaining,
                                                           int min_chunk_index) {
  std::vector<Target> targets;
  // Throughput of a saturated gpulet and the threshold above which one is worth trying: what it
  // serves alone on a whole GPU, or under the worst interference a neighbour could cause on a
  // split one (below that a round of all that is left serves at least as well).
  auto saturated = [&](int size) {
    const size_t i = std::lower_bound(sizes_.begin(), sizes_.end(), size) - sizes_.begin();
    return saturated_rps_[m][i];
  };
  auto threshold = [&](int size, bool whole_gpu) {
    const size_t i = std::lower_bound(sizes_.begin(), sizes_.end(), size) - sizes_.begin();
    return whole_gpu ? saturated_rps_[m][i] : saturated_worst_rps_[m][i];
  };
  std::set<std::string> seen;
  for (int g = 0; g < state_.opened; ++g) {
    const Gpu& gpu = state_.gpus[g];
    const std::string gpu_key = GpuKey(gpu);
    for (size_t s = 0; s < gpu.slots.size(); ++s) {
      const Slot& slot = gpu.slots[s];
      if (!slot.members.empty() || g * 2 + static_cast<int>(s) < min_chunk_index) continue;
      const double sat = saturated(slot.size);
      if (sat <= 0 || remaining <= threshold(slot.size, gpu.slots.size() == 1)) continue;
      if (!seen.insert(gpu_key + '#' + SlotKey(slot)).second) continue;
      targets.push_back({g, static_cast<int>(s), -1, slot.size, -sat / slot.size});
    }
  }
  if (state_.opened < num_gpus_) {
    for (size_t l = 0; l < layouts_.size(); ++l) {
      for (size_t s = 0; s < layouts_[l].size(); ++s) {
        const int size = layouts_[l][s];
        if (s > 0 && size == layouts_[l][s - 1]) continue;
        const double sat = saturated(size);
        if (sat <= 0 || remaining <= threshold(size, layouts_[l].size() == 1)) continue;
        // Most throughput per % first; already opened GPUs before new ones.
        targets.push_back(
            {state_.opened, static_cast<int>(s), static_cast<int>(l), size, 1.0 - sat / size});
      }
    }
  }
  std::stable_sort(targets.begin(), targets.end(),
                   [](const Target& a, const Target& b) { return a.order_key < b.order_key; });
  return targets;
}

bool IdealSearch::Apply(const Target& t, const Member& member) {
  Gpu& gpu = state_.gpus[t.gpu];
  if (t.layout >= 0) {
    for (int size : layouts_[t.layout]) gpu.slots.push_back(Slot{size, {}, nullptr});
    ++state_.opened;
  }
  Slot& slot = gpu.slots[t.slot];
  Member added = member;
  if (!added.saturated) {
    if (!AloneFits(added.model, slot.size, added.rate_rps, &added.alone_occupancy)) return false;
    state_.residue_rate[added.model] = added.rate_rps;
    state_.residue_gpu[added.model] = t.gpu;
    state_.residue_slot[added.model] = t.slot;
  }
  slot.members.push_back(added);
  if (GpuMemory(gpu) > memory_limit_mb_) return false;
  return Propagate({t.gpu});
}

bool IdealSearch::Propagate(std::vector<int> dirty) {
  for (int pass = 0; pass < 32; ++pass) {
    for (int g : dirty) {
      const std::optional<std::vector<GpuletEval>>& evals = EvaluateCached(g);
      if (!evals) return false;
      Gpu& gpu = state_.gpus[g];
      for (size_t s = 0; s < gpu.slots.size(); ++s) gpu.slots[s].eval = &(*evals)[s];
    }
    dirty.clear();
    // Throughput a saturated gpulet lost to interference moves to its model's round share.
    for (int m : order_) {
      if (!state_.complete[m]) continue;
      double served = 0;
      for (int g = 0; g < state_.opened; ++g) {
        for (const Slot& slot : state_.gpus[g].slots) {
          if (!slot.members.empty() && slot.members[0].saturated && slot.members[0].model == m) {
            served += slot.eval->rates_rps[0];
          }
        }
      }
      const double need = demands_[m].target_rps - served;
      if (state_.residue_gpu[m] < 0) {
        if (need > kRateEpsilon) return false;
        continue;
      }
      if (need <= state_.residue_rate[m] + 1e-9) continue;
      Slot& slot = state_.gpus[state_.residue_gpu[m]].slots[state_.residue_slot[m]];
      for (Member& member : slot.members) {
        if (member.model != m) continue;
        member.rate_rps = need;
        if (!AloneFits(m, slot.size, need, &member.alone_occupancy)) return false;
      }
      state_.residue_rate[m] = need;
      dirty.push_back(state_.residue_gpu[m]);
    }
    if (dirty.empty()) return true;
  }
  return false;
}

const std::optional<std::vector<GpuletEval>>& IdealSearch::EvaluateCached(int g) {
  const Gpu& gpu = state_.gpus[g];
  std::string key;
  for (const Slot& slot : gpu.slots) {
    AppendBytes(&key, slot.size);
    AppendBytes(&key, slot.members.size());
    for (const Member& m : slot.members) {
      AppendBytes(&key, m.model);
      AppendBytes(&key, m.saturated);
      AppendBytes(&key, m.rate_rps);
    }
  }
  auto [it, inserted] = eval_cache_.try_emplace(std::move(key));
  if (inserted) {
    std::vector<GpuletSpec> specs;
    for (const Slot& slot : gpu.slots) {
      GpuletSpec spec{slot.size, {}};
      for (const Member& m : slot.members) {
        spec.members.push_back({&demands_[m.model], m.saturated, m.rate_rps});
      }
      specs.push_back(std::move(spec));
    }
    it->second = EvaluateGpu(specs, cache_, interference_, options_);
  }
  return it->second;
}

bool IdealSearch::BoundHolds(int pos) const {
  // Hall's condition over nested size thresholds: the models that need a gpulet of at least
  // size t must fit, by compute share, into the free share of gpulets of size ≥ t.
  std::vector<double> supply(sizes_.size(), 0);
  std::vector<double> demand(sizes_.size(), 0);
  auto index = [&](int size) {
    return std::lower_bound(sizes_.begin(), sizes_.end(), size) - sizes_.begin();
  };
  for (int g = 0; g < state_.opened; ++g) {
    for (const Slot& slot : state_.gpus[g].slots) {
      if (static_cast<int>(slot.members.size()) >= options_.max_models_per_gpulet) continue;
      if (!slot.members.empty() && slot.members[0].saturated) continue;
      // Members already there take at least their cheapest alone occupancy of the slot.
      double used = 0;
      for (const Member& m : slot.members) used += m.alone_occupancy;
      supply[index(slot.size)] += slot.size * std::max(0.0, 1 - used);
    }
  }
  supply.back() += 100.0 * (num_gpus_ - state_.opened);
  for (size_t i = pos; i < order_.size(); ++i) {
    demand[index(min_size_[order_[i]])] += need_units_[order_[i]];
  }
  double cum_supply = 0, cum_demand = 0;
  for (size_t i = sizes_.size(); i-- > 0;) {
    cum_supply += supply[i];
    cum_demand += demand[i];
    if (cum_demand > cum_supply + 1e-9) return false;
  }
  return true;
}

std::string IdealSearch::SlotKey(const Slot& slot) const {
  std::vector<const Member*> members;
  for (const Member& m : slot.members) members.push_back(&m);
  std::sort(members.begin(), members.end(),
            [](const Member* a, const Member* b) { return a->model < b->model; });
  std::string key;
  AppendBytes(&key, slot.size);
  for (const Member* m : members) {
    AppendBytes(&key, m->model);
    AppendBytes(&key, m->saturated);
    AppendBytes(&key, m->rate_rps);
  }
  return key;
}

std::string IdealSearch::GpuKey(const Gpu& gpu) const {
  std::vector<std::string> slots;
  for (const Slot& slot : gpu.slots) slots.push_back(SlotKey(slot));
  std::sort(slots.begin(), slots.end());
  std::string key;
  for (const std::string& s : slots) {
    AppendBytes(&key, s.size());
    key += s;
  }
  return key;
}

std::string IdealSearch::StateKey(int pos) const {
  std::vector<std::string> gpus;
  for (int g = 0; g < state_.opened; ++g) gpus.push_back(GpuKey(state_.gpus[g]));
  std::sort(gpus.begin(), gpus.end());
  std::string key;
  AppendBytes(&key, pos);
  for (const std::string& s : gpus) {
    AppendBytes(&key, s.size());
    key += s;
  }
  return key;
}

double IdealSearch::GpuMemory(const Gpu& gpu) const {
  double total = 0;
  for (const Slot& slot : gpu.slots) {
    if (slot.members.empty()) continue;
    total += options_.per_gpulet_overhead_mb;
    for (const Member& m : slot.members) total += demands_[m.model].profile->memory_mb();
  }
  return total;
}

}  // namespace tessera::scheduler::baseline
