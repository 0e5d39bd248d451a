// Helpers for the simulator's tests: profile sets, hand-made plans and model streams.
#pragma once

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "profile_fixtures_for_test.h"
#include "tessera/scheduler/plan.h"
#include "tessera/sim/simulator.h"

namespace tessera::sim::testing {

// A profile set on "test-gpu" holding `profiles`.
inline scheduler::ProfileSet ProfileSetForTest(std::vector<scheduler::ModelProfile> profiles) {
  scheduler::ProfileSet set(scheduler::DeviceInfo{"test-gpu", 11000, true});
  for (auto& p : profiles) EXPECT_TRUE(set.Add(std::move(p)).ok());
  return set;
}

inline SimModel PoissonModelForTest(const std::string& model, double rate_rps, double slo_ms) {
  SimModel m;
  m.demand.model = model;
  m.demand.rate_rps = rate_rps;
  m.demand.slo_ms = slo_ms;
  return m;
}

inline SimModel TraceModelForTest(const std::string& model, std::vector<double> times_s,
                                  double slo_ms) {
  SimModel m;
  m.demand.model = model;
  m.demand.slo_ms = slo_ms;
  m.arrivals.kind = ArrivalKind::kTrace;
  m.arrivals.trace_s = std::move(times_s);
  return m;
}

inline scheduler::Gpulet GpuletForTest(int gpu, int partition_pct, double duty_ms,
                                       std::vector<scheduler::GpuletModel> models) {
  scheduler::Gpulet g;
  g.gpu = gpu;
  g.partition_pct = partition_pct;
  g.duty_ms = duty_ms;
  g.models = std::move(models);
  return g;
}

inline scheduler::Plan PlanForTest(int num_gpus, std::vector<scheduler::Gpulet> gpulets,
                                   bool exclusive = true) {
  scheduler::Plan plan;
  plan.policy = "hand-made";
  plan.num_gpus = num_gpus;
  plan.partitions_exclusive = exclusive;
  plan.gpulets = std::move(gpulets);
  return plan;
}

// No jitter, no warm-up: hand-computable runs.
inline SimOptions ExactOptionsForTest(double duration_s) {
  SimOptions options;
  options.duration_s = duration_s;
  options.warmup_s = 0;
  options.jitter_sigma = 0;
  return options;
}

}  // namespace tessera::sim::testing
