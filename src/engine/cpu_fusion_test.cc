// The CPU model's own fusions (graph_passes.h). FuseMatMulEpilogues: a MatMul by constant weights
// absorbs its bias Add and an erf-form GELU in both orders PyTorch exports. FuseConvResidual: a
// Conv absorbs the residual Add after it, and then the Relu. FuseConvEltwise: a Conv absorbs a
// LeakyRelu, Sigmoid, Tanh or SiLU after it. For all: the CPU model computes the
// same values with and without oneDNN, intermediates that are read elsewhere block them, and the
// shared graph (what the CUDA backend gets) stays unfused.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/fusion_test_util.h"
#include "engine/graph_passes.h"
#include "engine/onnx_builder_for_test.h"
#include "engine/onnx_import.h"
#include "gtest/gtest.h"
#include "tessera/common/float16.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {
namespace {

constexpr int64_t kDepth = 6;   // K
constexpr int64_t kWidth = 10;  // N

enum class GeluOrder { kNone, kTimesOnePlusErfFirst, kHalfFirst };
enum class GeluForm { kErf, kTanh };

struct Weights {
  std::vector<float> w, bias;
};

Weights MakeWeights() {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 0.6f);
  Weights out;
  for (int64_t i = 0; i < kDepth * kWidth; ++i) out.w.push_back(dist(rng));
  for (int64_t i = 0; i < kWidth; ++i) out.bias.push_back(dist(rng));
  return out;
}

struct Case {
  GeluOrder gelu = GeluOrder::kTimesOnePlusErfFirst;
  GeluForm form = GeluForm::kErf;
  bool bias = true;
  bool bias_is_output = false;  // the biased product is also a graph output
  std::vector<int64_t> bias_dims = {kWidth};
  // The GELU constants as a BF16 model file holds them (widened at import): the coarsest rounding
  // the fusion must still recognise.
  bool bf16_constants = false;
};

// x [batch, 3, K] -> MatMul W [K, N] -> (Add bias) -> (GELU) -> y.
std::string Model(const Case& c, const std::string& file) {
  const Weights weights = MakeWeights();
  OnnxBuilderForTest b;
  b.Input("x", {-1, 3, kDepth});
  b.FloatConstant("w", {kDepth, kWidth}, weights.w);
  b.Node("MatMul", {"x", "w"}, {"mm"});
  std::string y = "mm";
  if (c.bias) {
    std::vector<float> bias = weights.bias;
    int64_t count = 1;
    for (int64_t d : c.bias_dims) count *= d;
    bias.resize(count, 0.25f);
    b.FloatConstant("bias", c.bias_dims, bias);
    b.Node("Add", {"bias", "mm"}, {"biased"});  // bias first, as PyTorch writes it
    y = "biased";
  }
  if (c.gelu != GeluOrder::kNone) {
    const auto stored = [&](float v) { return c.bf16_constants ? Bf16ToFloat(FloatToBf16(v)) : v; };
    b.FloatConstant("one", {}, {1.0f});
    b.FloatConstant("half", {}, {0.5f});
    if (c.form == GeluForm::kErf) {
      b.FloatConstant("sqrt2", {}, {stored(1.41421354f)});
      b.Node("Div", {y, "sqrt2"}, {"scaled"});
      b.Node("Erf", {"scaled"}, {"erf"});
      b.Node("Add", {"erf", "one"}, {"one_plus_erf"});
    } else {
      // As torch exports nn.GELU(approximate="tanh"), constants first where it puts them.
      b.FloatConstant("k", {}, {stored(0.044715f)});
      b.FloatConstant("sqrt_2_over_pi", {}, {stored(0.797884583f)});
      b.Node("Mul", {y, y}, {"square"});
      b.Node("Mul", {y, "square"}, {"cube"});
      b.Node("Mul", {"k", "cube"}, {"k_cube"});
      b.Node("Add", {y, "k_cube"}, {"inner"});
      b.Node("Mul", {"sqrt_2_over_pi", "inner"}, {"pre"});
      b.Node("Tanh", {"pre"}, {"tanh"});
      b.Node("Add", {"one", "tanh"}, {"one_plus_erf"});
    }
    if (c.gelu == GeluOrder::kTimesOnePlusErfFirst) {
      b.Node("Mul", {y, "one_plus_erf"}, {"product"});
      b.Node("Mul", {"product", "half"}, {"y"});
    } else {
      b.Node("Mul", {y, "half"}, {"half_x"});
      b.Node("Mul", {"half_x", "one_plus_erf"}, {"y"});
    }
    y = "y";
  }
  b.Output(y);
  if (c.bias_is_output) b.Output("biased");
  return b.Write(file);
}

TEST(MatMulFusionTest, BiasAndGeluBecomeOneMatMulInBothFormsAndExportOrders) {
  for (GeluForm form : {GeluForm::kErf, GeluForm::kTanh}) {
    for (GeluOrder order : {GeluOrder::kTimesOnePlusErfFirst, GeluOrder::kHalfFirst}) {
      for (bool bf16_constants : {false, true}) {
        Case c;
        c.gelu = order;
        c.form = form;
        c.bf16_constants = bf16_constants;
        SCOPED_TRACE(bf16_constants ? "BF16-rounded constants" : "FP32 constants");
        auto graph = PreparedGraph(Model(c, "matmul_gelu.onnx"));
        ASSERT_TRUE(graph.ok()) << graph.status();
        // The backend-independent passes leave it alone: the CUDA backend gets plain ONNX ops.
        EXPECT_EQ(graph->nodes.size(), form == GeluForm::kErf ? 7u : 11u);
        EXPECT_EQ(FuseMatMulEpilogues(&*graph), 1);
        RemoveDeadNodes(&*graph);
        ASSERT_EQ(graph->nodes.size(), 1u);
        const Node& mm = graph->nodes[0];
        EXPECT_EQ(mm.op_type, "MatMul");
        EXPECT_EQ(mm.inputs.size(), 3u);
        EXPECT_EQ(mm.attributes.GetString("tessera_activation"),
                  form == GeluForm::kErf ? "Gelu" : "GeluTanh");
        EXPECT_EQ(graph->value_names[mm.outputs[0]], "y");
      }
    }
  }
}

TEST(MatMulFusionTest, GeluWithoutBiasAndBiasWithoutGelu) {
  Case gelu_only;
  gelu_only.bias = false;
  auto graph = PreparedGraph(Model(gelu_only, "matmul_gelu_only.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(FuseMatMulEpilogues(&*graph), 1);
  RemoveDeadNodes(&*graph);
  ASSERT_EQ(graph->nodes.size(), 1u);
  EXPECT_EQ(graph->nodes[0].inputs.size(), 2u);
  EXPECT_EQ(graph->nodes[0].attributes.GetString("tessera_activation"), "Gelu");

  Case bias_only;
  bias_only.gelu = GeluOrder::kNone;
  graph = PreparedGraph(Model(bias_only, "matmul_bias_only.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(FuseMatMulEpilogues(&*graph), 1);
  RemoveDeadNodes(&*graph);
  ASSERT_EQ(graph->nodes.size(), 1u);
  EXPECT_EQ(graph->nodes[0].inputs.size(), 3u);
  EXPECT_FALSE(graph->nodes[0].attributes.Has("tessera_activation"));
}

TEST(MatMulFusionTest, AReadIntermediateOrAnotherBiasShapeBlocksIt) {
  // The biased product is a graph output: the bias is absorbed, the GELU is not.
  Case leaky;
  leaky.bias_is_output = true;
  auto graph = PreparedGraph(Model(leaky, "matmul_leaky.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(FuseMatMulEpilogues(&*graph), 1);
  RemoveDeadNodes(&*graph);
  EXPECT_EQ(graph->nodes.size(), 6u);
  EXPECT_EQ(graph->nodes[0].inputs.size(), 3u);
  EXPECT_FALSE(graph->nodes[0].attributes.Has("tessera_activation"));

  // A [3, N] bias adds a different row to each of the 3 rows: not a bias over the last dim.
  Case per_row;
  per_row.gelu = GeluOrder::kNone;
  per_row.bias_dims = {3, kWidth};
  graph = PreparedGraph(Model(per_row, "matmul_per_row.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(FuseMatMulEpilogues(&*graph), 0);
  EXPECT_EQ(graph->nodes.size(), 2u);
}

TEST(MatMulFusionTest, FusedModelComputesTheFormulaWithAndWithoutOneDnn) {
  const Weights weights = MakeWeights();
  for (auto [form, order] : {std::pair{GeluForm::kErf, GeluOrder::kTimesOnePlusErfFirst},
                             std::pair{GeluForm::kErf, GeluOrder::kHalfFirst},
                             std::pair{GeluForm::kTanh, GeluOrder::kTimesOnePlusErfFirst},
                             std::pair{GeluForm::kTanh, GeluOrder::kHalfFirst}}) {
    Case c;
    c.gelu = order;
    c.form = form;
    const std::string path = Model(c, "matmul_gelu_run.onnx");
    constexpr int64_t kBatch = 4, kRows = kBatch * 3;
    std::vector<float> x(kRows * kDepth);
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 1.5f);
    for (float& v : x) v = dist(rng);
    std::vector<double> expected(kRows * kWidth);
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t j = 0; j < kWidth; ++j) {
        double h = weights.bias[j];
        for (int64_t p = 0; p < kDepth; ++p)
          h += double{x[r * kDepth + p]} * weights.w[p * kWidth + j];
        expected[r * kWidth + j] =
            form == GeluForm::kErf
                ? 0.5 * h * (1.0 + std::erf(h / std::sqrt(2.0)))
                : 0.5 * h * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (h + 0.044715 * h * h * h)));
      }
    }
    for (bool onednn : {true, false}) {
      ModelOptions options;
      options.onednn = onednn;
      options.num_threads = 2;
      auto model = LoadOnnxModel(path, options);
      ASSERT_TRUE(model.ok()) << model.status();
      TensorView view{
          "x", DataType::kFp32, {kBatch, 3, kDepth}, x.data(), x.size() * sizeof(float)};
      std::vector<Tensor> out;
      ASSERT_TRUE((*model)->Run({view}, &out).ok());
      ASSERT_EQ(out[0].shape, (Shape{kBatch, 3, kWidth}));
      const auto* y = reinterpret_cast<const float*>(out[0].bytes.data());
      for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_NEAR(y[i], expected[i], 1e-5 + 1e-4 * std::fabs(expected[i])) << i;
      }
    }
  }
}

TEST(MatMulFusionTest, AFileMatMulWithTheEnginesOwnInputsIsInvalid) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, kDepth});
  b.Weight("w", {kDepth, kWidth}, 0.5f);
  b.Weight("bias", {kWidth}, 0.5f);
  b.Node("MatMul", {"x", "w", "bias"}, {"y"});
  b.Output("y");
  auto model = LoadOnnxModel(b.Write("matmul_three_inputs.onnx"), ModelOptions{});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("MatMul takes 2 inputs, the node has 3"),
            std::string::npos)
      << model.status();
}

// x [batch, 4, 5, 5] -> Conv "a" (3x3, pad 1) -> Conv "b" (3x3, pad 1, no bias) -> Add(b, a)
// -> Relu -> y: ResNet's basic block without BatchNorm. With `leak_b`, b is also a graph output.
std::string ResidualBlock(bool leak_b, const std::string& file) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 4, 5, 5});
  b.Weight("wa", {4, 4, 3, 3}, 0.3f);
  b.Weight("ba", {4}, 0.3f);
  b.Weight("wb", {4, 4, 3, 3}, 0.3f);
  OnnxBuilderForTest::Ints(b.Node("Conv", {"x", "wa", "ba"}, {"a"}), "pads", {1, 1, 1, 1});
  OnnxBuilderForTest::Ints(b.Node("Conv", {"a", "wb"}, {"b"}), "pads", {1, 1, 1, 1});
  b.Node("Add", {"b", "a"}, {"sum"});
  b.Node("Relu", {"sum"}, {"y"});
  b.Output("y");
  if (leak_b) b.Output("b");
  return b.Write(file);
}

TEST(ConvResidualFusionTest, TheSecondConvTakesTheResidualAndTheRelu) {
  auto graph = PreparedGraph(ResidualBlock(false, "residual_block.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->nodes.size(), 4u);  // the shared passes leave the Add and Relu alone
  EXPECT_EQ(FuseConvResidual(&*graph), 1);
  EXPECT_EQ(FuseConvActivation(&*graph), 1);
  ASSERT_EQ(graph->nodes.size(), 2u);
  const Node& conv = graph->nodes[1];
  ASSERT_EQ(conv.inputs.size(), 4u);
  EXPECT_EQ(conv.inputs[2], kNoValue);  // no bias
  EXPECT_EQ(graph->value_names[conv.inputs[3]], "a");
  EXPECT_EQ(conv.attributes.GetInt("tessera_residual", 0), 1);
  EXPECT_EQ(conv.attributes.GetString("tessera_activation"), "Relu");
  EXPECT_EQ(graph->value_names[conv.outputs[0]], "y");

  // The Conv output read elsewhere (a graph output) blocks it.
  graph = PreparedGraph(ResidualBlock(true, "residual_block_leaky.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(FuseConvResidual(&*graph), 0);
}

TEST(ConvResidualFusionTest, AResidualOfAnotherShapeIsNotTaken) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 4, 5, 5});
  b.Input("scale", {1, 4, 1, 1});  // broadcast over the Conv output: not a residual
  b.Weight("w", {4, 4, 1, 1}, 0.3f);
  b.Node("Conv", {"x", "w"}, {"c"});
  b.Node("Add", {"c", "scale"}, {"y"});
  b.Output("y");
  auto graph = PreparedGraph(b.Write("residual_broadcast.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(FuseConvResidual(&*graph), 0);
}

TEST(ConvResidualFusionTest, FusedBlockComputesWhatTheUnfusedOneDoes) {
  const std::string fused_path = ResidualBlock(false, "residual_run.onnx");
  const std::string unfused_path = ResidualBlock(true, "residual_run_leaky.onnx");
  const RandomX x({3, 4, 5, 5}, 9, 1.0f);
  const std::vector<float> expected = FirstOutput(unfused_path, false, x);
  int positive = 0;
  for (float v : expected) positive += v > 0;
  EXPECT_GT(positive, 0);  // the Relu leaves something
  EXPECT_LT(positive, static_cast<int>(expected.size()));  // and clips something
  for (bool onednn : {true, false}) {
    const std::vector<float> got = FirstOutput(fused_path, onednn, x);
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_NEAR(got[i], expected[i], 1e-5f + 1e-4f * std::fabs(expected[i])) << i;
    }
  }
}

TEST(ConvResidualFusionTest, AFileConvWithTheEnginesOwnInputsIsInvalid) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 4, 5, 5});
  b.Weight("w", {4, 4, 1, 1}, 0.3f);
  b.Weight("bias", {4}, 0.3f);
  b.Node("Conv", {"x", "w", "bias", "x"}, {"y"});
  b.Output("y");
  auto model = LoadOnnxModel(b.Write("conv_four_inputs.onnx"), ModelOptions{});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("Conv takes 2 or 3 inputs, the node has 4"),
            std::string::npos)
      << model.status();
}

// x [batch, 4, 5, 5] -> Conv "a" -> Conv "c" -> Conv "b" -> Add(b, a) -> Relu -> y: the residual
// "a" is last read by the Conv that absorbs the Add, which may then write its output over it.
// With `read_after`, z = y + a is a second output, so a is read after that Conv; with `leak_b`,
// b is a graph output, which blocks the fusion.
std::string SkipBlock(bool read_after, bool leak_b, const std::string& file) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 4, 5, 5});
  for (const char* w : {"wa", "wc", "wb"}) b.Weight(w, {4, 4, 3, 3}, 0.3f);
  b.Weight("ba", {4}, 0.3f);
  OnnxBuilderForTest::Ints(b.Node("Conv", {"x", "wa", "ba"}, {"a"}), "pads", {1, 1, 1, 1});
  OnnxBuilderForTest::Ints(b.Node("Conv", {"a", "wc"}, {"c"}), "pads", {1, 1, 1, 1});
  OnnxBuilderForTest::Ints(b.Node("Conv", {"c", "wb"}, {"b"}), "pads", {1, 1, 1, 1});
  b.Node("Add", {"b", "a"}, {"sum"});
  b.Node("Relu", {"sum"}, {"y"});
  b.Output("y");
  if (read_after) {
    b.Node("Add", {"y", "a"}, {"z"});
    b.Output("z");
  }
  if (leak_b) b.Output("b");
  return b.Write(file);
}

// Buffers the memory plan gives the model's activations at batch 3.
int PlannedBuffers(const std::string& path, bool onednn) {
  ModelOptions options;
  options.onednn = onednn;
  auto model = LoadOnnxModel(path, options);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return -1;
  auto info = (*model)->PlanMemory(3);
  EXPECT_TRUE(info.ok()) << info.status();
  return info.ok() ? info->num_values : -1;
}

TEST(ConvResidualFusionTest, TheOutputTakesOverTheResidualsBufferWhenNothingReadsItLater) {
  const std::string skip = SkipBlock(false, false, "skip_block.onnx");
  const std::string read_after = SkipBlock(true, false, "skip_block_read_after.onnx");
  for (bool onednn : {true, false}) {
    // a, c and y, with y in a's bytes.
    EXPECT_EQ(PlannedBuffers(skip, onednn), 2) << onednn;
    // a is still read by z: a, c, y and z each have their own.
    EXPECT_EQ(PlannedBuffers(read_after, onednn), 4) << onednn;
    // ResidualBlock's Conv reads the residual as X too: its output must not overwrite it.
    EXPECT_EQ(PlannedBuffers(ResidualBlock(false, "residual_plan.onnx"), onednn), 2) << onednn;
  }
}

TEST(ConvResidualFusionTest, PlannedRunsOverTheResidualComputeWhatTheUnfusedOneDoes) {
  const std::string skip = SkipBlock(false, false, "skip_block_run.onnx");
  const RandomX x({3, 4, 5, 5}, 21, 1.0f);
  const std::vector<float> expected =
      FirstOutput(SkipBlock(false, true, "skip_block_unfused.onnx"), false, x);
  for (bool onednn : {true, false}) {
    ModelOptions options;
    options.onednn = onednn;
    auto model = LoadOnnxModel(skip, options);
    ASSERT_TRUE(model.ok()) << model.status();
    // The first Run records the plan; the later ones run on it, the output over the residual.
    for (int run = 0; run < 3; ++run) {
      std::vector<Tensor> out;
      ASSERT_TRUE((*model)->Run({x.view}, &out).ok());
      ASSERT_EQ(out[0].bytes.size(), expected.size() * sizeof(float));
      const auto* got = reinterpret_cast<const float*>(out[0].bytes.data());
      for (size_t i = 0; i < expected.size(); ++i) {
        ASSERT_NEAR(got[i], expected[i], 1e-5f + 1e-4f * std::fabs(expected[i]))
            << "onednn " << onednn << " run " << run << " element " << i;
      }
    }
  }
}

// x [batch, 4, 6, 6] -> Conv (3x3, pad 1) -> `activation` -> y; "Swish" is Sigmoid and Mul (with
// the Mul's inputs swapped by `swap`). With `leak`, the Conv output is a graph output too, which
// blocks the fusion: the same computation unfused.
std::string ConvThen(const std::string& activation, bool swap, bool leak, const std::string& file) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 4, 6, 6});
  b.Weight("w", {4, 4, 3, 3}, 0.4f);
  b.Weight("bias", {4}, 0.3f);
  OnnxBuilderForTest::Ints(b.Node("Conv", {"x", "w", "bias"}, {"c"}), "pads", {1, 1, 1, 1});
  if (activation == "Swish") {
    b.Node("Sigmoid", {"c"}, {"s"});
    b.Node("Mul", swap ? std::vector<std::string>{"s", "c"} : std::vector<std::string>{"c", "s"},
           {"y"});
  } else {
    auto* act = b.Node(activation, {"c"}, {"y"});
    if (activation == "LeakyRelu") OnnxBuilderForTest::Float(act, "alpha", 0.2f);
  }
  b.Output("y");
  if (leak) b.Output("c");
  return b.Write(file);
}

TEST(ConvEltwiseFusionTest, EachActivationBecomesPartOfTheConv) {
  for (const std::string act : {"LeakyRelu", "Sigmoid", "Tanh", "Swish"}) {
    for (bool swap : {false, true}) {
      if (swap && act != "Swish") continue;
      auto graph = PreparedGraph(ConvThen(act, swap, false, "conv_" + act + ".onnx"));
      ASSERT_TRUE(graph.ok()) << graph.status();
      EXPECT_EQ(FuseConvEltwise(&*graph), 1) << act;
      ASSERT_EQ(graph->nodes.size(), 1u) << act;
      const Node& conv = graph->nodes[0];
      EXPECT_EQ(conv.attributes.GetString("tessera_activation"), act);
      EXPECT_EQ(graph->value_names[conv.outputs[0]], "y");
      if (act == "LeakyRelu") {
        EXPECT_FLOAT_EQ(conv.attributes.GetFloat("tessera_alpha", 0), 0.2f);
      }

      // The Conv output read elsewhere blocks it; the shared graph stays unfused.
      graph = PreparedGraph(ConvThen(act, swap, true, "conv_" + act + "_leak.onnx"));
      ASSERT_TRUE(graph.ok()) << graph.status();
      EXPECT_EQ(FuseConvEltwise(&*graph), 0) << act;
    }
  }
}

TEST(ConvEltwiseFusionTest, AMulOfTheSigmoidAndAnotherValueIsNotASwish) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 4, 6, 6});
  b.Input("other", {-1, 4, 6, 6});
  b.Weight("w", {4, 4, 1, 1}, 0.4f);
  b.Node("Conv", {"x", "w"}, {"c"});
  b.Node("Sigmoid", {"c"}, {"s"});
  b.Node("Mul", {"s", "other"}, {"m"});
  b.Node("Add", {"m", "c"}, {"y"});  // the Conv output's second reader is not the Mul
  b.Output("y");
  auto graph = PreparedGraph(b.Write("conv_sigmoid_gate.onnx"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(FuseConvEltwise(&*graph), 0);
  EXPECT_EQ(graph->nodes.size(), 4u);
}

TEST(ConvEltwiseFusionTest, FusedConvComputesWhatTheUnfusedOneDoes) {
  const RandomX x({2, 4, 6, 6}, 5, 1.5f);
  for (const std::string act : {"LeakyRelu", "Sigmoid", "Tanh", "Swish"}) {
    const std::vector<float> expected =
        FirstOutput(ConvThen(act, true, true, "conv_run_" + act + "_leak.onnx"), false, x);
    int negative = 0;
    for (float v : expected) negative += v < 0;
    if (act != "Sigmoid") {
      EXPECT_GT(negative, 0) << act;  // the negative side is exercised
    }
    const std::string fused_path = ConvThen(act, true, false, "conv_run_" + act + ".onnx");
    for (bool onednn : {true, false}) {
      size_t kernels = 0;
      // One kernel when fused; the Conv and its activation when not.
      const std::vector<float> got = FirstOutput(fused_path, onednn, x, &kernels);
      EXPECT_EQ(kernels, 1u) << act;
      for (size_t i = 0; i < expected.size(); ++i) {
        ASSERT_NEAR(got[i], expected[i], 1e-5f + 1e-4f * std::fabs(expected[i]))
            << act << (onednn ? " oneDNN" : " own kernels") << " at " << i;
      }
    }
  }
}

// Attention's scores: x times its own transpose, scaled by a constant (Div by 4, or Mul by 0.25
// on the left), a mask added, Softmax. With `leak` the product is also a graph output.
std::string ScaledScores(bool mul, bool leak, const std::string& file) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 2, 6, 6});
  b.FloatConstant("c", {}, {mul ? 0.25f : 4.0f});
  b.Weight("mask", {6}, -0.5f);
  OnnxBuilderForTest::Ints(b.Node("Transpose", {"x"}, {"xt"}), "perm", {0, 1, 3, 2});
  b.Node("MatMul", {"x", "xt"}, {"scores"});
  if (mul) {
    b.Node("Mul", {"c", "scores"}, {"scaled"});
  } else {
    b.Node("Div", {"scores", "c"}, {"scaled"});
  }
  b.Node("Add", {"scaled", "mask"}, {"masked"});
  OnnxBuilderForTest::Int(b.Node("Softmax", {"masked"}, {"y"}), "axis", -1);
  b.Output("y");
  if (leak) b.Output("scores");
  return b.Write(file);
}

TEST(MatMulScaleFusionTest, ADivOrMulByAConstantBecomesTheMatMulsScale) {
  for (bool mul : {false, true}) {
    auto graph = PreparedGraph(ScaledScores(mul, false, "scaled_scores.onnx"));
    ASSERT_TRUE(graph.ok()) << graph.status();
    const size_t nodes = graph->nodes.size();
    EXPECT_EQ(FuseMatMulScale(&*graph), 1);
    EXPECT_EQ(graph->nodes.size(), nodes - 1);
    const auto matmul = std::find_if(graph->nodes.begin(), graph->nodes.end(),
                                     [](const Node& node) { return node.op_type == "MatMul"; });
    ASSERT_NE(matmul, graph->nodes.end());
    EXPECT_FLOAT_EQ(matmul->attributes.GetFloat("tessera_scale", 0.0f), 0.25f);
    EXPECT_EQ(graph->value_names[matmul->outputs[0]], "scaled");
    graph = PreparedGraph(ScaledScores(mul, true, "scaled_scores_leak.onnx"));
    ASSERT_TRUE(graph.ok()) << graph.status();
    EXPECT_EQ(FuseMatMulScale(&*graph), 0);  // the unscaled product is read too
  }
}

TEST(MatMulScaleFusionTest, FusedComputesWhatTheUnfusedOneDoes) {
  const RandomX x({3, 2, 6, 6}, 21, 1.0f);
  const std::vector<float> expected =
      FirstOutput(ScaledScores(false, true, "scaled_scores_run_leak.onnx"), false, x);
  for (bool mul : {false, true}) {
    const std::string fused = ScaledScores(mul, false, "scaled_scores_run.onnx");
    for (bool onednn : {true, false}) {
      const std::vector<float> got = FirstOutput(fused, onednn, x);
      ASSERT_EQ(got.size(), expected.size());
      for (size_t i = 0; i < expected.size(); ++i) {
        ASSERT_NEAR(got[i], expected[i], 1e-5f + 1e-4f * std::fabs(expected[i]))
            << (mul ? "Mul" : "Div") << (onednn ? " oneDNN" : " own kernels") << " at " << i;
      }
    }
  }
}

TEST(MatMulScaleFusionTest, AModelFileMayNotSetTheInternalAttribute) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 4});
  b.Weight("w", {4, 4}, 0.5f);
  OnnxBuilderForTest::Float(b.Node("MatMul", {"x", "w"}, {"y"}), "tessera_scale", 2.0f);
  b.Output("y");
  auto model = LoadOnnxModel(b.Write("matmul_internal_scale.onnx"), ModelOptions{});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(std::string(model.status().message()).find("tessera_scale"), std::string::npos)
      << model.status();
}

}  // namespace
}  // namespace tessera::engine
