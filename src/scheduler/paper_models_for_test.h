// Test-only stand-ins for the nine models of seed 001 Table 3, for property tests and benches
// before (or besides) the synthetic profile set: L(b,100) = base + per_item·b with rough RTX
// 2080 Ti magnitudes, stretched below a knee that rises with the batch as in seed 001 Fig. 4:
// L(b,p) = L(b,100)·max(1, knee(b)/p), knee(b) = 20 % + 60 %·(b − 1)/31. Memory from the gpulet
// artifact's mem-config.json (seed 001 §1.3). Not measurements.
#pragma once

#include <string>
#include <vector>

#include "tessera/scheduler/plan.h"
#include "tessera/scheduler/profile.h"

namespace tessera::scheduler::testing {

struct PaperModelForTest {
  const char* name;
  double slo_ms;
  double base_ms;
  double per_item_ms;
  double memory_mb;
  double l2;    // standalone L2 utilisation at batch 32, whole GPU
  double dram;  // standalone DRAM utilisation at batch 32, whole GPU
};

inline const std::vector<PaperModelForTest>& PaperModelsForTest() {
  static const std::vector<PaperModelForTest> models = {
      {"googlenet", 66, 4.2, 0.8, 1720, 0.45, 0.35},
      {"lenet", 5, 0.3, 0.01, 50, 0.10, 0.05},
      {"resnet50", 108, 5.0, 2.0, 1820, 0.55, 0.45},
      {"ssd-mobilenet", 202, 6.0, 2.3, 640, 0.40, 0.40},
      {"vgg16", 142, 2.0, 3.4, 2920, 0.65, 0.60},
      {"mnasnet", 62, 3.3, 0.68, 1550, 0.35, 0.30},
      {"mobilenet", 64, 3.3, 0.68, 464, 0.35, 0.30},
      {"densenet161", 202, 16.0, 3.6, 1220, 0.50, 0.40},
      {"bert", 22, 4.7, 0.3, 500, 0.30, 0.20},
  };
  return models;
}

inline ProfileSet PaperProfileSetForTest() {
  ProfileSet set(DeviceInfo{"test-2080ti", 11000, true});
  for (const PaperModelForTest& m : PaperModelsForTest()) {
    ModelProfile::Table table;
    table.partitions_pct = {20, 40, 50, 60, 80, 100};
    for (int b = 1; b <= 32; ++b) table.batches.push_back(b);
    for (int p : table.partitions_pct) {
      std::vector<double> row;
      for (int b : table.batches) {
        const double knee = 20 + 60.0 * (b - 1) / 31;
        row.push_back((m.base_ms + m.per_item_ms * b) * std::max(1.0, knee / p));
      }
      table.latency_ms.push_back(row);
    }
    auto profile = ModelProfile::Create(m.name, "test-2080ti", table, m.memory_mb,
                                        {{1, m.l2 / 3, m.dram / 3}, {32, m.l2, m.dram}},
                                        /*synthetic=*/true);
    (void)set.Add(*std::move(profile));
  }
  return set;
}

// The demands of one scenario: rates[i] for PaperModelsForTest()[i], each at its SLO.
inline std::vector<ModelDemand> PaperDemandsForTest(const std::vector<double>& rates) {
  std::vector<ModelDemand> demands;
  const auto& models = PaperModelsForTest();
  for (size_t i = 0; i < models.size() && i < rates.size(); ++i) {
    demands.push_back({models[i].name, "", rates[i], models[i].slo_ms});
  }
  return demands;
}

}  // namespace tessera::scheduler::testing
