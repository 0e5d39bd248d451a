// The committed synthetic profile set profiles/synthetic-2080ti (tools/make_synthetic_profiles.py):
// it loads, and it has the shape the planners are built for.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "interference_fit.h"
#include "tessera/common/yaml_util.h"
#include "tessera/scheduler/interference.h"
#include "tessera/scheduler/profile.h"

namespace tessera::scheduler {
namespace {

const std::filesystem::path kDir =
    std::filesystem::path(TESSERA_SOURCE_DIR) / "profiles" / "synthetic-2080ti";

// seed 001 Table 3: the models and their SLOs (ms); memory from the gpulet artifact.
struct Expected {
  double slo_ms;
  double memory_mb;
};
const std::map<std::string, Expected> kModels = {
    {"googlenet", {66, 1720}},     {"lenet", {5, 50}},           {"resnet50", {108, 1820}},
    {"ssd_mobilenet", {202, 640}}, {"vgg16", {142, 2920}},       {"mnasnet", {62, 1550}},
    {"mobilenet_v2", {64, 464}},   {"densenet161", {202, 1220}}, {"bert_base", {22, 500}}};

class SyntheticProfilesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = ProfileSet::LoadDirectory(kDir);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    set_ = new ProfileSet(*std::move(loaded));
  }
  static void TearDownTestSuite() {
    delete set_;
    set_ = nullptr;
  }
  static const ProfileSet* set_;
};
const ProfileSet* SyntheticProfilesTest::set_ = nullptr;

// Smallest profiled partition whose latency is within 5 % of the whole device's.
int KneePct(const ModelProfile& p, int batch) {
  for (int part : p.table().partitions_pct) {
    if (p.LatencyMs(batch, part) <= 1.05 * p.LatencyMs(batch, 100)) return part;
  }
  return 100;
}

TEST_F(SyntheticProfilesTest, AllNineModelsLoadAndAreLabelledSynthetic) {
  ASSERT_NE(set_, nullptr);
  EXPECT_EQ(set_->device().name, "synthetic-2080ti");
  EXPECT_EQ(set_->device().memory_mb, 11000);
  EXPECT_TRUE(set_->device().synthetic);
  std::vector<std::string> names;
  for (const auto& [name, expected] : kModels) names.push_back(name);
  EXPECT_EQ(set_->models(), names);  // both sorted
  for (const auto& [name, expected] : kModels) {
    const ModelProfile* p = set_->Find(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_TRUE(p->synthetic()) << name;
    EXPECT_EQ(p->memory_mb(), expected.memory_mb) << name;
    EXPECT_EQ(p->table().partitions_pct, (std::vector<int>{20, 40, 50, 60, 80, 100})) << name;
    EXPECT_EQ(p->max_batch(), 32) << name;
    EXPECT_EQ(p->table().batches.size(), 32u) << name;
    EXPECT_EQ(p->utilisation().size(), 6u) << name;
  }
}

TEST_F(SyntheticProfilesTest, LatencyNeverRisesWithThePartition) {
  ASSERT_NE(set_, nullptr);
  for (const std::string& name : set_->models()) {
    const ModelProfile& p = *set_->Find(name);
    for (int b = 1; b <= 32; ++b) {
      for (int part = 2; part <= 100; ++part) {
        // 1e-12: interpolating between two equal values may round up in the last bit.
        ASSERT_LE(p.LatencyMs(b, part), p.LatencyMs(b, part - 1) * (1 + 1e-12))
            << name << " batch " << b << " at " << part << " %";
      }
      // More work per batch never takes less time.
      if (b > 1) {
        ASSERT_GE(p.LatencyMs(b, 100), p.LatencyMs(b - 1, 100)) << name << " " << b;
      }
    }
  }
}

TEST_F(SyntheticProfilesTest, EveryModelHasAKneeThatRisesWithTheBatch) {
  ASSERT_NE(set_, nullptr);
  for (const std::string& name : set_->models()) {
    const ModelProfile& p = *set_->Find(name);
    // Batch 16 stops getting faster before the whole device (seed 000 Table 4.2: 20–50 %).
    const int knee16 = KneePct(p, 16);
    EXPECT_LT(knee16, 100) << name;
    EXPECT_LE(KneePct(p, 1), knee16) << name;
    EXPECT_LE(knee16, KneePct(p, 32)) << name;
    // Below the knee it slows down steeply, except LeNet, too small to fill even 20 %.
    if (name != "lenet") {
      EXPECT_GT(p.LatencyMs(16, 20), 1.2 * p.LatencyMs(16, 100)) << name;
    }
  }
  // The big convnets need more of the device than the depthwise ones (seed 000 Table 4.2).
  EXPECT_GT(KneePct(*set_->Find("vgg16"), 32), KneePct(*set_->Find("mobilenet_v2"), 32));
}

TEST_F(SyntheticProfilesTest, SlosOfSeed001Table3MakeSense) {
  ASSERT_NE(set_, nullptr);
  int fail_at_20_pct = 0;
  for (const auto& [name, expected] : kModels) {
    const ModelProfile& p = *set_->Find(name);
    // On the whole device a batch of 16 or more fits the saturated rule 2·L ≤ SLO (seed 001 §2.4).
    EXPECT_LE(2 * p.LatencyMs(16, 100), expected.slo_ms) << name;
    if (2 * p.LatencyMs(32, 20) > expected.slo_ms) ++fail_at_20_pct;
  }
  // ... but not every model can run its largest batch on a 20 % gpulet.
  EXPECT_GE(fail_at_20_pct, 3);
}

TEST_F(SyntheticProfilesTest, InterferenceFilesLoadAndTheFitIsCurrent) {
  auto truth = LoadInterferenceFile(kDir / "interference_truth.yaml");
  ASSERT_TRUE(truth.ok()) << truth.status();
  ASSERT_EQ(truth->kind(), InterferenceModel::Kind::kLinear);
  EXPECT_EQ(truth->coefficients().l2_self, 0.11291);  // seed 001 digest §3
  EXPECT_EQ(truth->coefficients().l2_other, 0.71596);
  EXPECT_EQ(truth->coefficients().dram_self, 0.35487);
  EXPECT_EQ(truth->coefficients().dram_other, 0.08820);
  EXPECT_EQ(truth->coefficients().constant, 0.89537);

  auto fitted = LoadInterferenceFile(kDir / "interference.yaml");
  ASSERT_TRUE(fitted.ok()) << fitted.status();
  ASSERT_EQ(fitted->kind(), InterferenceModel::Kind::kLinear);

  const std::string csv_path = (kDir / "interference_samples.csv").string();
  auto text = yaml::ReadFileToString(csv_path);
  ASSERT_TRUE(text.ok()) << text.status();
  auto samples = ParseSamplesCsv(*text, csv_path);
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 2500u);

  // tessera-fit-interference's protocol with its defaults gives the committed coefficients.
  auto split = SplitSamples(*samples, 0.7, 1);
  ASSERT_TRUE(split.ok());
  auto refit = FitInterference(split->train);
  ASSERT_TRUE(refit.ok()) << refit.status();
  EXPECT_NEAR(refit->l2_self, fitted->coefficients().l2_self, 1e-9);
  EXPECT_NEAR(refit->l2_other, fitted->coefficients().l2_other, 1e-9);
  EXPECT_NEAR(refit->dram_self, fitted->coefficients().dram_self, 1e-9);
  EXPECT_NEAR(refit->dram_other, fitted->coefficients().dram_other, 1e-9);
  EXPECT_NEAR(refit->constant, fitted->coefficients().constant, 1e-9);

  // Its validation error is in the paper's range (seed 001 Fig. 10: p90 10.26 %, p95 13.98 %).
  const std::vector<double> errors = RelativeErrors(*fitted, split->validation);
  EXPECT_LT(Percentile(errors, 0.9), 0.12);
  EXPECT_LT(Percentile(errors, 0.95), 0.16);
  // The fit is close to the truth where it matters: predicted factors, not raw coefficients
  // (the clamp at 1 and the upward outliers bias a plain least-squares fit).
  double worst = 0;
  for (const CoLocationSample& s : *samples) {
    const double a = fitted->Factor(s.l2_self, s.dram_self, s.l2_other, s.dram_other);
    const double b = truth->Factor(s.l2_self, s.dram_self, s.l2_other, s.dram_other);
    worst = std::max(worst, std::abs(a - b) / b);
  }
  EXPECT_LT(worst, 0.08) << worst;
}

}  // namespace
}  // namespace tessera::scheduler
