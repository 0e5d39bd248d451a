// The CPU model's BatchNormalization fusions (graph_passes.h): FuseBatchNormRelu takes the Relu
// after a normalisation, FuseConcatBatchNorm the Concat before it. Both compute what the unfused
// graph does, with oneDNN's channels-last values and with the own kernels' row-major ones, and a
// model file may not use their internal attributes.
#include <cmath>
#include <string>
#include <vector>

#include "engine/fusion_test_util.h"
#include "engine/onnx_builder_for_test.h"
#include "gtest/gtest.h"

namespace tessera::engine {
namespace {

// DenseNet's order: Conv, then BatchNormalization and Relu before the next Conv (so the
// normalisation cannot fold into the Conv before it: its output is also a graph output with
// `leak`, and the Relu's input then has a second reader).
std::string ConvNormRelu(bool leak, const std::string& file) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 4, 6, 6});
  b.Weight("w", {4, 4, 3, 3}, 0.4f);
  b.Weight("gamma", {4}, 1.0f);
  b.Weight("beta", {4}, 0.5f);
  b.Weight("mean", {4}, 0.3f);
  b.FloatConstant("var", {4}, {0.5f, 1.0f, 2.0f, 0.25f});
  OnnxBuilderForTest::Ints(b.Node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c"}, {"r"});  // keeps the normalisation off the Conv
  b.Node("BatchNormalization", {"r", "gamma", "beta", "mean", "var"}, {"n"});
  b.Node("Relu", {"n"}, {"y"});
  b.Output("y");
  if (leak) b.Output("n");
  return b.Write(file);
}

TEST(BatchNormReluFusionTest, TheReluBecomesPartOfTheNormalisation) {
  auto graph = PreparedGraph(ConvNormRelu(false, "norm_relu.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(FuseBatchNormRelu(&*graph), 1);
  const Node& norm = graph->nodes.back();
  EXPECT_EQ(norm.op_type, "BatchNormalization");
  EXPECT_EQ(norm.attributes.GetString("tessera_activation"), "Relu");
  EXPECT_EQ(graph->value_names[norm.outputs[0]], "y");
  graph = PreparedGraph(ConvNormRelu(true, "norm_relu_leak.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(FuseBatchNormRelu(&*graph), 0);  // the normalisation's output is read elsewhere
}

TEST(BatchNormReluFusionTest, FusedComputesWhatTheUnfusedOneDoes) {
  const RandomX x({2, 4, 6, 6}, 8, 1.5f);
  const std::vector<float> expected =
      FirstOutput(ConvNormRelu(true, "norm_relu_run_leak.onnx"), false, x);
  int zeros = 0;
  for (float v : expected) zeros += v == 0.0f;
  EXPECT_GT(zeros, 0);  // the Relu clamps something
  const std::string fused = ConvNormRelu(false, "norm_relu_run.onnx");
  for (bool onednn : {true, false}) {  // channels-last input with oneDNN, row-major without
    const std::vector<float> got = FirstOutput(fused, onednn, x);
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NEAR(got[i], expected[i], 1e-5f + 1e-4f * std::fabs(expected[i]))
          << (onednn ? "oneDNN" : "own kernels") << " at " << i;
    }
  }
}

TEST(BatchNormReluFusionTest, AModelFileMayNotSetTheInternalAttribute) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 4, 6, 6});
  for (const char* p : {"gamma", "beta", "mean"}) b.Weight(p, {4}, 0.5f);
  b.FloatConstant("var", {4}, {1.0f, 1.0f, 1.0f, 1.0f});
  auto* norm = b.Node("BatchNormalization", {"x", "gamma", "beta", "mean", "var"}, {"y"});
  OnnxBuilderForTest::String(norm, "tessera_activation", "Relu");
  b.Output("y");
  auto model = LoadOnnxModel(b.Write("norm_internal_attribute.onnx"), ModelOptions{});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(std::string(model.status().message()).find("tessera_activation"), std::string::npos)
      << model.status();
}

// DenseNet's dense layers: x [N, 8, 6, 6] -> Conv a (4 channels) -> Concat(x, a) -> BN -> Relu
// -> Conv b (4) -> Concat(x, a, b) -> BN -> Relu -> y [N, 16, 6, 6]. With oneDNN x is row-major
// and a, b channels-last: the first join is mostly row-major bytes, the second half and half.
// With `leak` both joins are graph outputs too, which blocks the fusion. `axis` is the Concats'.
std::string DenseLayers(bool leak, int64_t axis, const std::string& file) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 8, 6, 6});
  b.Weight("wa", {4, 8, 3, 3}, 0.3f);
  b.Weight("wb", {4, 12, 3, 3}, 0.3f);
  for (int64_t channels : {12, 16}) {
    const std::string n = std::to_string(channels);
    b.Weight("gamma" + n, {channels}, 1.0f);
    b.Weight("beta" + n, {channels}, 0.5f);
    b.Weight("mean" + n, {channels}, 0.3f);
    std::vector<float> var;
    for (int64_t c = 0; c < channels; ++c) var.push_back(0.25f + 0.125f * static_cast<float>(c));
    b.FloatConstant("var" + n, {channels}, var);
  }
  OnnxBuilderForTest::Ints(b.Node("Conv", {"x", "wa"}, {"a"}), "pads", {1, 1, 1, 1});
  OnnxBuilderForTest::Int(b.Node("Concat", {"x", "a"}, {"xa"}), "axis", axis);
  b.Node("BatchNormalization", {"xa", "gamma12", "beta12", "mean12", "var12"}, {"n12"});
  b.Node("Relu", {"n12"}, {"r12"});
  OnnxBuilderForTest::Ints(b.Node("Conv", {"r12", "wb"}, {"b"}), "pads", {1, 1, 1, 1});
  OnnxBuilderForTest::Int(b.Node("Concat", {"x", "a", "b"}, {"xab"}), "axis", axis);
  b.Node("BatchNormalization", {"xab", "gamma16", "beta16", "mean16", "var16"}, {"n16"});
  b.Node("Relu", {"n16"}, {"y"});
  b.Output("y");
  if (leak) {
    b.Output("xa");
    b.Output("xab");
  }
  return b.Write(file);
}

TEST(ConcatBatchNormFusionTest, TheNormalisationTakesTheConcatsInputs) {
  auto graph = PreparedGraph(DenseLayers(false, 1, "dense_layers.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  const size_t nodes = graph->nodes.size();
  EXPECT_EQ(FuseConcatBatchNorm(&*graph), 2);
  EXPECT_EQ(graph->nodes.size(), nodes - 2);
  std::vector<size_t> parts;
  for (const Node& node : graph->nodes) {
    EXPECT_NE(node.op_type, "Concat");
    if (node.op_type != "BatchNormalization") continue;
    parts.push_back(static_cast<size_t>(node.attributes.GetInt("tessera_concat", 0)));
    ASSERT_EQ(node.inputs.size(), 4 + parts.back());
    EXPECT_EQ(graph->value_names[node.inputs[0]], "x");
    EXPECT_EQ(graph->value_names[node.inputs[5]], "a");
  }
  EXPECT_EQ(parts, (std::vector<size_t>{2, 3}));
  // -3 is axis 1 of a 4-D tensor; the joins read elsewhere, or on another axis, stay.
  graph = PreparedGraph(DenseLayers(false, -3, "dense_layers_negative_axis.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(FuseConcatBatchNorm(&*graph), 2);
  graph = PreparedGraph(DenseLayers(true, 1, "dense_layers_leak.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(FuseConcatBatchNorm(&*graph), 0);
  OnnxBuilderForTest b;
  b.Input("x", {-1, 4, 6, 6});
  for (const char* p : {"gamma", "beta", "mean", "var"}) b.Weight(p, {4}, 0.5f);
  OnnxBuilderForTest::Int(b.Node("Concat", {"x", "x"}, {"rows"}), "axis", 2);
  b.Node("BatchNormalization", {"rows", "gamma", "beta", "mean", "var"}, {"y"});
  b.Output("y");
  graph = PreparedGraph(b.Write("concat_rows_norm.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(FuseConcatBatchNorm(&*graph), 0);
  // A Concat of one input (each dense block's first layer) is a copy the normalisation skips.
  OnnxBuilderForTest one;
  one.Input("x", {-1, 4, 6, 6});
  for (const char* p : {"gamma", "beta", "mean", "var"}) one.Weight(p, {4}, 0.5f);
  OnnxBuilderForTest::Int(one.Node("Concat", {"x"}, {"copy"}), "axis", 1);
  one.Node("BatchNormalization", {"copy", "gamma", "beta", "mean", "var"}, {"y"});
  one.Output("y");
  graph = PreparedGraph(one.Write("concat_one_norm.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(FuseConcatBatchNorm(&*graph), 1);
  ASSERT_EQ(graph->nodes.size(), 1u);
  EXPECT_EQ(graph->value_names[graph->nodes[0].inputs[0]], "x");
}

// All of output 0's values.
std::vector<float> WholeOutput(const std::string& path, bool onednn, const RandomX& x) {
  ModelOptions options;
  options.onednn = onednn;
  auto model = LoadOnnxModel(path, options);
  EXPECT_TRUE(model.ok()) << model.status();
  std::vector<Tensor> out;
  EXPECT_TRUE(model.ok() && (*model)->Run({x.view}, &out).ok());
  if (out.empty()) return {};
  const auto* y = reinterpret_cast<const float*>(out[0].bytes.data());
  return std::vector<float>(y, y + out[0].bytes.size() / sizeof(float));
}

TEST(ConcatBatchNormFusionTest, FusedComputesWhatTheUnfusedOneDoes) {
  const RandomX x({3, 8, 6, 6}, 17, 1.0f);
  const std::vector<float> expected =
      WholeOutput(DenseLayers(true, 1, "dense_layers_run_leak.onnx"), false, x);
  ASSERT_EQ(expected.size(), 3u * 16 * 6 * 6);
  int zeros = 0;
  for (float v : expected) zeros += v == 0.0f;
  EXPECT_GT(zeros, 0);  // the Relu clamps something
  const std::string fused = DenseLayers(false, 1, "dense_layers_run.onnx");
  for (bool onednn : {true, false}) {  // mixed layouts with oneDNN, row-major without
    const std::vector<float> got = WholeOutput(fused, onednn, x);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NEAR(got[i], expected[i], 1e-5f + 1e-4f * std::fabs(expected[i]))
          << (onednn ? "oneDNN" : "own kernels") << " at " << i;
    }
  }
}

TEST(ConcatBatchNormFusionTest, AModelFileMayNotSetTheInternalAttributeOrMoreInputs) {
  for (bool attribute : {true, false}) {
    OnnxBuilderForTest b;
    b.Input("x", {-1, 4, 6, 6});
    for (const char* p : {"gamma", "beta", "mean", "var"}) b.Weight(p, {4}, 0.5f);
    auto* norm = b.Node("BatchNormalization", {"x", "gamma", "beta", "mean", "var", "x"}, {"y"});
    if (attribute) OnnxBuilderForTest::Int(norm, "tessera_concat", 2);
    b.Output("y");
    auto model = LoadOnnxModel(b.Write("norm_concat_attribute.onnx"), ModelOptions{});
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(model.status().message())
                  .find(attribute ? "tessera_concat" : "BatchNormalization takes 5 inputs"),
              std::string::npos)
        << model.status();
  }
}

}  // namespace
}  // namespace tessera::engine
