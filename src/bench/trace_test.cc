#include "trace.h"

#include "gtest/gtest.h"

namespace tessera::bench {
namespace {

TEST(TraceTest, ReplayIsFaithful) {
  auto trace = ParseTrace(
      "# comment\n"
      "time_s,model\n"
      "0.5,b\n"
      "0.000001,a\n"
      "\n"
      "1.25,a\n"
      "2.000000001,a\n"
      "3,b\n",
      "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->at("a"), (std::vector<int64_t>{1'000, 1'250'000'000, 2'000'000'001}));
  EXPECT_EQ(trace->at("b"), (std::vector<int64_t>{500'000'000, 3'000'000'000}));
  // Replay sends exactly these offsets; the window cuts the tail; speedup compresses time.
  EXPECT_EQ(ReplayOffsets(*trace, "a", 1, 10), trace->at("a"));
  EXPECT_EQ(ReplayOffsets(*trace, "a", 1, 2), (std::vector<int64_t>{1'000, 1'250'000'000}));
  EXPECT_EQ(ReplayOffsets(*trace, "b", 2, 10), (std::vector<int64_t>{250'000'000, 1'500'000'000}));
  EXPECT_TRUE(ReplayOffsets(*trace, "c", 1, 10).empty());
  // Format and parse round-trip to the nanosecond.
  auto again = ParseTrace(FormatTrace(*trace), "again");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *trace);
}

TEST(TraceTest, ErrorsNameFileAndLine) {
  auto no_header = ParseTrace("0.1,a\n", "x.csv");
  ASSERT_FALSE(no_header.ok());
  EXPECT_EQ(no_header.status().message(), "x.csv:1: expected the header line \"time_s,model\"");
  auto bad_time = ParseTrace("time_s,model\n0.1,a\nsoon,a\n", "x.csv");
  ASSERT_FALSE(bad_time.ok());
  EXPECT_NE(bad_time.status().message().find("x.csv:3: time_s must be a number"),
            absl::string_view::npos);
  EXPECT_FALSE(ParseTrace("time_s,model\n-1,a\n", "x").ok());
  EXPECT_FALSE(ParseTrace("time_s,model\n1,\n", "x").ok());
  EXPECT_FALSE(ParseTrace("time_s,model\n1,a,b\n", "x").ok());
  EXPECT_EQ(LoadTrace("/nonexistent/trace.csv").status().code(), absl::StatusCode::kNotFound);
}

std::string AzureCsv() {
  std::string header = "HashOwner,HashApp,HashFunction,Trigger";
  for (int m = 1; m <= 4; ++m) header += "," + std::to_string(m);
  return header + "\n" +
         "o1,a1,f1,http,10,20,0,0\n"
         "o2,a2,f2,timer,1,1,1,1\n"
         "o3,a3,f3,queue,0,0,0,0\n"
         "o4,a4,f4,http,30,0,0,5\n";
}

TEST(AzureTraceTest, KeepsCountsPerMinuteAndMapsFunctionsByWeight) {
  AzureConvertOptions opt;
  opt.first_minute = 1;
  opt.minutes = 4;
  opt.models = {{"big", 2}, {"small", 1}};
  auto r = ConvertAzureFunctionsTrace(AzureCsv(), "az.csv", opt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->functions_used, 3);  // f3 has no invocations
  EXPECT_EQ(r->source_invocations, 30 + 35 + 4);
  EXPECT_DOUBLE_EQ(r->scale, 1);
  // Busiest first: f4 (35) -> big, f1 (30) -> small (big already has its share), f2 (4) -> big.
  const auto& big = r->trace.at("big");
  const auto& small = r->trace.at("small");
  EXPECT_EQ(big.size(), 35u + 4u);
  EXPECT_EQ(small.size(), 30u);
  // f1's 10 + 20 per minute land in minutes 0 and 1.
  int minute0 = 0, minute1 = 0;
  for (int64_t t : small) (t < 60'000'000'000 ? minute0 : minute1) += 1;
  EXPECT_EQ(minute0, 10);
  EXPECT_EQ(minute1, 20);
  for (size_t i = 1; i < big.size(); ++i) EXPECT_LE(big[i - 1], big[i]);
}

TEST(AzureTraceTest, ScalesToTargetRateAndSelectsMinutesAndFunctions) {
  AzureConvertOptions opt;
  opt.first_minute = 2;
  opt.minutes = 3;
  opt.functions = 1;
  opt.target_rate = 0.1;  // 18 requests over 3 minutes
  opt.models = {{"m", 1}};
  auto r = ConvertAzureFunctionsTrace(AzureCsv(), "az.csv", opt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source_invocations, 20);  // f1 in minutes 2..4 (f4 has 5)
  EXPECT_DOUBLE_EQ(r->scale, 18.0 / 20);
  const auto& m = r->trace.at("m");
  EXPECT_GE(m.size(), 17u);  // 20 * 0.9: exact, random rounding only on the fraction
  EXPECT_LE(m.size(), 19u);
  for (int64_t t : m) EXPECT_LT(t, 60'000'000'000);  // all of f1's minute-2 calls -> minute 0
}

TEST(AzureTraceTest, BadInputsAreNamed) {
  AzureConvertOptions opt;
  opt.models = {{"m", 1}};
  opt.minutes = 4;
  EXPECT_NE(ConvertAzureFunctionsTrace("a,b,c\n1,2,3\n", "x.csv", opt)
                .status()
                .message()
                .find("not an Azure Functions invocation trace"),
            absl::string_view::npos);
  opt.minutes = 10;
  EXPECT_NE(ConvertAzureFunctionsTrace(AzureCsv(), "x.csv", opt)
                .status()
                .message()
                .find("minute columns"),
            absl::string_view::npos);
  opt.minutes = 4;
  std::string broken = AzureCsv() + "o5,a5,f5,http,1,x,1,1\n";
  EXPECT_NE(ConvertAzureFunctionsTrace(broken, "x.csv", opt).status().message().find("x.csv:6:"),
            absl::string_view::npos);
  opt.models.clear();
  EXPECT_FALSE(ConvertAzureFunctionsTrace(AzureCsv(), "x.csv", opt).ok());
}

}  // namespace
}  // namespace tessera::bench
