#include "tessera/common/data_type.h"

#include <gtest/gtest.h>

#include "tessera/common/tensor.h"

namespace tessera {
namespace {

TEST(DataTypeTest, WireAndConfigNamesRoundTrip) {
  for (int i = 1; i <= 14; ++i) {
    auto type = static_cast<DataType>(i);
    EXPECT_EQ(DataTypeFromWireName(DataTypeToWireName(type)), type);
    EXPECT_EQ(DataTypeFromConfigName(DataTypeToConfigName(type)), type);
  }
  EXPECT_EQ(DataTypeFromWireName("FP32"), DataType::kFp32);
  EXPECT_EQ(DataTypeFromConfigName("TYPE_STRING"), DataType::kString);
  EXPECT_EQ(DataTypeToWireName(DataType::kString), "BYTES");
  EXPECT_FALSE(DataTypeFromWireName("FLOAT32").has_value());
  EXPECT_FALSE(DataTypeFromWireName("INVALID").has_value());
  EXPECT_FALSE(DataTypeFromConfigName("FP32").has_value());
  // onnx.proto's numbers: FLOAT 1, INT64 7, FLOAT16 10, BFLOAT16 16; COMPLEX64 14 has no KServe type.
  EXPECT_EQ(DataTypeFromOnnxElementType(1), DataType::kFp32);
  EXPECT_EQ(DataTypeFromOnnxElementType(7), DataType::kInt64);
  EXPECT_EQ(DataTypeFromOnnxElementType(10), DataType::kFp16);
  EXPECT_EQ(DataTypeFromOnnxElementType(16), DataType::kBf16);
  EXPECT_FALSE(DataTypeFromOnnxElementType(14).has_value());
  EXPECT_FALSE(DataTypeFromOnnxElementType(0).has_value());
}

TEST(DataTypeTest, ByteSizes) {
  EXPECT_EQ(DataTypeByteSize(DataType::kFp32), 4u);
  EXPECT_EQ(DataTypeByteSize(DataType::kFp16), 2u);
  EXPECT_EQ(DataTypeByteSize(DataType::kInt64), 8u);
  EXPECT_EQ(DataTypeByteSize(DataType::kBool), 1u);
  EXPECT_EQ(DataTypeByteSize(DataType::kString), 0u);
}

TEST(TensorTest, ElementCountAndFormatting) {
  EXPECT_EQ(ElementCount({}), 1);
  EXPECT_EQ(ElementCount({2, 3, 4}), 24);
  EXPECT_EQ(ElementCount({2, -1}), -1);
  EXPECT_EQ(ShapeToString({1, 3, 224}), "[1, 3, 224]");
}

TEST(TensorTest, DenseByteSizeRefusesWildcardsAndSizesPast64Bits) {
  EXPECT_EQ(DenseByteSize({}, 4), 4u);
  EXPECT_EQ(DenseByteSize({2, 3}, 4), 24u);
  EXPECT_EQ(DenseByteSize({2, 0}, 4), 0u);
  EXPECT_EQ(DenseByteSize({2, -1}, 4), std::nullopt);
  // 2^62 FP32 elements: 2^64 bytes, which a plain product wraps to 0.
  EXPECT_EQ(DenseByteSize({1, int64_t{1} << 62}, 4), std::nullopt);
  EXPECT_EQ(DenseByteSize({int64_t{1} << 31, int64_t{1} << 31, int64_t{1} << 2}, 1),
            std::nullopt);
  EXPECT_EQ(DenseByteSize({int64_t{1} << 61}, 4), uint64_t{1} << 63);
}

}  // namespace
}  // namespace tessera
