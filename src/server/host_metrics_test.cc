// The host's CPU and memory readings: /proc parsing, the utilization between two readings, and
// the samples a live sampler gives.
#include "host_metrics.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::server {
namespace {

TEST(HostMetricsTest, ProcStatGivesAllAndBusyJiffies) {
  // user nice system idle iowait irq softirq steal guest guest_nice
  std::optional<CpuTimes> times =
      ParseProcStat("cpu  100 20 30 400 50 6 4 10 99 99\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1 2 3\n");
  ASSERT_TRUE(times.has_value());
  EXPECT_EQ(times->total, 620u);  // guest time is already inside user and nice
  EXPECT_EQ(times->busy, 170u);   // idle and iowait are not busy
  EXPECT_FALSE(ParseProcStat("cpu0 1 2 3 4\n").has_value());
  EXPECT_FALSE(ParseProcStat("cpu  1 2 x 4\n").has_value());
  EXPECT_FALSE(ParseProcStat("").has_value());
}

TEST(HostMetricsTest, UtilizationIsTheBusyShareBetweenTwoReadings) {
  EXPECT_DOUBLE_EQ(CpuUtilization({1000, 200}, {2000, 450}), 0.25);
  EXPECT_DOUBLE_EQ(CpuUtilization({1000, 200}, {1000, 200}), 0.0);  // no time passed
  EXPECT_DOUBLE_EQ(CpuUtilization({2000, 200}, {1000, 100}), 0.0);  // counters went back
}

TEST(HostMetricsTest, MeminfoGivesTotalAndAvailableBytes) {
  std::optional<MemoryBytes> memory = ParseMeminfo(
      "MemTotal:       24576000 kB\nMemFree:         1000000 kB\nMemAvailable:   12288000 kB\n");
  ASSERT_TRUE(memory.has_value());
  EXPECT_EQ(memory->total, 24576000ull * 1024);
  EXPECT_EQ(memory->available, 12288000ull * 1024);
  EXPECT_FALSE(ParseMeminfo("MemTotal: 10 kB\n").has_value());  // no MemAvailable
  EXPECT_FALSE(ParseMeminfo("MemTotal: 10 MB\nMemAvailable: 5 kB\n").has_value());
}

TEST(HostMetricsTest, ASamplerReportsThisMachine) {
  HostMetrics host(20, /*cpu=*/true, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::map<std::string, double> values;
  for (const frontend::MetricSample& sample : host.Samples()) values[sample.name] = sample.value;
  ASSERT_TRUE(values.count("nv_cpu_utilization"));
  EXPECT_GE(values["nv_cpu_utilization"], 0.0);
  EXPECT_LE(values["nv_cpu_utilization"], 1.0);
  EXPECT_GT(values["nv_cpu_memory_total_bytes"], 0.0);
  EXPECT_GT(values["nv_cpu_memory_used_bytes"], 0.0);
  EXPECT_LT(values["nv_cpu_memory_used_bytes"], values["nv_cpu_memory_total_bytes"]);
}

}  // namespace
}  // namespace tessera::server
