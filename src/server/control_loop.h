// The scheduler's control loop in the server (seed 001 §4.5; issue 5 item 5): every rate window it
// reads each model's arrivals into a RateMonitor; every epoch it plans the measured rates with the
// configured policy (through the Autoscaler, so a load that needs more devices than there are is
// reported as unschedulable instead of silently overloading) and applies the plan by diff
// (PlanApplier). Plans, switches and their timings are logged and kept in ControlStatus for the
// metrics endpoint; unschedulable models are also noted in the repository index.
//
// Only models with an SLO (config slo_ms > 0) and a profile in the profiles folder are planned;
// the others stay on their configured instances (logged once per model).
//
// Thread-safety: Start/Stop from one thread; status() from any; SampleOnce/EpochOnce are the
// loop's steps, exposed so tests can drive the loop by hand (not while it runs).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "model_manager.h"
#include "plan_applier.h"
#include "tessera/frontend/metrics.h"
#include "tessera/scheduler/autoscaler.h"
#include "tessera/scheduler/planner.h"
#include "tessera/scheduler/profile.h"
#include "tessera/scheduler/rate_monitor.h"

namespace tessera::server {

struct ControlLoopOptions {
  std::string policy = "gpulet";  // scheduler::ParsePolicy names, except triton (no loop)
  std::string profiles_dir;       // profiles/<device>; interference.yaml there is used if present
  double epoch_ms = 20000;
  double window_ms = 500;
  int devices = 1;                // devices plans may use (the CPU is one device)
  PlanApplierOptions applier;
};

struct ControlStatus {
  uint64_t epochs = 0;
  uint64_t plan_generation = 0;  // bumped whenever the applied plan changed
  uint64_t switches = 0;         // model lane switches (active/shadow swaps)
  uint64_t apply_errors = 0;
  uint64_t weights_shared = 0;  // shadow loads that mapped a running gpulet's weights
  uint64_t unschedulable_events = 0;
  uint64_t last_switch_gap_ns = 0;
  uint64_t max_switch_gap_ns = 0;
  double last_plan_ms = 0;   // planner time of the last epoch
  double last_apply_ms = 0;  // applying time of the last changed plan
  std::vector<std::string> unschedulable;
  std::map<std::string, double> rates_rps;  // measured (EWMA) per planned model
  std::vector<AppliedGpulet> gpulets;
  std::string plan_text;  // PlanToText of the plan in force
};

class ControlLoop {
 public:
  // INVALID_ARGUMENT/NOT_FOUND for a bad policy or an unreadable profiles folder.
  static StatusOr<std::unique_ptr<ControlLoop>> Create(ControlLoopOptions options,
                                                       ModelManager* manager, ExecutorPool* pool);
  ~ControlLoop();  // Stop()

  void Start();
  // Stops the loop thread (waits for an epoch in progress); gpulets keep serving.
  void StopLoop();
  // StopLoop, then stops the gpulet executors: call after the model queues were shut down.
  void Stop();

  void SampleOnce(double now_ms);
  void EpochOnce(double now_ms);

  ControlStatus status() const;

 private:
  ControlLoop(ControlLoopOptions options, ModelManager* manager, ExecutorPool* pool,
              scheduler::ProfileSet profiles, scheduler::InterferenceModel interference,
              scheduler::Policy policy);
  void Loop();

  const ControlLoopOptions options_;
  ModelManager* const manager_;
  scheduler::ProfileSet profiles_;
  std::unique_ptr<scheduler::Planner> planner_;
  scheduler::RateMonitor monitor_;
  PlanApplier applier_;

  // Loop state (the loop thread, or a test stepping it).
  std::optional<scheduler::Autoscaler> autoscaler_;
  std::set<std::string> planned_models_;            // the autoscaler's model set
  std::set<std::string> warned_unplannable_;
  std::map<std::string, uint64_t> last_arrivals_;   // by model, summed over versions
  std::string last_plan_text_;

  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  ControlStatus status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// The loop's state as Prometheus samples (tessera_plan_generation, tessera_lane_switches_total,
// tessera_switch_gap_seconds, tessera_gpulet_rate_rps{gpulet,device,partition_pct,model,batch},
// tessera_model_rate_rps{model}, tessera_unschedulable_models, ...): docs/metrics in
// docs/architecture.md.
std::vector<frontend::MetricSample> ControlMetrics(const ControlStatus& status);

}  // namespace tessera::server
