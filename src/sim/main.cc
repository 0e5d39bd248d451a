// tessera-sim: runs the real planners against a simulated cluster (docs/simulator.md).
//
//   tessera-sim run SCENARIO.yaml            plan + discrete-event simulation → report
//   tessera-sim peak WORKLOAD.yaml...        SLO-preserved peak throughput per policy → table
//   tessera-sim schedulability WORKLOAD.yaml all rate combinations → schedulable counts, 2 policies
//
// Policies: gpulet, temporal, spatial, triton, ideal; "+int" gives the planner the profile set's
// interference model (interference.yaml), otherwise it plans blind (InterferenceModel::None).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "peak_search.h"
#include "schedulability.h"
#include "sim_config.h"
#include "tessera/scheduler/autoscaler.h"
#include "tessera/scheduler/planner.h"
#include "tessera/sim/simulator.h"

namespace tessera::sim {
namespace {

namespace fs = std::filesystem;

struct Common {
  std::string profiles_dir = "profiles/synthetic-2080ti";
};

struct Loaded {
  scheduler::ProfileSet profiles;
  scheduler::InterferenceModel planner_model;  // interference.yaml, for "+int" policies
};

StatusOr<Loaded> LoadProfiles(const std::string& dir) {
  Loaded loaded;
  TESSERA_ASSIGN_OR_RETURN(loaded.profiles, scheduler::ProfileSet::LoadDirectory(dir));
  const fs::path model = fs::path(dir) / "interference.yaml";
  if (fs::exists(model)) {
    TESSERA_ASSIGN_OR_RETURN(loaded.planner_model, scheduler::LoadInterferenceFile(model));
  } else {
    loaded.planner_model = scheduler::InterferenceModel::Constant();  // the documented default
  }
  return loaded;
}

// The simulator's ground truth (Scenario::true_interference).
StatusOr<SlowdownFn> TrueSlowdown(const std::string& spec, const std::string& dir,
                                  const scheduler::InterferenceModel& planner_model) {
  if (spec == "none") return NoSlowdown();
  if (spec == "planner") return SlowdownOf(planner_model);
  double factor = 0;
  if (spec != "truth") {
    if (!absl::SimpleAtod(spec, &factor) || factor < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--true-interference '", spec,
                                                     "': expected truth, planner, none or a "
                                                     "factor ≥ 1"));
    }
    return ConstantSlowdown(factor);
  }
  const fs::path truth = fs::path(dir) / "interference_truth.yaml";
  if (!fs::exists(truth)) return SlowdownOf(planner_model);
  TESSERA_ASSIGN_OR_RETURN(scheduler::InterferenceModel model,
                           scheduler::LoadInterferenceFile(truth));
  return SlowdownOf(std::move(model));
}

struct PolicySpec {
  std::string name;  // as given, e.g. "gpulet+int"
  scheduler::Policy policy = scheduler::Policy::kGpulet;
  bool interference_aware = false;
};

StatusOr<PolicySpec> ParsePolicySpec(std::string_view name) {
  PolicySpec spec;
  spec.name = std::string(name);
  std::string_view base = name;
  if (base.size() > 4 && base.substr(base.size() - 4) == "+int") {
    spec.interference_aware = true;
    base.remove_suffix(4);
  }
  StatusOr<scheduler::Policy> policy = scheduler::ParsePolicy(base);
  if (!policy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(policy.status().message(), " (optionally with +int, e.g. gpulet+int)"));
  }
  spec.policy = *policy;
  return spec;
}

StatusOr<std::unique_ptr<scheduler::Planner>> MakePlanner(const PolicySpec& spec,
                                                          const Loaded& loaded) {
  std::unique_ptr<scheduler::Planner> planner = scheduler::CreatePlanner(
      spec.policy, &loaded.profiles,
      spec.interference_aware ? loaded.planner_model : scheduler::InterferenceModel::None());
  if (!planner) {  // CreatePlanner covers every Policy; a null here is a broken invariant
    return absl::InternalError(absl::StrCat("no planner for policy '", spec.name, "'"));
  }
  return planner;
}

PlanFn PlanFnOf(scheduler::Planner* planner) {
  return [planner](const std::vector<scheduler::ModelDemand>& demands, int gpus) {
    return planner->MakePlan(demands, gpus);
  };
}

// Same gpulets, models and batches: a re-plan that only moved routing weights is not worth a
// switch (the old plan keeps its state).
bool SameShape(const scheduler::Plan& x, const scheduler::Plan& y) {
  if (x.gpulets.size() != y.gpulets.size() || x.partitions_exclusive != y.partitions_exclusive) {
    return false;
  }
  for (size_t i = 0; i < x.gpulets.size(); ++i) {
    const scheduler::Gpulet& a = x.gpulets[i];
    const scheduler::Gpulet& b = y.gpulets[i];
    if (a.gpu != b.gpu || a.partition_pct != b.partition_pct || a.duty_ms != b.duty_ms ||
        a.models.size() != b.models.size()) {
      return false;
    }
    for (size_t j = 0; j < a.models.size(); ++j) {
      if (a.models[j].model != b.models[j].model || a.models[j].batch != b.models[j].batch) {
        return false;
      }
    }
  }
  return true;
}

int Fail(const Status& status) {
  std::cerr << "tessera-sim: " << status.message() << "\n";
  return 2;
}

struct RunFlags {
  std::string scenario, policy, true_interference, headroom = "none";
  int gpus = 0;
  double total_rps = 0, duration_s = 0;
  int64_t seed = -1;
  bool print_plan = false, json = false;
};

int RunCommand(const Common& common, const RunFlags& flags) {
  StatusOr<Scenario> scenario = LoadScenarioFile(flags.scenario);
  if (!scenario.ok()) return Fail(scenario.status());
  StatusOr<Loaded> loaded = LoadProfiles(common.profiles_dir);
  if (!loaded.ok()) return Fail(loaded.status());
  const std::string policy_name =
      !flags.policy.empty() ? flags.policy : scenario->policy.value_or("gpulet+int");
  StatusOr<PolicySpec> spec = ParsePolicySpec(policy_name);
  if (!spec.ok()) return Fail(spec.status());
  StatusOr<Headroom> headroom = ParseHeadroom(flags.headroom);
  if (!headroom.ok()) return Fail(headroom.status());
  const int gpus = flags.gpus > 0 ? flags.gpus : scenario->gpus;
  SimOptions options = scenario->sim;
  if (flags.seed >= 0) options.seed = static_cast<uint64_t>(flags.seed);
  if (flags.duration_s > 0) options.duration_s = flags.duration_s;
  const std::string truth_spec =
      flags.true_interference.empty() ? scenario->true_interference : flags.true_interference;
  StatusOr<SlowdownFn> truth = TrueSlowdown(truth_spec, common.profiles_dir, loaded->planner_model);
  if (!truth.ok()) return Fail(truth.status());

  // Offered rates: rate_rps per model, or --total-rps split by weight.
  const Workload workload = scenario->ToWorkload();
  std::vector<SimModel> models;
  double total_weight = 0;
  for (const WorkloadModel& m : workload.models) total_weight += m.weight;
  for (const ScenarioModel& m : scenario->models) {
    SimModel s;
    s.demand = {m.workload.model, m.workload.profile, 0, m.workload.slo_ms};
    s.arrivals = m.arrivals;
    if (flags.total_rps > 0) {
      s.demand.rate_rps = flags.total_rps * m.workload.weight / total_weight;
    } else if (m.rate_rps) {
      s.demand.rate_rps = *m.rate_rps;
    } else if (!m.arrivals.schedule.empty()) {
      s.demand.rate_rps = m.arrivals.schedule.front().rate_rps;
    } else if (m.arrivals.kind != ArrivalKind::kTrace) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat(flags.scenario, ":", m.line, ": model '", m.workload.model,
                       "' has no rate_rps or schedule; give one or --total-rps")));
    }
    if (m.arrivals.kind == ArrivalKind::kTrace) {
      s.demand.rate_rps = m.arrivals.trace_s.size() / std::max(1e-9, options.duration_s);
    }
    models.push_back(std::move(s));
  }

  StatusOr<std::unique_ptr<scheduler::Planner>> made = MakePlanner(*spec, *loaded);
  if (!made.ok()) return Fail(made.status());
  std::unique_ptr<scheduler::Planner> planner = std::move(*made);
  std::vector<scheduler::ModelDemand> demands;
  for (const SimModel& m : models) {
    scheduler::ModelDemand d = m.demand;
    if (*headroom == Headroom::kPoisson99) d.rate_rps = Poisson99Rps(d.rate_rps);
    demands.push_back(d);
  }
  StatusOr<scheduler::Plan> plan;
  std::optional<scheduler::Autoscaler> autoscaler;
  if (scenario->epoch && scenario->epoch->autoscale) {
    // Seed 001 Alg. 2: the autoscaler picks the GPU count, from initial_gpus up to the scenario's
    // GPUs, at the start (offered rates) and every epoch (observed rates), adding its headroom.
    const EpochConfig& e = *scenario->epoch;
    scheduler::AutoscalerOptions autoscale;
    autoscale.gpu_limit = gpus;
    autoscale.initial_gpus = std::min(e.initial_gpus, gpus);
    autoscale.poisson_headroom = e.headroom == Headroom::kPoisson99;
    StatusOr<scheduler::Autoscaler> created =
        scheduler::Autoscaler::Create(planner.get(), demands, autoscale);
    if (!created.ok()) return Fail(created.status());
    autoscaler.emplace(std::move(*created));
    std::map<std::string, double> offered;
    for (const SimModel& m : models) offered[m.demand.model] = m.demand.rate_rps;
    StatusOr<scheduler::AutoscaleDecision> first = autoscaler->Step(0, offered);
    if (!first.ok()) return Fail(first.status());
    plan = std::move(first->plan);
  } else {
    plan = planner->MakePlan(demands, gpus);
  }
  if (!plan.ok()) return Fail(plan.status());

  if (scenario->epoch) {
    const EpochConfig e = *scenario->epoch;
    options.epoch.epoch_s = e.epoch_s;
    options.epoch.prepare_delay_s = e.prepare_s;
    options.epoch.rate_interval_s = e.rate_interval_s;
    if (autoscaler) {
      options.epoch.replan = [&autoscaler](
                                 const scheduler::Plan& current,
                                 const std::vector<scheduler::ModelDemand>& observed,
                                 double now_s) -> StatusOr<std::optional<scheduler::Plan>> {
        std::map<std::string, double> rates;
        for (const scheduler::ModelDemand& d : observed) rates[d.model] = d.rate_rps;
        TESSERA_ASSIGN_OR_RETURN(scheduler::AutoscaleDecision decision,
                                 autoscaler->Step(now_s * 1000.0, rates));
        if (decision.event) std::cerr << "tessera-sim: " << decision.event->ToString() << "\n";
        if (!decision.replanned || SameShape(decision.plan, current)) {
          return std::optional<scheduler::Plan>();
        }
        return std::optional<scheduler::Plan>(std::move(decision.plan));
      };
    } else {
      options.epoch.replan = [&planner, gpus, e](
                                 const scheduler::Plan& current,
                                 const std::vector<scheduler::ModelDemand>& observed,
                                 double) -> StatusOr<std::optional<scheduler::Plan>> {
        std::vector<scheduler::ModelDemand> wanted = observed;
        for (scheduler::ModelDemand& d : wanted) {
          if (e.headroom == Headroom::kPoisson99) d.rate_rps = Poisson99Rps(d.rate_rps);
        }
        TESSERA_ASSIGN_OR_RETURN(scheduler::Plan next, planner->Replan(current, wanted, gpus));
        if (SameShape(next, current)) return std::optional<scheduler::Plan>();
        return std::optional<scheduler::Plan>(std::move(next));
      };
    }
  }
  if (flags.print_plan && !flags.json) std::cout << scheduler::PlanToText(*plan);
  StatusOr<SimReport> report = Simulate(loaded->profiles, *plan, models, *truth, options);
  if (!report.ok()) return Fail(report.status());
  std::cout << (flags.json ? ReportToJson(*report) : ReportToText(*report));
  return 0;
}

struct PeakFlags {
  std::vector<std::string> workloads;
  std::vector<std::string> policies = {"gpulet+int", "gpulet", "temporal", "spatial"};
  std::string headroom = "poisson99", true_interference, arrival = "poisson";
  int runs = 3, gpus = 0;
  int64_t seed = 1;
  double resolution = 0.02, start_rps = 100, max_rps = 1e5, duration_s = 30, warmup_s = 5,
         jitter = 0.03;
  bool planner_only = false, json = false, slo_drop = false, wait_for_duty = false;
};

int PeakCommand(const Common& common, const PeakFlags& flags) {
  StatusOr<Loaded> loaded = LoadProfiles(common.profiles_dir);
  if (!loaded.ok()) return Fail(loaded.status());
  StatusOr<Headroom> headroom = ParseHeadroom(flags.headroom);
  if (!headroom.ok()) return Fail(headroom.status());
  std::vector<PolicySpec> specs;
  for (const std::string& name : flags.policies) {
    StatusOr<PolicySpec> spec = ParsePolicySpec(name);
    if (!spec.ok()) return Fail(spec.status());
    specs.push_back(*spec);
  }
  std::vector<Scenario> scenarios;
  for (const std::string& path : flags.workloads) {
    StatusOr<Scenario> s = LoadScenarioFile(path);
    if (!s.ok()) return Fail(s.status());
    if (flags.gpus > 0) s->gpus = flags.gpus;
    scenarios.push_back(std::move(*s));
  }
  PeakOptions options;
  options.search.resolution = flags.resolution;
  options.search.start_rps = flags.start_rps;
  options.search.max_rps = flags.max_rps;
  options.runs = flags.runs;
  options.headroom = *headroom;
  options.arrival = flags.arrival == "constant" ? ArrivalKind::kConstant : ArrivalKind::kPoisson;
  options.sim.duration_s = flags.duration_s;
  options.sim.warmup_s = flags.warmup_s;
  options.sim.jitter_sigma = flags.jitter;
  options.sim.seed = static_cast<uint64_t>(flags.seed);
  options.sim.slo_drop = flags.slo_drop;
  options.sim.wait_for_duty = flags.wait_for_duty;

  // The settings head the table, so a committed table says how it was made.
  std::string table =
      flags.planner_only
          ? absl::StrFormat(
                "# max schedulable total rps (planner only): resolution %.3g, "
                "headroom %s, profiles %s\n",
                flags.resolution, flags.headroom, common.profiles_dir)
          : absl::StrFormat(
                "# SLO-preserved peak total rps (>= 99 %% within SLO): median of %d runs, "
                "resolution %.3g, %s arrivals, %.0f s (%.0f s warm-up), jitter %.3g, headroom %s, "
                "profiles %s\n",
                flags.runs, flags.resolution, flags.arrival, flags.duration_s, flags.warmup_s,
                flags.jitter, flags.headroom, common.profiles_dir);
  absl::StrAppendFormat(&table, "%-12s", "workload");
  for (const PolicySpec& s : specs) absl::StrAppendFormat(&table, " %14s", s.name);
  table += "\n";
  std::string json = "{\"results\": [";
  bool first_json = true;
  for (const Scenario& scenario : scenarios) {
    const Workload workload = scenario.ToWorkload();
    const std::string truth_spec =
        flags.true_interference.empty() ? scenario.true_interference : flags.true_interference;
    StatusOr<SlowdownFn> truth =
        TrueSlowdown(truth_spec, common.profiles_dir, loaded->planner_model);
    if (!truth.ok()) return Fail(truth.status());
    absl::StrAppendFormat(&table, "%-12s", workload.name);
    for (const PolicySpec& spec : specs) {
      StatusOr<std::unique_ptr<scheduler::Planner>> made = MakePlanner(spec, *loaded);
      if (!made.ok()) return Fail(made.status());
      std::unique_ptr<scheduler::Planner> planner = std::move(*made);
      const auto start = std::chrono::steady_clock::now();
      double value = 0;
      int simulations = 0;
      std::vector<double> run_peaks;
      if (flags.planner_only) {
        StatusOr<SearchResult> r =
            MaxSchedulableRate(workload, PlanFnOf(planner.get()), options.search, *headroom);
        if (!r.ok()) return Fail(r.status());
        value = r->max_rps;
      } else {
        StatusOr<PeakResult> r =
            FindPeak(workload, loaded->profiles, PlanFnOf(planner.get()), *truth, options);
        if (!r.ok()) return Fail(r.status());
        value = r->peak_rps;
        simulations = r->simulations;
        for (const SearchResult& run : r->runs) run_peaks.push_back(run.max_rps);
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      absl::StrAppendFormat(&table, " %14.1f", value);
      absl::StrAppend(&json, first_json ? "" : ", ", "{\"workload\": \"", workload.name,
                      "\", \"policy\": \"", spec.name, "\", \"",
                      flags.planner_only ? "max_schedulable_rps" : "peak_rps",
                      "\": ", absl::StrFormat("%.3f", value), ", \"run_peaks\": [",
                      absl::StrJoin(run_peaks, ", "), "], \"simulations\": ", simulations,
                      ", \"seconds\": ", absl::StrFormat("%.3f", seconds), "}");
      first_json = false;
      std::cerr << absl::StrFormat("%s / %s: %.1f rps (%d simulations, %.1f s)\n", workload.name,
                                   spec.name, value, simulations, seconds);
    }
    table += "\n";
  }
  json += "]}\n";
  std::cout << (flags.json ? json : table);
  return 0;
}

struct SchedulabilityFlags {
  std::string workload;
  std::vector<std::string> policies = {"gpulet+int", "ideal+int"};
  std::vector<double> rates = {0, 100, 200};
  std::string headroom = "none";
  int gpus = 0;
  int64_t limit = 0;
};

int SchedulabilityCommand(const Common& common, const SchedulabilityFlags& flags) {
  if (flags.policies.size() != 2) {
    return Fail(absl::InvalidArgumentError("--policies takes exactly two policies"));
  }
  StatusOr<Scenario> scenario = LoadScenarioFile(flags.workload);
  if (!scenario.ok()) return Fail(scenario.status());
  StatusOr<Loaded> loaded = LoadProfiles(common.profiles_dir);
  if (!loaded.ok()) return Fail(loaded.status());
  StatusOr<Headroom> headroom = ParseHeadroom(flags.headroom);
  if (!headroom.ok()) return Fail(headroom.status());
  std::vector<std::unique_ptr<scheduler::Planner>> planners;
  std::vector<PlanFn> plan_fns;
  for (const std::string& name : flags.policies) {
    StatusOr<PolicySpec> spec = ParsePolicySpec(name);
    if (!spec.ok()) return Fail(spec.status());
    StatusOr<std::unique_ptr<scheduler::Planner>> made = MakePlanner(*spec, *loaded);
    if (!made.ok()) return Fail(made.status());
    planners.push_back(std::move(*made));
    plan_fns.push_back(PlanFnOf(planners.back().get()));
  }
  SchedulabilityOptions options;
  options.rates_rps = flags.rates;
  options.num_gpus = flags.gpus > 0 ? flags.gpus : scenario->gpus;
  options.headroom = *headroom;
  options.limit = flags.limit;
  StatusOr<SchedulabilityResult> result =
      CountSchedulable(scenario->ToWorkload(), {plan_fns[0], plan_fns[1]}, options);
  if (!result.ok()) return Fail(result.status());
  std::cout << SchedulabilityToText(*result, {flags.policies[0], flags.policies[1]});
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"tessera-sim: plans + discrete-event simulation of Tessera's dispatcher"};
  app.require_subcommand(1);
  Common common;
  app.add_option("--profiles", common.profiles_dir,
                 "Profile set folder (default profiles/synthetic-2080ti)");

  RunFlags run;
  CLI::App* run_cmd = app.add_subcommand("run", "Plan a scenario and simulate it");
  run_cmd->add_option("scenario", run.scenario, "Scenario YAML")->required();
  run_cmd->add_option("--policy", run.policy, "Planner (default: the scenario's, else gpulet+int)");
  run_cmd->add_option("--gpus", run.gpus, "GPUs (default: the scenario's)");
  run_cmd->add_option("--total-rps", run.total_rps, "Total offered rate, split by weight");
  run_cmd->add_option("--seed", run.seed, "Seed (default: the scenario's)");
  run_cmd->add_option("--duration-s", run.duration_s, "Simulated seconds");
  run_cmd->add_option("--true-interference", run.true_interference,
                      "truth | planner | none | FACTOR (default: the scenario's, else truth)");
  run_cmd->add_option("--headroom", run.headroom, "Rate headroom for planning: none | poisson99");
  run_cmd->add_flag("--print-plan", run.print_plan, "Print the plan before the report");
  run_cmd->add_flag("--json", run.json, "Report as JSON");

  PeakFlags peak;
  CLI::App* peak_cmd =
      app.add_subcommand("peak", "SLO-preserved peak throughput of workloads per policy");
  peak_cmd->add_option("workloads", peak.workloads, "Workload YAML files")->required();
  peak_cmd->add_option("--policies", peak.policies, "Policies (comma-separated)")->delimiter(',');
  peak_cmd->add_option("--gpus", peak.gpus, "GPUs (default: each workload's)");
  peak_cmd->add_option("--runs", peak.runs, "Independent searches per cell; median (default 3)");
  peak_cmd->add_option("--seed", peak.seed, "Seed of the first run (default 1)");
  peak_cmd->add_option("--resolution", peak.resolution, "Relative resolution (default 0.02)");
  peak_cmd->add_option("--start-rps", peak.start_rps, "First total rate tried (default 100)");
  peak_cmd->add_option("--max-rps", peak.max_rps, "Largest total rate tried (default 1e5)");
  peak_cmd->add_option("--duration-s", peak.duration_s, "Simulated seconds per probe (default 30)");
  peak_cmd->add_option("--warmup-s", peak.warmup_s, "Warm-up seconds per probe (default 5)");
  peak_cmd->add_option("--jitter", peak.jitter, "Latency jitter sigma (default 0.03)");
  peak_cmd->add_option("--arrival", peak.arrival, "poisson | constant")
      ->check(CLI::IsMember({"poisson", "constant"}));
  peak_cmd->add_option("--headroom", peak.headroom,
                       "Rate headroom for planning: none | poisson99 (default)");
  peak_cmd->add_option("--true-interference", peak.true_interference,
                       "truth | planner | none | FACTOR (default: the workload's, else truth)");
  peak_cmd->add_flag("--slo-drop", peak.slo_drop, "Drop requests that cannot meet their SLO");
  peak_cmd->add_flag("--wait-for-duty", peak.wait_for_duty, "Rounds wait for the duty cycle");
  peak_cmd->add_flag("--planner-only", peak.planner_only,
                     "Max rate the planner calls schedulable, no simulation (Fig. 17)");
  peak_cmd->add_flag("--json", peak.json, "Results as JSON");

  SchedulabilityFlags sched;
  CLI::App* sched_cmd = app.add_subcommand(
      "schedulability", "Every rate combination of a model set: schedulable by two policies?");
  sched_cmd->add_option("workload", sched.workload, "Workload YAML (models and SLOs)")->required();
  sched_cmd->add_option("--policies", sched.policies, "Exactly two policies (comma-separated)")
      ->delimiter(',');
  sched_cmd->add_option("--rates", sched.rates, "Rate levels per model (default 0,100,200)")
      ->delimiter(',');
  sched_cmd->add_option("--gpus", sched.gpus, "GPUs (default: the workload's)");
  sched_cmd->add_option("--headroom", sched.headroom, "Rate headroom: none (default) | poisson99");
  sched_cmd->add_option("--limit", sched.limit, "Only the first N scenarios (quick checks)");

  CLI11_PARSE(app, argc, argv);
  if (*run_cmd) return RunCommand(common, run);
  if (*peak_cmd) return PeakCommand(common, peak);
  return SchedulabilityCommand(common, sched);
}

}  // namespace
}  // namespace tessera::sim

int main(int argc, char** argv) { return tessera::sim::Main(argc, argv); }
