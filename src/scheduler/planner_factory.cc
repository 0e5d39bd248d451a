// CreatePlanner: the one place that maps a Policy to its implementation.
#include "baseline_planners.h"
#include "gpulet_planner.h"
#include "tessera/scheduler/planner.h"

namespace tessera::scheduler {

std::unique_ptr<Planner> CreatePlanner(Policy policy, const ProfileSet* profiles,
                                       InterferenceModel interference, PlannerOptions options) {
  switch (policy) {
    case Policy::kGpulet:
      return CreateGpuletPlanner(profiles, std::move(interference), std::move(options));
    case Policy::kTemporal:
      return CreateTemporalPlanner(profiles, std::move(interference), std::move(options));
    case Policy::kSpatial:
      return CreateSpatialPlanner(profiles, std::move(interference), std::move(options));
    case Policy::kTriton:
      return CreateTritonPlanner(profiles, std::move(interference), std::move(options));
    case Policy::kIdeal:
      return CreateIdealPlanner(profiles, std::move(interference), std::move(options));
  }
  return nullptr;
}

}  // namespace tessera::scheduler
