// GPU metrics over a fake NVML: units turned into Triton's, energy counted from the opening, and
// a query NVML refuses left out rather than reported as zero. The real library is loaded only
// where a driver is: here its absence must be a clear UNAVAILABLE.
#include "gpu_metrics.h"

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "host_metrics.h"

namespace tessera::server {
namespace {

using ::testing::HasSubstr;

// Two GPUs; the second does not report power (as some boards do not). Energy grows by 5 J per
// reading.
struct FakeNvmlForTest {
  static inline unsigned long long energy_mj = 1'000'000;
  static int Init() { return 0; }
  static int Count(unsigned int* count) {
    *count = 2;
    return 0;
  }
  static int ByIndex(unsigned int index, NvmlApi::Device* device) {
    *device = reinterpret_cast<NvmlApi::Device>(static_cast<uintptr_t>(index + 1));
    return 0;
  }
  static unsigned Index(NvmlApi::Device device) {
    return static_cast<unsigned>(reinterpret_cast<uintptr_t>(device)) - 1;
  }
  static int Uuid(NvmlApi::Device device, char* out, unsigned int length) {
    std::snprintf(out, length, "GPU-fake-%u", Index(device));
    return 0;
  }
  static int Utilization(NvmlApi::Device device, NvmlUtilization* u) {
    u->gpu = Index(device) == 0 ? 37 : 100;
    u->memory = 5;
    return 0;
  }
  static int Memory(NvmlApi::Device, NvmlMemory* m) {
    m->total = 80ull << 30;
    m->used = 3ull << 30;
    m->free = m->total - m->used;
    return 0;
  }
  static int Power(NvmlApi::Device device, unsigned int* mw) {
    if (Index(device) == 1) return 3;  // NVML_ERROR_NOT_SUPPORTED
    *mw = 312'500;
    return 0;
  }
  static int Limit(NvmlApi::Device, unsigned int* mw) {
    *mw = 700'000;
    return 0;
  }
  static int Energy(NvmlApi::Device, unsigned long long* mj) {
    *mj = energy_mj;
    energy_mj += 5'000;
    return 0;
  }
  static NvmlApi Api() {
    NvmlApi api;
    api.init = Init;
    api.device_count = Count;
    api.device_by_index = ByIndex;
    api.uuid = Uuid;
    api.utilization = Utilization;
    api.memory = Memory;
    api.power_usage = Power;
    api.power_limit = Limit;
    api.energy = Energy;
    return api;
  }
};

TEST(GpuMetricsTest, ReadingsComeInTritonsUnits) {
  auto gpus = GpuMetrics::Open(FakeNvmlForTest::Api());
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  std::vector<GpuReading> readings = (*gpus)->Read();
  ASSERT_EQ(readings.size(), 2u);
  EXPECT_EQ(readings[0].uuid, "GPU-fake-0");
  EXPECT_DOUBLE_EQ(*readings[0].utilization, 0.37);
  EXPECT_EQ(*readings[0].memory_total_bytes, 80ull << 30);
  EXPECT_EQ(*readings[0].memory_used_bytes, 3ull << 30);
  EXPECT_DOUBLE_EQ(*readings[0].power_watts, 312.5);
  EXPECT_DOUBLE_EQ(*readings[0].power_limit_watts, 700.0);
  EXPECT_GT(*readings[0].energy_joules, 0.0);  // counted from the opening, not the driver load
  EXPECT_LT(*readings[0].energy_joules, 20.0);
  EXPECT_FALSE(readings[1].power_watts.has_value());  // refused: left out, not zero
  EXPECT_DOUBLE_EQ(*readings[1].utilization, 1.0);
}

TEST(GpuMetricsTest, SamplesCarryTheGpuUuid) {
  auto gpus = GpuMetrics::Open(FakeNvmlForTest::Api());
  ASSERT_TRUE(gpus.ok());
  HostMetrics host(1000, /*cpu=*/false, std::move(gpus).value());
  std::map<std::string, int> names;
  bool labelled = true;
  for (const frontend::MetricSample& sample : host.Samples()) {
    ++names[sample.name];
    labelled &= sample.labels.size() == 1 && sample.labels[0].first == "gpu_uuid";
  }
  EXPECT_TRUE(labelled);
  EXPECT_EQ(names["nv_gpu_utilization"], 2);
  EXPECT_EQ(names["nv_gpu_memory_used_bytes"], 2);
  EXPECT_EQ(names["nv_gpu_power_usage"], 1);  // the second GPU does not report it
  EXPECT_EQ(names["nv_energy_consumption"], 2);
  EXPECT_EQ(names.count("nv_cpu_utilization"), 0u);  // cpu off
}

TEST(GpuMetricsTest, NoNvmlIsUnavailableNamingTheLibrary) {
  StatusOr<NvmlApi> api = LoadNvml("libtessera-no-such-nvml.so");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(api.status().message()),
              HasSubstr("cannot load libtessera-no-such-nvml.so"));
}

}  // namespace
}  // namespace tessera::server
