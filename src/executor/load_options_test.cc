#include "executor/load_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::executor {
namespace {

using ::testing::HasSubstr;

ipc::LoadModel Request(const std::string& precision) {
  ipc::LoadModel request;
  request.set_instance_key("m/1");
  request.set_precision(precision);
  request.add_inputs()->set_name("x");
  request.add_inputs()->set_name("scale");
  return request;
}

engine::ModelOptions Base(engine::Backend backend) {
  engine::ModelOptions base;
  base.backend = backend;
  base.num_threads = 3;
  return base;
}

TEST(LoadOptionsTest, Fp16RunsTheCudaBackendInFp16AndTheCpuInFp32) {
  auto cuda = LoadOptionsFor(Request("fp16"), Base(engine::Backend::kCuda), nullptr);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_EQ(cuda->precision, engine::Precision::kFp16);
  EXPECT_EQ(cuda->num_threads, 3);
  for (const char* precision : {"fp16", "bf16", "fp32", ""}) {
    auto cpu = LoadOptionsFor(Request(precision), Base(engine::Backend::kCpu), nullptr);
    ASSERT_TRUE(cpu.ok()) << precision << ": " << cpu.status();
    EXPECT_EQ(cpu->precision, engine::Precision::kFp32) << precision;
  }
  for (const char* precision : {"fp32", ""}) {
    auto fp32 = LoadOptionsFor(Request(precision), Base(engine::Backend::kCuda), nullptr);
    ASSERT_TRUE(fp32.ok());
    EXPECT_EQ(fp32->precision, engine::Precision::kFp32) << precision;
  }
}

TEST(LoadOptionsTest, Bf16OnTheCudaBackendAndUnknownPrecisionsAreRefusedNamingThem) {
  auto bf16 = LoadOptionsFor(Request("bf16"), Base(engine::Backend::kCuda), nullptr);
  EXPECT_EQ(bf16.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bf16.status().message(), HasSubstr("precision bf16"));
  auto int8 = LoadOptionsFor(Request("int8"), Base(engine::Backend::kCpu), nullptr);
  EXPECT_EQ(int8.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(int8.status().message(), HasSubstr("'int8'"));
}

TEST(LoadOptionsTest, ConfigInputsOverrideInitializersAndSharedWeightsAreMapped) {
  engine::WeightImport shared;
  shared.fd = 7;
  shared.bytes = 1024;
  shared.layout = "layout";
  auto options = LoadOptionsFor(Request("fp32"), Base(engine::Backend::kCuda), &shared);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->overridable_initializers, (std::vector<std::string>{"x", "scale"}));
  ASSERT_TRUE(options->import_weights.has_value());
  EXPECT_EQ(options->import_weights->fd, 7);
  EXPECT_EQ(options->import_weights->layout, "layout");
  auto without = LoadOptionsFor(Request("fp32"), Base(engine::Backend::kCpu), nullptr);
  EXPECT_FALSE(without->import_weights.has_value());
}

}  // namespace
}  // namespace tessera::executor
