#include "peak_search.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "tessera/scheduler/rate_monitor.h"

namespace tessera::sim {

StatusOr<Headroom> ParseHeadroom(std::string_view name) {
  if (name == "none") return Headroom::kNone;
  if (name == "poisson99") return Headroom::kPoisson99;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown headroom '", std::string(name), "': expected one of none, poisson99"));
}

std::string_view HeadroomName(Headroom headroom) {
  return headroom == Headroom::kNone ? "none" : "poisson99";
}

double Poisson99Rps(double rate_rps) {
  if (!(rate_rps > 0)) return 0;
  // Never below the mean: for a tiny mean the 99th percentile is 0, which would plan nothing.
  return std::max(rate_rps, scheduler::PoissonHeadroomRps(rate_rps));
}

Status ValidateWorkload(const Workload& workload) {
  const std::string name = workload.name.empty() ? "workload" : workload.name;
  if (workload.models.empty()) return absl::InvalidArgumentError(name + ": no models");
  if (workload.num_gpus < 1) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": gpus ", workload.num_gpus, " < 1"));
  }
  std::set<std::string> seen;
  double total_weight = 0;
  for (const WorkloadModel& m : workload.models) {
    if (!seen.insert(m.model).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": model '", m.model, "' is listed twice"));
    }
    if (!(m.slo_ms > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": model '", m.model, "': slo_ms must be > 0"));
    }
    if (!(m.weight >= 0) || !std::isfinite(m.weight)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": model '", m.model, "': weight must be ≥ 0"));
    }
    total_weight += m.weight;
  }
  if (!(total_weight > 0)) {
    return absl::InvalidArgumentError(name + ": the weights add up to 0");
  }
  return absl::OkStatus();
}

std::vector<scheduler::ModelDemand> DemandsAt(const Workload& workload, double total_rps,
                                              Headroom headroom) {
  double total_weight = 0;
  for (const WorkloadModel& m : workload.models) total_weight += m.weight;
  std::vector<scheduler::ModelDemand> demands;
  for (const WorkloadModel& m : workload.models) {
    const double rate = total_rps * m.weight / total_weight;
    demands.push_back(scheduler::ModelDemand{
        m.model, m.profile, headroom == Headroom::kPoisson99 ? Poisson99Rps(rate) : rate,
        m.slo_ms});
  }
  return demands;
}

StatusOr<SearchResult> SearchMaxRate(const std::function<StatusOr<Probe>(double)>& probe,
                                     const SearchOptions& options) {
  if (!(options.min_rps > 0) || !(options.max_rps >= options.min_rps) ||
      !(options.start_rps >= options.min_rps) || !(options.start_rps <= options.max_rps) ||
      !(options.resolution > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("search needs 0 < min_rps ≤ start_rps ≤ max_rps and resolution > 0; got min ",
                     options.min_rps, ", start ", options.start_rps, ", max ", options.max_rps,
                     ", resolution ", options.resolution));
  }
  SearchResult result;
  auto passes = [&](double rate) -> StatusOr<bool> {
    TESSERA_ASSIGN_OR_RETURN(Probe p, probe(rate));
    p.total_rps = rate;
    result.probes.push_back(p);
    return p.pass;
  };
  double pass = 0, fail = 0;
  TESSERA_ASSIGN_OR_RETURN(bool ok, passes(options.start_rps));
  if (ok) {
    pass = options.start_rps;
    while (true) {
      if (pass >= options.max_rps) {
        result.max_rps = options.max_rps;
        return result;
      }
      const double next = std::min(pass * 2, options.max_rps);
      TESSERA_ASSIGN_OR_RETURN(ok, passes(next));
      if (!ok) {
        fail = next;
        break;
      }
      pass = next;
    }
  } else {
    fail = options.start_rps;
    while (true) {
      const double next = fail / 2;
      if (next < options.min_rps) return result;  // max_rps stays 0
      TESSERA_ASSIGN_OR_RETURN(ok, passes(next));
      if (ok) {
        pass = next;
        break;
      }
      fail = next;
    }
  }
  while (fail - pass > options.resolution * pass) {
    const double mid = (pass + fail) / 2;
    TESSERA_ASSIGN_OR_RETURN(ok, passes(mid));
    (ok ? pass : fail) = mid;
  }
  result.max_rps = pass;
  return result;
}

StatusOr<PeakResult> FindPeak(const Workload& workload, const scheduler::ProfileSet& profiles,
                              const PlanFn& plan, const SlowdownFn& true_interference,
                              const PeakOptions& options) {
  TESSERA_RETURN_IF_ERROR(ValidateWorkload(workload));
  if (options.runs < 1) return absl::InvalidArgumentError("runs must be ≥ 1");
  if (options.arrival == ArrivalKind::kTrace) {
    return absl::InvalidArgumentError("peak search needs Poisson or constant arrivals");
  }
  if (options.sim.epoch.epoch_s > 0) {
    return absl::InvalidArgumentError("peak search simulates a fixed plan: epoch_s must be 0");
  }
  PeakResult peak;
  // The ramp's rates are the same in every run, so their plans are made once.
  std::map<double, scheduler::Plan> plans;
  double total_weight = 0;
  for (const WorkloadModel& m : workload.models) total_weight += m.weight;

  for (int run = 0; run < options.runs; ++run) {
    SimOptions sim = options.sim;
    sim.seed = options.sim.seed + run;
    auto probe = [&](double total_rps) -> StatusOr<Probe> {
      auto it = plans.find(total_rps);
      if (it == plans.end()) {
        TESSERA_ASSIGN_OR_RETURN(
            scheduler::Plan made,
            plan(DemandsAt(workload, total_rps, options.headroom), workload.num_gpus));
        ++peak.plans;
        it = plans.emplace(total_rps, std::move(made)).first;
      }
      Probe p;
      p.schedulable = it->second.schedulable();
      if (!p.schedulable) return p;
      std::vector<SimModel> models;
      for (const WorkloadModel& m : workload.models) {
        SimModel s;
        s.demand = {m.model, m.profile, total_rps * m.weight / total_weight, m.slo_ms};
        s.arrivals.kind = options.arrival;
        models.push_back(std::move(s));
      }
      TESSERA_ASSIGN_OR_RETURN(SimReport report,
                               Simulate(profiles, it->second, models, true_interference, sim));
      ++peak.simulations;
      p.violation_pct = report.total.violation_pct;
      p.pass = 100.0 - p.violation_pct >= options.slo_target_pct;
      return p;
    };
    TESSERA_ASSIGN_OR_RETURN(SearchResult result, SearchMaxRate(probe, options.search));
    peak.runs.push_back(std::move(result));
  }
  std::vector<double> peaks;
  for (const SearchResult& r : peak.runs) peaks.push_back(r.max_rps);
  std::sort(peaks.begin(), peaks.end());
  peak.peak_rps = peaks[(peaks.size() - 1) / 2];
  return peak;
}

StatusOr<SearchResult> MaxSchedulableRate(const Workload& workload, const PlanFn& plan,
                                          const SearchOptions& options, Headroom headroom) {
  TESSERA_RETURN_IF_ERROR(ValidateWorkload(workload));
  auto probe = [&](double total_rps) -> StatusOr<Probe> {
    TESSERA_ASSIGN_OR_RETURN(scheduler::Plan made,
                             plan(DemandsAt(workload, total_rps, headroom), workload.num_gpus));
    Probe p;
    p.schedulable = made.schedulable();
    p.pass = p.schedulable;
    return p;
  };
  return SearchMaxRate(probe, options);
}

}  // namespace tessera::sim
