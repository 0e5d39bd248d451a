#include "config_proto.h"

#include <gtest/gtest.h>

namespace tessera::frontend {
namespace {

TEST(ConfigProtoTest, TritonShapeWithNormalizedBatching) {
  repository::ModelConfig config;
  config.name = "mlp";
  config.max_batch_size = 8;
  config.inputs = {{"input", DataType::kFp32, {64}}};
  config.outputs = {{"output", DataType::kFp32, {10}}};
  config.dynamic_batching.enabled = true;
  config.dynamic_batching.max_queue_delay_microseconds = 2000;
  config.instance_groups = {{"", repository::InstanceKind::kCpu, 2, {}}};
  config.slo_ms = 50;

  inference::ModelConfig wire = ToTritonModelConfig(config);
  EXPECT_EQ(wire.name(), "mlp");
  EXPECT_EQ(wire.max_batch_size(), 8);
  ASSERT_EQ(wire.input_size(), 1);
  EXPECT_EQ(wire.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(wire.input(0).dims(0), 64);
  ASSERT_TRUE(wire.has_dynamic_batching());
  ASSERT_EQ(wire.dynamic_batching().preferred_batch_size_size(), 1);
  EXPECT_EQ(wire.dynamic_batching().preferred_batch_size(0), 8);
  EXPECT_EQ(wire.dynamic_batching().max_queue_delay_microseconds(), 2000u);
  ASSERT_EQ(wire.instance_group_size(), 1);
  EXPECT_EQ(wire.instance_group(0).name(), "mlp_0");
  EXPECT_EQ(wire.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(wire.instance_group(0).count(), 2);
  EXPECT_EQ(wire.parameters().at("slo_ms").string_value(), "50");
  EXPECT_EQ(wire.version_policy().latest().num_versions(), 1u);
}

TEST(ConfigProtoTest, NoBatchingMeansNoDynamicBatchingMessage) {
  repository::ModelConfig config;
  config.name = "m";
  EXPECT_FALSE(ToTritonModelConfig(config).has_dynamic_batching());
}

}  // namespace
}  // namespace tessera::frontend
