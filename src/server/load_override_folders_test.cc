// A load request's files: written into a fresh folder that they cannot leave, and removed again.
#include "load_override_folders.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class LoadOverrideFoldersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / "tessera_load_override_folders_test" /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(LoadOverrideFoldersTest, WritesTheFilesIntoAFreshFolderPerLoad) {
  LoadOverrideFolders folders(root_.string());
  const std::string model(std::string("\0onnx\xff", 6));
  StatusOr<std::string> first = folders.Create({{"1/model.onnx", model}, {"labels.txt", "a\nb\n"}});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(ReadAll(fs::path(*first) / "1" / "model.onnx"), model);
  EXPECT_EQ(ReadAll(fs::path(*first) / "labels.txt"), "a\nb\n");
  EXPECT_EQ(fs::status(root_).permissions() & fs::perms::all, fs::perms::owner_all);

  StatusOr<std::string> second = folders.Create({{"2/model.onnx", "x"}});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(*first, *second);
  folders.Remove(*first);
  EXPECT_FALSE(fs::exists(*first));
  EXPECT_TRUE(fs::exists(fs::path(*second) / "2" / "model.onnx"));
}

TEST_F(LoadOverrideFoldersTest, PathsThatCouldLeaveTheFolderAreRefusedAndNothingIsWritten) {
  LoadOverrideFolders folders(root_.string());
  const std::pair<const char*, const char*> refused[] = {
      {"", "no path after 'file:'"},
      {"/etc/model.onnx", "must be relative"},
      {"../model.onnx", "'.' and '..' are not allowed"},
      {"1/../../x", "'.' and '..' are not allowed"},
      {"1/./model.onnx", "'.' and '..' are not allowed"},
      {"1//model.onnx", "empty part"},
      {"1/", "empty part"},
      {"config.pbtxt", "comes from the load's 'config' parameter"},
      {"config.yaml", "comes from the load's 'config' parameter"},
  };
  for (const auto& [path, why] : refused) {
    // A good file beside it: the whole load is refused, so not even that one is written.
    StatusOr<std::string> made = folders.Create({{"1/model.onnx", "x"}, {path, "y"}});
    ASSERT_FALSE(made.ok()) << path;
    EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(
        std::string(made.status().message()),
        AllOf(HasSubstr(std::string("load parameter 'file:") + path + "'"), HasSubstr(why)));
  }
  EXPECT_FALSE(fs::exists(root_) && !fs::is_empty(root_));
  EXPECT_FALSE(CheckOverrideFilePath(std::string("a\0b", 3)).ok());
  EXPECT_TRUE(CheckOverrideFilePath("1/sub/config.pbtxt").ok());  // only the folder's own config
}

TEST_F(LoadOverrideFoldersTest, CollidingPathsFailWithoutLeavingAFolder) {
  LoadOverrideFolders folders(root_.string());
  StatusOr<std::string> made = folders.Create({{"1", "a file"}, {"1/model.onnx", "x"}});
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(made.status().message()),
              HasSubstr("load parameter 'file:1/model.onnx'"));
  EXPECT_TRUE(fs::is_empty(root_));
}

TEST_F(LoadOverrideFoldersTest, ARootThatIsALinkIsRefused) {
  const fs::path elsewhere = root_.string() + "-elsewhere";
  fs::create_directories(elsewhere);
  fs::create_directories(root_.parent_path());
  fs::create_directory_symlink(elsewhere, root_);
  LoadOverrideFolders folders(root_.string());
  StatusOr<std::string> made = folders.Create({{"1/model.onnx", "x"}});
  EXPECT_EQ(made.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(made.status().message()), HasSubstr("is not a folder of this user"));
  EXPECT_TRUE(fs::is_empty(elsewhere));
  fs::remove_all(elsewhere);
}

TEST_F(LoadOverrideFoldersTest, TheRootGoesWithTheObject) {
  {
    LoadOverrideFolders folders(root_.string());
    ASSERT_TRUE(folders.Create({{"1/model.onnx", "x"}}).ok());
    EXPECT_TRUE(fs::exists(root_));
  }
  EXPECT_FALSE(fs::exists(root_));
}

}  // namespace
}  // namespace tessera::server
