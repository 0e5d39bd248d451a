#include "host_metrics.h"

#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tessera/common/yaml_util.h"

namespace tessera::server {

std::optional<CpuTimes> ParseProcStat(std::string_view text) {
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    if (!absl::ConsumePrefix(&line, "cpu ")) continue;
    // user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is already
    // inside user and nice, so the first eight are all of it.
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() < 4) return std::nullopt;
    CpuTimes times;
    uint64_t idle = 0;
    for (size_t i = 0; i < fields.size() && i < 8; ++i) {
      uint64_t value = 0;
      if (!absl::SimpleAtoi(fields[i], &value)) return std::nullopt;
      times.total += value;
      if (i == 3 || i == 4) idle += value;
    }
    times.busy = times.total - idle;
    return times;
  }
  return std::nullopt;
}

std::optional<MemoryBytes> ParseMeminfo(std::string_view text) {
  std::optional<uint64_t> total, available;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    std::optional<uint64_t>* field = absl::ConsumePrefix(&line, "MemTotal:")       ? &total
                                     : absl::ConsumePrefix(&line, "MemAvailable:") ? &available
                                                                                   : nullptr;
    if (field == nullptr) continue;
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumeSuffix(&line, " kB")) return std::nullopt;
    uint64_t kib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib)) return std::nullopt;
    *field = kib * 1024;
  }
  if (!total || !available) return std::nullopt;
  return MemoryBytes{*total, *available};
}

double CpuUtilization(const CpuTimes& before, const CpuTimes& after) {
  if (after.total <= before.total || after.busy < before.busy) return 0;
  const double share = static_cast<double>(after.busy - before.busy) /
                       static_cast<double>(after.total - before.total);
  return share > 1 ? 1 : share;
}

HostMetrics::HostMetrics(int64_t interval_ms, bool cpu, std::unique_ptr<GpuMetrics> gpus)
    : interval_ms_(interval_ms), cpu_(cpu), gpus_(std::move(gpus)) {
  Sample();
  sampler_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_cv_.wait_for(lock, std::chrono::milliseconds(interval_ms_),
                              [this] { return stopping_; })) {
      lock.unlock();  // a scrape never waits on NVML or /proc
      Sample();
      lock.lock();
    }
  });
}

HostMetrics::~HostMetrics() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  sampler_.join();
}

void HostMetrics::Sample() {
  std::vector<GpuReading> gpus;
  if (gpus_) gpus = gpus_->Read();
  std::optional<double> utilization;
  std::optional<MemoryBytes> memory;
  if (cpu_) {
    if (StatusOr<std::string> stat = yaml::ReadFileToString("/proc/stat"); stat.ok()) {
      std::optional<CpuTimes> now = ParseProcStat(*stat);
      if (now && last_cpu_) utilization = CpuUtilization(*last_cpu_, *now);
      if (now) last_cpu_ = now;
    }
    if (StatusOr<std::string> meminfo = yaml::ReadFileToString("/proc/meminfo"); meminfo.ok()) {
      memory = ParseMeminfo(*meminfo);
    }
  }
  std::lock_guard lock(mu_);
  gpu_readings_ = std::move(gpus);
  if (utilization) utilization_ = utilization;
  if (memory) memory_ = memory;
}

std::vector<frontend::MetricSample> HostMetrics::Samples() const {
  std::lock_guard lock(mu_);
  std::vector<frontend::MetricSample> samples;
  if (utilization_) {
    samples.push_back(
        {"nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", false, {}, *utilization_});
  }
  if (memory_) {
    samples.push_back({"nv_cpu_memory_total_bytes",
                       "CPU total memory (RAM), in bytes",
                       false,
                       {},
                       static_cast<double>(memory_->total)});
    samples.push_back({"nv_cpu_memory_used_bytes",
                       "CPU used memory (RAM), in bytes",
                       false,
                       {},
                       static_cast<double>(memory_->total - memory_->available)});
  }
  for (const GpuReading& gpu : gpu_readings_) {
    const std::vector<std::pair<std::string, std::string>> labels = {{"gpu_uuid", gpu.uuid}};
    struct Gauge {
      const char* name;
      const char* help;
      bool counter;
      std::optional<double> value;
    };
    auto bytes = [](std::optional<uint64_t> v) {
      return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
    };
    for (const Gauge& gauge : {
             Gauge{"nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", false,
                   gpu.utilization},
             Gauge{"nv_gpu_memory_total_bytes", "GPU total memory, in bytes", false,
                   bytes(gpu.memory_total_bytes)},
             Gauge{"nv_gpu_memory_used_bytes", "GPU used memory, in bytes", false,
                   bytes(gpu.memory_used_bytes)},
             Gauge{"nv_gpu_power_usage", "GPU power usage in watts", false, gpu.power_watts},
             Gauge{"nv_gpu_power_limit", "GPU power management limit in watts", false,
                   gpu.power_limit_watts},
             Gauge{"nv_energy_consumption",
                   "GPU energy consumption in joules since the server started", true,
                   gpu.energy_joules},
         }) {
      if (gauge.value)
        samples.push_back({gauge.name, gauge.help, gauge.counter, labels, *gauge.value});
    }
  }
  return samples;
}

}  // namespace tessera::server
