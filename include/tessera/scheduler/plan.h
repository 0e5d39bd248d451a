// Plans: which gpulets exist, and which models run on each at which batch size and duty cycle.
//
// Glossary (docs/architecture.md): a *gpulet* is a partition of p % of one GPU's compute (an MPS
// active-thread cap or a green context), run by one executor process. One or more models
// time-share a gpulet in *rounds* of `duty_ms`: every round, each model of the gpulet runs one
// batch of the requests collected during the previous round (seed 001 §2.2, Fig. 2; the SBP rules
// of Nexus). A model with more load than one gpulet can serve is spread over several gpulets, its
// rate split between them by `rate_rps`. Two gpulets on one GPU run concurrently and slow each
// other by interference (seed 001 §4.4).
//
// Plain values; thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::scheduler {

// What the scheduler is asked to serve: a request rate under a latency SLO.
struct ModelDemand {
  std::string model;    // served model name (unique within a demand list)
  std::string profile;  // profile to use; empty = `model` (six LeNet streams can share one profile)
  double rate_rps = 0;  // requests per second to serve (already including any headroom)
  double slo_ms = 0;    // end-to-end latency bound: queueing + batching wait + execution

  const std::string& profile_name() const { return profile.empty() ? model : profile; }
};

// One model's share of a gpulet.
struct GpuletModel {
  std::string model;
  int batch = 1;           // batch size run each round
  double rate_rps = 0;     // the part of the model's rate routed to this gpulet
  double latency_ms = 0;   // scheduled latency of one batch: L(b,p) · interference · margin
};

struct Gpulet {
  int gpu = 0;                 // device index, 0-based
  int partition_pct = 100;     // share of the GPU's compute, in (0, 100]
  // Round length: each model collects requests for at most duty_ms (or until its batch is full)
  // while the previous round executes. A single saturated model has duty_ms = its latency_ms.
  // 0 = no round: a batch is dispatched as soon as the model's instance is free (Triton-like).
  double duty_ms = 0;
  std::vector<GpuletModel> models;  // run in this order each round
};

struct Plan {
  std::string policy;          // planner that made it: gpulet, gpulet+int, temporal, spatial, ...
  int num_gpus = 0;            // GPUs the plan was made for (ids 0..num_gpus-1)
  // true: gpulets on one GPU never add up past 100 % (MPS caps / green contexts). false: the
  // Triton-like baseline, where every model's instance may use the whole GPU and concurrent batches
  // share it.
  bool partitions_exclusive = true;
  std::vector<Gpulet> gpulets;
  std::vector<std::string> unschedulable;  // models whose rate or SLO could not be covered

  bool schedulable() const { return unschedulable.empty(); }
  // Σ rate_rps routed to `model` over all gpulets.
  double AssignedRate(std::string_view model) const;
  // GPUs that hold at least one gpulet with a model.
  int GpusUsed() const;
  // Σ partition_pct over gpulets that hold a model.
  int PartitionSum() const;
};

// A fixed-width table, one line per (gpulet, model), for logs and tessera-sim's --print-plan:
// "gpu part% duty_ms model batch rate_rps latency_ms", then the unschedulable models.
std::string PlanToText(const Plan& plan);

}  // namespace tessera::scheduler
