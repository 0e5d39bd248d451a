#include "http_compression.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera::frontend {
namespace {

TEST(HttpCompressionTest, RoundTripsBothEncodings) {
  std::string body;
  for (int i = 0; i < 20000; ++i) body += std::to_string(i % 97) + ",";
  for (HttpEncoding encoding : {HttpEncoding::kGzip, HttpEncoding::kDeflate}) {
    const std::string packed = Deflate(body, encoding);
    EXPECT_LT(packed.size(), body.size() / 2) << EncodingName(encoding);
    auto unpacked = Inflate(packed, encoding, 1 << 20);
    ASSERT_TRUE(unpacked.ok()) << unpacked.status();
    EXPECT_EQ(*unpacked, body);
  }
  EXPECT_EQ(Deflate("abc", HttpEncoding::kIdentity), "abc");
}

TEST(HttpCompressionTest, BadDataAndBombsAreRefused) {
  const std::string packed = Deflate(std::string(100000, 'a'), HttpEncoding::kGzip);
  auto bomb = Inflate(packed, HttpEncoding::kGzip, 4096);
  ASSERT_FALSE(bomb.ok());
  EXPECT_EQ(bomb.status().code(), absl::StatusCode::kResourceExhausted);

  auto truncated = Inflate(packed.substr(0, packed.size() - 5), HttpEncoding::kGzip, 1 << 20);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("not valid gzip data"), std::string::npos);
  auto garbage = Inflate("not compressed at all", HttpEncoding::kDeflate, 1 << 20);
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument);
  // gzip data sent as deflate (a zlib stream) is refused too: the header differs.
  EXPECT_FALSE(Inflate(packed, HttpEncoding::kDeflate, 1 << 20).ok());
}

TEST(HttpCompressionTest, InflationStaysWithinItsBudget) {
  const std::string body(1 << 20, 'a');
  const std::string packed = Deflate(body, HttpEncoding::kGzip);
  InflateBudget budget(5 << 19);  // 2.5 MiB: one 1 MiB body (1.5 MiB while it grew), not two
  {
    InflateHold first(&budget);
    auto inflated = Inflate(packed, HttpEncoding::kGzip, 8 << 20, &first);
    ASSERT_TRUE(inflated.ok()) << inflated.status();
    EXPECT_EQ(*inflated, body);
    // The hold keeps the inflated body's memory (and the copy while it grew) until dropped.
    EXPECT_GE(budget.in_use(), int64_t{1} << 20);
    EXPECT_LE(budget.in_use(), budget.limit());

    // A second body of the same size finds no room while the first is held.
    InflateHold second(&budget);
    auto refused =
        Inflate(packed, HttpEncoding::kGzip, 8 << 20, &second, "request message", "grpc-encoding");
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(refused.status().message().find("grpc.max_inflating_bytes"), std::string::npos);
  }
  EXPECT_EQ(budget.in_use(), 0);  // both holds gave everything back
  InflateHold again(&budget);
  EXPECT_TRUE(Inflate(packed, HttpEncoding::kGzip, 8 << 20, &again).ok());
}

TEST(HttpCompressionTest, HeadersAreRead) {
  EXPECT_EQ(*ParseContentEncoding(nullptr), HttpEncoding::kIdentity);
  EXPECT_EQ(*ParseContentEncoding(" GZIP "), HttpEncoding::kGzip);
  EXPECT_EQ(*ParseContentEncoding("deflate"), HttpEncoding::kDeflate);
  auto br = ParseContentEncoding("br");
  ASSERT_FALSE(br.ok());
  EXPECT_EQ(br.status().code(), absl::StatusCode::kUnimplemented);

  EXPECT_EQ(ChooseResponseEncoding(nullptr), HttpEncoding::kIdentity);
  EXPECT_EQ(ChooseResponseEncoding("br, deflate;q=0.5, gzip"), HttpEncoding::kDeflate);
  EXPECT_EQ(ChooseResponseEncoding("gzip;q=0, deflate"), HttpEncoding::kDeflate);
  EXPECT_EQ(ChooseResponseEncoding("identity"), HttpEncoding::kIdentity);
}

}  // namespace
}  // namespace tessera::frontend
