#include "baseline_planners.h"

#include "gtest/gtest.h"

namespace tessera::scheduler {
namespace {
TEST(BaselinePlannersTest, Placeholder) {}
}  // namespace
}  // namespace tessera::scheduler
