// FuseLayerNorm: PyTorch's decomposed LayerNorm (opset < 17 exports) becomes one node, computes
// the same values, and is left alone when an intermediate has another reader.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/graph_passes.h"
#include "engine/onnx_builder_for_test.h"
#include "engine/onnx_import.h"
#include "gtest/gtest.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {
namespace {

constexpr int64_t kWidth = 8;
constexpr float kEps = 1e-5f;

// x -> the 9-node decomposition of LayerNorm(x) over the last axis -> y. With `leak`, the
// normalised value before the affine part is a second graph output (so it must survive).
std::string DecomposedLayerNorm(bool leak) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 3, kWidth});
  b.FloatConstant("two", {}, {2.0f});
  b.FloatConstant("eps", {}, {kEps});
  b.Weight("gamma", {kWidth}, 1.0f);
  b.Weight("beta", {kWidth}, 1.0f);
  OnnxBuilderForTest::Ints(b.Node("ReduceMean", {"x"}, {"mean"}), "axes", {-1});
  b.Node("Sub", {"x", "mean"}, {"d"});
  b.Node("Pow", {"d", "two"}, {"sq"});
  OnnxBuilderForTest::Ints(b.Node("ReduceMean", {"sq"}, {"var"}), "axes", {-1});
  b.Node("Add", {"var", "eps"}, {"var_eps"});
  b.Node("Sqrt", {"var_eps"}, {"std"});
  b.Node("Div", {"d", "std"}, {"normed"});
  b.Node("Mul", {"normed", "gamma"}, {"scaled"});
  b.Node("Add", {"scaled", "beta"}, {"y"});
  b.Output("y");
  if (leak) b.Output("normed");
  return b.Write(leak ? "layernorm_leaky.onnx" : "layernorm.onnx");
}

StatusOr<Graph> ImportForTest(const std::string& path) {
  return ImportOnnxModel(path, [](const std::string& op) { return cpu::FindOp(op) != nullptr; });
}

TEST(LayerNormFusionTest, NineNodesBecomeOneLayerNormalization) {
  auto graph = ImportForTest(DecomposedLayerNorm(false));
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto summary = RunGraphPasses(&*graph);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->layernorms_fused, 1);
  ASSERT_EQ(graph->nodes.size(), 1u);
  EXPECT_EQ(graph->nodes[0].op_type, "LayerNormalization");
  EXPECT_FLOAT_EQ(graph->nodes[0].attributes.GetFloat("epsilon", 0), kEps);
}

TEST(LayerNormFusionTest, FusedModelComputesTheDecomposedFormula) {
  auto model = LoadOnnxModel(DecomposedLayerNorm(false), ModelOptions{});
  ASSERT_TRUE(model.ok()) << model.status();
  // The reference: the same decomposition (same seeded weights) where a second output keeps
  // every node from being fused, so it runs node by node.
  auto unfused = LoadOnnxModel(DecomposedLayerNorm(true), ModelOptions{});
  ASSERT_TRUE(unfused.ok()) << unfused.status();
  std::vector<float> x(2 * 3 * kWidth);
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.5f, 2.0f);
  for (float& v : x) v = dist(rng);
  TensorView view{"x", DataType::kFp32, {2, 3, kWidth}, x.data(), x.size() * sizeof(float)};
  std::vector<Tensor> fused_out, unfused_out;
  ASSERT_TRUE((*model)->Run({view}, &fused_out).ok());
  ASSERT_TRUE((*unfused)->Run({view}, &unfused_out).ok());
  const auto* a = reinterpret_cast<const float*>(fused_out[0].bytes.data());
  const auto* e = reinterpret_cast<const float*>(unfused_out[0].bytes.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(a[i], e[i], 1e-5f) << i;
}

TEST(LayerNormFusionTest, AnIntermediateWithAnotherReaderBlocksTheFusion) {
  auto graph = ImportForTest(DecomposedLayerNorm(true));
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto summary = RunGraphPasses(&*graph);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->layernorms_fused, 0);
  EXPECT_EQ(graph->nodes.size(), 9u);
}

}  // namespace
}  // namespace tessera::engine
