#include "tessera/scheduler/plan.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tessera::scheduler {

double Plan::AssignedRate(std::string_view model) const {
  double rate = 0;
  for (const Gpulet& g : gpulets) {
    for (const GpuletModel& m : g.models) {
      if (m.model == model) rate += m.rate_rps;
    }
  }
  return rate;
}

int Plan::GpusUsed() const {
  std::set<int> gpus;
  for (const Gpulet& g : gpulets) {
    if (!g.models.empty()) gpus.insert(g.gpu);
  }
  return static_cast<int>(gpus.size());
}

int Plan::PartitionSum() const {
  int sum = 0;
  for (const Gpulet& g : gpulets) {
    if (!g.models.empty()) sum += g.partition_pct;
  }
  return sum;
}

std::string PlanToText(const Plan& plan) {
  std::string out = absl::StrFormat("plan by %s on %d GPUs: %d used, partitions sum %d%%\n",
                                    plan.policy, plan.num_gpus, plan.GpusUsed(),
                                    plan.PartitionSum());
  absl::StrAppendFormat(&out, "%4s %6s %9s  %-16s %5s %10s %11s\n", "gpu", "part%", "duty_ms",
                        "model", "batch", "rate_rps", "latency_ms");
  for (const Gpulet& g : plan.gpulets) {
    for (const GpuletModel& m : g.models) {
      absl::StrAppendFormat(&out, "%4d %6d %9.2f  %-16s %5d %10.1f %11.2f\n", g.gpu,
                            g.partition_pct, g.duty_ms, m.model, m.batch, m.rate_rps,
                            m.latency_ms);
    }
  }
  if (!plan.unschedulable.empty()) {
    absl::StrAppend(&out, "unschedulable: ", absl::StrJoin(plan.unschedulable, ", "), "\n");
  }
  return out;
}

}  // namespace tessera::scheduler
