#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "profile_fixtures_for_test.h"
#include "tessera/scheduler/profile.h"
#include "yaml_text.h"

namespace tessera::scheduler {
namespace {

namespace fs = std::filesystem;

// A valid two-partition, three-batch profile; tests replace one line to break it.
constexpr const char* kValid = R"(model: m
device: gpu
synthetic: true
source: "hand-written for a test"
memory_mb: 100
latency_ms:
  partitions: [50, 100]
  batches: [1, 2, 4]
  rows:
    - [4, 6, 10]
    - [2, 3, 5]
utilisation:
  - {batch: 1, l2: 0.1, dram: 0.2}
  - {batch: 4, l2: 0.3, dram: 0.4}
)";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// Parses `text` and expects an INVALID_ARGUMENT whose message contains `expected`.
void ExpectError(const std::string& text, const std::string& expected) {
  auto parsed = ParseProfileYaml(text, "p.yaml");
  ASSERT_FALSE(parsed.ok()) << "accepted:\n" << text;
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(parsed.status().message()).find(expected), std::string::npos)
      << "got: " << parsed.status() << "\nwanted: " << expected;
}

TEST(ProfileYamlTest, ParsesAValidFile) {
  auto p = ParseProfileYaml(kValid, "p.yaml");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->model(), "m");
  EXPECT_EQ(p->device(), "gpu");
  EXPECT_TRUE(p->synthetic());
  EXPECT_EQ(p->memory_mb(), 100);
  EXPECT_DOUBLE_EQ(p->LatencyMs(2, 50), 6);
  EXPECT_DOUBLE_EQ(p->LatencyMs(4, 100), 5);
  EXPECT_DOUBLE_EQ(p->LatencyMs(3, 100), 4);  // halfway between batches 2 and 4
  ASSERT_EQ(p->utilisation().size(), 2u);
  EXPECT_DOUBLE_EQ(p->utilisation()[1].dram_util, 0.4);
}

TEST(ProfileYamlTest, OptionalKeysDefault) {
  std::string text = Replace(kValid, "synthetic: true\n", "");
  text = Replace(text, "source: \"hand-written for a test\"\n", "note: anything at all\n");
  text = text.substr(0, text.find("utilisation:"));
  auto p = ParseProfileYaml(text, "p.yaml");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->synthetic());
  EXPECT_TRUE(p->utilisation().empty());
}

void ExpectSameProfile(const ModelProfile& a, const ModelProfile& b) {
  EXPECT_EQ(a.model(), b.model());
  EXPECT_EQ(a.device(), b.device());
  EXPECT_EQ(a.synthetic(), b.synthetic());
  EXPECT_EQ(a.memory_mb(), b.memory_mb());
  EXPECT_EQ(a.table().partitions_pct, b.table().partitions_pct);
  EXPECT_EQ(a.table().batches, b.table().batches);
  EXPECT_EQ(a.table().latency_ms, b.table().latency_ms);  // bit-exact
  ASSERT_EQ(a.utilisation().size(), b.utilisation().size());
  for (size_t i = 0; i < a.utilisation().size(); ++i) {
    EXPECT_EQ(a.utilisation()[i].batch, b.utilisation()[i].batch);
    EXPECT_EQ(a.utilisation()[i].l2_util, b.utilisation()[i].l2_util);
    EXPECT_EQ(a.utilisation()[i].dram_util, b.utilisation()[i].dram_util);
  }
}

TEST(ProfileYamlTest, RoundTripsExactly) {
  // 1/3-ish values have no short decimal form: the writer must still give back the same bits.
  for (const ModelProfile& original :
       {testing::LinearProfileForTest("resnet50", 1.0 / 3, 0.7, 1820.5, 0.31, 0.1 + 0.2),
        testing::KneeProfileForTest("odd name: \"x\"", 2.1, 0.37, 40, 0, "dev ice")}) {
    const std::string text = ProfileToYaml(original, "made by a \"test\"\nsecond line");
    auto parsed = ParseProfileYaml(text, "roundtrip.yaml");
    ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
    ExpectSameProfile(original, *parsed);
    for (int b : {1, 7, 32}) {
      for (int p : {10, 20, 45, 100}) EXPECT_EQ(original.LatencyMs(b, p), parsed->LatencyMs(b, p));
    }
    // Writing the parsed profile again gives the same text.
    EXPECT_EQ(ProfileToYaml(*parsed, "made by a \"test\"\nsecond line"), text);
  }
}

TEST(ProfileYamlTest, WrittenFileIsReadable) {
  const std::string text = ProfileToYaml(testing::LinearProfileForTest("lenet", 1, 0.5));
  EXPECT_NE(text.find("# SYNTHETIC"), std::string::npos);
  EXPECT_NE(text.find("model: lenet\n"), std::string::npos);
  EXPECT_NE(text.find("  partitions: [20, 40, 50, 60, 80, 100]\n"), std::string::npos);
  EXPECT_NE(text.find("    # partition 20 %\n    - [7.5, 10, 12.5,"), std::string::npos) << text;
  EXPECT_NE(text.find("  - {batch: 1, l2: 0.3, dram: 0.3}\n"), std::string::npos);
  EXPECT_EQ(text.find("source:"), std::string::npos);
}

TEST(ProfileYamlTest, NumbersAndStringsAreWrittenShortAndSafe) {
  EXPECT_EQ(FormatYamlNumber(12), "12");
  EXPECT_EQ(FormatYamlNumber(0.1), "0.1");
  EXPECT_EQ(FormatYamlNumber(1e-7), "1e-07");
  EXPECT_EQ(QuoteYamlString("resnet50"), "resnet50");
  EXPECT_EQ(QuoteYamlString("synthetic-2080ti"), "synthetic-2080ti");
  EXPECT_EQ(QuoteYamlString("true"), "\"true\"");
  EXPECT_EQ(QuoteYamlString("2080ti"), "\"2080ti\"");
  EXPECT_EQ(QuoteYamlString("a: b"), "\"a: b\"");
  EXPECT_EQ(QuoteYamlString("say \"hi\"\\"), "\"say \\\"hi\\\"\\\\\"");
  EXPECT_EQ(QuoteYamlString(""), "\"\"");
}

TEST(ProfileYamlTest, RejectsBrokenYamlAndEmptyFiles) {
  ExpectError("model: [unclosed\n", "p.yaml:");
  ExpectError("model: [unclosed\n", "YAML syntax error");
  ExpectError("", "p.yaml:1: empty profile file");
  ExpectError("- a\n- b\n", "p.yaml:1: expected a map, got a list");
}

TEST(ProfileYamlTest, RejectsUnknownAndDuplicateKeys) {
  ExpectError(Replace(kValid, "memory_mb:", "memroy_mb:"), "p.yaml:5: memroy_mb: unknown key");
  ExpectError(Replace(kValid, "  batches:", "  batch:"), "p.yaml:8: latency_ms.batch: unknown key");
  ExpectError(Replace(kValid, "{batch: 4, l2: 0.3,", "{batch: 4, l3: 0.3,"),
              "p.yaml:14: utilisation[1].l3: unknown key");
  ExpectError(Replace(kValid, "memory_mb: 100\n", "memory_mb: 100\nmemory_mb: 200\n"),
              "p.yaml:6: memory_mb: duplicate key (first at line 5)");
}

TEST(ProfileYamlTest, RejectsMissingRequiredKeys) {
  ExpectError(Replace(kValid, "model: m\n", ""), "p.yaml:1: model: required key is missing");
  ExpectError(Replace(kValid, "device: gpu\n", ""), "device: required key is missing");
  ExpectError(Replace(kValid, "memory_mb: 100\n", ""), "memory_mb: required key is missing");
  ExpectError(Replace(kValid, "  batches: [1, 2, 4]\n", ""),
              "p.yaml:7: latency_ms.batches: required key is missing");
  ExpectError(Replace(kValid, "  - {batch: 4, l2: 0.3, dram: 0.4}", "  - {batch: 4, l2: 0.3}"),
              "p.yaml:14: utilisation[1].dram: required key is missing");
  std::string no_table = kValid;
  no_table = no_table.substr(0, no_table.find("latency_ms:"));
  ExpectError(no_table, "latency_ms: required key is missing");
}

TEST(ProfileYamlTest, RejectsWrongTypes) {
  ExpectError(Replace(kValid, "memory_mb: 100", "memory_mb: lots"),
              "p.yaml:5: memory_mb: expected a number, got \"lots\"");
  ExpectError(Replace(kValid, "synthetic: true", "synthetic: maybe"),
              "p.yaml:3: synthetic: expected true or false");
  ExpectError(Replace(kValid, "model: m", "model: [a, b]"), "p.yaml:1: model: expected a string");
  ExpectError(Replace(kValid, "model: m", "model: \"\""), "p.yaml:1: model: is empty");
  ExpectError(Replace(kValid, "source: \"hand-written for a test\"", "source: {a: 1}"),
              "p.yaml:4: source: expected a string, got a map");
  ExpectError(Replace(kValid, "  partitions: [50, 100]", "  partitions: 100"),
              "p.yaml:7: latency_ms.partitions: expected a list");
  ExpectError(Replace(kValid, "[4, 6, 10]", "[4, six, 10]"),
              "p.yaml:10: latency_ms.rows[0][1]: expected a number, got \"six\"");
  ExpectError(Replace(kValid, "  batches: [1, 2, 4]", "  batches: [1, 2.5, 4]"),
              "p.yaml:8: latency_ms.batches[1]: expected an integer");
  const std::string text = kValid;
  ExpectError(text.substr(0, text.find("latency_ms:")) + "latency_ms: 3\n",
              "p.yaml:6: latency_ms: expected a map, got \"3\"");
  ExpectError(text.substr(0, text.find("utilisation:")) + "utilisation: high\n",
              "p.yaml:12: utilisation: expected a list, got \"high\"");
}

TEST(ProfileYamlTest, RejectsBadAxes) {
  ExpectError(Replace(kValid, "[50, 100]", "[100, 50]"),
              "p.yaml:7: latency_ms.partitions[1]: must be strictly ascending: 50 follows 100");
  ExpectError(Replace(kValid, "[50, 100]", "[50, 90]"),
              "p.yaml:7: latency_ms.partitions: must include 100");
  ExpectError(Replace(kValid, "[50, 100]", "[0, 100]"),
              "latency_ms.partitions[0]: must be 1..100, got 0");
  ExpectError(Replace(kValid, "[50, 100]", "[50, 120]"),
              "latency_ms.partitions[1]: must be 1..100, got 120");
  ExpectError(Replace(kValid, "[1, 2, 4]", "[2, 3, 4]"),
              "p.yaml:8: latency_ms.batches: must include batch 1");
  ExpectError(Replace(kValid, "[1, 2, 4]", "[1, 4, 4]"),
              "latency_ms.batches[2]: must be strictly ascending: 4 follows 4");
  ExpectError(Replace(kValid, "[1, 2, 4]", "[]"), "latency_ms.batches: must not be empty");
}

TEST(ProfileYamlTest, RejectsRaggedAndBadTables) {
  ExpectError(Replace(kValid, "    - [2, 3, 5]\n", ""),
              "p.yaml:10: latency_ms.rows: has 1 rows for 2 partitions");
  ExpectError(Replace(kValid, "[2, 3, 5]", "[2, 3]"),
              "p.yaml:11: latency_ms.rows[1]: row for partition 100 % has 2 values for 3 batches");
  ExpectError(Replace(kValid, "[2, 3, 5]", "[2, 3, 5, 6]"), "has 4 values for 3 batches");
  ExpectError(Replace(kValid, "[2, 3, 5]", "[2, 0, 5]"),
              "p.yaml:11: latency_ms.rows[1][1]: latency must be > 0 ms");
  ExpectError(Replace(kValid, "[2, 3, 5]", "[2, -3, 5]"), "latency_ms.rows[1][1]: must be in [0,");
  ExpectError(Replace(kValid, "[2, 3, 5]", "[2, 3, 11]"),
              "p.yaml:11: latency_ms.rows[1][2]: batch 4 takes 11 ms at 100 %, more than 5 % "
              "above its 10 ms at 50 %");
  // Within 5 % is measurement noise and accepted.
  EXPECT_TRUE(ParseProfileYaml(Replace(kValid, "[2, 3, 5]", "[2, 3, 10.4]"), "p.yaml").ok());
  ExpectError(Replace(kValid, "[2, 3, 5]", "[[2], 3, 5]"),
              "latency_ms.rows[1][0]: expected a number");
}

TEST(ProfileYamlTest, RejectsBadUtilisation) {
  ExpectError(Replace(kValid, "l2: 0.3", "l2: 1.3"),
              "p.yaml:14: utilisation[1].l2: must be in [0, 1], got 1.3");
  ExpectError(Replace(kValid, "dram: 0.2", "dram: -0.2"), "utilisation[0].dram: must be in [0, 1]");
  ExpectError(Replace(kValid, "{batch: 4,", "{batch: 1,"),
              "p.yaml:14: utilisation[1].batch: batches must be strictly ascending: 1 follows 1");
  ExpectError(Replace(kValid, "{batch: 4,", "{batch: 0,"), "utilisation[1].batch: must be 1..1024");
  ExpectError(Replace(kValid, "  - {batch: 1, l2: 0.1, dram: 0.2}", "  - 7"),
              "p.yaml:13: utilisation[0]: expected a map");
}

TEST(DeviceYamlTest, ParsesAndRoundTrips) {
  auto d = ParseDeviceYaml("name: rtx\nmemory_mb: 11000\nsynthetic: true\nnote: x\n", "d.yaml");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->name, "rtx");
  EXPECT_EQ(d->memory_mb, 11000);
  EXPECT_TRUE(d->synthetic);
  auto again = ParseDeviceYaml(DeviceToYaml(*d, "from a test"), "d2.yaml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->name, "rtx");
  EXPECT_EQ(again->memory_mb, 11000);
  EXPECT_TRUE(again->synthetic);
}

TEST(DeviceYamlTest, RejectsBadFiles) {
  auto error = [](const std::string& text) {
    return std::string(ParseDeviceYaml(text, "d.yaml").status().message());
  };
  EXPECT_EQ(error("memory_mb: 1\n"), "d.yaml:1: name: required key is missing");
  EXPECT_EQ(error("name: a\n"), "d.yaml:1: memory_mb: required key is missing");
  EXPECT_EQ(error("name: a\nmemory_mb: 0\n"), "d.yaml:2: memory_mb: must be > 0, got 0");
  EXPECT_NE(error("name: a\nmemory_mb: 1\nsms: 68\n").find("d.yaml:3: sms: unknown key"),
            std::string::npos);
  EXPECT_EQ(error(""), "d.yaml:1: empty device file");
}

// A scratch directory removed when the test ends.
class ProfileDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera_profiles_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  void WriteValidSet() {
    Write("device.yaml", "name: gpu\nmemory_mb: 11000\n");
    Write("a.yaml", Replace(kValid, "model: m", "model: a"));
    Write("b.yaml", Replace(kValid, "model: m", "model: b"));
    Write("interference.yaml", "not: a profile\n");
    Write("interference_truth.yaml", "not: a profile either\n");
    Write("samples.csv", "l2_self\n");
    Write("README.md", "# notes\n");
  }
  fs::path dir_;
};

TEST_F(ProfileDirTest, LoadsEveryProfileAndSkipsTheRest) {
  WriteValidSet();
  auto set = ProfileSet::LoadDirectory(dir_);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->device().name, "gpu");
  EXPECT_EQ(set->device().memory_mb, 11000);
  EXPECT_EQ(set->models(), (std::vector<std::string>{"a", "b"}));
}

TEST_F(ProfileDirTest, MissingDirectoryOrDeviceIsNotFound) {
  auto missing = ProfileSet::LoadDirectory(dir_ / "nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(missing.status().message()).find("nope"), std::string::npos);
  Write("a.yaml", kValid);
  auto no_device = ProfileSet::LoadDirectory(dir_);
  EXPECT_EQ(no_device.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(no_device.status().message()).find("device.yaml"), std::string::npos);
}

TEST_F(ProfileDirTest, ErrorsNameTheFile) {
  WriteValidSet();
  Write("b.yaml", Replace(Replace(kValid, "model: m", "model: b"), "[2, 3, 5]", "[2, 3]"));
  auto bad = ProfileSet::LoadDirectory(dir_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find((dir_ / "b.yaml").string() + ":11:"),
            std::string::npos)
      << bad.status();

  WriteValidSet();
  Write("c.yaml", Replace(kValid, "model: m", "model: a"));  // a second profile of a, misnamed
  bad = ProfileSet::LoadDirectory(dir_);
  EXPECT_NE(std::string(bad.status().message()).find("c.yaml: holds the profile of model 'a'"),
            std::string::npos)
      << bad.status();

  WriteValidSet();
  fs::remove(dir_ / "c.yaml");
  Write("b.yaml", Replace(Replace(kValid, "model: m", "model: b"), "device: gpu", "device: tpu"));
  bad = ProfileSet::LoadDirectory(dir_);
  EXPECT_NE(
      std::string(bad.status().message()).find("b.yaml: profile of model 'b' is for device 'tpu'"),
      std::string::npos)
      << bad.status();

  WriteValidSet();
  Write("device.yaml", "name: gpu\n");
  bad = ProfileSet::LoadDirectory(dir_);
  EXPECT_NE(std::string(bad.status().message()).find("device.yaml:1: memory_mb: required"),
            std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace tessera::scheduler
