// Peak search: the highest load at which at most `violation_limit_pct` of requests violate their
// SLO (seed 001 §5.4: "raise the rate until more than 1 % of requests violate the SLO").
//
// Load is a factor that multiplies every model's rate schedule. The search doubles (or halves) the
// factor from `start_factor` until it brackets the limit, then bisects until the bracket is within
// `tolerance` (relative). Each probe runs `repeats` times and judges the median violation %, so one
// noisy run does not move the result. The probe itself is a callback, so the search is tested
// without a server.
//
// Thread-safety: PeakSearch calls `probe` sequentially on the calling thread.
#pragma once

#include <functional>
#include <vector>

#include "tessera/common/status.h"

namespace tessera::bench {

struct PeakSearchOptions {
  double start_factor = 1;
  double violation_limit_pct = 1;  // a probe passes when median violation % <= this
  int repeats = 3;
  double tolerance = 0.05;  // stop when (high - low) / low <= tolerance
  int max_probes = 24;      // probes (each `repeats` runs) at most
};

struct PeakProbe {
  double factor = 0;
  std::vector<double> violation_pct;  // one per repeat
  double median_pct = 0;
  bool pass = false;
};

struct PeakResult {
  double peak_factor = 0;     // highest passing factor found (0: even the smallest tried failed)
  double failing_factor = 0;  // lowest failing factor found (0: none failed)
  std::vector<PeakProbe> probes;
};

// Returns the violation % of one run at `factor`.
using ProbeFn = std::function<StatusOr<double>(double factor)>;

// Median of `values` (mean of the two middle ones for an even count); 0 for none.
double Median(std::vector<double> values);

StatusOr<PeakResult> PeakSearch(const PeakSearchOptions& options, const ProbeFn& probe);

}  // namespace tessera::bench
