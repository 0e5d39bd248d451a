// GPU auto-scaling (seed 001 §4.5, Alg. 2): once per epoch, plan the measured rates on the GPUs
// held now; if they do not fit, add GPUs one at a time up to a limit; if even the limit does not
// fit, report the models that do not.
//
// Rules, per Step:
//  1. Targets: each model's measured rate, plus Poisson headroom (PoissonHeadroomRps) unless
//     options.poisson_headroom is false.
//  2. Scale up (Alg. 2 l.2–7): Planner::Replan of the current plan on the N GPUs held (incremental
//     first, full re-partition when that fails); if unschedulable, MakePlan on N+1, N+2, …,
//     gpu_limit, the first schedulable plan wins.
//  3. Unschedulable (l.8): when gpu_limit does not fit either, an UnschedulableEvent names the
//     models the plan at gpu_limit leaves out, with their target rates. The last schedulable plan
//     keeps running (nothing is torn down in overload); before any, the plan at gpu_limit, which
//     serves the models that fit.
//  4. Scale down (not in the paper, whose Fig. 15 only shows partitions shrinking with the load):
//     hysteresis, so that neither one quiet epoch nor a load just under N − 1 GPUs' capacity makes
//     GPUs flap. After scale_down_epochs (K, default 3) consecutive epochs in which the targets
//     raised by scale_down_fall (10 %) fit on N − 1 GPUs — the rates are more than ~10 % below
//     what N − 1 GPUs can take — the plan on N − 1 GPUs (for the unraised targets) is taken.
//     One GPU per K epochs at most.
// The first Step starts from options.initial_gpus.
//
// Thread-compatible: one control loop (or simulator) drives it; `planner` must outlive it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessera/common/status.h"
#include "tessera/scheduler/plan.h"
#include "tessera/scheduler/planner.h"

namespace tessera::scheduler {

struct AutoscalerOptions {
  int gpu_limit = 1;              // most GPUs a plan may use (GPU_LIMIT of Alg. 2), ≥ 1
  int initial_gpus = 1;           // N of the first epoch, in [1, gpu_limit]
  int scale_down_epochs = 3;      // K consecutive epochs before giving a GPU back, ≥ 1
  double scale_down_fall = 0.10;  // margin below N − 1 GPUs' capacity before scaling down
  bool poisson_headroom = true;   // plan for PoissonHeadroomRps(measured), not the mean
};

// Models that do not fit on gpu_limit GPUs.
struct UnschedulableEvent {
  double time_ms = 0;
  int gpu_limit = 0;
  std::vector<ModelDemand> models;  // with the target rates that did not fit
  // "unschedulable on 4 GPUs: vgg16 (1200.0 rps, SLO 142 ms), ..."
  std::string ToString() const;
};

struct AutoscaleDecision {
  Plan plan;                   // the plan to run from now on
  int num_gpus = 0;            // GPUs held (the plan may use fewer)
  bool replanned = false;      // plan differs from the previous Step's in any way
  bool repartitioned = false;  // some gpulet (gpu, partition, model set) appeared or went away
  int scaled = 0;              // +1 a GPU was added (or more), −1 one given back, 0 neither
  std::vector<ModelDemand> targets;         // what was planned for
  std::optional<UnschedulableEvent> event;  // set when gpu_limit does not fit
};

class Autoscaler {
 public:
  // `models`: every served model with its SLO (and profile); their rate fields are ignored.
  // INVALID_ARGUMENT for bad options or duplicate models.
  static StatusOr<Autoscaler> Create(Planner* planner, std::vector<ModelDemand> models,
                                     AutoscalerOptions options);

  // One epoch at `now_ms` with measured rates (requests/s, e.g. RateMonitor::Rates()); a model
  // missing from `measured_rps` has rate 0. INVALID_ARGUMENT for a rate of an unknown model or a
  // negative rate; planner errors pass through.
  StatusOr<AutoscaleDecision> Step(double now_ms,
                                   const std::map<std::string, double>& measured_rps);

  int num_gpus() const { return num_gpus_; }
  const std::optional<Plan>& plan() const { return plan_; }

 private:
  Autoscaler(Planner* planner, std::vector<ModelDemand> models, AutoscalerOptions options);

  Planner* planner_;
  std::vector<ModelDemand> models_;
  AutoscalerOptions options_;
  int num_gpus_ = 0;
  std::optional<Plan> plan_;       // the plan running now
  bool plan_schedulable_ = false;  // whether plan_ fits every model
  int quiet_epochs_ = 0;           // consecutive epochs that would fit on num_gpus_ − 1
};

}  // namespace tessera::scheduler
