#include "control_loop.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "tessera/common/clock.h"
#include "tessera/common/thread_name.h"
#include "tessera/scheduler/interference.h"

namespace tessera::server {

StatusOr<std::unique_ptr<ControlLoop>> ControlLoop::Create(ControlLoopOptions options,
                                                           ModelManager* manager,
                                                           ExecutorPool* pool) {
  TESSERA_ASSIGN_OR_RETURN(scheduler::Policy policy, scheduler::ParsePolicy(options.policy));
  if (policy == scheduler::Policy::kTriton) {
    return absl::InvalidArgumentError(
        "scheduler.policy triton keeps per-model dynamic batching and has no control loop");
  }
  if (options.profiles_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scheduler.policy ", options.policy,
        " plans from latency profiles: set scheduler.profiles to a folder written by "
        "tessera-profile (docs/profile-format.md)"));
  }
  auto profiles = scheduler::ProfileSet::LoadDirectory(options.profiles_dir);
  if (!profiles.ok()) {
    return absl::Status(profiles.status().code(),
                        absl::StrCat("scheduler.profiles: ", profiles.status().message()));
  }
  // Partitions of one device run side by side; without a fitted model, the conservative constant
  // of seed 001 Fig. 7 applies (documented in interference.h).
  scheduler::InterferenceModel interference = scheduler::InterferenceModel::Constant();
  const auto fitted = std::filesystem::path(options.profiles_dir) / "interference.yaml";
  if (std::filesystem::exists(fitted)) {
    TESSERA_ASSIGN_OR_RETURN(interference, scheduler::LoadInterferenceFile(fitted));
  }
  if (options.window_ms <= 0 || options.epoch_ms < options.window_ms || options.devices < 1) {
    return absl::InvalidArgumentError("control loop: need 0 < window ≤ epoch and ≥ 1 device");
  }
  return std::unique_ptr<ControlLoop>(new ControlLoop(std::move(options), manager, pool,
                                                      std::move(profiles).value(), interference,
                                                      policy));
}

ControlLoop::ControlLoop(ControlLoopOptions options, ModelManager* manager, ExecutorPool* pool,
                         scheduler::ProfileSet profiles, scheduler::InterferenceModel interference,
                         scheduler::Policy policy)
    : options_(std::move(options)),
      manager_(manager),
      profiles_(std::move(profiles)),
      monitor_(scheduler::RateMonitorOptions{options_.window_ms, options_.epoch_ms}),
      applier_(options_.applier, pool) {
  scheduler::PlannerOptions planner_options;
  // Partition sizes: those the profiles were measured at (on a CPU, the distinct core counts).
  std::set<int> partitions;
  for (const std::string& model : profiles_.models()) {
    for (int p : profiles_.Find(model)->table().partitions_pct) partitions.insert(p);
  }
  if (!partitions.empty()) planner_options.partitions_pct.assign(partitions.begin(), partitions.end());
  // The per-process context overhead of the gpulet artifact is a GPU figure; a CPU executor's
  // memory is its model's.
  if (profiles_.device().name.rfind("cpu", 0) == 0) planner_options.per_gpulet_overhead_mb = 0;
  planner_ = scheduler::CreatePlanner(policy, &profiles_, interference, planner_options);
}

ControlLoop::~ControlLoop() { Stop(); }

void ControlLoop::Start() {
  thread_ = std::thread([this] { Loop(); });
  spdlog::info("control loop: policy {}, profiles {} ({}), epoch {:.1f} s, rate window {:.0f} ms",
               planner_->name(), options_.profiles_dir, profiles_.device().name,
               options_.epoch_ms / 1000, options_.window_ms);
}

void ControlLoop::StopLoop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ControlLoop::Stop() {
  StopLoop();
  applier_.Shutdown();
}

void ControlLoop::Loop() {
  SetCurrentThreadName("ts-control");
  const uint64_t origin = MonotonicNs();
  auto now_ms = [&] { return (MonotonicNs() - origin) / 1e6; };
  double next_epoch = options_.epoch_ms;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    stop_cv_.wait_for(lock, std::chrono::microseconds(static_cast<int64_t>(options_.window_ms * 1e3)),
                      [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    const double now = now_ms();
    SampleOnce(now);
    if (now >= next_epoch) {
      EpochOnce(now);
      next_epoch = now + options_.epoch_ms;
    }
    lock.lock();
  }
}

void ControlLoop::SampleOnce(double now_ms) {
  for (const ServedModel& model : manager_->ServedModels()) {
    uint64_t arrivals = 0;
    for (const auto& stats : model.stats_by_version) arrivals += stats->Snapshot().arrivals;
    uint64_t& last = last_arrivals_[model.name];
    // A reload brings fresh counters: count from zero again rather than going negative.
    const uint64_t delta = arrivals >= last ? arrivals - last : arrivals;
    last = arrivals;
    monitor_.Record(model.name, now_ms, static_cast<int64_t>(delta));
  }
  monitor_.Advance(now_ms);
}

void ControlLoop::EpochOnce(double now_ms) {
  const std::vector<ServedModel> served = manager_->ServedModels();
  std::vector<scheduler::ModelDemand> demands;
  std::set<std::string> names;
  for (const ServedModel& model : served) {
    std::string why;
    const bool asks_for_cpu =
        std::any_of(model.config->instance_groups.begin(), model.config->instance_groups.end(),
                    [](const repository::InstanceGroupConfig& group) {
                      return group.kind == repository::InstanceKind::kCpu;
                    });
    if (asks_for_cpu && profiles_.device().name.rfind("cpu", 0) != 0) {
      why = "its instance_group asks for KIND_CPU, and the plans are for the GPU";
    } else if (model.config->slo_ms <= 0) {
      why = "it has no slo_ms";
    } else if (!profiles_.Find(model.name)) {
      why = absl::StrCat("there is no profile for it in ", options_.profiles_dir);
    }
    if (!why.empty()) {
      if (warned_unplannable_.insert(model.name).second) {
        spdlog::warn("control loop: model '{}' stays on its configured instances: {}", model.name, why);
      }
      continue;
    }
    demands.push_back({model.name, "", 0, model.config->slo_ms});
    names.insert(model.name);
  }
  if (names != planned_models_ || !autoscaler_) {
    scheduler::AutoscalerOptions autoscale;
    autoscale.gpu_limit = options_.devices;
    autoscale.initial_gpus = options_.devices;
    auto created = scheduler::Autoscaler::Create(planner_.get(), demands, autoscale);
    if (!created.ok()) {
      spdlog::error("control loop: {}", created.status().message());
      return;
    }
    autoscaler_.emplace(std::move(created).value());
    planned_models_ = names;
  }
  std::map<std::string, double> rates;
  for (const std::string& name : names) rates[name] = monitor_.Rate(name);

  const uint64_t plan_start = MonotonicNs();
  auto decision = autoscaler_->Step(now_ms, rates);
  const double plan_ms = (MonotonicNs() - plan_start) / 1e6;
  if (!decision.ok()) {
    spdlog::error("control loop: planning failed: {}", decision.status().message());
    std::lock_guard lock(mu_);
    ++status_.epochs;
    ++status_.apply_errors;
    return;
  }
  std::map<std::string, std::string> notes;
  std::vector<std::string> unschedulable;
  if (decision->event) {
    spdlog::warn("control loop: {}", decision->event->ToString());
    for (const auto& demand : decision->event->models) {
      unschedulable.push_back(demand.model);
      notes[demand.model] = absl::StrFormat(
          "unschedulable: %.1f rps within %.0f ms do not fit on %d device(s)", demand.rate_rps,
          demand.slo_ms, decision->event->gpu_limit);
    }
  }
  manager_->SetPlanNotes(notes);

  ApplyReport report = applier_.Apply(decision->plan, served);
  const std::string plan_text = scheduler::PlanToText(decision->plan);
  const bool changed = plan_text != last_plan_text_ || !report.switches.empty();
  if (changed) {
    spdlog::info("control loop: plan {} ({} gpulet(s) started, {} kept, {} stopped, {} switch(es), "
                 "planned in {:.2f} ms, applied in {:.1f} ms):\n{}",
                 decision->plan.policy, report.gpulets_started, report.gpulets_kept,
                 report.gpulets_stopped, report.switches.size(), plan_ms, report.total_ns / 1e6,
                 plan_text);
    last_plan_text_ = plan_text;
  }
  std::lock_guard lock(mu_);
  ++status_.epochs;
  if (changed) ++status_.plan_generation;
  status_.switches += report.switches.size();
  status_.apply_errors += report.errors.size();
  status_.weights_shared += static_cast<uint64_t>(report.weights_shared);
  if (decision->event) ++status_.unschedulable_events;
  for (const ModelSwitch& s : report.switches) {
    status_.last_switch_gap_ns = s.swap.gap_ns;
    status_.max_switch_gap_ns = std::max(status_.max_switch_gap_ns, s.swap.gap_ns);
  }
  status_.last_plan_ms = plan_ms;
  if (changed) status_.last_apply_ms = report.total_ns / 1e6;
  status_.unschedulable = unschedulable;
  status_.rates_rps = rates;
  status_.gpulets = applier_.gpulets();
  status_.plan_text = plan_text;
}

ControlStatus ControlLoop::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

std::vector<frontend::MetricSample> ControlMetrics(const ControlStatus& status) {
  std::vector<frontend::MetricSample> samples = {
      {"tessera_control_epochs_total", "Control-loop epochs run", true, {}, double(status.epochs)},
      {"tessera_plan_generation",
       "Bumped each time the applied plan changed",
       false,
       {},
       double(status.plan_generation)},
      {"tessera_lane_switches_total",
       "Switches of a model's lanes at a batch boundary: to a new (shadow) gpulet, back to its "
       "instances, or to new batch/duty/rate numbers",
       true,
       {},
       double(status.switches)},
      {"tessera_switch_gap_seconds",
       "Dispatch pause of the last lane switch",
       false,
       {},
       status.last_switch_gap_ns / 1e9},
      {"tessera_switch_gap_max_seconds",
       "Longest dispatch pause of any lane switch",
       false,
       {},
       status.max_switch_gap_ns / 1e9},
      {"tessera_plan_apply_errors_total",
       "Gpulets that could not be started, plans that failed",
       true,
       {},
       double(status.apply_errors)},
      {"tessera_shadow_weights_shared_total",
       "Shadow gpulet loads that mapped a running gpulet's weights instead of loading a copy (GPU)",
       true,
       {},
       double(status.weights_shared)},
      {"tessera_unschedulable_events_total",
       "Epochs whose load did not fit the devices",
       true,
       {},
       double(status.unschedulable_events)},
      {"tessera_unschedulable_models",
       "Models the current plan could not cover",
       false,
       {},
       double(status.unschedulable.size())},
      {"tessera_plan_seconds",
       "Planner time of the last epoch",
       false,
       {},
       status.last_plan_ms / 1e3},
      {"tessera_plan_apply_seconds",
       "Time to apply the last changed plan",
       false,
       {},
       status.last_apply_ms / 1e3},
  };
  for (const auto& [model, rate] : status.rates_rps) {
    samples.push_back({"tessera_model_rate_rps", "Measured request rate (EWMA) the planner used",
                       false, {{"model", model}}, rate});
  }
  for (const AppliedGpulet& gpulet : status.gpulets) {
    for (const scheduler::GpuletModel& m : gpulet.models) {
      samples.push_back({"tessera_gpulet_rate_rps",
                         "Request rate routed to a model on a running gpulet by the plan",
                         false,
                         {{"gpulet", gpulet.label},
                          {"device", absl::StrCat(gpulet.device)},
                          {"partition_pct", absl::StrCat(gpulet.partition_pct)},
                          {"model", m.model},
                          {"batch", absl::StrCat(m.batch)},
                          {"duty_ms", absl::StrFormat("%.3f", gpulet.duty_ms)}},
                         m.rate_rps});
    }
  }
  return samples;
}

}  // namespace tessera::server
