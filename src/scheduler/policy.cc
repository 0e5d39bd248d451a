#include "absl/strings/str_cat.h"
#include "tessera/scheduler/planner.h"

namespace tessera::scheduler {

StatusOr<Policy> ParsePolicy(std::string_view name) {
  for (Policy p : {Policy::kGpulet, Policy::kTemporal, Policy::kSpatial, Policy::kTriton,
                   Policy::kIdeal}) {
    if (PolicyName(p) == name) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown scheduler policy '", std::string(name),
                   "': expected one of gpulet, temporal, spatial, triton, ideal"));
}

std::string_view PolicyName(Policy policy) {
  switch (policy) {
    case Policy::kGpulet: return "gpulet";
    case Policy::kTemporal: return "temporal";
    case Policy::kSpatial: return "spatial";
    case Policy::kTriton: return "triton";
    case Policy::kIdeal: return "ideal";
  }
  return "?";
}

}  // namespace tessera::scheduler
