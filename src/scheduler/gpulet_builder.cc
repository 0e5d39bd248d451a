#include "gpulet_builder.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "slo_rules.h"

namespace tessera::scheduler::gpulet {
namespace {

// A pair of sizes whose standalone throughput rises by less than this is flat: not a knee
// candidate (the artifact's getMaxReturnPart threshold, seed 001 §2.5 [R]).
constexpr double kKneeMinGain = 1.05;

// Placement steps one PlaceModel may take, per GPU and model: each step either places a chunk or
// moves lost throughput; this bounds a pathological ping-pong between two interfering models.
constexpr int kStepsPerGpuAndModel = 4;

double Served(const Gpu& gpu, std::map<int, double>& by_model, double sign) {
  double total = 0;
  for (const Slot& s : gpu.slots) {
    for (const Member& m : s.members) {
      by_model[m.model] += sign * m.rate_rps;
      total += m.rate_rps;
    }
  }
  return total;
}

double Occupancy(const Slot& slot) {
  double total = 0;
  for (const Member& m : slot.members) total += m.latency_ms;
  return slot.duty_ms > 0 ? total / slot.duty_ms : 1;
}

bool HasModel(const Slot& slot, int model) {
  for (const Member& m : slot.members) {
    if (m.model == model) return true;
  }
  return false;
}

// A necessary condition for `model` at `rate_rps` to join `slot` at `pct`: the round fits with
// no interference at all (factors only slow rounds down). Cheap enough to run before solving the
// whole GPU, which most candidates would fail.
bool RoundMayFit(const Context& c, const Slot& slot, int pct, int model, double rate_rps) {
  std::vector<RoundMember> members;
  for (const Member& m : slot.members) {
    members.push_back({c.models[m.model].profile, m.want_rps, c.models[m.model].slo_ms, 1,
                       LatencyTable(c, m.model, pct)});
  }
  members.push_back(
      {c.models[model].profile, rate_rps, c.models[model].slo_ms, 1, LatencyTable(c, model, pct)});
  return FitRound(members, pct, c.options.latency_margin, c.options.max_batch).has_value();
}

}  // namespace

void DeriveModelInfo(const Context& c, ModelInfo& info) {
  info.sat_batch.clear();
  info.sat_rps.clear();
  info.latency_ms.clear();
  const int max_batch = std::min(c.options.max_batch, info.profile->max_batch());
  for (int p : c.partitions) {
    std::vector<double> row(max_batch + 1, 0);
    for (int b = 1; b <= max_batch; ++b) row[b] = info.profile->LatencyMs(b, p);
    info.latency_ms.push_back(std::move(row));
    const int b = MaxSaturatedBatch(*info.profile, p, info.slo_ms, 1, c.options.latency_margin,
                                    c.options.max_batch);
    info.sat_batch.push_back(b);
    info.sat_rps.push_back(
        b == 0 ? 0 : SaturatedThroughputRps(*info.profile, b, p, 1, c.options.latency_margin));
  }
  info.knee = KneeIndex(c, info, /*include_last_pair=*/false);
  info.pct_per_rps = info.knee < 0 ? 0 : c.partitions[info.knee] / info.sat_rps[info.knee];
}

int KneeIndex(const Context& c, const ModelInfo& info, bool include_last_pair) {
  const int n = static_cast<int>(c.partitions.size());
  int knee = -1;
  for (int i = 0; i < n; ++i) {
    if (info.sat_rps[i] > 0) {
      knee = i;  // default: the smallest size that meets the SLO at all
      break;
    }
  }
  if (knee < 0) return -1;
  // The artifact walks the pairs up to (60,80) and never (80,100): with at most two gpulets per
  // GPU, a knee below 100 % leaves the complement (20 %) for low-rate models to share.
  const int last_pair = include_last_pair ? n - 1 : n - 2;
  double best_gain = 0;
  for (int i = 1; i <= last_pair; ++i) {
    const double lo = info.sat_rps[i - 1];
    const double hi = info.sat_rps[i];
    if (hi <= 0 || (lo > 0 && hi < lo * kKneeMinGain)) continue;
    const double gain = (hi - lo) / (c.partitions[i] - c.partitions[i - 1]);
    if (gain > best_gain) {  // strict: ties keep the smaller size
      best_gain = gain;
      knee = i;
    }
  }
  return knee;
}

int PairKneeIndex(const Context& c, const ModelInfo& info) {
  const int n = static_cast<int>(c.partitions.size());
  auto sat = [&](int pct) {
    for (int i = 0; i < n; ++i) {
      if (c.partitions[i] == pct) return info.sat_rps[i];
    }
    return -1.0;  // not an allowed size
  };
  int knee = -1;
  double best = 0;
  for (int i = 0; i < n; ++i) {
    const int p = c.partitions[i];
    if (info.sat_rps[i] <= 0 || (p > 50 && p < 100)) continue;
    double served = info.sat_rps[i];
    if (p < 100) {
      if (c.options.max_gpulets_per_gpu < 2 || sat(100 - p) < 0) continue;
      served += sat(100 - p);
    }
    if (served > best * (1 + 1e-9)) {
      best = served;
      knee = i;
    }
  }
  return knee >= 0 ? knee : KneeIndex(c, info, /*include_last_pair=*/true);
}

int MinRequiredIndex(const Context& c, const ModelInfo& info, int knee, double rate_rps) {
  for (int i = 0; i < knee; ++i) {
    if (info.sat_rps[i] >= rate_rps) return i;
  }
  return knee;
}

Builder::Builder(const Context* context, int num_gpus, Variant variant)
    : Builder(context, std::vector<Gpu>(std::max(0, num_gpus)),
              std::vector<double>(context->models.size(), 0), variant) {
  for (size_t m = 0; m < c_->models.size(); ++m) pending_[m] = c_->models[m].rate_rps;
}

Builder::Builder(const Context* context, std::vector<Gpu> gpus, std::vector<double> pending,
                 Variant variant)
    : c_(context), variant_(variant), gpus_(std::move(gpus)), pending_(std::move(pending)) {
  for (const ModelInfo& info : c_->models) {
    switch (variant_.knee) {
      case KneeRule::kArtifact:
        knee_.push_back(info.knee);
        break;
      case KneeRule::kWholeGpu:
        knee_.push_back(KneeIndex(*c_, info, true));
        break;
      case KneeRule::kGpuPair:
        knee_.push_back(PairKneeIndex(*c_, info));
        break;
    }
  }
  started_.assign(c_->models.size(), 0);
  for (const Gpu& gpu : gpus_) {
    for (const Slot& s : gpu.slots) {
      for (const Member& m : s.members) started_[m.model] = 1;
    }
  }
}

std::vector<int> Builder::Order() const {
  std::vector<int> order(c_->models.size());
  std::iota(order.begin(), order.end(), 0);
  // Alg. 1 l.2: rate × SLO is the work a model needs; least work first.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const ModelInfo& x = c_->models[a];
    const ModelInfo& y = c_->models[b];
    const double wx = x.rate_rps * x.slo_ms;
    const double wy = y.rate_rps * y.slo_ms;
    if (wx != wy) return variant_.ascending ? wx < wy : wx > wy;
    return x.name < y.name;
  });
  return order;
}

bool Builder::Done(int model) const {
  const ModelInfo& info = c_->models[model];
  return pending_[model] <= c_->options.rate_slack_rps + 1e-9 * std::max(1.0, info.rate_rps);
}

bool Builder::PlaceModel(int model) {
  if (Done(model)) return true;
  if (knee_[model] < 0) return false;
  const std::vector<Gpu> saved_gpus = gpus_;
  const std::vector<double> saved_pending = pending_;
  const std::vector<char> saved_started = started_;
  started_[model] = 1;
  steps_left_ = kStepsPerGpuAndModel * (static_cast<int>(gpus_.size()) + 1) *
                static_cast<int>(pending_.size());
  bool ok = true;
  while (ok && !Done(model)) ok = PlaceChunk(model);
  // Throughput that interference took from models placed before goes back in, in Alg. 1 order.
  const std::vector<int> order = Order();
  for (bool again = true; ok && again;) {
    again = false;
    for (int other : order) {
      if (started_[other] && !Done(other)) {
        ok = knee_[other] >= 0 && PlaceChunk(other);
        again = true;
        break;
      }
    }
  }
  if (!ok) {
    gpus_ = saved_gpus;
    pending_ = saved_pending;
    started_ = saved_started;
  }
  return ok;
}

bool Builder::PlaceChunk(int model) {
  if (--steps_left_ < 0) return false;
  const ModelInfo& info = c_->models[model];
  const int knee = knee_[model];
  const double rate = pending_[model];
  if (rate > info.sat_rps[knee]) {
    // Alg. 1 l.6–9 with p_ideal = p_eff: a saturated gpulet at the knee.
    return TryNewSlot(model, c_->partitions[knee], /*saturated=*/true) || TryFallback(model);
  }
  // The residue: p_ideal = p_req ≤ p_eff (l.7–8). Temporal sharing first: it costs no partition.
  if (TryTimeShare(model) || TryGrow(model)) return true;
  const int need = c_->partitions[MinRequiredIndex(*c_, info, knee, rate)];
  return TryNewSlot(model, need, /*saturated=*/false) || TryFallback(model);
}

bool Builder::Evaluate(int g, Gpu& after, int model, bool full, double* gain) const {
  if (!MemoryFits(*c_, after) || !SolveGpu(*c_, after)) return false;
  std::map<int, double> delta;
  Served(after, delta, 1);
  Served(gpus_[g], delta, -1);
  const double mine = delta[model];
  const double tolerance = 1e-9 * std::max(1.0, c_->models[model].rate_rps);
  if (mine <= tolerance) return false;
  if (full && mine < pending_[model] - tolerance) return false;
  double lost_pct = 0;
  for (const auto& [other, change] : delta) {
    if (other == model || change >= 0) continue;
    if (full && change < -1e-9 * std::max(1.0, c_->models[other].rate_rps)) return false;
    lost_pct += -change * c_->models[other].pct_per_rps;
  }
  if (lost_pct > mine * c_->models[model].pct_per_rps) return false;
  *gain = mine;
  return true;
}

void Builder::Commit(int g, Gpu after) {
  std::map<int, double> delta;
  Served(after, delta, 1);
  Served(gpus_[g], delta, -1);
  for (const auto& [m, change] : delta) pending_[m] -= change;
  // What was lost is pending again; the members now want what they serve.
  for (Slot& s : after.slots) {
    for (Member& m : s.members) m.want_rps = m.rate_rps;
    s.members.erase(std::remove_if(s.members.begin(), s.members.end(),
                                   [](const Member& m) { return m.rate_rps <= 0; }),
                    s.members.end());
  }
  after.slots.erase(std::remove_if(after.slots.begin(), after.slots.end(),
                                   [](const Slot& s) { return s.members.empty(); }),
                    after.slots.end());
  gpus_[g] = std::move(after);
}

bool Builder::TryTimeShare(int model) {
  // seed 001 §4.3 "temporal scheduling": share an existing gpulet under the round rules at its
  // size. Of the gpulets that take the whole residue without slowing anyone, the one left fullest
  // (best fit in time), ties to the lowest GPU and slot.
  int best_gpu = -1;
  double best_occupancy = -1;
  Gpu best;
  for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
    for (size_t s = 0; s < gpus_[g].slots.size(); ++s) {
      const Slot& slot = gpus_[g].slots[s];
      if (static_cast<int>(slot.members.size()) >= c_->options.max_models_per_gpulet ||
          HasModel(slot, model)) {
        continue;
      }
      if (!RoundMayFit(*c_, slot, slot.pct, model, pending_[model])) continue;
      Gpu after = gpus_[g];
      after.slots[s].members.push_back({model, pending_[model]});
      double gain = 0;
      if (!Evaluate(g, after, model, /*full=*/true, &gain)) continue;
      const double occupancy = Occupancy(after.slots[s]);
      if (occupancy > best_occupancy + 1e-12) {
        best_occupancy = occupancy;
        best_gpu = g;
        best = std::move(after);
      }
    }
  }
  if (best_gpu < 0) return false;
  Commit(best_gpu, std::move(best));
  return true;
}

bool Builder::TryGrow(int model) {
  // Not in the paper: a gpulet that cannot take the residue at its size may grow into free
  // capacity of its GPU (the artifact resizes fits the same way). Growing a 20 % gpulet to 40 %
  // costs 20 %, where a new gpulet would take a whole remainder (often 80 %) or open a GPU.
  // Smallest growth wins, then the fullest result, then the lowest GPU and slot.
  int best_gpu = -1;
  int best_growth = 101;
  double best_occupancy = -1;
  Gpu best;
  for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
    const int free_pct = gpus_[g].FreePct();
    for (size_t s = 0; s < gpus_[g].slots.size() && free_pct > 0; ++s) {
      const Slot& slot = gpus_[g].slots[s];
      if (static_cast<int>(slot.members.size()) >= c_->options.max_models_per_gpulet ||
          HasModel(slot, model)) {
        continue;
      }
      for (int p : c_->partitions) {
        if (p <= slot.pct || p > slot.pct + free_pct || p - slot.pct > best_growth) continue;
        if (!RoundMayFit(*c_, slot, p, model, pending_[model])) continue;
        Gpu after = gpus_[g];
        after.slots[s].pct = p;
        after.slots[s].members.push_back({model, pending_[model]});
        double gain = 0;
        if (!Evaluate(g, after, model, /*full=*/true, &gain)) continue;
        const double occupancy = Occupancy(after.slots[s]);
        if (p - slot.pct < best_growth ||
            (p - slot.pct == best_growth && occupancy > best_occupancy + 1e-12)) {
          best_growth = p - slot.pct;
          best_occupancy = occupancy;
          best_gpu = g;
          best = std::move(after);
        }
        break;  // larger sizes of this slot only grow more
      }
    }
  }
  if (best_gpu < 0) return false;
  Commit(best_gpu, std::move(best));
  return true;
}

bool Builder::TryNewSlot(int model, int need_pct, bool saturated) {
  // FindBestFit (Alg. 1 l.14–26): free capacity sorted by size, smallest first (a whole GPU is a
  // 100 % gpulet, so partly used GPUs come first); split it into the needed size and the rest
  // unless this is the last gpulet the GPU may hold, which then takes all that is left. Memory,
  // the SLO with interference and the neighbour re-check are in Evaluate.
  std::vector<int> order;
  for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
    const int slots = static_cast<int>(gpus_[g].slots.size());
    if (slots < c_->options.max_gpulets_per_gpu && gpus_[g].FreePct() >= need_pct) {
      order.push_back(g);
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return gpus_[a].FreePct() < gpus_[b].FreePct(); });
  for (int g : order) {
    const int free_pct = gpus_[g].FreePct();
    int size = need_pct;
    if (static_cast<int>(gpus_[g].slots.size()) + 1 == c_->options.max_gpulets_per_gpu) {
      for (int p : c_->partitions) {
        if (p <= free_pct) size = std::max(size, p);
      }
    }
    Gpu after = gpus_[g];
    after.slots.push_back({size, 0, {{model, pending_[model], saturated}}});
    double gain = 0;
    if (Evaluate(g, after, model, /*full=*/false, &gain)) {
      Commit(g, std::move(after));
      return true;
    }
  }
  return false;
}

bool Builder::TryFallback(int model) {
  // Not in the paper (the artifact's "readjust"): when no free capacity is as large as needed,
  // the largest that is left serves what it can at its size, and the loop places the rest.
  std::vector<int> order;
  for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
    if (static_cast<int>(gpus_[g].slots.size()) < c_->options.max_gpulets_per_gpu &&
        gpus_[g].FreePct() >= c_->partitions.front()) {
      order.push_back(g);
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return gpus_[a].FreePct() > gpus_[b].FreePct(); });
  for (int g : order) {
    int size = 0;
    for (int p : c_->partitions) {
      if (p <= gpus_[g].FreePct()) size = p;
    }
    Gpu after = gpus_[g];
    after.slots.push_back({size, 0, {{model, pending_[model], /*saturated=*/true}}});
    double gain = 0;
    if (Evaluate(g, after, model, /*full=*/false, &gain)) {
      Commit(g, std::move(after));
      return true;
    }
  }
  return false;
}

}  // namespace tessera::scheduler::gpulet
