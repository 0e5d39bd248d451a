// Simulate(): input checks, the event loop, arrivals, the epoch (re-planning) loop and the
// request accounting. Batching and execution live in dispatcher_model.cc, formatting in report.cc.
#include "tessera/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "arrivals.h"
#include "dispatcher_model.h"
#include "event_queue.h"
#include "report_internal.h"
#include "tessera/scheduler/rate_monitor.h"

namespace tessera::sim {

std::string_view ArrivalKindName(ArrivalKind kind) {
  switch (kind) {
    case ArrivalKind::kPoisson:
      return "poisson";
    case ArrivalKind::kConstant:
      return "constant";
    case ArrivalKind::kTrace:
      return "trace";
  }
  return "?";
}

SlowdownFn NoSlowdown() {
  return [](const scheduler::ModelProfile&, int, int, const scheduler::ModelProfile&, int, int) {
    return 1.0;
  };
}

SlowdownFn ConstantSlowdown(double factor) {
  return [factor](const scheduler::ModelProfile&, int, int, const scheduler::ModelProfile&, int,
                  int) { return factor; };
}

namespace {

using ModelIndex = std::map<std::string, int, std::less<>>;

Status CheckPlanShape(const scheduler::Plan& plan, const ModelIndex& index,
                      const std::vector<const scheduler::ModelProfile*>& profiles) {
  for (size_t i = 0; i < plan.gpulets.size(); ++i) {
    const scheduler::Gpulet& g = plan.gpulets[i];
    const std::string where = absl::StrCat("plan gpulet ", i, " (gpu ", g.gpu, ")");
    if (g.gpu < 0 || g.gpu >= plan.num_gpus) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": GPU outside the plan's ", plan.num_gpus, " GPUs"));
    }
    if (g.partition_pct <= 0 || g.partition_pct > 100) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": partition ", g.partition_pct, "% is outside (0, 100]"));
    }
    if (!std::isfinite(g.duty_ms) || g.duty_ms < 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": duty ", g.duty_ms, " ms < 0"));
    }
    for (const scheduler::GpuletModel& m : g.models) {
      auto it = index.find(m.model);
      if (it == index.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": model '", m.model, "' is not one of the simulated models"));
      }
      const int max_batch = profiles[it->second]->max_batch();
      if (m.batch < 1 || m.batch > max_batch) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": model '", m.model, "' batch ",
                                                       m.batch, " is outside [1, ", max_batch,
                                                       "] (its profile)"));
      }
    }
  }
  return absl::OkStatus();
}

Status CheckOptions(const SimOptions& o) {
  if (!(o.duration_s > 0) || !std::isfinite(o.duration_s)) {
    return absl::InvalidArgumentError(absl::StrCat("duration_s ", o.duration_s, " must be > 0"));
  }
  if (!(o.warmup_s >= 0) || o.warmup_s >= o.duration_s) {
    return absl::InvalidArgumentError(
        absl::StrCat("warmup_s ", o.warmup_s, " must be in [0, duration_s = ", o.duration_s, ")"));
  }
  if (!(o.jitter_sigma >= 0) || o.jitter_sigma > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("jitter_sigma ", o.jitter_sigma, " must be in [0, 2]"));
  }
  const EpochOptions& e = o.epoch;
  if (!(e.epoch_s >= 0) || !std::isfinite(e.epoch_s)) {
    return absl::InvalidArgumentError(absl::StrCat("epoch_s ", e.epoch_s, " must be ≥ 0"));
  }
  if (e.epoch_s > 0) {
    if (!e.replan) return absl::InvalidArgumentError("epoch_s > 0 needs a replan callback");
    if (!(e.rate_interval_s > 0) || e.rate_interval_s > e.epoch_s) {
      return absl::InvalidArgumentError(absl::StrCat("rate_interval_s ", e.rate_interval_s,
                                                     " must be in (0, epoch_s = ", e.epoch_s, "]"));
    }
    if (!(e.prepare_delay_s >= 0) || !std::isfinite(e.prepare_delay_s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("prepare_delay_s ", e.prepare_delay_s, " must be ≥ 0"));
    }
  }
  return absl::OkStatus();
}

struct ModelStats {
  int64_t arrived = 0, completed = 0, good = 0, late = 0, dropped = 0, unserved = 0, excluded = 0;
  std::vector<double> latencies_ms;
};

class Simulation : public RequestSink {
 public:
  Simulation(const std::vector<SimModel>& models,
             std::vector<const scheduler::ModelProfile*> profiles, ModelIndex index,
             const SlowdownFn& slowdown, const SimOptions& options)
      : models_(models),
        profiles_(profiles),
        index_(std::move(index)),
        options_(options),
        end_ms_(options.duration_s * 1000.0),
        warmup_ms_(options.warmup_s * 1000.0),
        stats_(models.size()) {
    dispatcher_ = std::make_unique<DispatcherModel>(
        profiles, &index_, slowdown,
        DispatcherOptions{options.jitter_sigma, options.seed, options.slo_drop,
                          options.wait_for_duty},
        &events_, this);
    for (size_t m = 0; m < models.size(); ++m) {
      streams_.emplace_back(models[m].arrivals, models[m].demand.rate_rps, Rng(options.seed, 1 + m),
                            end_ms_);
    }
  }

  SimReport Run(const scheduler::Plan& plan) {
    plan_ = plan;
    dispatcher_->InstallPlan(plan_, 0);
    for (size_t m = 0; m < models_.size(); ++m) PushNextArrival(static_cast<int>(m));
    const EpochOptions& e = options_.epoch;
    if (e.epoch_s > 0) {
      epoch_ms_ = e.epoch_s * 1000.0;
      // The server's own rate monitor, so the simulated control loop sees what the real one would.
      monitor_ = std::make_unique<scheduler::RateMonitor>(
          scheduler::RateMonitorOptions{e.rate_interval_s * 1000.0, epoch_ms_});
      monitor_->Advance(0);  // windows start at time 0
      events_.Push(epoch_ms_, EventType::kEpoch);
    }
    while (!events_.empty() && events_.top().time_ms < end_ms_) {
      const Event event = events_.Pop();
      Handle(event);
    }
    dispatcher_->ForEachPending([this](const Request& r) {
      if (end_ms_ > r.deadline_ms) {
        if (Measured(r)) ++stats_[r.model].unserved;
        CountViolation(r);
      } else if (Measured(r)) {
        ++stats_[r.model].excluded;
      }
    });
    return MakeReport();
  }

  void Completed(const Request& r, double now_ms) override {
    const double latency_ms = now_ms - r.arrival_ms;
    // A hair of tolerance: a plan exactly at its bound must not fail on rounding.
    const bool good = now_ms <= r.deadline_ms + 1e-9;
    if (!good) CountViolation(r);
    if (!Measured(r)) return;
    ModelStats& s = stats_[r.model];
    ++s.completed;
    ++(good ? s.good : s.late);
    s.latencies_ms.push_back(latency_ms);
  }

  void Dropped(const Request& r, double now_ms) override {
    CountViolation(r);
    if (Measured(r)) ++stats_[r.model].dropped;
  }

 private:
  bool Measured(const Request& r) const { return r.arrival_ms >= warmup_ms_; }

  size_t EpochOf(const Request& r) const { return static_cast<size_t>(r.arrival_ms / epoch_ms_); }

  void CountViolation(const Request& r) {
    if (epoch_ms_ <= 0) return;
    const size_t k = EpochOf(r);
    if (k >= epoch_violations_.size()) epoch_violations_.resize(k + 1, 0);
    ++epoch_violations_[k];
  }

  void PushNextArrival(int model) {
    if (std::optional<double> t = streams_[model].Next()) {
      events_.Push(*t, EventType::kArrival, model);
    }
  }

  void Handle(const Event& event) {
    const double now = event.time_ms;
    switch (event.type) {
      case EventType::kArrival: {
        const int m = static_cast<int>(event.a);
        const Request r{next_request_id_++, m, now, now + models_[m].demand.slo_ms};
        if (Measured(r)) ++stats_[m].arrived;
        if (monitor_) {
          monitor_->Record(models_[m].demand.model, now);
          const size_t k = EpochOf(r);
          if (k >= epoch_arrivals_.size()) epoch_arrivals_.resize(k + 1, 0);
          ++epoch_arrivals_[k];
        }
        dispatcher_->Route(r, now);
        PushNextArrival(m);
        break;
      }
      case EventType::kRoundTimer:
        dispatcher_->OnRoundTimer(static_cast<int>(event.a), event.gen, now);
        break;
      case EventType::kBatchFinish:
        dispatcher_->OnBatchFinish(event.a, event.gen, now);
        break;
      case EventType::kEpoch:
        DecideEpoch(now);
        break;
      case EventType::kPlanSwitch:
        if (event.gen == pending_gen_ && pending_) {
          plan_ = std::move(*pending_);
          pending_.reset();
          dispatcher_->InstallPlan(plan_, now);
          ++replans_;
        }
        break;
    }
  }

  void DecideEpoch(double now_ms) {
    monitor_->Advance(now_ms);
    std::vector<scheduler::ModelDemand> observed;
    for (const SimModel& m : models_) {
      observed.push_back(m.demand);
      observed.back().rate_rps = monitor_->Rate(m.demand.model);
    }
    EpochRecord record;
    record.time_s = now_ms / 1000.0;
    StatusOr<std::optional<scheduler::Plan>> decided =
        options_.epoch.replan(plan_, observed, record.time_s);
    const scheduler::Plan* shown = &plan_;
    if (!decided.ok()) {
      record.action = absl::StrCat("error: ", decided.status().message());
    } else if (!decided->has_value()) {
      record.action = "kept";
    } else if (Status shape = CheckPlanShape(**decided, index_, profiles_); !shape.ok()) {
      record.action = absl::StrCat("error: ", shape.message());
    } else {
      pending_ = std::move(**decided);
      shown = &*pending_;
      record.action = "replanned";
      record.switch_s = record.time_s + options_.epoch.prepare_delay_s;
      events_.Push(now_ms + options_.epoch.prepare_delay_s * 1000.0, EventType::kPlanSwitch, 0,
                   ++pending_gen_);
    }
    record.gpus_used = shown->GpusUsed();
    record.partition_sum = shown->PartitionSum();
    record.schedulable = shown->schedulable();
    epochs_.push_back(std::move(record));
    events_.Push(now_ms + epoch_ms_, EventType::kEpoch);
  }

  SimReport MakeReport() {
    SimReport report;
    report.window_s = options_.duration_s - options_.warmup_s;
    report.seed = options_.seed;
    report.batches = dispatcher_->batches_started();
    report.replans = replans_;
    std::vector<ModelCounts> counts;
    for (size_t m = 0; m < models_.size(); ++m) {
      ModelStats& s = stats_[m];
      counts.push_back(ModelCounts{models_[m].demand.model, models_[m].demand.slo_ms, s.arrived,
                                   s.completed, s.good, s.late, s.dropped, s.unserved, s.excluded,
                                   std::move(s.latencies_ms)});
    }
    FillModelReports(std::move(counts), report);
    for (size_t k = 0; k < epochs_.size(); ++k) {
      if (k < epoch_arrivals_.size()) epochs_[k].arrived = epoch_arrivals_[k];
      if (k < epoch_violations_.size()) epochs_[k].violations = epoch_violations_[k];
    }
    report.epochs = std::move(epochs_);
    return report;
  }

  const std::vector<SimModel>& models_;
  std::vector<const scheduler::ModelProfile*> profiles_;
  ModelIndex index_;
  SimOptions options_;
  double end_ms_;
  double warmup_ms_;
  EventQueue events_;
  std::unique_ptr<DispatcherModel> dispatcher_;
  std::vector<ArrivalStream> streams_;
  std::vector<ModelStats> stats_;
  uint64_t next_request_id_ = 0;
  scheduler::Plan plan_;

  // Epoch loop.
  double epoch_ms_ = 0;
  std::unique_ptr<scheduler::RateMonitor> monitor_;
  std::optional<scheduler::Plan> pending_;
  uint64_t pending_gen_ = 0;
  int64_t replans_ = 0;
  std::vector<EpochRecord> epochs_;
  std::vector<int64_t> epoch_arrivals_;
  std::vector<int64_t> epoch_violations_;
};

}  // namespace

StatusOr<SimReport> Simulate(const scheduler::ProfileSet& profiles, const scheduler::Plan& plan,
                             const std::vector<SimModel>& models,
                             const SlowdownFn& true_interference, const SimOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckOptions(options));
  if (models.empty()) return absl::InvalidArgumentError("no models to simulate");
  if (!true_interference) return absl::InvalidArgumentError("no interference function given");
  ModelIndex index;
  std::vector<const scheduler::ModelProfile*> model_profiles;
  for (size_t m = 0; m < models.size(); ++m) {
    const scheduler::ModelDemand& d = models[m].demand;
    if (d.model.empty())
      return absl::InvalidArgumentError(absl::StrCat("model ", m, " has no name"));
    if (!index.emplace(d.model, static_cast<int>(m)).second) {
      return absl::InvalidArgumentError(absl::StrCat("model '", d.model, "' is listed twice"));
    }
    if (!(d.slo_ms > 0) || !std::isfinite(d.slo_ms)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", d.model, "': SLO ", d.slo_ms, " ms must be > 0"));
    }
    TESSERA_ASSIGN_OR_RETURN(const scheduler::ModelProfile* profile,
                             profiles.Get(d.profile_name()));
    model_profiles.push_back(profile);
    TESSERA_RETURN_IF_ERROR(ValidateArrivals(models[m].arrivals, d.rate_rps, d.model));
  }
  TESSERA_RETURN_IF_ERROR(CheckPlanShape(plan, index, model_profiles));
  Simulation simulation(models, model_profiles, std::move(index), true_interference, options);
  return simulation.Run(plan);
}

}  // namespace tessera::sim
