#include "interference_fit.h"

#include <cmath>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::scheduler {
namespace {

// Samples told apart by their slowdown 1, 2, ..., n.
std::vector<CoLocationSample> Numbered(int n) {
  std::vector<CoLocationSample> samples;
  for (int i = 1; i <= n; ++i) samples.push_back({0, 0, 0, 0, static_cast<double>(i)});
  return samples;
}

std::multiset<double> Slowdowns(const std::vector<CoLocationSample>& samples) {
  std::multiset<double> values;
  for (const CoLocationSample& s : samples) values.insert(s.slowdown);
  return values;
}

TEST(InterferenceFitTest, SplitsLikeThePaper) {
  // seed 001 §4.4: 2,500 samples → 1,750 train / 750 validation.
  auto split = SplitSamples(Numbered(2500), 0.7, 1);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->train.size(), 1750u);
  EXPECT_EQ(split->validation.size(), 750u);
  // A partition of the input: every sample exactly once.
  std::multiset<double> all = Slowdowns(split->train);
  for (double v : Slowdowns(split->validation)) all.insert(v);
  EXPECT_EQ(all, Slowdowns(Numbered(2500)));
  // Shuffled, not the first 1,750.
  EXPECT_LT(*Slowdowns(split->validation).begin(), 1751);
}

TEST(InterferenceFitTest, SplitIsSeeded) {
  auto a = SplitSamples(Numbered(100), 0.7, 42);
  auto b = SplitSamples(Numbered(100), 0.7, 42);
  auto c = SplitSamples(Numbered(100), 0.7, 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::vector<double> va, vb, vc;
  for (const auto& s : a->train) va.push_back(s.slowdown);
  for (const auto& s : b->train) vb.push_back(s.slowdown);
  for (const auto& s : c->train) vc.push_back(s.slowdown);
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
}

TEST(InterferenceFitTest, SplitEdgesAndErrors) {
  auto all = SplitSamples(Numbered(10), 1.0, 1);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->train.size(), 10u);
  EXPECT_TRUE(all->validation.empty());
  EXPECT_EQ(SplitSamples(Numbered(3), 0.5, 1)->train.size(), 2u);  // round(1.5) = 2
  EXPECT_FALSE(SplitSamples(Numbered(10), 0, 1).ok());
  EXPECT_FALSE(SplitSamples(Numbered(10), 1.5, 1).ok());
  EXPECT_FALSE(SplitSamples(Numbered(10), std::nan(""), 1).ok());
}

TEST(InterferenceFitTest, PercentileIsNearestRank) {
  const std::vector<double> v = {5, 1, 4, 2, 3, 10, 9, 8, 7, 6};  // 1..10, unsorted
  EXPECT_EQ(Percentile(v, 0.5), 5);
  EXPECT_EQ(Percentile(v, 0.9), 9);
  EXPECT_EQ(Percentile(v, 0.95), 10);
  EXPECT_EQ(Percentile(v, 0.91), 10);
  EXPECT_EQ(Percentile(v, 0), 1);
  EXPECT_EQ(Percentile(v, 1), 10);
  EXPECT_TRUE(std::isnan(Percentile({}, 0.5)));
}

}  // namespace
}  // namespace tessera::scheduler
