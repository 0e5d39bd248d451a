#include "peak_search.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tessera::bench {
namespace {

TEST(PeakSearchTest, FindsTheKneeOfAStepFunction) {
  // Violations jump above 1 % past factor 3.7.
  int calls = 0;
  auto probe = [&](double f) -> StatusOr<double> {
    ++calls;
    return f <= 3.7 ? 0.2 : 30.0;
  };
  PeakSearchOptions opt;
  opt.repeats = 3;
  opt.tolerance = 0.02;
  auto r = PeakSearch(opt, probe);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LE(r->peak_factor, 3.7);
  EXPECT_GT(r->failing_factor, 3.7);
  EXPECT_LE((r->failing_factor - r->peak_factor) / r->peak_factor, 0.02);
  EXPECT_EQ(calls, static_cast<int>(r->probes.size()) * 3);
}

TEST(PeakSearchTest, SearchesDownwardWhenTheStartFails) {
  auto probe = [](double f) -> StatusOr<double> { return f <= 0.3 ? 0.0 : 5.0; };
  auto r = PeakSearch({}, probe);
  ASSERT_TRUE(r.ok());
  EXPECT_LE(r->peak_factor, 0.3);
  EXPECT_GT(r->peak_factor, 0.3 / 1.06);
}

TEST(PeakSearchTest, MedianIgnoresOneNoisyRun) {
  int call = 0;
  // Every probe's second run is bad; the median of three still passes below the knee at 2.
  auto probe = [&](double f) -> StatusOr<double> {
    return (call++ % 3 == 1) ? 50.0 : (f <= 2 ? 0.0 : 50.0);
  };
  auto r = PeakSearch({}, probe);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->peak_factor, 1.8);
  EXPECT_LE(r->peak_factor, 2);
}

TEST(PeakSearchTest, ProbeErrorsStopTheSearch) {
  auto probe = [](double) -> StatusOr<double> { return absl::UnavailableError("server gone"); };
  EXPECT_EQ(PeakSearch({}, probe).status().code(), absl::StatusCode::kUnavailable);
  PeakSearchOptions bad;
  bad.repeats = 0;
  EXPECT_FALSE(PeakSearch(bad, probe).ok());
}

TEST(MedianTest, OddAndEven) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({}), 0);
}

}  // namespace
}  // namespace tessera::bench
