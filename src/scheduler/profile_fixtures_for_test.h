// Test-only profiles with round numbers, so expected plans can be computed by hand.
#pragma once

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/scheduler/profile.h"

namespace tessera::scheduler::testing {

// L(b,p) = (base_ms + per_item_ms·b) · 100/p on partitions {20,40,50,60,80,100} and batches
// 1..32: perfectly compute-bound, so no knee. memory_mb and utilisation as given.
inline ModelProfile LinearProfileForTest(const std::string& model, double base_ms,
                                         double per_item_ms, double memory_mb = 100,
                                         double l2 = 0.3, double dram = 0.3,
                                         const std::string& device = "test-gpu") {
  ModelProfile::Table table;
  table.partitions_pct = {20, 40, 50, 60, 80, 100};
  for (int b = 1; b <= 32; ++b) table.batches.push_back(b);
  for (int p : table.partitions_pct) {
    std::vector<double> row;
    for (int b : table.batches) row.push_back((base_ms + per_item_ms * b) * 100.0 / p);
    table.latency_ms.push_back(row);
  }
  auto profile = ModelProfile::Create(model, device, table, memory_mb,
                                      {{1, l2, dram}, {32, l2, dram}}, /*synthetic=*/true);
  EXPECT_TRUE(profile.ok()) << profile.status();
  return *std::move(profile);
}

// A profile with a knee: below `knee_pct` latency grows as knee/p; at or above it, L is flat.
inline ModelProfile KneeProfileForTest(const std::string& model, double base_ms,
                                       double per_item_ms, int knee_pct,
                                       double memory_mb = 100,
                                       const std::string& device = "test-gpu") {
  ModelProfile::Table table;
  table.partitions_pct = {20, 40, 50, 60, 80, 100};
  for (int b = 1; b <= 32; ++b) table.batches.push_back(b);
  for (int p : table.partitions_pct) {
    std::vector<double> row;
    for (int b : table.batches) {
      const double stretch = p >= knee_pct ? 1.0 : static_cast<double>(knee_pct) / p;
      row.push_back((base_ms + per_item_ms * b) * stretch);
    }
    table.latency_ms.push_back(row);
  }
  auto profile = ModelProfile::Create(model, device, table, memory_mb,
                                      {{1, 0.2, 0.2}, {32, 0.5, 0.5}}, /*synthetic=*/true);
  EXPECT_TRUE(profile.ok()) << profile.status();
  return *std::move(profile);
}

}  // namespace tessera::scheduler::testing
