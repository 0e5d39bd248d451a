// Graph inputs that also have an initializer (ONNX's overridable initializers): weights by
// default, inputs with a default when ModelOptions::overridable_initializers names them.
#include <string>
#include <vector>

#include "engine/onnx_builder_for_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {
namespace {

using ::testing::HasSubstr;

// y = x * scale, where `scale` is a graph input whose initializer is {2, 3}.
std::string ScaleModel(const std::string& file, std::vector<int64_t> scale_dims = {2}) {
  OnnxBuilderForTest b;
  b.Input("x", {2});
  b.Input("scale", scale_dims);
  b.FloatConstant("scale", {2}, {2, 3});
  b.Output("y");
  b.Node("Mul", {"x", "scale"}, {"y"});
  return b.Write(file);
}

std::vector<float> RunY(Model& model, std::vector<TensorView> inputs, Status* status = nullptr) {
  std::vector<Tensor> out;
  Status run = model.Run(inputs, &out);
  if (status != nullptr) *status = run;
  if (!run.ok() || out.size() != 1) return {};
  const auto* y = reinterpret_cast<const float*>(out[0].bytes.data());
  return std::vector<float>(y, y + out[0].bytes.size() / sizeof(float));
}

std::vector<float> kX = {10, 100};

TensorView XView() { return TensorView{"x", DataType::kFp32, {2}, kX.data(), 8}; }

TEST(OverridableInitializerTest, UnnamedItIsAWeightAndNotAnInput) {
  auto model = LoadOnnxModel(ScaleModel("scale_weight.onnx"), {});
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ((*model)->inputs().size(), 1u);
  EXPECT_EQ((*model)->inputs()[0].name, "x");
  EXPECT_FALSE((*model)->inputs()[0].has_default);
  EXPECT_EQ(RunY(**model, {XView()}), (std::vector<float>{20, 300}));
}

TEST(OverridableInitializerTest, NamedItIsAnInputThatMayBeLeftOut) {
  const std::string path = ScaleModel("scale_input.onnx");
  ModelOptions options;
  options.overridable_initializers = {"x", "scale", "not_in_the_model"};
  auto model = LoadOnnxModel(path, options);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ((*model)->inputs().size(), 2u);
  EXPECT_EQ((*model)->inputs()[1].name, "scale");
  EXPECT_TRUE((*model)->inputs()[1].has_default);
  EXPECT_FALSE((*model)->inputs()[0].has_default);
  EXPECT_EQ((*model)->inputs()[1].shape, (Shape{2}));

  EXPECT_EQ(RunY(**model, {XView()}), (std::vector<float>{20, 300}));
  std::vector<float> scale = {5, 7};
  TensorView given{"scale", DataType::kFp32, {2}, scale.data(), 8};
  EXPECT_EQ(RunY(**model, {given, XView()}), (std::vector<float>{50, 700}));
  // The default is not overwritten by a Run that gave the input.
  EXPECT_EQ(RunY(**model, {XView()}), (std::vector<float>{20, 300}));

  // A load of the same file without the name, in the same process, still folds the weight.
  auto folded = LoadOnnxModel(path, {});
  ASSERT_TRUE(folded.ok()) << folded.status();
  EXPECT_EQ((*folded)->inputs().size(), 1u);
  Status status;
  RunY(**folded, {XView(), given}, &status);
  EXPECT_FALSE(status.ok());
}

TEST(OverridableInitializerTest, AnInputWithoutADefaultMustBeGiven) {
  auto model = LoadOnnxModel(ScaleModel("scale_missing.onnx"), {});
  ASSERT_TRUE(model.ok()) << model.status();
  Status status;
  RunY(**model, {}, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("missing input \"x\" (it has no default"));
}

TEST(OverridableInitializerTest, AnInitializerThatDisagreesWithItsInputFailsTheLoad) {
  ModelOptions options;
  options.overridable_initializers = {"scale"};
  auto model = LoadOnnxModel(ScaleModel("scale_bad_shape.onnx", {3}), options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(),
              HasSubstr("input \"scale\" (an overridable initializer): declared shape [3] but its "
                        "initializer is [2]"));
}

TEST(OverridableInitializerTest, ADynamicDeclaredDimTakesOtherSizes) {
  ModelOptions options;
  options.overridable_initializers = {"scale"};
  auto model = LoadOnnxModel(ScaleModel("scale_dynamic.onnx", {-1}), options);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->inputs()[1].shape, (Shape{-1}));
  std::vector<float> one = {4};
  TensorView broadcast{"scale", DataType::kFp32, {1}, one.data(), 4};
  EXPECT_EQ(RunY(**model, {XView(), broadcast}), (std::vector<float>{40, 400}));
  EXPECT_EQ(RunY(**model, {XView()}), (std::vector<float>{20, 300}));
}

}  // namespace
}  // namespace tessera::engine
