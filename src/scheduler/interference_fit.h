// The validation protocol of tessera-fit-interference (seed 001 §4.4: 2,500 samples split at
// random into 1,750 for fitting and 750 for validation), kept here so it is unit-tested.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/common/status.h"
#include "tessera/scheduler/interference.h"

namespace tessera::scheduler {

struct SampleSplit {
  std::vector<CoLocationSample> train;
  std::vector<CoLocationSample> validation;
};

// Shuffles the samples with a seeded std::mt19937_64 (the same split on every platform for the
// same seed) and puts round(n · train_fraction) of them in `train`, the rest in `validation`.
// INVALID_ARGUMENT unless 0 < train_fraction ≤ 1.
StatusOr<SampleSplit> SplitSamples(const std::vector<CoLocationSample>& samples,
                                   double train_fraction, uint64_t seed);

// Nearest-rank percentile (q in [0, 1]) of `values`: the smallest value with at least q·n values
// ≤ it. NaN for an empty list.
double Percentile(std::vector<double> values, double q);

}  // namespace tessera::scheduler
