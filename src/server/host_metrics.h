// The machine's CPU use and memory, as Triton reports them on /metrics (nv_cpu_utilization,
// nv_cpu_memory_total_bytes, nv_cpu_memory_used_bytes), and its GPUs' (gpu_metrics.h), so
// dashboards made for Triton show them. A thread of its own reads /proc and NVML every interval:
// a scrape gets the utilization of the last interval, not an average since boot, whenever it
// comes.
//
// Thread-safety: Samples may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "gpu_metrics.h"
#include "tessera/frontend/metrics.h"

namespace tessera::server {

// Jiffies of the aggregate "cpu" line of /proc/stat: all of them, and those not idle (idle and
// iowait are idle).
struct CpuTimes {
  uint64_t total = 0;
  uint64_t busy = 0;
};
std::optional<CpuTimes> ParseProcStat(std::string_view text);

// MemTotal and MemAvailable of /proc/meminfo, in bytes.
struct MemoryBytes {
  uint64_t total = 0;
  uint64_t available = 0;
};
std::optional<MemoryBytes> ParseMeminfo(std::string_view text);

// Busy share of the jiffies between two readings, in [0, 1]; 0 when none passed.
double CpuUtilization(const CpuTimes& before, const CpuTimes& after);

class HostMetrics {
 public:
  // Reads /proc (with `cpu`) and `gpus` (when given) now and then every `interval_ms` until
  // destroyed.
  HostMetrics(int64_t interval_ms, bool cpu, std::unique_ptr<GpuMetrics> gpus);
  ~HostMetrics();
  HostMetrics(const HostMetrics&) = delete;
  HostMetrics& operator=(const HostMetrics&) = delete;

  // The latest readings; a metric whose file could not be read is left out.
  std::vector<frontend::MetricSample> Samples() const;

 private:
  // Reads /proc and NVML without the lock, then stores the readings under it. Called by the
  // constructor and then only by the sampler thread.
  void Sample() ABSL_LOCKS_EXCLUDED(mu_);

  const int64_t interval_ms_;
  const bool cpu_;
  const std::unique_ptr<GpuMetrics> gpus_;  // read by the sampler only
  std::vector<GpuReading> gpu_readings_ ABSL_GUARDED_BY(mu_);
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<CpuTimes> last_cpu_;  // the sampler's own
  std::optional<double> utilization_ ABSL_GUARDED_BY(mu_);
  std::optional<MemoryBytes> memory_ ABSL_GUARDED_BY(mu_);
  std::thread sampler_;
};

}  // namespace tessera::server
