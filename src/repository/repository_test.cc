#include "tessera/repository/repository.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tessera/common/bytes_tensor.h"
#include "tessera/repository/model_completion.h"

namespace tessera::repository {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string ConfigText(const std::string& name, const std::string& extra = "") {
  return "name: " + name + R"(
max_batch_size: 4
input: [{ name: x, data_type: TYPE_FP32, dims: [4] }]
output: [{ name: y, data_type: TYPE_FP32, dims: [2] }]
)" + extra;
}

// A fresh repository folder per test under gtest's temp dir.
class RepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::path(::testing::TempDir()) / "tessera_repository_test" / info->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const fs::path& relative, const std::string& text) {
    fs::path path = root_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
  }
  // A model folder with config.yaml and the given version folders holding model.onnx.
  void AddModel(const std::string& name, std::initializer_list<int> versions,
                const std::string& config_extra = "") {
    Write(fs::path(name) / "config.yaml", ConfigText(name, config_extra));
    for (int v : versions) Write(fs::path(name) / std::to_string(v) / "model.onnx", "onnx-bytes");
  }
  std::string root() const { return root_.string(); }

  fs::path root_;
};

TEST_F(RepositoryTest, MissingRootIsNotFound) {
  StatusOr<RepositorySnapshot> snapshot = ScanRepository(root() + "/nope");
  ASSERT_FALSE(snapshot.ok());
  EXPECT_EQ(snapshot.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(snapshot.status().message()), HasSubstr(root() + "/nope"));

  Write("file", "x");
  snapshot = ScanRepository(root() + "/file");
  ASSERT_FALSE(snapshot.ok());
  EXPECT_EQ(snapshot.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(RepositoryTest, EmptyRepository) {
  StatusOr<RepositorySnapshot> snapshot = ScanRepository(root());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_THAT(snapshot->models, IsEmpty());
  EXPECT_THAT(snapshot->roots, ElementsAre(root()));
}

TEST_F(RepositoryTest, LatestPolicyDefaultPicksHighest) {
  AddModel("mlp", {1, 2, 3});
  StatusOr<RepositorySnapshot> snapshot = ScanRepository(root());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ASSERT_EQ(snapshot->models.size(), 1u);
  const ModelEntry& m = snapshot->models[0];
  ASSERT_TRUE(m.config.ok()) << m.config.status();
  EXPECT_EQ(m.name, "mlp");
  EXPECT_EQ(m.path, (root_ / "mlp").string());
  ASSERT_EQ(m.versions.size(), 3u);
  EXPECT_EQ(m.versions[0].version, 1);
  EXPECT_EQ(m.versions[2].version, 3);
  EXPECT_EQ(m.versions[2].model_path, (root_ / "mlp" / "3" / "model.onnx").string());
  EXPECT_EQ(m.versions[2].file_bytes, 10u);
  EXPECT_THAT(m.selected_versions, ElementsAre(3));
  EXPECT_TRUE(CheckServable(m).ok());
}

TEST_F(RepositoryTest, EachVersionPolicy) {
  AddModel("latest2", {1, 2, 3}, "version_policy: { latest: { num_versions: 2 } }\n");
  AddModel("latest9", {1, 2, 3}, "version_policy: { latest: { num_versions: 9 } }\n");
  AddModel("all", {1, 2, 3}, "version_policy: { all: {} }\n");
  AddModel("specific", {1, 2, 3}, "version_policy: { specific: { versions: [3, 1, 7] } }\n");
  AddModel("nothing", {1, 2, 3}, "version_policy: { specific: { versions: [5] } }\n");
  StatusOr<RepositorySnapshot> snapshot = ScanRepository(root());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ASSERT_EQ(snapshot->models.size(), 5u);
  EXPECT_EQ(snapshot->models[0].name, "all");  // sorted by name

  EXPECT_THAT(snapshot->Find("latest2")->selected_versions, ElementsAre(2, 3));
  EXPECT_THAT(snapshot->Find("latest9")->selected_versions, ElementsAre(1, 2, 3));
  EXPECT_THAT(snapshot->Find("all")->selected_versions, ElementsAre(1, 2, 3));
  const ModelEntry* specific = snapshot->Find("specific");
  EXPECT_THAT(specific->selected_versions, ElementsAre(1, 3));
  EXPECT_THAT(specific->missing_versions, ElementsAre(7));
  EXPECT_TRUE(CheckServable(*specific).ok());

  const ModelEntry* nothing = snapshot->Find("nothing");
  EXPECT_THAT(nothing->selected_versions, IsEmpty());
  Status servable = CheckServable(*nothing);
  EXPECT_EQ(servable.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(servable.message()), HasSubstr("nothing"));
  EXPECT_EQ(snapshot->Find("absent"), nullptr);
}

TEST_F(RepositoryTest, SelectVersionsDirectly) {
  VersionPolicy latest;
  latest.latest_num_versions = 2;
  EXPECT_THAT(SelectVersions(latest, {1, 5, 9}), ElementsAre(5, 9));
  EXPECT_THAT(SelectVersions(latest, {}), IsEmpty());
  VersionPolicy specific;
  specific.kind = VersionPolicy::Kind::kSpecific;
  specific.specific_versions = {9, 2};
  EXPECT_THAT(SelectVersions(specific, {1, 2, 5, 9}), ElementsAre(2, 9));
}

TEST_F(RepositoryTest, IgnoresNonVersionFoldersAndHiddenEntries) {
  AddModel("mlp", {2, 10});
  Write("mlp/latest/model.onnx", "x");  // not numeric
  Write("mlp/0/model.onnx", "x");       // zero is not a version
  Write("mlp/007/model.onnx", "x");     // leading zero
  Write("mlp/3a/model.onnx", "x");      // not numeric
  Write("mlp/4/other.onnx", "x");       // no model file
  Write("mlp/11", "a file, not a folder");
  Write(".hidden/config.yaml", ConfigText(".hidden"));
  Write(".git/HEAD", "ref");
  Write("README.md", "a file at the root is not a model");
  StatusOr<RepositorySnapshot> snapshot = ScanRepository(root());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ASSERT_EQ(snapshot->models.size(), 1u);
  const ModelEntry& m = snapshot->models[0];
  ASSERT_EQ(m.versions.size(), 2u);
  EXPECT_EQ(m.versions[0].version, 2);
  EXPECT_EQ(m.versions[1].version, 10);  // numeric order, not "10" < "2"
  EXPECT_THAT(m.selected_versions, ElementsAre(10));
}

TEST_F(RepositoryTest, DefaultModelFilenameIsLookedFor) {
  AddModel("net", {}, "default_model_filename: net.onnx\n");
  Write("net/1/model.onnx", "x");
  Write("net/2/net.onnx", "x");
  StatusOr<RepositorySnapshot> snapshot = ScanRepository(root());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  const ModelEntry* m = snapshot->Find("net");
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->versions.size(), 1u);
  EXPECT_EQ(m->versions[0].version, 2);
}

TEST_F(RepositoryTest, BrokenConfigIsRecordedPerModel) {
  AddModel("good", {1});
  Write("broken/config.yaml", "name: broken\nmax_batch_size: eight\n");
  Write("broken/1/model.onnx", "x");
  Write("misnamed/config.yaml", ConfigText("other"));
  Write("noconfig/1/model.onnx", "x");
  Write("nomodel/readme.txt", "x");
  StatusOr<RepositorySnapshot> snapshot = ScanRepository(root());
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ASSERT_EQ(snapshot->models.size(), 5u);

  EXPECT_TRUE(snapshot->Find("good")->config.ok());
  EXPECT_THAT(snapshot->Find("good")->selected_versions, ElementsAre(1));

  const ModelEntry* broken = snapshot->Find("broken");
  ASSERT_FALSE(broken->config.ok());
  EXPECT_EQ(broken->config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(broken->config.status().message()),
              HasSubstr((root_ / "broken" / "config.yaml").string() + ":2: max_batch_size"));
  EXPECT_THAT(broken->selected_versions, IsEmpty());
  EXPECT_EQ(CheckServable(*broken), broken->config.status());

  const ModelEntry* misnamed = snapshot->Find("misnamed");
  ASSERT_FALSE(misnamed->config.ok());
  EXPECT_THAT(std::string(misnamed->config.status().message()),
              HasSubstr("\"other\" does not match the model folder \"misnamed\""));

  // Model files without a config: the config is completed from the model file at load.
  const ModelEntry* noconfig = snapshot->Find("noconfig");
  ASSERT_TRUE(noconfig->config.ok()) << noconfig->config.status();
  EXPECT_EQ(noconfig->config->name, "noconfig");
  EXPECT_TRUE(NeedsCompletion(*noconfig->config));
  EXPECT_THAT(noconfig->selected_versions, ElementsAre(1));

  // Neither a config nor a model file: not a model.
  const ModelEntry* nomodel = snapshot->Find("nomodel");
  ASSERT_FALSE(nomodel->config.ok());
  EXPECT_EQ(nomodel->config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(nomodel->config.status().message()), HasSubstr("config.yaml"));
  EXPECT_THAT(std::string(nomodel->config.status().message()), HasSubstr("config.pbtxt"));
  EXPECT_THAT(std::string(nomodel->config.status().message()), HasSubstr("<version>/model.onnx"));
}

TEST_F(RepositoryTest, TritonConfigPbtxtIsServedAndEditsArePickedUp) {
  const std::string pbtxt = R"(name: "triton_mlp"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "input", data_type: TYPE_FP32, dims: [ 64 ] } ]
output [ { name: "output", data_type: TYPE_FP32, dims: [ 10 ] } ]
instance_group [ { kind: KIND_CPU } ]
)";
  Write("triton_mlp/config.pbtxt", pbtxt);
  Write("triton_mlp/1/model.onnx", "x");
  Write("triton_mlp/2/model.onnx", "x");
  StatusOr<RepositorySnapshot> before = ScanRepository(root());
  ASSERT_TRUE(before.ok()) << before.status();
  const ModelEntry* m = before->Find("triton_mlp");
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->config.ok()) << m->config.status();
  EXPECT_EQ(m->config->max_batch_size, 4);
  EXPECT_THAT(m->selected_versions, ElementsAre(2));
  EXPECT_TRUE(CheckServable(*m).ok());

  Write("triton_mlp/config.pbtxt", pbtxt + "version_policy { all {} }\n");
  StatusOr<RepositorySnapshot> after = ScanRepository(root());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(Diff(*before, *after).changed, ElementsAre("triton_mlp"));
  EXPECT_THAT(after->Find("triton_mlp")->selected_versions, ElementsAre(1, 2));

  // A broken config.pbtxt is this model's error, with the file and line.
  Write("triton_mlp/config.pbtxt", pbtxt + "dynamic_batching { max_queue_delay: 5 }\n");
  StatusOr<ModelEntry> broken = ScanModel(root(), "triton_mlp");
  ASSERT_TRUE(broken.ok()) << broken.status();
  ASSERT_FALSE(broken->config.ok());
  EXPECT_THAT(std::string(broken->config.status().message()),
              HasSubstr((root_ / "triton_mlp" / "config.pbtxt").string() + ":7:"));
}

TEST_F(RepositoryTest, ALoadRequestsConfigReplacesTheFoldersConfigFile) {
  AddModel("m", {1, 2});  // config.yaml: max_batch_size 4, latest version
  const std::string json = R"({"max_batch_size": 2, "version_policy": {"all": {}},
    "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
    "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [2],
                "label_filename": "labels.txt"}]})";
  Write("m/labels.txt", "a\nb\n");
  StatusOr<ModelEntry> entry = ScanModelFolderWithConfig((root_ / "m").string(), "m", json);
  ASSERT_TRUE(entry.ok()) << entry.status();
  ASSERT_TRUE(entry->config.ok()) << entry->config.status();
  EXPECT_EQ(entry->config->name, "m");
  EXPECT_EQ(entry->config->max_batch_size, 2);
  EXPECT_THAT(entry->selected_versions, ElementsAre(1, 2));
  ASSERT_NE(entry->config->outputs[0].labels, nullptr);  // read from the folder
  EXPECT_THAT(*entry->config->outputs[0].labels, ElementsAre("a", "b"));
  EXPECT_TRUE(CheckServable(*entry).ok());
  StatusOr<ModelEntry> from_file = ScanModel(root(), "m");
  ASSERT_TRUE(from_file.ok());
  EXPECT_NE(from_file->fingerprint, entry->fingerprint);

  // A broken one is the entry's error, naming the request rather than a file.
  StatusOr<ModelEntry> broken =
      ScanModelFolderWithConfig((root_ / "m").string(), "m", R"({"max_batch_size": -1})");
  ASSERT_TRUE(broken.ok()) << broken.status();
  ASSERT_FALSE(broken->config.ok());
  EXPECT_THAT(std::string(broken->config.status().message()),
              HasSubstr("the load request's 'config': max_batch_size"));
  EXPECT_EQ(ScanModelFolderWithConfig((root_ / "none").string(), "m", "{}").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ScanModelFolderWithConfig((root_ / "m").string(), "../m", "{}").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RepositoryTest, SeveralRepositoriesAreScannedAsOne) {
  auto add = [&](const std::string& root, const std::string& name, int version) {
    Write(fs::path(root) / name / "config.yaml", ConfigText(name));
    Write(fs::path(root) / name / std::to_string(version) / "model.onnx", "onnx-bytes");
  };
  add("a", "only_in_a", 1);
  add("b", "only_in_b", 1);
  add("a", "in_both", 1);
  add("b", "in_both", 2);
  const std::vector<std::string> roots = {(root_ / "a").string(), (root_ / "b").string()};
  StatusOr<RepositorySnapshot> scan = ScanRepositories(roots);
  ASSERT_TRUE(scan.ok()) << scan.status();
  std::vector<std::string> names;
  for (const ModelEntry& m : scan->models) names.push_back(m.name);
  EXPECT_THAT(names, ElementsAre("in_both", "only_in_a", "only_in_b"));
  EXPECT_EQ(scan->Find("only_in_b")->path, (root_ / "b" / "only_in_b").string());
  EXPECT_TRUE(CheckServable(*scan->Find("only_in_b")).ok());
  // A name in two of them is that model's error, naming both folders; the others serve.
  const ModelEntry* both = scan->Find("in_both");
  ASSERT_FALSE(both->config.ok());
  EXPECT_THAT(std::string(both->config.status().message()),
              AllOf(HasSubstr("more than one model repository"),
                    HasSubstr((root_ / "a" / "in_both").string()),
                    HasSubstr((root_ / "b" / "in_both").string())));

  StatusOr<ModelEntry> found = FindModel(roots, "only_in_b");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_THAT(found->selected_versions, ElementsAre(1));
  EXPECT_EQ(FindModel(roots, "in_both").status().code(), absl::StatusCode::kInvalidArgument);
  StatusOr<ModelEntry> missing = FindModel(roots, "nowhere");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("not found in repositories '" + roots[0] + "', '" + roots[1] + "'"));

  // A root that is not there fails the whole scan, as with one root.
  EXPECT_EQ(ScanRepositories({roots[0], root() + "/nope"}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RepositoryTest, AConfigNameSelectsAFoldersCustomConfig) {
  AddModel("custom", {1});  // config.yaml: max_batch_size 4
  AddModel("plain", {1});
  Write("custom/configs/h100.pbtxt", R"(name: "custom"
max_batch_size: 16
input [ { name: "x", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "y", data_type: TYPE_FP32, dims: [ 2 ] } ]
)");
  Write("custom/configs/cpu.yaml", ConfigText("custom", "dynamic_batching: {}\n"));
  StatusOr<RepositorySnapshot> h100 = ScanRepositories({root()}, {.config_name = "h100"});
  ASSERT_TRUE(h100.ok()) << h100.status();
  ASSERT_TRUE(h100->Find("custom")->config.ok()) << h100->Find("custom")->config.status();
  EXPECT_EQ(h100->Find("custom")->config->max_batch_size, 16);
  EXPECT_EQ(h100->Find("plain")->config->max_batch_size, 4);  // no configs/h100.*: its own
  StatusOr<ModelEntry> cpu = FindModel({root()}, "custom", {.config_name = "cpu"});
  ASSERT_TRUE(cpu.ok() && cpu->config.ok());
  EXPECT_EQ(cpu->config->max_batch_size, 4);
  EXPECT_TRUE(cpu->config->dynamic_batching.enabled);
  StatusOr<ModelEntry> none = FindModel({root()}, "custom", {.config_name = "a100"});
  ASSERT_TRUE(none.ok() && none->config.ok());
  EXPECT_FALSE(none->config->dynamic_batching.enabled);  // config.yaml
  StatusOr<RepositorySnapshot> plain = ScanRepository(root());
  EXPECT_NE(plain->Find("custom")->fingerprint, h100->Find("custom")->fingerprint);

  // Its errors name the custom file; both forms of one name is an error naming both.
  Write("custom/configs/h100.pbtxt", "max_batch_size: -3\n");
  StatusOr<ModelEntry> broken = FindModel({root()}, "custom", {.config_name = "h100"});
  ASSERT_TRUE(broken.ok());
  EXPECT_THAT(std::string(broken->config.status().message()),
              HasSubstr((root_ / "custom" / "configs" / "h100.pbtxt").string() + ":1:"));
  Write("custom/configs/cpu.pbtxt", "max_batch_size: 2\n");
  StatusOr<ModelEntry> twice = FindModel({root()}, "custom", {.config_name = "cpu"});
  ASSERT_TRUE(twice.ok());
  EXPECT_THAT(std::string(twice->config.status().message()),
              HasSubstr("configs/cpu.pbtxt are there; keep one of them"));
}

TEST_F(RepositoryTest, WarmupDataFilesAreReadFromTheWarmupFolder) {
  const std::string config = ConfigText("warm", R"(model_warmup:
  - name: real
    batch_size: 2
    inputs:
      x: {data_type: TYPE_FP32, dims: [4], input_data_file: row.bin}
)");
  Write("warm/config.yaml", config);
  Write("warm/1/model.onnx", "x");
  Write("warm/warmup/row.bin", std::string(16, '\1'));
  StatusOr<ModelEntry> entry = ScanModel(root(), "warm");
  ASSERT_TRUE(entry.ok() && entry->config.ok()) << entry->config.status();
  const WarmupInput& input = entry->config->model_warmup[0].inputs[0];
  ASSERT_NE(input.data, nullptr);
  EXPECT_EQ(*input.data, std::string(16, '\1'));

  // A changed file changes the fingerprint (a poll reloads the model); a missing one is the
  // model's error, naming the path.
  Write("warm/warmup/row.bin", std::string(16, '\2'));
  EXPECT_NE(ScanModel(root(), "warm")->fingerprint, entry->fingerprint);
  fs::remove(root_ / "warm" / "warmup" / "row.bin");
  StatusOr<ModelEntry> missing = ScanModel(root(), "warm");
  ASSERT_TRUE(missing.ok());
  EXPECT_THAT(std::string(missing->config.status().message()),
              HasSubstr("model 'warm': model_warmup \"real\" input 'x': cannot read its "
                        "input_data_file " +
                        (root_ / "warm" / "warmup" / "row.bin").string()));
}

TEST_F(RepositoryTest, InitialStateFilesAreReadAndSizeChecked) {
  auto config = [](const std::string& file) {
    return "name: acc\nmax_batch_size: 2\n"
           "input: [{name: x, data_type: TYPE_FP32, dims: [1]}]\n"
           "output: [{name: y, data_type: TYPE_FP32, dims: [1]}]\n"
           "sequence_batching:\n  state:\n    - input_name: s_in\n      output_name: s_out\n"
           "      data_type: TYPE_FP32\n      dims: [2]\n      initial_state: [{data_type: "
           "TYPE_FP32, dims: [2], data_file: " +
           file + "}]\n";
  };
  Write("acc/config.yaml", config("two.bin"));
  Write("acc/1/model.onnx", "x");
  Write("acc/initial_state/two.bin", std::string(8, '\7'));
  Write("acc/initial_state/three.bin", std::string(12, '\7'));
  StatusOr<ModelEntry> entry = ScanModel(root(), "acc");
  ASSERT_TRUE(entry.ok() && entry->config.ok()) << entry->config.status();
  ASSERT_NE(entry->config->sequence_batching.states[0].initial_data, nullptr);
  EXPECT_EQ(*entry->config->sequence_batching.states[0].initial_data, std::string(8, '\7'));

  Write("acc/config.yaml", config("three.bin"));
  StatusOr<ModelEntry> wrong = ScanModel(root(), "acc");
  ASSERT_TRUE(wrong.ok());
  EXPECT_THAT(std::string(wrong->config.status().message()),
              HasSubstr("state 's_in': initial_state data_file " +
                        (root_ / "acc" / "initial_state" / "three.bin").string() +
                        " holds 12 bytes; the initial state's dims [2] of TYPE_FP32 are 8 bytes"));
  Write("acc/config.yaml", config("none.bin"));
  EXPECT_THAT(std::string(ScanModel(root(), "acc")->config.status().message()),
              HasSubstr("none.bin cannot be read"));
}

TEST_F(RepositoryTest, BytesInitialStateFilesHoldSerializedElements) {
  Write("words/config.yaml",
        "name: words\nmax_batch_size: 2\n"
        "input: [{name: x, data_type: TYPE_STRING, dims: [1]}]\n"
        "output: [{name: y, data_type: TYPE_STRING, dims: [2]}]\n"
        "sequence_batching:\n  state:\n    - input_name: s_in\n      output_name: s_out\n"
        "      data_type: TYPE_STRING\n      dims: [2]\n      initial_state: [{data_type: "
        "TYPE_STRING, dims: [2], data_file: two.bin}]\n");
  Write("words/1/model.onnx", "x");
  std::string two;
  AppendBytesElement("hi", &two);
  AppendBytesElement("", &two);
  Write("words/initial_state/two.bin", two);
  StatusOr<ModelEntry> entry = ScanModel(root(), "words");
  ASSERT_TRUE(entry.ok() && entry->config.ok()) << entry->config.status();
  EXPECT_EQ(*entry->config->sequence_batching.states[0].initial_data, two);

  Write("words/initial_state/two.bin", two.substr(0, two.size() - 4));  // one element
  StatusOr<ModelEntry> short_file = ScanModel(root(), "words");
  ASSERT_TRUE(short_file.ok());
  EXPECT_THAT(std::string(short_file->config.status().message()),
              AllOf(HasSubstr("state 's_in': initial_state data_file"), HasSubstr("two.bin"),
                    HasSubstr("1 element")));
}

TEST_F(RepositoryTest, LabelFilesAreReadWithTheConfig) {
  const std::string config =
      "name: labelled\ninput: [{name: x, data_type: TYPE_FP32, dims: [3]}]\n"
      "output: [{name: y, data_type: TYPE_FP32, dims: [3], label_filename: labels.txt}]\n";
  Write("labelled/config.yaml", config);
  Write("labelled/1/model.onnx", "x");
  Write("labelled/labels.txt", "cat\r\ndog\n\nfish\n");
  StatusOr<ModelEntry> m = ScanModel(root(), "labelled");
  ASSERT_TRUE(m.ok() && m->config.ok()) << m->config.status();
  ASSERT_NE(m->config->outputs[0].labels, nullptr);
  EXPECT_THAT(*m->config->outputs[0].labels, ElementsAre("cat", "dog", "", "fish"));

  // An edit of the labels is a change (poll reloads); a missing file is the model's error.
  Write("labelled/labels.txt", "cat\n");
  StatusOr<ModelEntry> edited = ScanModel(root(), "labelled");
  EXPECT_NE(edited->fingerprint, m->fingerprint);
  fs::remove(root_ / "labelled" / "labels.txt");
  StatusOr<ModelEntry> missing = ScanModel(root(), "labelled");
  ASSERT_FALSE(missing->config.ok());
  EXPECT_THAT(std::string(missing->config.status().message()),
              HasSubstr("output 'y': cannot read its label_filename"));
}

TEST_F(RepositoryTest, BothConfigFilesAreRefused) {
  AddModel("twice", {1});
  Write("twice/config.pbtxt", "name: \"twice\"\n");
  StatusOr<ModelEntry> m = ScanModel(root(), "twice");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_FALSE(m->config.ok());
  EXPECT_EQ(m->config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(m->config.status().message()),
              HasSubstr("both " + (root_ / "twice" / "config.yaml").string() + " and " +
                        (root_ / "twice" / "config.pbtxt").string() + " are there"));
  EXPECT_FALSE(CheckServable(*m).ok());
}

TEST_F(RepositoryTest, ScanModel) {
  AddModel("mlp", {1, 2});
  StatusOr<ModelEntry> m = ScanModel(root(), "mlp");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->selected_versions, ElementsAre(2));

  EXPECT_EQ(ScanModel(root(), "absent").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(ScanModel(root(), "absent").status().message()), HasSubstr("absent"));
  EXPECT_EQ(ScanModel(root() + "/nope", "mlp").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ScanModel(root(), "../mlp").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ScanModel(root(), ".hidden").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ScanModel(root(), "").status().code(), absl::StatusCode::kInvalidArgument);

  // Same entry as the full scan gives.
  StatusOr<RepositorySnapshot> snapshot = ScanRepository(root());
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(snapshot->Find("mlp")->fingerprint, m->fingerprint);
}

TEST_F(RepositoryTest, RescanWithoutChangesIsEmptyDiff) {
  AddModel("a", {1});
  AddModel("b", {1, 2});
  StatusOr<RepositorySnapshot> first = ScanRepository(root());
  StatusOr<RepositorySnapshot> second = ScanRepository(root());
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_TRUE(Diff(*first, *second).empty());
}

TEST_F(RepositoryTest, DiffDetectsAddedRemovedChanged) {
  AddModel("keep", {1});
  AddModel("gone", {1});
  AddModel("retouched", {1, 2});
  AddModel("reconfigured", {1});
  AddModel("old_version_touched", {1, 2});
  StatusOr<RepositorySnapshot> before = ScanRepository(root());
  ASSERT_TRUE(before.ok()) << before.status();

  fs::remove_all(root_ / "gone");
  AddModel("fresh", {1});
  // Same size, new mtime on the served version.
  fs::path served = root_ / "retouched" / "2" / "model.onnx";
  fs::last_write_time(served, fs::last_write_time(served) + std::chrono::seconds(5));
  Write("reconfigured/config.yaml", ConfigText("reconfigured", "slo_ms: 20\n"));
  // Version 1 is not served (latest 1 → 2): touching it changes nothing that is loaded.
  fs::path unserved = root_ / "old_version_touched" / "1" / "model.onnx";
  fs::last_write_time(unserved, fs::last_write_time(unserved) + std::chrono::seconds(5));

  StatusOr<RepositorySnapshot> after = ScanRepository(root());
  ASSERT_TRUE(after.ok()) << after.status();
  RepositoryDiff diff = Diff(*before, *after);
  EXPECT_THAT(diff.added, ElementsAre("fresh"));
  EXPECT_THAT(diff.removed, ElementsAre("gone"));
  EXPECT_THAT(diff.changed, ElementsAre("reconfigured", "retouched"));
  EXPECT_FALSE(diff.empty());
}

TEST_F(RepositoryTest, DiffSeesNewVersionSizeChangeAndConfigRepair) {
  AddModel("grow", {1});
  AddModel("resize", {1});
  Write("fixme/config.yaml", "name: fixme\nmax_batch_size: eight\n");
  Write("fixme/1/model.onnx", "x");
  StatusOr<RepositorySnapshot> before = ScanRepository(root());
  ASSERT_TRUE(before.ok());

  Write("grow/2/model.onnx", "v2");              // latest 1 now selects version 2
  Write("resize/1/model.onnx", "longer bytes");  // size differs even if mtime would not
  Write("fixme/config.yaml", ConfigText("fixme"));

  StatusOr<RepositorySnapshot> after = ScanRepository(root());
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->Find("fixme")->config.ok());
  RepositoryDiff diff = Diff(*before, *after);
  EXPECT_THAT(diff.changed, ElementsAre("fixme", "grow", "resize"));
  EXPECT_THAT(diff.added, IsEmpty());
  EXPECT_THAT(diff.removed, IsEmpty());
}

}  // namespace
}  // namespace tessera::repository
