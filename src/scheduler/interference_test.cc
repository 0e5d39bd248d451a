#include "tessera/scheduler/interference.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "profile_fixtures_for_test.h"

namespace tessera::scheduler {
namespace {

// The gpulet artifact's RTX 2080 Ti fit (seed 001 digest §3).
constexpr InterferenceCoefficients kTruth{0.11291, 0.71596, 0.35487, 0.08820, 0.89537};

double TruthFactor(const CoLocationSample& s) {
  return kTruth.l2_self * s.l2_self + kTruth.l2_other * s.l2_other +
         kTruth.dram_self * s.dram_self + kTruth.dram_other * s.dram_other + kTruth.constant;
}

// `n` samples with features uniform in [0, 0.8] and slowdown = truth × exp(noise).
std::vector<CoLocationSample> Samples(int n, double noise_sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> util(0, 0.8);
  std::normal_distribution<double> noise(0, noise_sigma);
  std::vector<CoLocationSample> samples;
  for (int i = 0; i < n; ++i) {
    CoLocationSample s{util(rng), util(rng), util(rng), util(rng), 0};
    s.slowdown = TruthFactor(s) * (noise_sigma > 0 ? std::exp(noise(rng)) : 1.0);
    samples.push_back(s);
  }
  return samples;
}

void ExpectCoefficientsNear(const InterferenceCoefficients& a, const InterferenceCoefficients& b,
                            double tolerance) {
  EXPECT_NEAR(a.l2_self, b.l2_self, tolerance);
  EXPECT_NEAR(a.l2_other, b.l2_other, tolerance);
  EXPECT_NEAR(a.dram_self, b.dram_self, tolerance);
  EXPECT_NEAR(a.dram_other, b.dram_other, tolerance);
  EXPECT_NEAR(a.constant, b.constant, tolerance);
}

TEST(InterferenceTest, NoneIsAlwaysOne) {
  InterferenceModel none = InterferenceModel::None();
  EXPECT_EQ(none.kind(), InterferenceModel::Kind::kNone);
  EXPECT_EQ(none.Factor(0.9, 0.9, 0.9, 0.9), 1);
}

TEST(InterferenceTest, ConstantDefaultIsEighteenPercent) {
  // seed 001 Fig. 7: 90 % of co-located pairs were slowed by less than 18 %.
  InterferenceModel c = InterferenceModel::Constant();
  EXPECT_EQ(c.kind(), InterferenceModel::Kind::kConstant);
  EXPECT_DOUBLE_EQ(c.constant_slowdown(), 1.18);
  EXPECT_DOUBLE_EQ(c.Factor(0, 0, 0, 0), 1.18);
  EXPECT_DOUBLE_EQ(InterferenceModel::Constant(1.3).Factor(0.5, 0.5, 0.5, 0.5), 1.3);
  EXPECT_DOUBLE_EQ(InterferenceModel::Constant(0.7).Factor(0.5, 0.5, 0.5, 0.5), 1);  // clamped
}

TEST(InterferenceTest, LinearFactorIsHandComputedAndClampedAtOne) {
  InterferenceModel m = InterferenceModel::Linear({0.1, 0.7, 0.3, 0.1, 0.9});
  // Factor(l2_self, dram_self, l2_other, dram_other):
  // 0.1·0.2 + 0.7·0.5 + 0.3·0.4 + 0.1·0.6 + 0.9 = 0.02 + 0.35 + 0.12 + 0.06 + 0.9 = 1.45
  EXPECT_NEAR(m.Factor(0.2, 0.4, 0.5, 0.6), 1.45, 1e-12);
  // All-zero utilisation gives 0.9 < 1: a co-runner never speeds a model up.
  EXPECT_EQ(m.Factor(0, 0, 0, 0), 1);
  EXPECT_EQ(InterferenceModel::Linear({-5, 0, 0, 0, 1}).Factor(1, 0, 0, 0), 1);
}

TEST(InterferenceTest, FactorFromProfilesScalesUtilisationByPartition) {
  // self: l2 0.4, dram 0.6 at any batch; other: l2 0.2, dram 0.8.
  ModelProfile self = testing::LinearProfileForTest("a", 1, 1, 100, 0.4, 0.6);
  ModelProfile other = testing::LinearProfileForTest("b", 1, 1, 100, 0.2, 0.8);
  InterferenceModel m = InterferenceModel::Linear({0.1, 0.7, 0.3, 0.1, 0.9});
  // self on 50 %: 0.2 / 0.3; other on 50 %: 0.1 / 0.4.
  // 0.1·0.2 + 0.7·0.1 + 0.3·0.3 + 0.1·0.4 + 0.9 = 0.02 + 0.07 + 0.09 + 0.04 + 0.9 = 1.12
  EXPECT_NEAR(m.Factor(self, 8, 50, other, 8, 50), 1.12, 1e-12);
  // self on 20 %, other on 80 %: self 0.08 / 0.12, other 0.16 / 0.64.
  // 0.008 + 0.112 + 0.036 + 0.064 + 0.9 = 1.12
  EXPECT_NEAR(m.Factor(self, 4, 20, other, 4, 80), 1.12, 1e-12);
  EXPECT_DOUBLE_EQ(InterferenceModel::Constant().Factor(self, 1, 50, other, 1, 50), 1.18);
  EXPECT_EQ(InterferenceModel::None().Factor(self, 1, 50, other, 1, 50), 1);
}

TEST(InterferenceTest, FitRecoversNoiseFreeCoefficients) {
  auto fit = FitInterference(Samples(40, 0, 7));
  ASSERT_TRUE(fit.ok()) << fit.status();
  ExpectCoefficientsNear(*fit, kTruth, 1e-6);
  // Exactly five independent samples determine the plane.
  fit = FitInterference(Samples(5, 0, 8));
  ASSERT_TRUE(fit.ok()) << fit.status();
  ExpectCoefficientsNear(*fit, kTruth, 1e-6);
}

TEST(InterferenceTest, FitRecoversNoisyCoefficientsWithinTolerance) {
  // 3 % multiplicative noise over 2,000 samples: the OLS standard error per coefficient is about
  // 0.005, so 0.03 is a loose bound that still catches a wrong fit.
  auto fit = FitInterference(Samples(2000, 0.03, 11));
  ASSERT_TRUE(fit.ok()) << fit.status();
  ExpectCoefficientsNear(*fit, kTruth, 0.03);
  // Its errors on fresh samples are about the noise level.
  std::vector<double> errors =
      RelativeErrors(InterferenceModel::Linear(*fit), Samples(500, 0.03, 12));
  std::sort(errors.begin(), errors.end());
  EXPECT_LT(errors[errors.size() * 9 / 10], 0.06);
}

TEST(InterferenceTest, FitRejectsTooFewSamples) {
  auto fit = FitInterference(Samples(4, 0, 1));
  EXPECT_EQ(fit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(fit.status().message()).find("at least 5 samples, got 4"),
            std::string::npos);
  EXPECT_FALSE(FitInterference({}).ok());
}

TEST(InterferenceTest, FitRejectsRankDeficientDesigns) {
  // One pair at one setting, measured many times: every row is the same.
  std::vector<CoLocationSample> same(20, CoLocationSample{0.3, 0.4, 0.5, 0.6, 1.2});
  auto fit = FitInterference(same);
  EXPECT_EQ(fit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(fit.status().message()).find("collinear (design rank 1 of 5)"),
            std::string::npos)
      << fit.status();
  // L2 and DRAM utilisation of self always equal: the two columns cannot be told apart.
  std::vector<CoLocationSample> tied = Samples(50, 0.01, 3);
  for (CoLocationSample& s : tied) s.dram_self = s.l2_self;
  fit = FitInterference(tied);
  EXPECT_NE(std::string(fit.status().message()).find("design rank 4 of 5"), std::string::npos)
      << fit.status();
  // A feature that never varies is collinear with the constant.
  std::vector<CoLocationSample> flat = Samples(50, 0.01, 4);
  for (CoLocationSample& s : flat) s.dram_other = 0.25;
  EXPECT_FALSE(FitInterference(flat).ok());
}

TEST(InterferenceTest, FitRejectsNonFiniteValues) {
  std::vector<CoLocationSample> samples = Samples(10, 0, 5);
  samples[3].slowdown = std::nan("");
  EXPECT_NE(std::string(FitInterference(samples).status().message()).find("sample 3"),
            std::string::npos);
}

TEST(InterferenceTest, RelativeErrorsAreHandComputed) {
  InterferenceModel m = InterferenceModel::Constant(1.2);
  std::vector<double> errors =
      RelativeErrors(m, {{0, 0, 0, 0, 1.0}, {0, 0, 0, 0, 1.5}, {0, 0, 0, 0, 1.2}});
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_NEAR(errors[0], 0.2, 1e-12);  // |1.2 − 1.0| / 1.0
  EXPECT_NEAR(errors[1], 0.2, 1e-12);  // |1.2 − 1.5| / 1.5
  EXPECT_NEAR(errors[2], 0, 1e-12);
  // The linear model's prediction is clamped before comparing: 0.5 → 1.
  errors = RelativeErrors(InterferenceModel::Linear({0, 0, 0, 0, 0.5}), {{0, 0, 0, 0, 1.25}});
  EXPECT_NEAR(errors[0], 0.2, 1e-12);
}

}  // namespace
}  // namespace tessera::scheduler
