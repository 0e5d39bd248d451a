#include "api_access.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http_routes.h"

namespace tessera::frontend {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ApiAccessTest, OnlyTheRestrictedGroupsNeedTheirHeader) {
  ApiAccess access({{{ApiGroup::kModelRepository, ApiGroup::kLogging}, "admin", "s3cret"},
                    {{ApiGroup::kInference}, "infer", "i"}},
                   "triton-grpc-protocol-");
  EXPECT_EQ(access.HeaderOf(ApiGroup::kHealth), nullptr);
  EXPECT_TRUE(access.Check(ApiGroup::kHealth, std::nullopt).ok());
  ASSERT_NE(access.HeaderOf(ApiGroup::kLogging), nullptr);
  EXPECT_EQ(*access.HeaderOf(ApiGroup::kLogging), "triton-grpc-protocol-admin");
  EXPECT_EQ(*access.HeaderOf(ApiGroup::kInference), "triton-grpc-protocol-infer");

  Status absent = access.Check(ApiGroup::kModelRepository, std::nullopt);
  EXPECT_EQ(absent.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(absent.message(),
            "This API (model-repository) is restricted, expecting header "
            "'triton-grpc-protocol-admin'");
  for (const char* wrong : {"", "s3cre", "s3cret ", "S3CRET", "i"}) {
    Status refused = access.Check(ApiGroup::kLogging, wrong);
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << wrong;
    EXPECT_THAT(refused.message(), AllOf(HasSubstr("another value"), Not(HasSubstr("s3cret"))));
  }
  EXPECT_TRUE(access.Check(ApiGroup::kLogging, "s3cret").ok());
  EXPECT_TRUE(access.Check(ApiGroup::kInference, "i").ok());
  EXPECT_FALSE(access.Check(ApiGroup::kInference, "s3cret").ok());
}

std::optional<ApiGroup> GroupOf(const std::string& path) {
  return HttpApiGroup(absl::StrSplit(path, '/', absl::SkipEmpty()));
}

TEST(HttpApiGroupTest, EveryRouteHasItsGroup) {
  EXPECT_EQ(GroupOf("/v2"), ApiGroup::kMetadata);
  EXPECT_EQ(GroupOf("/v2/health/live"), ApiGroup::kHealth);
  EXPECT_EQ(GroupOf("/v2/health/ready"), ApiGroup::kHealth);
  EXPECT_EQ(GroupOf("/v2/models/m"), ApiGroup::kMetadata);
  EXPECT_EQ(GroupOf("/v2/models/m/versions/2"), ApiGroup::kMetadata);
  EXPECT_EQ(GroupOf("/v2/models/m/ready"), ApiGroup::kHealth);
  EXPECT_EQ(GroupOf("/v2/models/m/versions/2/ready"), ApiGroup::kHealth);
  EXPECT_EQ(GroupOf("/v2/models/m/config"), ApiGroup::kModelConfig);
  EXPECT_EQ(GroupOf("/v2/models/m/stats"), ApiGroup::kStatistics);
  EXPECT_EQ(GroupOf("/v2/models/stats"), ApiGroup::kStatistics);
  EXPECT_EQ(GroupOf("/v2/models/m/infer"), ApiGroup::kInference);
  EXPECT_EQ(GroupOf("/v2/models/m/versions/1/infer"), ApiGroup::kInference);
  EXPECT_EQ(GroupOf("/v2/models/m/trace/setting"), ApiGroup::kTrace);
  EXPECT_EQ(GroupOf("/v2/trace/setting"), ApiGroup::kTrace);
  EXPECT_EQ(GroupOf("/v2/logging"), ApiGroup::kLogging);
  EXPECT_EQ(GroupOf("/v2/repository/index"), ApiGroup::kModelRepository);
  EXPECT_EQ(GroupOf("/v2/repository/models/m/load"), ApiGroup::kModelRepository);
  EXPECT_EQ(GroupOf("/v2/systemsharedmemory/region/r/register"), ApiGroup::kSharedMemory);
  EXPECT_EQ(GroupOf("/v2/cudasharedmemory/status"), ApiGroup::kSharedMemory);
  // Paths no route answers (404 for everyone).
  EXPECT_EQ(GroupOf("/"), std::nullopt);
  EXPECT_EQ(GroupOf("/v1/models/m"), std::nullopt);
  EXPECT_EQ(GroupOf("/v2/elsewhere"), std::nullopt);
  EXPECT_EQ(GroupOf("/v2/models/m/unknown"), std::nullopt);
  EXPECT_EQ(GroupOf("/v2/models/m/versions/1/infer/more"), std::nullopt);
}

}  // namespace
}  // namespace tessera::frontend
