// The GPUs' utilization, memory, power and energy, as Triton reports them on /metrics
// (nv_gpu_utilization, nv_gpu_memory_total_bytes, nv_gpu_memory_used_bytes, nv_gpu_power_usage,
// nv_gpu_power_limit, nv_energy_consumption, each labelled gpu_uuid): the four perf_analyzer's
// --collect-metrics reads, and what dashboards made for Triton chart. Read through NVML, which
// comes with the driver and is loaded at run time, so a machine without it just has no GPU
// metrics.
//
// Thread-safety: Read is called from one thread (HostMetrics' sampler).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/common/status.h"

namespace tessera::server {

// NVML's structs and entry points used here, spelled as plain C types (nvmlReturn_t is an int, 0
// on success; nvmlDevice_t a pointer); signatures follow nvml.h.
struct NvmlUtilization {
  unsigned int gpu;     // percent of the last sample period a kernel ran
  unsigned int memory;  // percent of it memory was read or written
};
struct NvmlMemory {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;
};
struct NvmlApi {
  using Device = void*;
  int (*init)() = nullptr;                                  // nvmlInit_v2
  int (*device_count)(unsigned int*) = nullptr;             // nvmlDeviceGetCount_v2
  int (*device_by_index)(unsigned int, Device*) = nullptr;  // nvmlDeviceGetHandleByIndex_v2
  int (*uuid)(Device, char*, unsigned int) = nullptr;       // nvmlDeviceGetUUID
  int (*utilization)(Device, NvmlUtilization*) = nullptr;   // nvmlDeviceGetUtilizationRates
  int (*memory)(Device, NvmlMemory*) = nullptr;             // nvmlDeviceGetMemoryInfo
  int (*power_usage)(Device, unsigned int*) = nullptr;      // milliwatts
  int (*power_limit)(Device, unsigned int*) = nullptr;      // nvmlDeviceGetEnforcedPowerLimit
  int (*energy)(Device, unsigned long long*) = nullptr;     // millijoules since driver load
};

// Loads `library` and nvmlInit_v2. UNAVAILABLE naming what failed (no library, a missing entry
// point, init's error code). The library stays loaded for the life of the process.
StatusOr<NvmlApi> LoadNvml(const char* library = "libnvidia-ml.so.1");

// One GPU's reading; a value NVML would not give (an error, an unsupported query) is unset.
struct GpuReading {
  std::string uuid;
  std::optional<double> utilization;  // 0..1
  std::optional<uint64_t> memory_total_bytes;
  std::optional<uint64_t> memory_used_bytes;
  std::optional<double> power_watts;
  std::optional<double> power_limit_watts;
  std::optional<double> energy_joules;  // since these metrics were opened
};

class GpuMetrics {
 public:
  // The devices `api` sees. UNAVAILABLE when it sees none or cannot list them.
  static StatusOr<std::unique_ptr<GpuMetrics>> Open(const NvmlApi& api);

  std::vector<GpuReading> Read();

 private:
  struct Gpu {
    NvmlApi::Device device;
    std::string uuid;
    std::optional<unsigned long long> energy_at_open_mj;
  };
  GpuMetrics(const NvmlApi& api, std::vector<Gpu> gpus) : api_(api), gpus_(std::move(gpus)) {}

  const NvmlApi api_;
  std::vector<Gpu> gpus_;
};

}  // namespace tessera::server
