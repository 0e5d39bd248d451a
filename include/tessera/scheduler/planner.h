// Planners: turn model demands (rate, SLO) into a Plan on N identical GPUs.
//
// Policies (server.yaml scheduler.policy, tessera-sim --policy):
//   gpulet     seed 001 Alg. 1, elastic spatio-temporal partitioning, interference-aware when the
//              planner is given an interference model ("gpulet+int") and blind when given None;
//   temporal   Nexus-style squishy bin packing (SBP): whole GPUs, models time-share by duty cycle;
//   spatial    greedy best fit: one partition per model sized for its rate, no time sharing;
//   triton     one instance per model on every GPU, dynamic batching, no partitions;
//   ideal      exhaustive search over partition layouts, for ≤ 4 GPUs (seed 001 §5.2).
//
// Thread-safety: a Planner is used by one thread at a time (the control loop or the simulator).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/common/status.h"
#include "tessera/scheduler/interference.h"
#include "tessera/scheduler/plan.h"
#include "tessera/scheduler/profile.h"

namespace tessera::scheduler {

enum class Policy { kGpulet, kTemporal, kSpatial, kTriton, kIdeal };

// "gpulet" | "temporal" | "spatial" | "triton" | "ideal"; INVALID_ARGUMENT listing them otherwise.
StatusOr<Policy> ParsePolicy(std::string_view name);
std::string_view PolicyName(Policy policy);

struct PlannerOptions {
  // Partition sizes a gpulet may have, in % (seed 001 §2.7: 20 % steps plus 50 %).
  std::vector<int> partitions_pct = {20, 40, 50, 60, 80, 100};
  int max_gpulets_per_gpu = 2;     // seed 001 §2.7
  int max_models_per_gpulet = 3;   // "Max Model" of the gpulet artifact
  int max_batch = 32;
  // Every scheduled latency is L(b,p)·interference·latency_margin: headroom for jitter and
  // profiling error (the artifact's "Latency Ratio" 1.1, seed 001 §2.4).
  double latency_margin = 1.1;
  // Device memory admission: a gpulet's models plus per_gpulet_overhead_mb must fit in
  // memory_room × device memory, summed over the gpulets of a GPU (seed 001 §1.3 [R]).
  double memory_room = 0.9;
  double per_gpulet_overhead_mb = 1230;
  // Device memory in MB; 0 = take it from the ProfileSet's DeviceInfo.
  double gpu_memory_mb = 0;
  // Demand left uncovered up to this many requests/s counts as served (the artifact's TRP_SLACK).
  double rate_slack_rps = 0;
};

class Planner {
 public:
  virtual ~Planner() = default;
  // "gpulet", "gpulet+int", "temporal", "spatial", "triton", "ideal".
  virtual std::string name() const = 0;

  // A plan for `demands` on `num_gpus` GPUs. A demand that does not fit is not an error: the plan
  // lists it in `unschedulable`. Errors are for bad input only: a model with no profile
  // (NOT_FOUND), a duplicate model, a negative rate or a non-positive SLO (INVALID_ARGUMENT).
  // Models with rate 0 get no gpulet.
  virtual StatusOr<Plan> MakePlan(const std::vector<ModelDemand>& demands, int num_gpus) = 0;

  // Re-plan from `current` after the demands changed. Planners that can (gpulet) first try an
  // incremental change that keeps unchanged models' gpulets in place, and fall back to a full
  // MakePlan; the default is a full MakePlan.
  virtual StatusOr<Plan> Replan(const Plan& current, const std::vector<ModelDemand>& demands,
                                int num_gpus) {
    return MakePlan(demands, num_gpus);
  }
};

// `profiles` must outlive the planner.
std::unique_ptr<Planner> CreatePlanner(Policy policy, const ProfileSet* profiles,
                                       InterferenceModel interference, PlannerOptions options = {});

// Validates a plan against the rules every planner must keep, under `interference`:
//  - every gpulet's GPU is in [0, num_gpus), its partition one of options.partitions_pct;
//  - if plan.partitions_exclusive: per GPU Σ partition ≤ 100 and ≤ max_gpulets_per_gpu gpulets;
//  - per gpulet ≤ max_models_per_gpulet models, batches in [1, max_batch], memory admission;
//  - SLO rules (seed 001 §2.4): a gpulet with duty_ms > 0 satisfies Σ latency ≤ duty_ms and, for
//    every model, Σ latency + duty_ms ≤ SLO, with every latency recomputed here as
//    L(b,p)·factor·margin where factor is the max interference from the other gpulets on the GPU;
//  - every model not listed unschedulable has AssignedRate ≥ rate − rate_slack_rps, and its
//    gpulets' batches cover their rates: batch ≥ rate_rps·duty_ms/1000 (up to rounding).
// FAILED_PRECONDITION naming the gpulet, model and violated rule. Used by property tests and by the
// simulator before it runs a plan.
Status CheckPlan(const Plan& plan, const std::vector<ModelDemand>& demands,
                 const ProfileSet& profiles, const InterferenceModel& interference,
                 const PlannerOptions& options);

}  // namespace tessera::scheduler
