// How long one gpulet planning decision takes: MakePlan for the nine models of seed 001 Table 3 on
// 8 GPUs, interference-aware, on the synthetic RTX 2080 Ti profile set (issue 4 target: < 10 ms).
// The rates are 90 % of the largest uniform scaling of a mixed base load that still fits on 8 GPUs,
// found once at start-up, so the plan needs most of the GPUs.
//
//   build/bin/planner_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpulet_planner.h"
#include "tessera/scheduler/interference.h"
#include "tessera/scheduler/planner.h"
#include "tessera/scheduler/profile.h"

namespace tessera::scheduler {
namespace {

const char kProfiles[] = TESSERA_SOURCE_DIR "/profiles/synthetic-2080ti";

// Seed 001 Table 3 SLOs; base rates mix heavy and light models.
const std::vector<ModelDemand>& BaseDemands() {
  static const std::vector<ModelDemand> demands = {
      {"googlenet", "", 300, 66},      {"lenet", "", 600, 5},         {"resnet50", "", 250, 108},
      {"ssd_mobilenet", "", 200, 202}, {"vgg16", "", 150, 142},       {"mnasnet", "", 300, 62},
      {"mobilenet_v2", "", 300, 64},   {"densenet161", "", 120, 202}, {"bert_base", "", 400, 22},
  };
  return demands;
}

struct Setup {
  ProfileSet profiles;
  InterferenceModel interference;
  std::vector<ModelDemand> demands;  // 9 models, scaled to need most of 8 GPUs
};

std::vector<ModelDemand> Scaled(double factor) {
  std::vector<ModelDemand> demands = BaseDemands();
  for (ModelDemand& d : demands) d.rate_rps *= factor;
  return demands;
}

const Setup& GetSetup() {
  static const Setup* setup = [] {
    auto profiles = ProfileSet::LoadDirectory(kProfiles);
    auto interference = LoadInterferenceFile(std::string(kProfiles) + "/interference.yaml");
    if (!profiles.ok() || !interference.ok()) {
      std::fprintf(stderr, "planner_bench: %s %s\n", profiles.status().ToString().c_str(),
                   interference.status().ToString().c_str());
      std::exit(1);
    }
    auto* s = new Setup{*std::move(profiles), *interference, {}};
    auto planner = CreateGpuletPlanner(&s->profiles, s->interference, {});
    double lo = 0, hi = 64;
    for (int i = 0; i < 30; ++i) {
      const double mid = (lo + hi) / 2;
      auto plan = planner->MakePlan(Scaled(mid), 8);
      (plan.ok() && plan->schedulable() ? lo : hi) = mid;
    }
    s->demands = Scaled(0.9 * lo);
    auto plan = planner->MakePlan(s->demands, 8);
    std::printf(
        "planner_bench: 9 models at %.2f × base rates (90 %% of the most that fits on 8 "
        "GPUs); gpulet+int plan: %d GPUs used, Σ partitions %d%%, %s\n",
        0.9 * lo, plan->GpusUsed(), plan->PartitionSum(),
        plan->schedulable() ? "schedulable" : "NOT schedulable");
    return s;
  }();
  return *setup;
}

void BM_MakePlan(benchmark::State& state, bool interference_aware) {
  const Setup& s = GetSetup();
  auto planner = CreateGpuletPlanner(
      &s.profiles, interference_aware ? s.interference : InterferenceModel::None(), {});
  int gpus_used = 0;
  for (auto _ : state) {
    auto plan = planner->MakePlan(s.demands, 8);
    if (!plan.ok()) {
      state.SkipWithError(plan.status().ToString().c_str());
      return;
    }
    gpus_used = plan->GpusUsed();
    benchmark::DoNotOptimize(plan);
  }
  state.counters["gpus_used"] = gpus_used;
}
BENCHMARK_CAPTURE(BM_MakePlan, gpulet_int_9_models_8_gpus, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MakePlan, gpulet_9_models_8_gpus, false)->Unit(benchmark::kMillisecond);

// An epoch's incremental re-plan: every rate 3 % up (kept in place) except one model at +30 %.
void BM_Replan(benchmark::State& state) {
  const Setup& s = GetSetup();
  auto planner = CreateGpuletPlanner(&s.profiles, s.interference, {});
  auto current = planner->MakePlan(s.demands, 8);
  std::vector<ModelDemand> next = s.demands;
  for (ModelDemand& d : next) d.rate_rps *= 1.03;
  next[2].rate_rps *= 1.3;
  for (auto _ : state) {
    auto plan = planner->Replan(*current, next, 8);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(BM_Replan)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera::scheduler

BENCHMARK_MAIN();
