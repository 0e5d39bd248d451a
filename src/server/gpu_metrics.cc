#include "gpu_metrics.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace tessera::server {
namespace {

constexpr int kNvmlSuccess = 0;
constexpr unsigned int kUuidBytes = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  return *fn != nullptr;
}

}  // namespace

StatusOr<NvmlApi> LoadNvml(const char* library) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::UnavailableError(
        absl::StrCat("cannot load ", library, ": ", why ? why : "unknown error"));
  }
  NvmlApi api;
  const std::pair<const char*, bool> entry_points[] = {
      {"nvmlInit_v2", Resolve(handle, "nvmlInit_v2", &api.init)},
      {"nvmlDeviceGetCount_v2", Resolve(handle, "nvmlDeviceGetCount_v2", &api.device_count)},
      {"nvmlDeviceGetHandleByIndex_v2",
       Resolve(handle, "nvmlDeviceGetHandleByIndex_v2", &api.device_by_index)},
      {"nvmlDeviceGetUUID", Resolve(handle, "nvmlDeviceGetUUID", &api.uuid)},
      {"nvmlDeviceGetUtilizationRates",
       Resolve(handle, "nvmlDeviceGetUtilizationRates", &api.utilization)},
      {"nvmlDeviceGetMemoryInfo", Resolve(handle, "nvmlDeviceGetMemoryInfo", &api.memory)},
      {"nvmlDeviceGetPowerUsage", Resolve(handle, "nvmlDeviceGetPowerUsage", &api.power_usage)},
      {"nvmlDeviceGetEnforcedPowerLimit",
       Resolve(handle, "nvmlDeviceGetEnforcedPowerLimit", &api.power_limit)},
      {"nvmlDeviceGetTotalEnergyConsumption",
       Resolve(handle, "nvmlDeviceGetTotalEnergyConsumption", &api.energy)},
  };
  for (const auto& [name, found] : entry_points) {
    if (!found) return absl::UnavailableError(absl::StrCat(library, " has no ", name));
  }
  if (int result = api.init(); result != kNvmlSuccess) {
    return absl::UnavailableError(absl::StrCat("nvmlInit_v2 failed (NVML error ", result, ")"));
  }
  return api;
}

StatusOr<std::unique_ptr<GpuMetrics>> GpuMetrics::Open(const NvmlApi& api) {
  unsigned int count = 0;
  if (int result = api.device_count(&count); result != kNvmlSuccess) {
    return absl::UnavailableError(
        absl::StrCat("nvmlDeviceGetCount_v2 failed (NVML error ", result, ")"));
  }
  if (count == 0) return absl::UnavailableError("NVML sees no GPU");
  std::vector<Gpu> gpus;
  for (unsigned int i = 0; i < count; ++i) {
    Gpu gpu{};
    if (api.device_by_index(i, &gpu.device) != kNvmlSuccess) continue;
    char uuid[kUuidBytes] = {};
    gpu.uuid = api.uuid(gpu.device, uuid, kUuidBytes) == kNvmlSuccess ? std::string(uuid)
                                                                      : absl::StrCat("GPU ", i);
    unsigned long long energy = 0;
    if (api.energy(gpu.device, &energy) == kNvmlSuccess) gpu.energy_at_open_mj = energy;
    gpus.push_back(std::move(gpu));
  }
  if (gpus.empty()) return absl::UnavailableError("NVML gives no handle for any GPU");
  return std::unique_ptr<GpuMetrics>(new GpuMetrics(api, std::move(gpus)));
}

std::vector<GpuReading> GpuMetrics::Read() {
  std::vector<GpuReading> readings;
  for (const Gpu& gpu : gpus_) {
    GpuReading reading;
    reading.uuid = gpu.uuid;
    NvmlUtilization utilization{};
    if (api_.utilization(gpu.device, &utilization) == kNvmlSuccess) {
      reading.utilization = utilization.gpu / 100.0;
    }
    NvmlMemory memory{};
    if (api_.memory(gpu.device, &memory) == kNvmlSuccess) {
      reading.memory_total_bytes = memory.total;
      reading.memory_used_bytes = memory.used;
    }
    unsigned int milliwatts = 0;
    if (api_.power_usage(gpu.device, &milliwatts) == kNvmlSuccess) {
      reading.power_watts = milliwatts / 1000.0;
    }
    if (api_.power_limit(gpu.device, &milliwatts) == kNvmlSuccess) {
      reading.power_limit_watts = milliwatts / 1000.0;
    }
    unsigned long long energy = 0;
    if (gpu.energy_at_open_mj && api_.energy(gpu.device, &energy) == kNvmlSuccess &&
        energy >= *gpu.energy_at_open_mj) {
      reading.energy_joules = (energy - *gpu.energy_at_open_mj) / 1000.0;
    }
    readings.push_back(std::move(reading));
  }
  return readings;
}

}  // namespace tessera::server
