#include "stats.h"

#include "gtest/gtest.h"

namespace tessera::bench {
namespace {

TEST(PercentileTest, NearestRankOnHandComputedCases) {
  std::vector<int64_t> ten = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(Percentile(ten, 50), 5);   // rank ceil(5) = 5
  EXPECT_EQ(Percentile(ten, 90), 9);   // rank 9
  EXPECT_EQ(Percentile(ten, 99), 10);  // rank ceil(9.9) = 10
  EXPECT_EQ(Percentile(ten, 10), 1);
  EXPECT_EQ(Percentile(ten, 11), 2);  // rank ceil(1.1) = 2
  EXPECT_EQ(Percentile(ten, 100), 10);
  EXPECT_EQ(Percentile({42}, 50), 42);
  EXPECT_EQ(Percentile({}, 99), 0);
  std::vector<int64_t> thousand;
  for (int i = 1; i <= 1000; ++i) thousand.push_back(i);
  EXPECT_EQ(Percentile(thousand, 99.9), 999);  // rank 999, not 1000 despite float error
  EXPECT_EQ(Percentile(thousand, 99), 990);
  EXPECT_EQ(Percentile(thousand, 50), 500);
  std::vector<int64_t> three = {10, 20, 30};
  EXPECT_EQ(Percentile(three, 50), 20);  // rank ceil(1.5) = 2
  EXPECT_EQ(Percentile(three, 34), 20);  // rank ceil(1.02) = 2
  EXPECT_EQ(Percentile(three, 33), 10);  // rank ceil(0.99) = 1
}

TEST(PercentileTest, SummarySortsAndConvertsToMs) {
  LatencySummary s = SummarizeLatencies({5'000'000, 1'000'000, 3'000'000, 2'000'000, 4'000'000});
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.min_ms, 1);
  EXPECT_DOUBLE_EQ(s.p50_ms, 3);
  EXPECT_DOUBLE_EQ(s.p90_ms, 5);
  EXPECT_DOUBLE_EQ(s.max_ms, 5);
  EXPECT_DOUBLE_EQ(s.mean_ms, 3);
}

Outcome Make(int model, int64_t scheduled_ms, int code, double latency_ms = 1) {
  Outcome o;
  o.model = model;
  o.scheduled_ns = scheduled_ms * 1'000'000;
  o.code = code;
  if (code != kNotSent) {
    o.sent_ns = o.scheduled_ns;
    if (code != kUnfinished) o.done_ns = o.sent_ns + static_cast<int64_t>(latency_ms * 1e6);
  }
  return o;
}

TEST(SummarizeTest, EveryRequestIsAccountedForAndErrorsAreByStatus) {
  std::vector<Outcome> outcomes = {
      Make(0, 100, 0, 5),   // ok within SLO 10 ms
      Make(0, 200, 0, 20),  // ok, violates the SLO
      Make(0, 300, 5),      // NOT_FOUND
      Make(0, 400, 14),     // UNAVAILABLE
      Make(0, 500, 14),     // UNAVAILABLE
      Make(0, 600, kNotSent), Make(0, 700, kUnfinished), Make(1, 800, 0, 1),  // the other model
      Make(0, 50, 0, 1),    // warm-up: not counted
      Make(0, 1000, 0, 1),  // after the window: not counted
  };
  SummaryOptions opt;
  opt.measure_begin_ns = 100'000'000;
  opt.measure_end_ns = 1'000'000'000;
  auto s = Summarize(outcomes, {"a", "b"}, {10, 0}, opt);
  ASSERT_EQ(s.size(), 3u);
  const Summary& a = s[0];
  EXPECT_EQ(a.model, "a");
  EXPECT_EQ(a.intended, 7);
  EXPECT_EQ(a.sent, 6);
  EXPECT_EQ(a.ok, 2);
  EXPECT_EQ(a.within_slo, 1);
  EXPECT_EQ(a.error_count, 3);
  EXPECT_EQ(a.errors.at("NOT_FOUND"), 1);
  EXPECT_EQ(a.errors.at("UNAVAILABLE"), 2);
  EXPECT_EQ(a.not_sent, 1);
  EXPECT_EQ(a.unfinished, 1);
  EXPECT_EQ(a.ok + a.error_count + a.not_sent + a.unfinished, a.intended);
  EXPECT_NEAR(a.violation_pct, 100.0 * 6 / 7, 1e-9);
  EXPECT_NEAR(a.throughput, 2 / 0.9, 1e-9);
  EXPECT_NEAR(a.goodput, 1 / 0.9, 1e-9);
  EXPECT_EQ(s[1].intended, 1);
  EXPECT_EQ(s[1].within_slo, 1);  // no SLO: every success is good
  const Summary& all = s[2];
  EXPECT_EQ(all.model, "overall");
  EXPECT_EQ(all.intended, 8);
  EXPECT_EQ(all.error_count, 3);
  EXPECT_EQ(all.errors.at("UNAVAILABLE"), 2);
}

TEST(SummarizeTest, LateSendsAreCounted) {
  Outcome o = Make(0, 100, 0, 1);
  o.sent_ns += 3'000'000;  // 3 ms late
  o.done_ns += 3'000'000;
  SummaryOptions opt;
  opt.measure_end_ns = 1'000'000'000;
  auto s = Summarize({o, Make(0, 200, 0, 1)}, {"a"}, {0}, opt);
  EXPECT_EQ(s[0].late_sends, 1);
  EXPECT_NEAR(s[0].send_lag_max_ms, 3, 1e-9);
}

TEST(OutcomeCodeNameTest, Names) {
  EXPECT_EQ(OutcomeCodeName(0), "OK");
  EXPECT_EQ(OutcomeCodeName(4), "DEADLINE_EXCEEDED");
  EXPECT_EQ(OutcomeCodeName(14), "UNAVAILABLE");
  EXPECT_EQ(OutcomeCodeName(kNotSent), "CLIENT_DROPPED");
  EXPECT_EQ(OutcomeCodeName(kUnfinished), "UNFINISHED");
}

TEST(TimelineTest, BucketsBySecond) {
  std::vector<Outcome> outcomes = {Make(0, 100, 0, 1), Make(0, 1500, 0, 1), Make(0, 1600, 14)};
  auto points = Timeline(outcomes, {"a"}, {10});
  // Seconds 0 and 1, for "a" and "overall".
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].second, 0);
  EXPECT_EQ(points[0].ok, 1);
  EXPECT_EQ(points[2].second, 1);
  EXPECT_EQ(points[2].model, "a");
  EXPECT_EQ(points[2].ok, 1);
  EXPECT_EQ(points[2].errors, 1);
}

}  // namespace
}  // namespace tessera::bench
