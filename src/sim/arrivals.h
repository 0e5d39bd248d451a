// Arrival streams: when the requests of one model arrive (Poisson, constant or trace replay),
// with piecewise-constant rate schedules. Rules in include/tessera/sim/simulator.h (Arrivals).
//
// Thread-compatible: one stream per model, used by one thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "random.h"
#include "tessera/common/status.h"
#include "tessera/sim/simulator.h"

namespace tessera::sim {

// INVALID_ARGUMENT naming `model` for a negative or non-finite rate, a schedule that is not
// strictly ascending or starts before 0, or a trace that is unsorted or negative.
Status ValidateArrivals(const Arrivals& arrivals, double default_rate_rps,
                        const std::string& model);

class ArrivalStream {
 public:
  // `arrivals` validated; arrivals at or after end_ms are not generated.
  ArrivalStream(const Arrivals& arrivals, double default_rate_rps, Rng rng, double end_ms);

  // The next arrival time in ms (non-decreasing), or nullopt when the stream is over.
  std::optional<double> Next();

 private:
  ArrivalKind kind_;
  std::vector<RateSegment> segments_;  // kPoisson / kConstant
  std::vector<double> trace_s_;        // kTrace
  Rng rng_;
  double end_ms_;
  size_t index_ = 0;      // current segment, or next trace entry
  double time_ms_ = 0;    // last arrival, or the current segment's start
  bool entered_ = false;  // time_ms_ was set to the current segment's start
  double segment_start_ms_ = 0;
  int64_t constant_count_ = 0;  // arrivals so far in the current segment (constant spacing)
};

}  // namespace tessera::sim
