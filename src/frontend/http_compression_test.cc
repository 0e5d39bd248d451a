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
