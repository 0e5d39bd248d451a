// The input mirror's bookkeeping (which staged ranges tile a batch, and the latest of them) and
// the host mirror. The CUDA mirror shares StagedRanges; it runs on a GPU in the server tests.
#include "executor/input_mirror.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::executor {
namespace {

TEST(StagedRangesTest, ABatchIsReadyWithTheLatestOfItsSlotsWhateverTheirOrder) {
  StagedRanges staged;
  // Three requests of 64 bytes at 0, 64, 128, staged out of slot order (several gRPC threads).
  staged.Add(64, 64, 1);
  staged.Add(128, 64, 2);
  staged.Add(0, 64, 3);
  EXPECT_EQ(staged.LatestCovering(0, 192), 3u);
  EXPECT_EQ(staged.LatestCovering(64, 128), 2u);
  EXPECT_EQ(staged.LatestCovering(64, 64), 1u);
}

TEST(StagedRangesTest, GapsPartialSlotsAndOverrunsAreNotCovered) {
  StagedRanges staged;
  staged.Add(0, 64, 1);
  staged.Add(128, 64, 2);
  EXPECT_FALSE(staged.LatestCovering(0, 192).has_value());    // 64..128 never staged
  EXPECT_FALSE(staged.LatestCovering(0, 32).has_value());     // half a request
  EXPECT_FALSE(staged.LatestCovering(32, 32).has_value());    // starts inside one
  EXPECT_FALSE(staged.LatestCovering(128, 128).has_value());  // runs past the last
  EXPECT_FALSE(staged.LatestCovering(0, 0).has_value());
}

TEST(StagedRangesTest, RestagingOverwritesOverlappedRangesAndDropForgetsThem) {
  StagedRanges staged;
  staged.Add(0, 64, 1);
  staged.Add(64, 64, 2);
  staged.Add(128, 64, 3);
  // The ring wrapped: a larger request now starts at 32 and covers parts of the first two.
  staged.Add(32, 64, 4);
  EXPECT_FALSE(staged.LatestCovering(0, 64).has_value());
  EXPECT_FALSE(staged.LatestCovering(64, 64).has_value());
  EXPECT_EQ(staged.LatestCovering(32, 64), 4u);
  EXPECT_EQ(staged.LatestCovering(128, 64), 3u);
  EXPECT_EQ(staged.size(), 2u);
  staged.Drop(90, 40);  // a copy that failed over the end of one and the start of the next
  EXPECT_EQ(staged.size(), 0u);
}

TEST(HostInputMirrorTest, ViewsTheCopyMadeAtStagingNotTheRingsLaterBytes) {
  std::vector<char> ring(256, 0);
  auto mirror = MakeHostInputMirror(ring.data(), ring.size());
  std::memset(ring.data() + 64, 'a', 64);
  ASSERT_TRUE(mirror->Stage(64, 64).ok());
  std::memset(ring.data() + 64, 'b', 64);  // the ring changes after staging
  auto view = mirror->View(64, 64);
  ASSERT_TRUE(view.has_value());
  EXPECT_FALSE(view->on_device);
  EXPECT_EQ(view->ready, nullptr);
  EXPECT_EQ(static_cast<const char*>(view->data)[0], 'a');
  EXPECT_NE(view->data, ring.data() + 64);
  EXPECT_FALSE(mirror->View(0, 64).has_value());  // never staged
  Status outside = mirror->Stage(200, 64);
  EXPECT_EQ(outside.code(), absl::StatusCode::kOutOfRange) << outside;
  EXPECT_NE(std::string(outside.message()).find("256-byte input ring"), std::string::npos);
}

}  // namespace
}  // namespace tessera::executor
