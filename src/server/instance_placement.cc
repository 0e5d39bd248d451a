#include "instance_placement.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera::server {

InstancePlacer::InstancePlacer(InstancePlacementOptions options) : options_(std::move(options)) {}

std::vector<std::string> InstancePlacer::GroupDevices(
    const repository::InstanceGroupConfig& group) const {
  if (!on_gpu() || !options_.add_executor) return {""};
  if (group.kind == repository::InstanceKind::kCpu) return {"cpu"};
  std::vector<int> gpus = group.gpus;
  if (gpus.empty()) {  // every GPU, as Triton places KIND_GPU and KIND_AUTO groups
    for (int gpu = 0; gpu < std::max(options_.gpu_count, 1); ++gpu) gpus.push_back(gpu);
  }
  std::vector<std::string> devices;
  for (int gpu : gpus) {
    const std::string device = absl::StrCat("cuda:", gpu);
    devices.push_back(device == options_.base_device ? "" : device);
  }
  return devices;
}

StatusOr<int> InstancePlacer::NextSlot(const std::string& device) {
  if (device.empty()) return static_cast<int>(next_base_++ % options_.base_slots);
  if (auto it = added_.find(device); it != added_.end()) return it->second;
  StatusOr<int> slot = options_.add_executor(device);
  if (!slot.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot start an executor on ", device, ": ", slot.status().message()));
  }
  added_[device] = *slot;
  return *slot;
}

StatusOr<std::vector<int>> InstancePlacer::Place(const repository::ModelConfig& config) {
  // Checked before anything starts, so a wrong id starts no executor.
  if (on_gpu()) {
    for (size_t i = 0; i < config.instance_groups.size(); ++i) {
      const repository::InstanceGroupConfig& group = config.instance_groups[i];
      if (group.kind == repository::InstanceKind::kCpu) continue;
      for (int gpu : group.gpus) {
        if (gpu >= options_.gpu_count) {
          return absl::InvalidArgumentError(
              absl::StrCat("instance_group[", i, "].gpus lists GPU ", gpu, ", but this server has ",
                           options_.gpu_count, " GPU(s) (ids 0..", options_.gpu_count - 1, ")"));
        }
      }
    }
  }
  // No instance_group: one instance on each GPU (or on the CPU), Triton's default.
  const std::vector<repository::InstanceGroupConfig> groups =
      config.instance_groups.empty() ? std::vector<repository::InstanceGroupConfig>(1)
                                     : config.instance_groups;
  std::lock_guard lock(mu_);
  std::vector<int> slots;
  if (!config.worker_batch_sizes.empty()) {
    TESSERA_ASSIGN_OR_RETURN(int slot, NextSlot(GroupDevices(groups.front()).front()));
    slots.assign(config.worker_batch_sizes.size(), slot);
    return slots;
  }
  for (const repository::InstanceGroupConfig& group : groups) {
    for (const std::string& device : GroupDevices(group)) {
      for (int i = 0; i < group.count; ++i) {
        TESSERA_ASSIGN_OR_RETURN(int slot, NextSlot(device));
        slots.push_back(slot);
      }
    }
  }
  return slots;
}

std::optional<repository::ModelConfig> InstancePlacer::CpuFallback(
    const repository::ModelConfig& config) const {
  if (!on_gpu() || !options_.add_executor) return std::nullopt;
  repository::ModelConfig on_cpu = config;
  if (on_cpu.instance_groups.empty()) on_cpu.instance_groups.resize(1);  // Place's default group
  bool moved = false;
  for (repository::InstanceGroupConfig& group : on_cpu.instance_groups) {
    if (group.kind == repository::InstanceKind::kGpu) return std::nullopt;
    if (group.kind == repository::InstanceKind::kAuto) {
      group.kind = repository::InstanceKind::kCpu;
      group.gpus.clear();
      moved = true;
    }
  }
  if (!moved) return std::nullopt;
  return on_cpu;
}

std::string InstancePlacer::DeviceOf(int slot) const {
  std::lock_guard lock(mu_);
  for (const auto& [device, added] : added_) {
    if (added == slot) return device;
  }
  return options_.base_device;
}

}  // namespace tessera::server
