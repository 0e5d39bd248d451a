// interference.yaml and the samples CSV: parse, write, and every error named.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/scheduler/interference.h"

namespace tessera::scheduler {
namespace {

constexpr const char* kLinear = R"(# a comment
kind: linear
synthetic: true
source: "a test"
coefficients:
  l2_self: 0.11291
  l2_other: 0.71596
  dram_self: 0.35487
  dram_other: 0.0882
  constant: 0.89537
)";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string YamlError(const std::string& text) {
  auto parsed = ParseInterferenceYaml(text, "i.yaml");
  EXPECT_FALSE(parsed.ok()) << "accepted:\n" << text;
  return std::string(parsed.status().message());
}

TEST(InterferenceYamlTest, ParsesEachKind) {
  auto linear = ParseInterferenceYaml(kLinear, "i.yaml");
  ASSERT_TRUE(linear.ok()) << linear.status();
  EXPECT_EQ(linear->kind(), InterferenceModel::Kind::kLinear);
  EXPECT_EQ(linear->coefficients().l2_other, 0.71596);
  EXPECT_EQ(linear->coefficients().constant, 0.89537);

  auto constant = ParseInterferenceYaml("kind: constant\nslowdown: 1.25\n", "i.yaml");
  ASSERT_TRUE(constant.ok()) << constant.status();
  EXPECT_EQ(constant->kind(), InterferenceModel::Kind::kConstant);
  EXPECT_EQ(constant->constant_slowdown(), 1.25);

  auto none = ParseInterferenceYaml("kind: none\nnote: isolated partitions (MIG)\n", "i.yaml");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->kind(), InterferenceModel::Kind::kNone);
}

TEST(InterferenceYamlTest, RoundTripsEachKindExactly) {
  const InterferenceCoefficients odd{1.0 / 3, -0.1 + 0.2, 2e-9, -7, 0.89537};
  for (const InterferenceModel& m :
       {InterferenceModel::Linear(odd), InterferenceModel::Constant(),
        InterferenceModel::Constant(1.0 + 1.0 / 7), InterferenceModel::None()}) {
    const std::string text =
        InterferenceToYaml(m, "fitted from x.csv\n\nsecond: line # with a hash");
    auto parsed = ParseInterferenceYaml(text, "rt.yaml");
    ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
    EXPECT_EQ(parsed->kind(), m.kind());
    EXPECT_EQ(parsed->constant_slowdown(), m.constant_slowdown());
    EXPECT_EQ(parsed->coefficients().l2_self, m.coefficients().l2_self);
    EXPECT_EQ(parsed->coefficients().l2_other, m.coefficients().l2_other);
    EXPECT_EQ(parsed->coefficients().dram_self, m.coefficients().dram_self);
    EXPECT_EQ(parsed->coefficients().dram_other, m.coefficients().dram_other);
    EXPECT_EQ(parsed->coefficients().constant, m.coefficients().constant);
    EXPECT_EQ(text.rfind("# fitted from x.csv\n#\n# second: line # with a hash\n", 0), 0u) << text;
  }
}

TEST(InterferenceYamlTest, RejectsBadFiles) {
  EXPECT_EQ(YamlError(""), "i.yaml:1: empty interference file");
  EXPECT_NE(YamlError("kind: [\n").find("YAML syntax error"), std::string::npos);
  EXPECT_EQ(YamlError("slowdown: 1.2\n"), "i.yaml:1: kind: required key is missing");
  EXPECT_EQ(YamlError("kind: quadratic\n"),
            "i.yaml:1: kind: expected one of none, constant, linear, got \"quadratic\"");
  EXPECT_NE(YamlError("kind: none\nfactor: 2\n").find("i.yaml:2: factor: unknown key"),
            std::string::npos);
  EXPECT_EQ(YamlError("kind: constant\n"), "i.yaml:1: slowdown: required key is missing");
  EXPECT_EQ(YamlError("kind: constant\nslowdown: 0.9\n"),
            "i.yaml:2: slowdown: must be in [1, 100], got 0.9");
  EXPECT_EQ(YamlError("kind: constant\nslowdown: fast\n"),
            "i.yaml:2: slowdown: expected a number, got \"fast\"");
  EXPECT_EQ(YamlError("kind: linear\nslowdown: 1.2\n"),
            "i.yaml:2: slowdown: only with kind constant (kind is linear)");
  EXPECT_EQ(YamlError("kind: none\ncoefficients: {}\n"),
            "i.yaml:2: coefficients: only with kind linear (kind is none)");
  EXPECT_EQ(YamlError("kind: linear\n"), "i.yaml:1: coefficients: required key is missing");
  EXPECT_EQ(YamlError(Replace(kLinear, "  dram_other: 0.0882\n", "")),
            "i.yaml:6: coefficients.dram_other: required key is missing");
  EXPECT_NE(YamlError(Replace(kLinear, "  constant:", "  c5:"))
                .find("i.yaml:10: coefficients.c5: unknown key"),
            std::string::npos);
  EXPECT_EQ(YamlError(Replace(kLinear, "l2_self: 0.11291", "l2_self: x")),
            "i.yaml:6: coefficients.l2_self: expected a number, got \"x\"");
  EXPECT_EQ(YamlError(Replace(kLinear, "synthetic: true", "synthetic: 1")),
            "i.yaml:3: synthetic: expected true or false, got \"1\"");
}

TEST(InterferenceFileTest, LoadMissingFileIsNotFound) {
  auto missing = LoadInterferenceFile("/nonexistent/interference.yaml");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(missing.status().message()).find("/nonexistent/interference.yaml"),
            std::string::npos);
}

std::string CsvError(const std::string& text) {
  auto parsed = ParseSamplesCsv(text, "s.csv");
  EXPECT_FALSE(parsed.ok()) << "accepted:\n" << text;
  return std::string(parsed.status().message());
}

TEST(SamplesCsvTest, ParsesRequiredAndDescriptiveColumnsInAnyOrder) {
  const std::string text =
      "# synthetic samples\r\n"
      "self_model,self_batch,self_partition,other_model,other_batch,other_partition,"
      "slowdown,l2_self,l2_other,dram_self,dram_other\r\n"
      "resnet50,8,50,vgg16,4,50,1.25,0.1,0.2,0.3,0.4\r\n"
      "\n"
      "vgg16, 4, 50, resnet50, 8, 50, 1.5 ,0.2,0.1,0.4,0.3\n";
  auto samples = ParseSamplesCsv(text, "s.csv");
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 2u);
  EXPECT_EQ((*samples)[0].l2_self, 0.1);
  EXPECT_EQ((*samples)[0].l2_other, 0.2);
  EXPECT_EQ((*samples)[0].dram_self, 0.3);
  EXPECT_EQ((*samples)[0].dram_other, 0.4);
  EXPECT_EQ((*samples)[0].slowdown, 1.25);
  EXPECT_EQ((*samples)[1].slowdown, 1.5);

  auto minimal = ParseSamplesCsv("l2_self,l2_other,dram_self,dram_other,slowdown\n", "s.csv");
  ASSERT_TRUE(minimal.ok()) << minimal.status();
  EXPECT_TRUE(minimal->empty());
}

TEST(SamplesCsvTest, RejectsBadFiles) {
  const std::string header = "l2_self,l2_other,dram_self,dram_other,slowdown\n";
  EXPECT_EQ(CsvError(""),
            "s.csv:1: no header line (expected the columns l2_self, l2_other, dram_self, "
            "dram_other, slowdown)");
  EXPECT_EQ(CsvError("# only a comment\n\n"),
            "s.csv:2: no header line (expected the columns l2_self, "
            "l2_other, dram_self, dram_other, slowdown)");
  EXPECT_NE(CsvError("l2_self,l2_other,dram_self,dram_other,slowdown,sm_util\n")
                .find("s.csv:1: column \"sm_util\": unknown column"),
            std::string::npos);
  EXPECT_EQ(CsvError("l2_self,l2_other,dram_self,slowdown\n"),
            "s.csv:1: column \"dram_other\": required column is missing from the header");
  EXPECT_EQ(CsvError("l2_self,l2_self,l2_other,dram_self,dram_other,slowdown\n"),
            "s.csv:1: column \"l2_self\": appears twice in the header");
  EXPECT_EQ(CsvError(header + "0.1,0.2,0.3,0.4\n"), "s.csv:2: has 4 fields for 5 columns");
  EXPECT_EQ(CsvError(header + "0.1,0.2,0.3,0.4,1.1,7\n"), "s.csv:2: has 6 fields for 5 columns");
  EXPECT_EQ(CsvError(header + "0.1,0.2,0.3,0.4,1.1\n# c\n0.1,high,0.3,0.4,1.1\n"),
            "s.csv:4: l2_other: expected a number, got \"high\"");
  EXPECT_EQ(CsvError(header + "0.1,0.2,1.3,0.4,1.1\n"),
            "s.csv:2: dram_self: must be in [0, 1], got 1.3");
  EXPECT_EQ(CsvError(header + "0.1,0.2,0.3,0.4,0\n"), "s.csv:2: slowdown: must be > 0, got 0");
  EXPECT_EQ(CsvError(header + "0.1,0.2,0.3,,1.1\n"),
            "s.csv:2: dram_other: expected a number, got \"\"");
  const std::string described = "self_model,self_batch,self_partition," + header;
  EXPECT_EQ(CsvError(described + ",8,50,0.1,0.2,0.3,0.4,1.1\n"), "s.csv:2: self_model: is empty");
  EXPECT_EQ(CsvError(described + "a,8.5,50,0.1,0.2,0.3,0.4,1.1\n"),
            "s.csv:2: self_batch: expected an integer in 1..1024, got \"8.5\"");
  EXPECT_EQ(CsvError(described + "a,8,120,0.1,0.2,0.3,0.4,1.1\n"),
            "s.csv:2: self_partition: expected an integer in 1..100, got \"120\"");
}

}  // namespace
}  // namespace tessera::scheduler
