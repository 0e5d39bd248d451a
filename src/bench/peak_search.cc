#include "peak_search.h"

#include <algorithm>

namespace tessera::bench {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

StatusOr<PeakResult> PeakSearch(const PeakSearchOptions& options, const ProbeFn& probe) {
  if (!(options.start_factor > 0) || options.repeats < 1 || !(options.tolerance > 0) ||
      options.max_probes < 2) {
    return absl::InvalidArgumentError(
        "peak search needs start factor > 0, repeats >= 1, tolerance > 0, max probes >= 2");
  }
  PeakResult result;
  auto run = [&](double factor) -> StatusOr<bool> {
    PeakProbe p;
    p.factor = factor;
    for (int r = 0; r < options.repeats; ++r) {
      TESSERA_ASSIGN_OR_RETURN(double pct, probe(factor));
      p.violation_pct.push_back(pct);
    }
    p.median_pct = Median(p.violation_pct);
    p.pass = p.median_pct <= options.violation_limit_pct;
    result.probes.push_back(p);
    return p.pass;
  };
  // 1. Bracket: low passes, high fails.
  double low = 0, high = 0;
  double factor = options.start_factor;
  TESSERA_ASSIGN_OR_RETURN(bool pass, run(factor));
  const double min_factor = options.start_factor / 1024;
  const double max_factor = options.start_factor * 1024;
  while (static_cast<int>(result.probes.size()) < options.max_probes) {
    if (pass) {
      low = factor;
      if (high > 0) break;
      if (factor * 2 > max_factor) break;
      factor *= 2;
    } else {
      high = factor;
      if (low > 0) break;
      if (factor / 2 < min_factor) break;
      factor /= 2;
    }
    TESSERA_ASSIGN_OR_RETURN(pass, run(factor));
  }
  if (pass && factor > low) low = factor;
  if (!pass && (high == 0 || factor < high)) high = factor;
  // 2. Bisect.
  while (low > 0 && high > 0 && (high - low) / low > options.tolerance &&
         static_cast<int>(result.probes.size()) < options.max_probes) {
    double mid = (low + high) / 2;
    TESSERA_ASSIGN_OR_RETURN(bool ok, run(mid));
    (ok ? low : high) = mid;
  }
  result.peak_factor = low;
  result.failing_factor = high;
  return result;
}

}  // namespace tessera::bench
