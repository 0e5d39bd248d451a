// Models whose files declare FLOAT16 or BFLOAT16 tensors: weights widened at import, graph inputs
// and outputs converted at the interface (Float16InterfaceModel), computation in FP32.
#include <cstring>
#include <string>
#include <vector>

#include "engine/onnx_builder_for_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tessera/common/float16.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {
namespace {

using ::testing::HasSubstr;

std::vector<uint16_t> Narrow(DataType type, const std::vector<float>& values) {
  std::vector<uint16_t> out(values.size());
  if (type == DataType::kFp16) {
    FloatToFp16(values.data(), out.data(), values.size());
  } else {
    FloatToBf16(values.data(), out.data(), values.size());
  }
  return out;
}

std::vector<float> Widen(DataType type, const std::vector<uint16_t>& values) {
  std::vector<float> out(values.size());
  if (type == DataType::kFp16) {
    Fp16ToFloat(values.data(), out.data(), values.size());
  } else {
    Bf16ToFloat(values.data(), out.data(), values.size());
  }
  return out;
}

int OnnxType(DataType type) {
  return type == DataType::kFp16 ? onnx::TensorProto::FLOAT16 : onnx::TensorProto::BFLOAT16;
}

// A 16-bit initializer: raw little-endian bytes, or one bit pattern per int32_data entry.
void Initializer16(onnx::TensorProto* t, const std::string& name, DataType type,
                   std::vector<int64_t> dims, const std::vector<float>& values, bool raw) {
  t->set_name(name);
  t->set_data_type(OnnxType(type));
  for (int64_t d : dims) t->add_dims(d);
  const std::vector<uint16_t> bits = Narrow(type, values);
  if (raw) {
    t->set_raw_data(std::string(reinterpret_cast<const char*>(bits.data()), bits.size() * 2));
  } else {
    for (uint16_t b : bits) t->add_int32_data(b);
  }
}

const std::vector<float> kW = {0.5f, -1.0f, 2.0f,  0.25f, 1.5f, -0.5f,
                               1.0f, 0.75f, -2.0f, 0.0f,  1.0f, 0.5f};  // [4, 3]
const std::vector<float> kBias = {0.25f, -0.5f, 1.0f};
// 1/3 is not exact in either type: the file holds its 16-bit rounding, which the model uses.
constexpr float kScale = 1.0f / 3;

// y = (x @ W + bias) * scale, all in `type`; f = Cast<FLOAT>(y); c = Cast<type>(f).
// W is raw data, bias int32_data, scale a Constant node's tensor.
std::string AffineModel(DataType type, const std::string& file) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 4}, OnnxType(type));
  b.Output("y", OnnxType(type));
  b.Output("f", onnx::TensorProto::FLOAT);
  b.Output("c", OnnxType(type));
  b.Node("MatMul", {"x", "W"}, {"h"});
  b.Node("Add", {"h", "bias"}, {"h2"});
  auto* constant = b.Node("Constant", {}, {"scale"});
  auto* value = constant->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  Initializer16(value->mutable_t(), "scale_value", type, {}, {kScale}, /*raw=*/true);
  b.Node("Mul", {"h2", "scale"}, {"y"});
  OnnxBuilderForTest::Int(b.Node("Cast", {"y"}, {"f"}), "to", onnx::TensorProto::FLOAT);
  OnnxBuilderForTest::Int(b.Node("Cast", {"f"}, {"c"}), "to", OnnxType(type));
  Initializer16(b.AddInitializer(), "W", type, {4, 3}, kW, /*raw=*/true);
  Initializer16(b.AddInitializer(), "bias", type, {3}, kBias, /*raw=*/false);
  return b.Write(file);
}

class Float16ModelTest : public ::testing::TestWithParam<DataType> {};

TEST_P(Float16ModelTest, InterfaceKeepsTheDeclaredTypesAndOutputsAreRoundedOnce) {
  const DataType type = GetParam();
  auto model = LoadOnnxModel(AffineModel(type, "affine16.onnx"), {});
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ((*model)->inputs().size(), 1u);
  EXPECT_EQ((*model)->inputs()[0].dtype, type);
  ASSERT_EQ((*model)->outputs().size(), 3u);
  EXPECT_EQ((*model)->outputs()[0].dtype, type);
  EXPECT_EQ((*model)->outputs()[1].dtype, DataType::kFp32);
  EXPECT_EQ((*model)->outputs()[2].dtype, type);

  // Values exact in both types, so x @ W + bias is exact in FP32.
  const std::vector<float> x = {1.0f, 2.0f, -0.5f, 0.25f, 3.0f, -1.0f, 0.5f, 2.0f};  // [2, 4]
  std::vector<uint16_t> x16 = Narrow(type, x);
  TensorView view{"x", type, {2, 4}, x16.data(), x16.size() * 2};
  const float scale = Widen(type, Narrow(type, {kScale}))[0];
  std::vector<float> exact(6);
  for (int r = 0; r < 2; ++r) {
    for (int j = 0; j < 3; ++j) {
      float h = kBias[j];
      for (int k = 0; k < 4; ++k) h += x[r * 4 + k] * kW[k * 3 + j];
      exact[r * 3 + j] = h * scale;  // one FP32 rounding, then one 16-bit rounding below
    }
  }
  for (int run = 0; run < 2; ++run) {  // the second Run is the planned one
    std::vector<Tensor> outputs;
    ASSERT_TRUE((*model)->Run({view}, &outputs).ok());
    ASSERT_EQ(outputs.size(), 3u);
    EXPECT_EQ(outputs[0].dtype, type);
    EXPECT_EQ(outputs[0].shape, (Shape{2, 3}));
    std::vector<uint16_t> y(6), c(6);
    ASSERT_EQ(outputs[0].bytes.size(), 12u);
    std::memcpy(y.data(), outputs[0].bytes.data(), 12);
    std::memcpy(c.data(), outputs[2].bytes.data(), 12);
    EXPECT_EQ(y, Narrow(type, exact)) << "run " << run;
    // Cast<FLOAT>(y) inside the graph reads FP32 values that were never rounded to 16 bits: the
    // engine computes 16-bit tensors in FP32, so `f` is the unrounded product.
    ASSERT_EQ(outputs[1].dtype, DataType::kFp32);
    std::vector<float> f(6);
    std::memcpy(f.data(), outputs[1].bytes.data(), 24);
    EXPECT_EQ(f, exact);
    EXPECT_EQ(c, y);
  }
}

TEST_P(Float16ModelTest, WrongInputTypeOrSizeIsRefusedAndTheModelStaysUsable) {
  const DataType type = GetParam();
  auto model = LoadOnnxModel(AffineModel(type, "affine16_errors.onnx"), {});
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<float> x32(4, 1.0f);
  std::vector<Tensor> outputs;
  Status status =
      (*model)->Run({TensorView{"x", DataType::kFp32, {1, 4}, x32.data(), 16}}, &outputs);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input \"x\" is FP32"));
  EXPECT_THAT(status.message(),
              HasSubstr(type == DataType::kFp16 ? "model takes FP16" : "model takes BF16"));
  std::vector<uint16_t> x16(4, 0);
  status = (*model)->Run({TensorView{"x", type, {1, 4}, x16.data(), 6}}, &outputs);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("has 6 bytes for shape [1, 4]"));
  status = (*model)->Run({TensorView{"x", type, {1, 4}, x16.data(), 8}}, &outputs);
  ASSERT_TRUE(status.ok()) << status;
  std::vector<uint16_t> y(3);
  std::memcpy(y.data(), outputs[0].bytes.data(), 6);
  EXPECT_EQ(y, Narrow(type, {kBias[0] * Widen(type, Narrow(type, {kScale}))[0],
                             kBias[1] * Widen(type, Narrow(type, {kScale}))[0],
                             kBias[2] * Widen(type, Narrow(type, {kScale}))[0]}));
}

INSTANTIATE_TEST_SUITE_P(Types, Float16ModelTest,
                         ::testing::Values(DataType::kFp16, DataType::kBf16), [](const auto& info) {
                           return info.param == DataType::kFp16 ? std::string("Fp16")
                                                                : std::string("Bf16");
                         });

// An FP16 initializer that is also a graph input (ONNX's overridable initializers) keeps FP16 at
// the interface when kept as an input, and a Run that leaves it out uses the widened default.
TEST(Float16ModelTest, OverridableFp16InitializerIsAnFp16InputWithItsDefault) {
  OnnxBuilderForTest b;
  b.Input("x", {2}, onnx::TensorProto::FLOAT16);
  b.Input("scale", {2}, onnx::TensorProto::FLOAT16);
  Initializer16(b.AddInitializer(), "scale", DataType::kFp16, {2}, {2.0f, 0.5f}, /*raw=*/false);
  b.Output("y", onnx::TensorProto::FLOAT16);
  b.Node("Mul", {"x", "scale"}, {"y"});
  ModelOptions options;
  options.overridable_initializers = {"scale"};
  auto model = LoadOnnxModel(b.Write("scale16.onnx"), options);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ((*model)->inputs().size(), 2u);
  EXPECT_EQ((*model)->inputs()[1].dtype, DataType::kFp16);
  EXPECT_TRUE((*model)->inputs()[1].has_default);
  std::vector<uint16_t> x = Narrow(DataType::kFp16, {3.0f, 8.0f});
  std::vector<Tensor> outputs;
  ASSERT_TRUE((*model)->Run({TensorView{"x", DataType::kFp16, {2}, x.data(), 4}}, &outputs).ok());
  std::vector<uint16_t> y(2);
  std::memcpy(y.data(), outputs[0].bytes.data(), 4);
  EXPECT_EQ(Widen(DataType::kFp16, y), (std::vector<float>{6.0f, 4.0f}));
  std::vector<uint16_t> scale = Narrow(DataType::kFp16, {-1.0f, 0.25f});
  ASSERT_TRUE((*model)
                  ->Run({TensorView{"x", DataType::kFp16, {2}, x.data(), 4},
                         TensorView{"scale", DataType::kFp16, {2}, scale.data(), 4}},
                        &outputs)
                  .ok());
  std::memcpy(y.data(), outputs[0].bytes.data(), 4);
  EXPECT_EQ(Widen(DataType::kFp16, y), (std::vector<float>{-3.0f, 2.0f}));
}

TEST(Float16ModelTest, DoubleTensorsAreStillRefusedNamingTheType) {
  OnnxBuilderForTest b;
  b.Input("x", {2}, onnx::TensorProto::DOUBLE);
  b.Output("y", onnx::TensorProto::DOUBLE);
  b.Node("Relu", {"x"}, {"y"});
  auto model = LoadOnnxModel(b.Write("double.onnx"), {});
  EXPECT_EQ(model.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(model.status().message(), HasSubstr("element type DOUBLE"));
}

}  // namespace
}  // namespace tessera::engine
