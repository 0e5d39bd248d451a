#include "tessera/common/yaml_util.h"

#include <array>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::yaml {
namespace {

using ::testing::HasSubstr;

YAML::Node Parse(const std::string& text) {
  StatusOr<YAML::Node> node = ParseDocument(text, "t.yaml");
  EXPECT_TRUE(node.ok()) << node.status();
  return node.ok() ? *node : YAML::Node();
}

TEST(YamlUtilTest, IntegersAreStrict) {
  YAML::Node doc = Parse("a: +7\nb: 9223372036854775808\nc: 0x10\nd: 1e3\ne: ' 12 '\nf: \"\"\n");
  EXPECT_EQ(*ReadInt("t.yaml", doc["a"], "a", 0, 10), 7);
  Status overflow = ReadInt("t.yaml", doc["b"], "b", 0, INT64_MAX).status();
  EXPECT_THAT(std::string(overflow.message()), HasSubstr("t.yaml:2: b: expected an integer"));
  EXPECT_FALSE(ReadInt("t.yaml", doc["c"], "c", 0, 100).ok());
  EXPECT_FALSE(ReadInt("t.yaml", doc["d"], "d", 0, 10000).ok());
  EXPECT_EQ(*ReadInt("t.yaml", doc["e"], "e", 0, 100), 12);
  EXPECT_FALSE(ReadInt("t.yaml", doc["f"], "f", 0, 100).ok());
}

TEST(YamlUtilTest, DoublesRejectNonFinite) {
  YAML::Node doc = Parse("a: 2.5\nb: nan\nc: 1e400\nd: 3\n");
  EXPECT_DOUBLE_EQ(*ReadDouble("t.yaml", doc["a"], "a", 0, 10), 2.5);
  EXPECT_FALSE(ReadDouble("t.yaml", doc["b"], "b", 0, 10).ok());
  EXPECT_FALSE(ReadDouble("t.yaml", doc["c"], "c", 0, 1e9).ok());
  EXPECT_DOUBLE_EQ(*ReadDouble("t.yaml", doc["d"], "d", 0, 10), 3);
}

// Strings end up in protobuf string fields, which must be UTF-8.
TEST(YamlUtilTest, StringsMustBeUtf8) {
  YAML::Node doc = Parse("a: caf\xC3\xA9\nb: bad\xFF\xFEname\nc: [1]\n");
  EXPECT_EQ(*ReadString("t.yaml", doc["a"], "a"), "caf\xC3\xA9");
  Status bad = ReadString("t.yaml", doc["b"], "b").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("t.yaml:2: b: is not valid UTF-8 text"));
  EXPECT_FALSE(ReadString("t.yaml", doc["c"], "c").ok());
}

TEST(YamlUtilTest, BoolsAndDescribe) {
  YAML::Node doc = Parse("a: true\nb: False\nc: yes\nd: [1]\ne: {x: 1}\nf:\n");
  EXPECT_TRUE(*ReadBool("t.yaml", doc["a"], "a"));
  EXPECT_FALSE(*ReadBool("t.yaml", doc["b"], "b"));
  EXPECT_THAT(std::string(ReadBool("t.yaml", doc["c"], "c").status().message()),
              HasSubstr("t.yaml:3: c: expected true or false, got \"yes\""));
  EXPECT_EQ(Describe(doc["d"]), "a list");
  EXPECT_EQ(Describe(doc["e"]), "a map");
  EXPECT_EQ(Describe(doc["f"]), "null");
  EXPECT_EQ(Describe(YAML::Node(std::string(100, 'x'))).size(), 60u + 5u);
}

TEST(YamlUtilTest, MapChecksKeysAtCreation) {
  constexpr std::array<std::string_view, 2> kKeys = {"a", "b"};
  YAML::Node doc = Parse("a: 1\n\nc: 2\n");
  StatusOr<YamlMap> map = YamlMap::Create("t.yaml", doc, "root", kKeys);
  ASSERT_FALSE(map.ok());
  EXPECT_THAT(std::string(map.status().message()),
              HasSubstr("t.yaml:3: root.c: unknown key (known: a, b)"));

  map = YamlMap::Create("t.yaml", Parse("a: 1\nb: 2\n"), "", kKeys);
  ASSERT_TRUE(map.ok());
  int a = 0;
  int64_t b = 0;
  int64_t untouched = 42;
  EXPECT_TRUE(map->GetInt("a", 0, 10, &a).ok());
  EXPECT_TRUE(map->GetInt("b", 0, 10, &b).ok());
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 2);
  EXPECT_EQ(map->KeyLine("b"), 2);
  EXPECT_FALSE(map->Has("c"));
  EXPECT_TRUE(map->GetInt("c", 0, 10, &untouched).ok());
  EXPECT_EQ(untouched, 42);
  EXPECT_THAT(std::string(map->Missing("zz").message()), HasSubstr("t.yaml:1: zz: required"));

  // int fields are range-checked against int even when the caller allows more.
  map = YamlMap::Create("t.yaml", Parse("a: 4294967296\n"), "", kKeys);
  ASSERT_TRUE(map.ok());
  EXPECT_FALSE(map->GetInt("a", 0, INT64_MAX, &a).ok());

  // A null value reads as an empty map.
  map = YamlMap::Create("t.yaml", Parse("x:\n")["x"], "x", kKeys);
  EXPECT_TRUE(map.ok());
}

TEST(YamlUtilTest, SyntaxErrorLine) {
  StatusOr<YAML::Node> node = ParseDocument("a: 1\nb: [1, 2\n", "t.yaml");
  ASSERT_FALSE(node.ok());
  EXPECT_THAT(std::string(node.status().message()), HasSubstr("t.yaml:"));
  EXPECT_THAT(std::string(node.status().message()), HasSubstr("YAML syntax error"));
  node = ParseDocument("a: 1\na b: : :\n  - x\n", "t.yaml");
  ASSERT_FALSE(node.ok());
  EXPECT_THAT(std::string(node.status().message()), HasSubstr("t.yaml:"));
}

}  // namespace
}  // namespace tessera::yaml
