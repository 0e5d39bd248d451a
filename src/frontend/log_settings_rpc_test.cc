#include "log_settings_rpc.h"

#include <gtest/gtest.h>

namespace tessera::frontend {
namespace {

inference::LogSettingsRequest Request(
    std::initializer_list<std::pair<std::string, inference::LogSettingsRequest::SettingValue>> entries) {
  inference::LogSettingsRequest request;
  for (const auto& [key, value] : entries) (*request.mutable_settings())[key] = value;
  return request;
}

inference::LogSettingsRequest::SettingValue Bool(bool v) {
  inference::LogSettingsRequest::SettingValue value;
  value.set_bool_param(v);
  return value;
}
inference::LogSettingsRequest::SettingValue Uint(uint32_t v) {
  inference::LogSettingsRequest::SettingValue value;
  value.set_uint32_param(v);
  return value;
}
inference::LogSettingsRequest::SettingValue Str(const std::string& v) {
  inference::LogSettingsRequest::SettingValue value;
  value.set_string_param(v);
  return value;
}

TEST(LogSettingsRpcTest, EveryKnownSettingIsTaken) {
  auto update = LogSettingsUpdateFromProto(Request({{"log_file", Str("/tmp/x.log")},
                                                    {"log_info", Bool(false)},
                                                    {"log_warning", Bool(true)},
                                                    {"log_error", Bool(false)},
                                                    {"log_verbose_level", Uint(2)},
                                                    {"log_format", Str("ISO8601")}}));
  ASSERT_TRUE(update.ok()) << update.status();
  EXPECT_EQ(update->file, "/tmp/x.log");
  EXPECT_EQ(update->info, false);
  EXPECT_EQ(update->warning, true);
  EXPECT_EQ(update->error, false);
  EXPECT_EQ(update->verbose_level, 2u);
  EXPECT_EQ(update->format, "ISO8601");
}

TEST(LogSettingsRpcTest, SettingsNotGivenStayUnset) {
  auto update = LogSettingsUpdateFromProto(Request({{"log_info", Bool(true)}}));
  ASSERT_TRUE(update.ok()) << update.status();
  EXPECT_EQ(update->info, true);
  EXPECT_FALSE(update->file || update->warning || update->error || update->verbose_level ||
               update->format);
}

TEST(LogSettingsRpcTest, AnUnknownKeyIsNamedWithTheKnownOnes) {
  auto update = LogSettingsUpdateFromProto(Request({{"log_colour", Bool(true)}}));
  ASSERT_FALSE(update.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(update.status()));
  EXPECT_NE(update.status().message().find("'log_colour'"), std::string::npos);
  EXPECT_NE(update.status().message().find("log_verbose_level"), std::string::npos);
}

TEST(LogSettingsRpcTest, AWrongOrMissingValueTypeIsNamed) {
  auto wrong = LogSettingsUpdateFromProto(Request({{"log_verbose_level", Str("1")}}));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(),
            "log setting 'log_verbose_level' takes uint32_param, got string_param");
  auto missing = LogSettingsUpdateFromProto(
      Request({{"log_info", inference::LogSettingsRequest::SettingValue()}}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "log setting 'log_info' takes bool_param, got no value");
}

TEST(LogSettingsRpcTest, TheResponseListsEverySetting) {
  LogSettings settings;
  settings.file = "/var/log/t.log";
  settings.warning = false;
  settings.verbose_level = 1;
  inference::LogSettingsResponse response;
  LogSettingsToProto(settings, &response);
  const auto& out = response.settings();
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out.at("log_file").string_param(), "/var/log/t.log");
  EXPECT_TRUE(out.at("log_info").bool_param());
  EXPECT_FALSE(out.at("log_warning").bool_param());
  EXPECT_TRUE(out.at("log_error").bool_param());
  EXPECT_EQ(out.at("log_verbose_level").uint32_param(), 1u);
  EXPECT_EQ(out.at("log_format").string_param(), "default");
}

}  // namespace
}  // namespace tessera::frontend
