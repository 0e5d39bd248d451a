#include "schedulability.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report_internal.h"

namespace tessera::sim {

StatusOr<SchedulabilityResult> CountSchedulable(const Workload& workload,
                                                const std::array<PlanFn, 2>& planners,
                                                const SchedulabilityOptions& options) {
  TESSERA_RETURN_IF_ERROR(ValidateWorkload(workload));
  const std::vector<double>& levels = options.rates_rps;
  if (levels.empty()) return absl::InvalidArgumentError("no rate levels");
  for (double r : levels) {
    if (!(r >= 0) || !std::isfinite(r)) {
      return absl::InvalidArgumentError(absl::StrCat("rate level ", r, " must be ≥ 0"));
    }
  }
  const size_t n = workload.models.size();
  const double combinations = std::pow(static_cast<double>(levels.size()), static_cast<double>(n));
  if (combinations > 1e7) {
    return absl::InvalidArgumentError(
        absl::StrCat(levels.size(), "^", n, " = ", combinations, " scenarios is more than 10^7"));
  }
  const int64_t total = static_cast<int64_t>(std::llround(combinations));

  SchedulabilityResult result;
  std::array<std::vector<double>, 2> times_ms;
  std::vector<size_t> digits(n, 0);
  for (int64_t k = 0; k < total; ++k) {
    if (k > 0) {
      // Next combination: increment the base-L counter (model 0 is the lowest digit).
      for (size_t i = 0; i < n; ++i) {
        if (++digits[i] < levels.size()) break;
        digits[i] = 0;
      }
    }
    std::vector<scheduler::ModelDemand> demands;
    for (size_t i = 0; i < n; ++i) {
      const double rate = levels[digits[i]];
      if (rate <= 0) continue;
      const WorkloadModel& m = workload.models[i];
      demands.push_back({m.model, m.profile,
                         options.headroom == Headroom::kPoisson99 ? Poisson99Rps(rate) : rate,
                         m.slo_ms});
    }
    if (demands.empty()) continue;
    if (options.limit > 0 && result.scenarios >= options.limit) break;
    ++result.scenarios;
    std::array<bool, 2> ok = {false, false};
    for (int p = 0; p < 2; ++p) {
      const auto start = std::chrono::steady_clock::now();
      StatusOr<scheduler::Plan> plan = planners[p](demands, options.num_gpus);
      times_ms[p].push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
      if (!plan.ok()) {
        return absl::Status(plan.status().code(),
                            absl::StrCat("scenario ", k, ": ", plan.status().message()));
      }
      ok[p] = plan->schedulable();
      result.schedulable[p] += ok[p];
    }
    if (ok[0] && ok[1]) ++result.both;
    if (ok[0] && !ok[1]) ++result.only_first;
    if (!ok[0] && ok[1]) ++result.only_second;
    if (!ok[0] && !ok[1]) ++result.neither;
  }
  for (int p = 0; p < 2; ++p) {
    std::vector<double>& t = times_ms[p];
    if (t.empty()) continue;
    std::sort(t.begin(), t.end());
    double sum = 0;
    for (double x : t) sum += x;
    result.planning[p] = {sum / t.size(), NearestRank(t, 0.99), t.back()};
  }
  return result;
}

std::string SchedulabilityToText(const SchedulabilityResult& result,
                                 const std::array<std::string, 2>& names) {
  std::string out = absl::StrFormat("%d scenarios\n", result.scenarios);
  absl::StrAppendFormat(&out, "%-14s %12s %14s %13s %13s\n", "policy", "schedulable",
                        "plan_mean_ms", "plan_p99_ms", "plan_max_ms");
  for (int p = 0; p < 2; ++p) {
    absl::StrAppendFormat(&out, "%-14s %12d %14.3f %13.3f %13.3f\n", names[p],
                          result.schedulable[p], result.planning[p].mean_ms,
                          result.planning[p].p99_ms, result.planning[p].max_ms);
  }
  absl::StrAppendFormat(&out, "both %d, only %s %d, only %s %d, neither %d\n", result.both,
                        names[0], result.only_first, names[1], result.only_second, result.neither);
  return out;
}

}  // namespace tessera::sim
