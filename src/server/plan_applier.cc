#include "plan_applier.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "executor_batch_runner.h"
#include "input_pool.h"
#include "spdlog/spdlog.h"
#include "tessera/common/clock.h"
#include "tessera/common/data_type.h"
#include "tessera/common/tensor.h"

namespace tessera::server {
namespace {

std::string Identity(const scheduler::Gpulet& gpulet, const std::map<std::string, ServedModel>& served) {
  std::vector<std::string> models;
  for (const scheduler::GpuletModel& m : gpulet.models) {
    auto it = served.find(m.model);
    models.push_back(absl::StrCat(m.model, "@", it == served.end() ? 0 : it->second.version));
  }
  std::sort(models.begin(), models.end());
  return absl::StrCat("device ", gpulet.gpu, " ", gpulet.partition_pct, "% ",
                      absl::StrJoin(models, ","));
}

// Batches of its planned size each model of a gpulet can have staged in the input pool at once:
// one being built, up to two sent (executors.batches_in_flight), and one of slack for slots that
// come back out of order (E²bird's pool holds every request from arrival to its batch's end).
constexpr uint64_t kPooledBatches = 4;
// The sizing never asks for a larger ring (shared memory, page-locked and mirrored on a GPU): a
// model whose batches need more keeps the configured ring and gathers, or is refused at its first
// batch that cannot fit, as before.
constexpr double kMaxSizedRingBytes = 4.0 * (1ull << 30);

}  // namespace

// Without this, four fixed regions of half the default ring held 13 ResNet-50 requests, and with
// 16 in flight most batches missed the pool (found on an H100, bench/results/2026-11-23-*).
void SizeGpuletInputRing(const scheduler::Gpulet& gpulet,
                         const std::map<std::string, ServedModel>& served,
                         ExecutorLaunchOptions* launch) {
  uint64_t region = 0, batch_bytes = 0;
  for (const scheduler::GpuletModel& m : gpulet.models) {
    const repository::ModelConfig& config = *served.at(m.model).config;
    uint64_t row = 0;
    for (const repository::TensorConfig& input : config.inputs) {
      std::optional<uint64_t> bytes = DenseByteSize(input.dims, DataTypeByteSize(input.data_type));
      if (!bytes.has_value() || *bytes == 0) {
        row = 0;
        break;
      }
      row += *bytes;
    }
    // Rows past the cap below need no exact sum (and must not overflow it).
    const uint64_t batch = std::min<uint64_t>(row, 1ull << 40) * std::max(1, m.batch);
    // The sub-rings hold the batches; the spill areas after them (a batch's wrapped head) the rest.
    const double spill =
        std::clamp(launch->input_pool_spill_share, 0.0, InputPoolOptions::kMaxSpillShare);
    const auto pooled =
        static_cast<uint64_t>(std::ceil(static_cast<double>(kPooledBatches * batch) / (1 - spill)));
    region = std::max(region, pooled + 4096 * config.inputs.size());
    batch_bytes = std::max(batch_bytes, batch);
  }
  launch->input_pool_instances = std::max<int>(1, static_cast<int>(gpulet.models.size()));
  const double fraction = std::clamp(launch->input_pool_fraction, 0.0, 1.0);
  if (fraction <= 0 || fraction >= 1) return;
  const double pool = static_cast<double>(region) * launch->input_pool_instances;
  const double gather = 2.0 * static_cast<double>(batch_bytes) + 4096;
  const double ring = std::max(pool / fraction, gather / (1 - fraction));
  if (ring > kMaxSizedRingBytes) return;
  const uint64_t pages = static_cast<uint64_t>(std::ceil(ring / 4096));
  launch->input_ring_bytes = std::max(launch->input_ring_bytes, pages * 4096);
}

PlanApplierOptions PlacedBy(partition::PartitionManager* partitions) {
  PlanApplierOptions options;
  options.cpu_cores = static_cast<int>(partitions->allowed_cpus().size());
  options.place = [partitions](int device, int pct) -> StatusOr<GpuletPlacement> {
    TESSERA_ASSIGN_OR_RETURN(partition::ExecutorPlacement placed, partitions->Place(device, pct));
    GpuletPlacement placement;
    placement.id = placed.id;
    placement.threads = std::max(1, placed.compute_threads);
    placement.extra_env = placed.env;
    placement.extra_args = placed.args;
    placement.describe = placed.describe;
    return placement;
  };
  options.release = [partitions](int64_t id) { partitions->Release(id).IgnoreError(); };
  return options;
}

PlanApplier::PlanApplier(PlanApplierOptions options, ExecutorPool* pool)
    : options_(std::move(options)), pool_(pool) {}

PlanApplier::~PlanApplier() { Shutdown(); }

StatusOr<GpuletPlacement> PlanApplier::Place(int device, int partition_pct) const {
  if (options_.place) return options_.place(device, partition_pct);
  GpuletPlacement placement;
  placement.threads = std::max(
      1, static_cast<int>(std::lround(partition_pct / 100.0 * std::max(1, options_.cpu_cores))));
  placement.describe = absl::StrCat("cpu ", partition_pct, " % (", placement.threads, " thread",
                                    placement.threads == 1 ? "" : "s", ")");
  return placement;
}

std::optional<SharedWeightsHandle> PlanApplier::WeightsToShare(
    int device, const ServedModel& model, const std::vector<std::shared_ptr<Binding>>& donors) {
  const std::string prefix = absl::StrCat(model.name, "/", model.version, "@");
  for (const auto& donor : donors) {
    if (donor->gpulet.device != device) continue;
    auto it = donor->instance_keys.find(model.name);
    if (it == donor->instance_keys.end() || !absl::StartsWith(it->second, prefix)) continue;
    auto exported = pool_->ExportWeights(donor->gpulet.executor_slot, it->second);
    if (exported.ok()) return *std::move(exported);
    // The CPU backend never shares: say so only in debug logs, not at every re-plan.
    if (absl::IsUnimplemented(exported.status())) {
      spdlog::debug("{}: weights not shared: {}", donor->gpulet.label, exported.status().message());
      return std::nullopt;
    }
    spdlog::warn("{}: cannot export the weights of '{}': {}", donor->gpulet.label, it->second,
                 exported.status().message());
  }
  return std::nullopt;
}

StatusOr<std::shared_ptr<PlanApplier::Binding>> PlanApplier::StartGpulet(
    const scheduler::Gpulet& gpulet, const std::string& identity,
    const std::map<std::string, ServedModel>& served,
    const std::vector<std::shared_ptr<Binding>>& donors, int* weights_shared) {
  auto binding = std::make_shared<Binding>();
  binding->identity = identity;
  binding->round_gate = std::make_shared<std::mutex>();
  AppliedGpulet& applied = binding->gpulet;
  applied.label = absl::StrCat("gpulet ", next_gpulet_++, " (device ", gpulet.gpu, ", ",
                               gpulet.partition_pct, " %)");
  applied.device = gpulet.gpu;
  applied.partition_pct = gpulet.partition_pct;
  applied.duty_ms = gpulet.duty_ms;
  applied.models = gpulet.models;

  TESSERA_ASSIGN_OR_RETURN(GpuletPlacement placement, Place(gpulet.gpu, gpulet.partition_pct));
  applied.placement = placement.describe;
  applied.placement_id = placement.id;
  ExecutorLaunchOptions launch = pool_->base_launch();
  SizeGpuletInputRing(gpulet, served, &launch);
  launch.threads = placement.threads;
  launch.extra_args.insert(launch.extra_args.end(), placement.extra_args.begin(),
                           placement.extra_args.end());
  launch.extra_env.insert(launch.extra_env.end(), placement.extra_env.begin(),
                          placement.extra_env.end());
  auto slot = pool_->AddExecutor(launch);
  if (!slot.ok()) {
    StopGpulet(*binding);
    return slot.status();
  }
  applied.executor_slot = *slot;

  Status status;
  for (const scheduler::GpuletModel& m : gpulet.models) {
    const ServedModel& model = served.at(m.model);
    const std::string key =
        absl::StrCat(model.name, "/", model.version, "@gpulet", next_instance_++);
    // A shadow maps its active's weights where the device allows (GSLICE §4.4).
    std::optional<SharedWeightsHandle> shared = WeightsToShare(gpulet.gpu, model, donors);
    bool mapped = false;
    status = pool_->LoadInstance(
        applied.executor_slot, BuildLoadModel(*model.config, model.version, model.model_path, key),
        shared.has_value() ? &*shared : nullptr, &mapped);
    if (!status.ok()) break;
    if (mapped && weights_shared != nullptr) ++*weights_shared;
    binding->instance_keys[m.model] = key;
    auto process = pool_->Acquire(applied.executor_slot, key);
    status = process.ok() ? WarmUp(**process, key, *model.config, m.batch) : process.status();
    if (!status.ok()) break;
    binding->runners[m.model] = std::make_shared<GpuletBatchRunner>(
        pool_, applied.executor_slot, key, model.config, binding->round_gate, applied.label);
  }
  if (!status.ok()) {
    StopGpulet(*binding);
    return absl::Status(status.code(), absl::StrCat("starting ", applied.label, " [", identity,
                                                    "]: ", status.message()));
  }
  spdlog::info("{} started on executor {} ({}), models {}", applied.label, applied.executor_slot,
               applied.placement, identity);
  return binding;
}

void PlanApplier::StopGpulet(const Binding& binding) {
  for (const auto& [model, key] : binding.instance_keys) {
    pool_->UnloadInstance(binding.gpulet.executor_slot, key);
  }
  if (binding.gpulet.executor_slot >= 0) pool_->RemoveExecutor(binding.gpulet.executor_slot);
  if (binding.gpulet.placement_id >= 0 && options_.release) {
    options_.release(binding.gpulet.placement_id);
  }
}

ApplyReport PlanApplier::Apply(const scheduler::Plan& plan, const std::vector<ServedModel>& models) {
  ApplyReport report;
  const uint64_t t0 = MonotonicNs();
  std::map<std::string, ServedModel> served;
  for (const ServedModel& model : models) served[model.name] = model;

  // 1. Match the plan's gpulets to the running ones; start shadows for the rest.
  std::vector<std::shared_ptr<Binding>> unused = bindings_;
  std::vector<std::pair<const scheduler::Gpulet*, std::shared_ptr<Binding>>> desired;
  std::set<std::string> failed_models;
  for (const scheduler::Gpulet& gpulet : plan.gpulets) {
    scheduler::Gpulet usable = gpulet;
    std::erase_if(usable.models, [&](const auto& m) { return !served.count(m.model); });
    if (usable.models.empty()) continue;
    const std::string identity = Identity(usable, served);
    auto match = std::find_if(unused.begin(), unused.end(),
                              [&](const auto& b) { return b->identity == identity; });
    if (match != unused.end()) {
      desired.push_back({&gpulet, *match});
      unused.erase(match);
      ++report.gpulets_kept;
      continue;
    }
    std::vector<std::shared_ptr<Binding>> donors = bindings_;
    for (const auto& [g, b] : desired) donors.push_back(b);
    auto started = StartGpulet(usable, identity, served, donors, &report.weights_shared);
    if (!started.ok()) {
      spdlog::error("{}", started.status().message());
      report.errors.push_back(std::string(started.status().message()));
      for (const auto& m : usable.models) failed_models.insert(m.model);
      continue;
    }
    desired.push_back({&gpulet, *started});
    ++report.gpulets_started;
  }
  report.start_ns = MonotonicNs() - t0;

  // 2. Switch every model whose lanes changed.
  std::vector<std::shared_ptr<Binding>> next;
  for (const auto& [gpulet, binding] : desired) next.push_back(binding);
  for (const auto& [name, model] : served) {
    if (failed_models.count(name)) {
      // Keep its current lanes, and the gpulets they run on.
      for (const auto& b : unused) {
        if (b->runners.count(name) && std::find(next.begin(), next.end(), b) == next.end()) {
          next.push_back(b);
        }
      }
      continue;
    }
    std::vector<dispatch::Lane> lanes;
    std::vector<std::string> signature;
    for (const auto& [gpulet, binding] : desired) {
      for (const scheduler::GpuletModel& m : gpulet->models) {
        if (m.model != name) continue;
        dispatch::Lane lane;
        lane.plan.weight = m.rate_rps;
        lane.plan.duty_cycle = true;
        lane.plan.duty.max_rows = std::max(1, m.batch);
        lane.plan.duty.duty_ns = static_cast<uint64_t>(gpulet->duty_ms * 1e6);
        lane.plan.expected_run_ns = static_cast<uint64_t>(m.latency_ms * 1e6);
        lane.plan.label = absl::StrFormat("%s batch %d duty %.2f ms", binding->gpulet.label,
                                          m.batch, gpulet->duty_ms);
        lane.runners.push_back(binding->runners.at(name));
        signature.push_back(absl::StrFormat("%s|%d|%.3f|%.3f|%.3f", binding->gpulet.label, m.batch,
                                            gpulet->duty_ms, m.rate_rps, m.latency_ms));
        lanes.push_back(std::move(lane));
      }
    }
    std::string sig = lanes.empty() ? "instances" : absl::StrJoin(signature, ";");
    if (lanes.empty()) lanes.push_back(model.base_lane);
    const bool same_queue = queue_of_[name] == model.queue.get();
    if (same_queue && lane_signature_[name] == sig) continue;
    if (!same_queue && sig == "instances") {
      // A fresh load already serves on its configured instances.
      queue_of_[name] = model.queue.get();
      lane_signature_[name] = sig;
      continue;
    }
    std::vector<std::string> labels;
    for (const auto& lane : lanes) labels.push_back(lane.plan.label);
    auto swap = model.queue->ReplaceLanes(std::move(lanes));
    if (!swap.ok()) {  // the version is being unloaded: nothing to serve there any more
      spdlog::warn("model '{}': lanes not switched: {}", name, swap.status().message());
      continue;
    }
    queue_of_[name] = model.queue.get();
    lane_signature_[name] = sig;
    report.switches.push_back({name, absl::StrJoin(labels, " + "), *swap});
    spdlog::info("model '{}' now on {} (switch gap {:.1f} us, {} queued request(s) moved, old lanes "
                 "drained in {:.1f} ms)",
                 name, absl::StrJoin(labels, " + "), swap->gap_ns / 1e3, swap->moved_requests,
                 swap->drain_ns / 1e6);
  }
  for (auto it = lane_signature_.begin(); it != lane_signature_.end();) {
    if (served.count(it->first)) {
      ++it;
    } else {
      queue_of_.erase(it->first);
      it = lane_signature_.erase(it);
    }
  }

  // 3. Gpulets nobody routes to any more: their lanes drained in ReplaceLanes; stop them.
  for (const auto& binding : unused) {
    if (std::find(next.begin(), next.end(), binding) != next.end()) continue;
    spdlog::info("{} stopped (executor {})", binding->gpulet.label, binding->gpulet.executor_slot);
    StopGpulet(*binding);
    ++report.gpulets_stopped;
  }
  bindings_ = std::move(next);
  // Kept gpulets take the new plan's numbers for their view.
  std::vector<AppliedGpulet> view;
  for (const auto& [gpulet, binding] : desired) {
    binding->gpulet.duty_ms = gpulet->duty_ms;
    binding->gpulet.models = gpulet->models;
  }
  for (const auto& binding : bindings_) view.push_back(binding->gpulet);
  {
    std::lock_guard lock(view_mu_);
    view_ = std::move(view);
  }
  report.total_ns = MonotonicNs() - t0;
  return report;
}

std::vector<AppliedGpulet> PlanApplier::gpulets() const {
  std::lock_guard lock(view_mu_);
  return view_;
}

void PlanApplier::Shutdown() {
  for (const auto& binding : bindings_) StopGpulet(*binding);
  bindings_.clear();
  std::lock_guard lock(view_mu_);
  view_.clear();
}

}  // namespace tessera::server
