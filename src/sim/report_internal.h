// Turning the simulator's raw counts into a SimReport (report.cc). Internal to tessera_sim.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/sim/simulator.h"

namespace tessera::sim {

struct ModelCounts {
  std::string model;
  double slo_ms = 0;
  int64_t arrived = 0, completed = 0, good = 0, late = 0, dropped = 0, unserved = 0, excluded = 0;
  std::vector<double> latencies_ms;  // completed requests, any order
};

// Nearest-rank percentile: the ⌈q·n⌉-th smallest of `sorted` (ascending), 0 when empty.
double NearestRank(const std::vector<double>& sorted, double q);

// Fills report.models (in order) and report.total; report.window_s must be set.
void FillModelReports(std::vector<ModelCounts> counts, SimReport& report);

}  // namespace tessera::sim
