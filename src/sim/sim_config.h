// tessera-sim's input file: a scenario (models with SLOs and rates or relative weights, GPUs,
// simulation settings, optional epoch loop). One format serves `run` (rates), `peak` (weights)
// and `schedulability` (the model list). Documented in docs/simulator.md.
//
// Strict: unknown keys, wrong types and out-of-range values are INVALID_ARGUMENT
// "<file>:<line>: <key path>: <reason>".
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "peak_search.h"
#include "tessera/common/status.h"
#include "tessera/sim/simulator.h"

namespace tessera::sim {

struct ScenarioModel {
  WorkloadModel workload;          // name, profile, SLO, weight (default: rate_rps, else 1)
  std::optional<double> rate_rps;  // for `run`
  Arrivals arrivals;               // kind, schedule; trace times read from `trace`
  int line = 1;                    // of the entry, for messages
};

struct EpochConfig {
  double epoch_s = 20;    // seed 001 §4.6
  double prepare_s = 20;  // new partitions serve after this (seed 001 §4.6, Fig. 11)
  double rate_interval_s = 0.5;
  Headroom headroom = Headroom::kPoisson99;  // added to the observed rates before re-planning
  // true: seed 001 Alg. 2 picks the GPU count (scheduler::Autoscaler, from initial_gpus up to the
  // scenario's gpus); false: Planner::Replan on all the scenario's GPUs.
  bool autoscale = true;
  int initial_gpus = 1;
};

struct Scenario {
  std::string name;  // default: the file's stem
  int gpus = 0;
  std::vector<ScenarioModel> models;
  SimOptions sim;  // no replan callback; the CLI provides it
  // "truth" (the profile set's interference_truth.yaml, else interference.yaml), "planner" (its
  // interference.yaml), "none", or a constant factor such as "1.18".
  std::string true_interference = "truth";
  std::optional<std::string> policy;  // default policy for `run`
  std::optional<EpochConfig> epoch;

  Workload ToWorkload() const;
};

// `source` names the text in messages; relative trace paths resolve against `base_dir`.
StatusOr<Scenario> ParseScenarioYaml(const std::string& text, std::string_view source,
                                     const std::filesystem::path& base_dir);
StatusOr<Scenario> LoadScenarioFile(const std::filesystem::path& path);

// A trace file: one arrival time in seconds per line, ascending; blank lines and # comments are
// skipped. Errors name the file and line.
StatusOr<std::vector<double>> ParseTraceText(const std::string& text, std::string_view source);

}  // namespace tessera::sim
