#include "tessera/common/logging.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "spdlog/spdlog.h"

namespace tessera {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InitLogging(0, "logtest");
    path_ = ::testing::TempDir() + "tessera-logging-test-" + std::to_string(getpid()) + ".log";
    std::remove(path_.c_str());
  }
  void TearDown() override {
    InitLogging(0, "logtest");  // back to stderr, closes the file
    std::remove(path_.c_str());
  }
  std::string path_;
};

TEST_F(LoggingTest, SeveritiesVerboseLevelAndFileFollowTheSettings) {
  LogSettingsUpdate to_file;
  to_file.file = path_;
  ASSERT_TRUE(UpdateLogSettings(to_file).ok());
  spdlog::info("info one");
  spdlog::debug("debug one");
  spdlog::warn("warning one");

  LogSettingsUpdate quieter;
  quieter.info = false;
  quieter.verbose_level = 1;
  ASSERT_TRUE(UpdateLogSettings(quieter).ok());
  spdlog::info("info two");
  spdlog::debug("debug two");
  spdlog::trace("trace two");
  spdlog::error("error two");
  spdlog::default_logger()->flush();

  const std::string text = ReadFile(path_);
  EXPECT_NE(text.find("info one"), std::string::npos) << text;
  EXPECT_EQ(text.find("debug one"), std::string::npos) << text;  // verbose level 0
  EXPECT_NE(text.find("warning one"), std::string::npos) << text;
  EXPECT_EQ(text.find("info two"), std::string::npos) << text;  // log_info off
  EXPECT_NE(text.find("debug two"), std::string::npos) << text;
  EXPECT_EQ(text.find("trace two"), std::string::npos) << text;  // needs level 2
  EXPECT_NE(text.find("error two"), std::string::npos) << text;

  LogSettings now = CurrentLogSettings();
  EXPECT_EQ(now.file, path_);
  EXPECT_FALSE(now.info);
  EXPECT_TRUE(now.warning);
  EXPECT_EQ(now.verbose_level, 1u);
}

TEST_F(LoggingTest, Iso8601WritesUtcTimestamps) {
  LogSettingsUpdate update;
  update.file = path_;
  update.format = "ISO8601";
  ASSERT_TRUE(UpdateLogSettings(update).ok());
  spdlog::warn("stamped");
  spdlog::default_logger()->flush();
  const std::string text = ReadFile(path_);
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ W .*stamped)")))
      << text;
}

TEST_F(LoggingTest, ABadFormatOrFileChangesNothing) {
  LogSettingsUpdate bad_format;
  bad_format.info = false;
  bad_format.format = "json";
  Status status = UpdateLogSettings(bad_format);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("'json'"), std::string::npos) << status;

  const std::string missing_dir = ::testing::TempDir() + "tessera-no-such-dir-" +
                                  std::to_string(getpid());
  LogSettingsUpdate bad_file;
  bad_file.info = false;
  bad_file.file = missing_dir + "/x.log";
  status = UpdateLogSettings(bad_file);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_NE(status.message().find("does not exist"), std::string::npos) << status;
  EXPECT_FALSE(std::filesystem::exists(missing_dir));  // not created either

  std::ofstream(path_) << "a file, not a directory";
  bad_file.file = path_ + "/x.log";
  status = UpdateLogSettings(bad_file);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_NE(status.message().find(path_), std::string::npos) << status;

  LogSettings now = CurrentLogSettings();
  EXPECT_TRUE(now.info);
  EXPECT_EQ(now.file, "");
  EXPECT_EQ(now.format, "default");
}

}  // namespace
}  // namespace tessera
