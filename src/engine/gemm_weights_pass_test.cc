// TransposeGemmWeights: a Gemm with transB = 1 and a constant B of its own gets B stored [K, N]
// and transB = 0, computes what the file says at every batch size (the CPU GEMM's parts by rows,
// columns and the inner dim included), and leaves a B that another node reads alone.
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

constexpr int64_t kIn = 300, kOut = 40;

// x [batch, kIn] -> Gemm(x, w [kOut, kIn], bias, transB = 1, alpha 0.5, beta 2) -> y; with
// `shared`, a second Gemm reads the same w (-> z).
std::string LinearModel(bool shared) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, kIn});
  b.Weight("w", {kOut, kIn}, 0.1f);
  b.Weight("bias", {kOut}, 1.0f);
  auto* gemm = b.Node("Gemm", {"x", "w", "bias"}, {"y"});
  OnnxBuilderForTest::Int(gemm, "transB", 1);
  OnnxBuilderForTest::Float(gemm, "alpha", 0.5f);
  OnnxBuilderForTest::Float(gemm, "beta", 2.0f);
  b.Output("y");
  if (shared) {
    OnnxBuilderForTest::Int(b.Node("Gemm", {"x", "w"}, {"z"}), "transB", 1);
    b.Output("z");
  }
  return b.Write(shared ? "gemm_shared_weights.onnx" : "gemm_weights.onnx");
}

StatusOr<Graph> PassedGraph(const std::string& path) {
  auto graph =
      ImportOnnxModel(path, [](const std::string& op) { return cpu::FindOp(op) != nullptr; });
  if (!graph.ok()) return graph.status();
  auto summary = RunGraphPasses(&*graph);
  if (!summary.ok()) return summary.status();
  EXPECT_EQ(summary->gemm_weights_transposed, graph->nodes.size() == 1 ? 1 : 0);
  return graph;
}

TEST(TransposeGemmWeightsTest, OwnConstantIsStoredTransposed) {
  auto original = ImportOnnxModel(LinearModel(false), [](const std::string& op) { return true; });
  ASSERT_TRUE(original.ok()) << original.status();
  const Value& w = *original->constants[original->nodes[0].inputs[1]];
  auto graph = PassedGraph(LinearModel(false));
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ(graph->nodes.size(), 1u);
  const Node& gemm = graph->nodes[0];
  EXPECT_EQ(gemm.attributes.GetInt("transB", 1), 0);
  ASSERT_TRUE(graph->IsConstant(gemm.inputs[1]));
  const Value& t = *graph->constants[gemm.inputs[1]];
  ASSERT_EQ(t.shape(), (Shape{kIn, kOut}));
  for (int64_t n = 0; n < kOut; ++n) {
    for (int64_t k = 0; k < kIn; ++k) {
      ASSERT_EQ(t.data<float>()[k * kOut + n], w.data<float>()[n * kIn + k]) << n << "," << k;
    }
  }
  // The [N, K] original has no reader left: its memory goes.
  EXPECT_FALSE(graph->IsConstant(original->nodes[0].inputs[1]));
}

TEST(TransposeGemmWeightsTest, WeightsAnotherNodeReadsAreLeftAlone) {
  auto graph = PassedGraph(LinearModel(true));
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ(graph->nodes.size(), 2u);
  for (const Node& gemm : graph->nodes) EXPECT_EQ(gemm.attributes.GetInt("transB", 0), 1);
}

TEST(TransposeGemmWeightsTest, ModelComputesTheFilesGemmAtEveryBatchSize) {
  auto original = ImportOnnxModel(LinearModel(false), [](const std::string& op) { return true; });
  ASSERT_TRUE(original.ok()) << original.status();
  const float* w = original->constants[original->nodes[0].inputs[1]]->data<float>();
  const float* bias = original->constants[original->nodes[0].inputs[2]]->data<float>();
  for (bool onednn : {false, true}) {
    ModelOptions options;
    options.num_threads = 2;
    options.onednn = onednn;
    auto model = LoadOnnxModel(LinearModel(false), options);
    ASSERT_TRUE(model.ok()) << model.status();
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (int64_t batch : {1, 2, 5, 33}) {
      std::vector<float> x(batch * kIn);
      for (float& v : x) v = dist(rng);
      TensorView view{"x", DataType::kFp32, {batch, kIn}, x.data(), x.size() * sizeof(float)};
      std::vector<Tensor> out;
      ASSERT_TRUE((*model)->Run({view}, &out).ok());
      const auto* y = reinterpret_cast<const float*>(out[0].bytes.data());
      for (int64_t i = 0; i < batch; ++i) {
        for (int64_t n = 0; n < kOut; ++n) {
          double sum = 0;
          for (int64_t k = 0; k < kIn; ++k) sum += double(x[i * kIn + k]) * w[n * kIn + k];
          EXPECT_NEAR(y[i * kOut + n], 0.5 * sum + 2.0 * bias[n], 1e-3)
              << "onednn " << onednn << " batch " << batch << " row " << i << " col " << n;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessera::engine
