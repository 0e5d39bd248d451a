#include "interference_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"

namespace tessera::scheduler {

StatusOr<SampleSplit> SplitSamples(const std::vector<CoLocationSample>& samples,
                                   double train_fraction, uint64_t seed) {
  if (!(train_fraction > 0 && train_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("train fraction must be in (0, 1], got ", train_fraction));
  }
  std::vector<CoLocationSample> shuffled = samples;
  // Fisher–Yates by hand: std::shuffle's use of the engine is implementation-defined, and the
  // committed interference.yaml should not depend on the standard library that wrote it.
  std::mt19937_64 rng(seed);
  for (size_t i = shuffled.size(); i > 1; --i) {
    std::swap(shuffled[i - 1], shuffled[rng() % i]);
  }
  const auto train_count =
      static_cast<size_t>(std::llround(static_cast<double>(samples.size()) * train_fraction));
  SampleSplit split;
  split.train.assign(shuffled.begin(), shuffled.begin() + static_cast<std::ptrdiff_t>(train_count));
  split.validation.assign(shuffled.begin() + static_cast<std::ptrdiff_t>(train_count),
                          shuffled.end());
  return split;
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size()));
  const size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

}  // namespace tessera::scheduler
