#include "tessera/common/bytes_tensor.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

std::string Serialize(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& e : elements) AppendBytesElement(e, &out);
  return out;
}

TEST(BytesTensorTest, RoundTripsElementsIncludingEmptyAndBinary) {
  const std::vector<std::string> elements = {"", "abc", std::string("\0\xff", 2), "x"};
  const std::string bytes = Serialize(elements);
  EXPECT_EQ(bytes.size(), 4u * 4 + 0 + 3 + 2 + 1);
  EXPECT_EQ(bytes.substr(4, 4), std::string("\x03\0\0\0", 4));  // little-endian length of "abc"
  auto split = SplitBytesElements(bytes.data(), bytes.size());
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->size(), elements.size());
  for (size_t i = 0; i < elements.size(); ++i) EXPECT_EQ((*split)[i], elements[i]);
  auto offsets = BytesElementOffsets(bytes.data(), bytes.size());
  ASSERT_TRUE(offsets.ok());
  EXPECT_EQ(*offsets, (std::vector<size_t>{0, 4, 11, 17, 22}));
}

TEST(BytesTensorTest, EmptyDataHoldsNoElements) {
  auto offsets = BytesElementOffsets(nullptr, 0);
  ASSERT_TRUE(offsets.ok());
  EXPECT_EQ(*offsets, std::vector<size_t>{0});
  EXPECT_TRUE(CheckBytesElements("input 'x'", nullptr, 0, 0).ok());
}

TEST(BytesTensorTest, RefusesCutOffPrefixAndOverlongLength) {
  std::string bytes = Serialize({"ab"});
  bytes.append("\x01\0", 2);  // half a length prefix
  auto cut = BytesElementOffsets(bytes.data(), bytes.size());
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cut.status().message().find("element 1 at byte 6"), std::string::npos) << cut.status();

  const std::string overlong("\x10\0\0\0abc", 7);  // says 16 bytes, has 3
  auto over = SplitBytesElements(overlong.data(), overlong.size());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("16 bytes but only 3 follow"), std::string::npos)
      << over.status();
}

TEST(BytesTensorTest, CheckNamesTheTensorAndBothCounts) {
  const std::string bytes = Serialize({"a", "b", "c"});
  EXPECT_TRUE(CheckBytesElements("input 'text'", bytes.data(), bytes.size(), 3).ok());
  Status wrong = CheckBytesElements("input 'text'", bytes.data(), bytes.size(), 4);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find("input 'text'"), std::string::npos);
  EXPECT_NE(wrong.message().find("hold 3 elements, the shape needs 4"), std::string::npos) << wrong;
  Status broken = CheckBytesElements("input 'text'", bytes.data(), bytes.size() - 1, 3);
  EXPECT_NE(broken.message().find("input 'text': BYTES element 2"), std::string::npos) << broken;
}

}  // namespace
}  // namespace tessera
