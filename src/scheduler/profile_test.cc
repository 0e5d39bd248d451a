#include "tessera/scheduler/profile.h"

#include "gtest/gtest.h"
#include "profile_fixtures_for_test.h"

namespace tessera::scheduler {
namespace {

ModelProfile::Table SmallTable() {
  ModelProfile::Table t;
  t.partitions_pct = {50, 100};
  t.batches = {1, 4};
  t.latency_ms = {{4, 10}, {2, 6}};
  return t;
}

TEST(ProfileTest, InterpolatesOverBatchAndPartition) {
  auto p = ModelProfile::Create("m", "d", SmallTable(), 10, {}, false);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->LatencyMs(1, 100), 2);
  EXPECT_DOUBLE_EQ(p->LatencyMs(4, 50), 10);
  EXPECT_DOUBLE_EQ(p->LatencyMs(2, 100), 2 + (6 - 2) / 3.0);   // batch 2 of 1..4
  EXPECT_DOUBLE_EQ(p->LatencyMs(1, 75), 3);                      // midway 50..100
  EXPECT_DOUBLE_EQ(p->LatencyMs(1, 25), 4 * 50 / 25.0);          // stretched below 50 %
  EXPECT_EQ(p->max_batch(), 4);
}

TEST(ProfileTest, UtilisationScalesWithPartition) {
  auto p = ModelProfile::Create("m", "d", SmallTable(), 10, {{1, 0.2, 0.4}, {4, 0.8, 1.0}}, false);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->L2Util(1, 100), 0.2);
  EXPECT_DOUBLE_EQ(p->L2Util(4, 50), 0.4);
  EXPECT_NEAR(p->DramUtil(2, 100), 0.6, 1e-12);
}

TEST(ProfileTest, RejectsBadTables) {
  auto t = SmallTable();
  t.partitions_pct = {50, 90};
  EXPECT_EQ(ModelProfile::Create("m", "d", t, 1, {}, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  t = SmallTable();
  t.latency_ms[1][1] = 20;  // slower with more compute
  auto bad = ModelProfile::Create("m", "d", t, 1, {}, false);
  EXPECT_NE(bad.status().message().find("rises"), std::string::npos) << bad.status();
  t = SmallTable();
  t.latency_ms[0].pop_back();
  EXPECT_FALSE(ModelProfile::Create("m", "d", t, 1, {}, false).ok());
  t = SmallTable();
  t.latency_ms[0][0] = 0;
  EXPECT_FALSE(ModelProfile::Create("m", "d", t, 1, {}, false).ok());
  EXPECT_FALSE(ModelProfile::Create("m", "d", SmallTable(), 1, {{1, 1.5, 0}}, false).ok());
}

TEST(ProfileTest, SetFindsByNameAndRejectsDuplicates) {
  ProfileSet set(DeviceInfo{"test-gpu", 11000, true});
  ASSERT_TRUE(set.Add(testing::LinearProfileForTest("a", 1, 1)).ok());
  EXPECT_FALSE(set.Add(testing::LinearProfileForTest("a", 1, 1)).ok());
  EXPECT_FALSE(set.Add(testing::LinearProfileForTest("b", 1, 1, 100, 0.3, 0.3, "other")).ok());
  EXPECT_NE(set.Find("a"), nullptr);
  auto missing = set.Get("zzz");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("zzz"), std::string::npos);
}

}  // namespace
}  // namespace tessera::scheduler
