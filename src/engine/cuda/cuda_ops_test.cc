// Each CUDA op on a small graph built here, against the CPU engine on the same file (FP32 at 1e-4,
// FP16 at 1e-2 relative). Ops the CPU engine of this build lacks are skipped with the reason (the
// CPU is the reference). Also the host-side shape chain with a dynamic batch, the fused Conv
// activation attributes, and the load-time report of ops the CUDA backend lacks.
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "engine/cuda/cuda_op_test_util.h"
#include "engine/cuda/cuda_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace tessera::engine {
namespace {

using ::testing::HasSubstr;

// One-node model: op(x[, y]) with the given initializers and attributes.
struct UnaryCase {
  std::string op;
  float lo, hi;  // input range (Sqrt/Pow need positives)
  float step = 0;  // Feed::step: inputs exact in FP16, for the step functions
};

void PrintTo(const UnaryCase& c, std::ostream* os) { *os << c.op; }

class CudaUnaryOpTest : public ::testing::TestWithParam<UnaryCase> {};

TEST_P(CudaUnaryOpTest, MatchesCpu) {
  TESSERA_REQUIRE_GPU();
  const UnaryCase& c = GetParam();
  // 198 elements: one at a time; 512: 16-byte vectors.
  for (const Shape& shape : {Shape{2, 3, 33}, Shape{2, 4, 64}}) {
    SCOPED_TRACE(ShapeToString(shape));
    ModelBuilder b;
    b.Input("x", shape).Output("y");
    b.Node(c.op, {"x"}, {"y"});
    CompareWithCpu(b.Write("unary_" + c.op + std::to_string(shape.back())),
                   {{"x", shape, c.lo, c.hi, false, c.step}});
  }
}

INSTANTIATE_TEST_SUITE_P(
    Ops, CudaUnaryOpTest,
    ::testing::Values(
        UnaryCase{"Relu", -1, 1}, UnaryCase{"Sigmoid", -4, 4}, UnaryCase{"Tanh", -3, 3},
        UnaryCase{"Erf", -2, 2}, UnaryCase{"Sqrt", 0.01f, 4}, UnaryCase{"Exp", -3, 3},
        UnaryCase{"Neg", -1, 1}, UnaryCase{"Identity", -1, 1}, UnaryCase{"LeakyRelu", -2, 2},
        UnaryCase{"Abs", -2, 2}, UnaryCase{"Reciprocal", 0.5f, 4}, UnaryCase{"Log", 0.1f, 4},
        UnaryCase{"Sin", -3, 3}, UnaryCase{"Cos", -3, 3}, UnaryCase{"Softplus", -6, 6},
        UnaryCase{"HardSigmoid", -4, 4}, UnaryCase{"HardSwish", -5, 5}, UnaryCase{"Elu", -3, 3},
        UnaryCase{"Floor", -3, 3, 0.125f}, UnaryCase{"Ceil", -3, 3, 0.125f},
        UnaryCase{"Round", -3, 3, 0.125f},  // ties included
        UnaryCase{"Sign", -1, 1, 0.125f},   // zeros included
        UnaryCase{"Tan", -1.2f, 1.2f}, UnaryCase{"Asin", -0.95f, 0.95f},
        UnaryCase{"Acos", -0.95f, 0.95f}, UnaryCase{"Atan", -3, 3}, UnaryCase{"Sinh", -3, 3},
        UnaryCase{"Cosh", -3, 3}, UnaryCase{"Asinh", -3, 3}, UnaryCase{"Acosh", 1.05f, 4},
        UnaryCase{"Atanh", -0.9f, 0.9f}, UnaryCase{"Softsign", -3, 3}, UnaryCase{"Selu", -3, 3},
        UnaryCase{"Celu", -3, 3}, UnaryCase{"ThresholdedRelu", -2, 2}, UnaryCase{"Shrink", -2, 2}),
    [](const auto& info) { return info.param.op; });

struct BinaryCase {
  std::string op;
  Shape a, b;
  float lo, hi;
};

void PrintTo(const BinaryCase& c, std::ostream* os) {
  *os << c.op << ShapeToString(c.a) << ShapeToString(c.b);
}

class CudaBinaryOpTest : public ::testing::TestWithParam<BinaryCase> {};

TEST_P(CudaBinaryOpTest, MatchesCpuWithBroadcasting) {
  TESSERA_REQUIRE_GPU();
  const BinaryCase& c = GetParam();
  ModelBuilder b;
  b.Input("a", c.a).Input("b", c.b).Output("y");
  b.Node(c.op, {"a", "b"}, {"y"});
  CompareWithCpu(b.Write("binary_" + c.op + std::to_string(c.a.size())),
                 {{"a", c.a, c.lo, c.hi}, {"b", c.b, c.lo, c.hi}});
}

INSTANTIATE_TEST_SUITE_P(
    Ops, CudaBinaryOpTest,
    ::testing::Values(BinaryCase{"Add", {2, 3, 4}, {2, 3, 4}, -1, 1},
                      BinaryCase{"Add", {2, 3, 4}, {4}, -1, 1},
                      BinaryCase{"Sub", {2, 1, 4}, {3, 1}, -1, 1},
                      BinaryCase{"Mul", {1, 3, 1, 5}, {2, 1, 4, 1}, -1, 1},
                      BinaryCase{"Div", {2, 3, 4}, {1, 3, 1}, 0.5f, 2},
                      BinaryCase{"Pow", {2, 3, 4}, {4}, 0.5f, 2},
                      // Shapes whose innermost dim takes 16-byte vectors: same shapes, a bias
                      // over the last dim, a value repeated along it, both operands broadcast.
                      BinaryCase{"Add", {2, 3, 64}, {2, 3, 64}, -1, 1},
                      BinaryCase{"Add", {4, 6, 32}, {32}, -1, 1},
                      BinaryCase{"Mul", {4, 6, 32}, {4, 6, 1}, -1, 1},
                      BinaryCase{"Sub", {4, 1, 16}, {1, 6, 16}, -1, 1},
                      BinaryCase{"Div", {3, 8, 16}, {8, 1}, 0.5f, 2}),
    [](const auto& info) {
      return info.param.op + "_rank" + std::to_string(info.param.a.size()) + "x" +
             std::to_string(info.param.b.size()) + "_" + std::to_string(info.index);
    });

TEST(CudaOpsTest, ClipWithConstantBounds) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.Input("x", {4, 50}).Output("y").FloatInit("lo", {}, {-0.25f}).FloatInit("hi", {}, {0.5f});
  b.Node("Clip", {"x", "lo", "hi"}, {"y"});
  CompareWithCpu(b.Write("clip"), {{"x", {4, 50}}});
}

TEST(CudaOpsTest, SoftmaxLastAxisShortAndLongRows) {
  TESSERA_REQUIRE_GPU();
  for (int64_t cols : {7, 1000, 3000}) {
    ModelBuilder b(13);
    b.Input("x", {3, 2, cols}).Output("y");
    b.Node("Softmax", {"x"}, {"y"});
    CompareWithCpu(b.Write("softmax" + std::to_string(cols)), {{"x", {3, 2, cols}, -5, 5}});
  }
}

TEST(CudaOpsTest, LayerNormalization) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(17);
  b.Input("x", {2, 5, 64}).Output("y");
  b.FloatInit("g", {64}, Pattern(64, 11, 0.5f, 1.5f)).FloatInit("beta", {64}, Pattern(64, 12));
  auto* n = b.Node("LayerNormalization", {"x", "g", "beta"}, {"y"});
  FloatAttr(n, "epsilon", 1e-5f);
  CompareWithCpu(b.Write("layernorm"), {{"x", {2, 5, 64}, -2, 3}});
}

TEST(CudaOpsTest, ReduceMeanLastAxis) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.Input("x", {2, 3, 40}).Output("y");
  auto* n = b.Node("ReduceMean", {"x"}, {"y"});
  IntsAttr(n, "axes", {-1});
  CompareWithCpu(b.Write("reducemean"), {{"x", {2, 3, 40}}});
}

TEST(CudaOpsTest, BatchNormalization) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(15);
  b.Input("x", {2, 4, 3, 5}).Output("y");
  b.FloatInit("s", {4}, Pattern(4, 3, 0.5f, 2)).FloatInit("bb", {4}, Pattern(4, 4));
  b.FloatInit("m", {4}, Pattern(4, 5)).FloatInit("v", {4}, Pattern(4, 6, 0.1f, 2));
  b.Node("BatchNormalization", {"x", "s", "bb", "m", "v"}, {"y"});
  CompareWithCpu(b.Write("batchnorm"), {{"x", {2, 4, 3, 5}}});
}

TEST(CudaOpsTest, GatherEmbeddingRowsAndScalarIndex) {
  TESSERA_REQUIRE_GPU();
  // Embedding: table [10, 8] constant, token ids an INT64 input (negative ones wrap); then
  // x[:, 1] through a constant scalar index.
  ModelBuilder b(13);
  b.Input("x", {4, 3, 8}).IntInput("ids", {2, 3}).Output("emb").Output("row");
  b.FloatInit("table", {10, 8}, Pattern(80, 9)).IntInit("one", {}, {1});
  b.Node("Gather", {"table", "ids"}, {"emb"});
  auto* n = b.Node("Gather", {"x", "one"}, {"row"});
  IntAttr(n, "axis", 1);
  Feed ids{"ids", {2, 3}, -10, 10};
  ids.int64 = true;
  CompareWithCpu(b.Write("gather"), {{"x", {4, 3, 8}}, ids});
}

TEST(CudaOpsTest, TransposeAndConcat) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.Input("x", {2, 3, 4}).Input("z", {2, 5, 4}).Output("t").Output("c").Output("r");
  auto* t = b.Node("Transpose", {"x"}, {"t"});
  IntsAttr(t, "perm", {2, 0, 1});
  auto* c = b.Node("Concat", {"x", "z", "x"}, {"c"});
  IntAttr(c, "axis", 1);
  b.Node("Transpose", {"z"}, {"r"});  // default perm: reversed
  CompareWithCpu(b.Write("movement"), {{"x", {2, 3, 4}}, {"z", {2, 5, 4}}});
}

// Transposes whose innermost run is contiguous and a whole number of 16-byte vectors (attention's
// [b, s, h, d] -> [b, h, s, d]) are copied 16 bytes at a time; the others element by element.
TEST(CudaOpsTest, TransposeVectorizedAndNot) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.Input("x", {2, 3, 4, 16}).Output("heads").Output("swap");
  auto* heads = b.Node("Transpose", {"x"}, {"heads"});
  IntsAttr(heads, "perm", {0, 2, 1, 3});
  auto* swap = b.Node("Transpose", {"x"}, {"swap"});
  IntsAttr(swap, "perm", {0, 1, 3, 2});
  CompareWithCpu(b.Write("transpose_vec"), {{"x", {2, 3, 4, 16}}});
}

TEST(CudaOpsTest, SliceWithStepsAndClamping) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.Input("x", {2, 3, 4}).Output("s");
  b.IntInit("st", {2}, {1, -1}).IntInit("en", {2}, {3, -100}).IntInit("ax", {2}, {1, 2});
  b.IntInit("sp", {2}, {1, -2});
  b.Node("Slice", {"x", "st", "en", "ax", "sp"}, {"s"});  // [2, 2, 2]: rows 1..2, columns 3, 1
  CompareWithCpu(b.Write("slice"), {{"x", {2, 3, 4}}});
}

// BERT's additive attention mask: the INT64 mask input is unsqueezed and cast to FLOAT on the
// device, then (1 - m) * -10000.
TEST(CudaOpsTest, CastInt64MaskToFloat) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.IntInput("mask", {2, 6}).Output("y");
  b.IntInit("ax", {1}, {1}).FloatInit("one", {}, {1.0f}).FloatInit("big", {}, {-10000.0f});
  b.Node("Unsqueeze", {"mask", "ax"}, {"m4"});
  auto* cast = b.Node("Cast", {"m4"}, {"mf"});
  IntAttr(cast, "to", 1);
  b.Node("Sub", {"one", "mf"}, {"inv"});
  b.Node("Mul", {"inv", "big"}, {"y"});
  Feed mask{"mask", {2, 6}, 0, 2};
  mask.int64 = true;
  CompareWithCpu(b.Write("cast_mask"), {mask});
}

TEST(CudaOpsTest, AliasesReshapeFlattenSqueezeUnsqueeze) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.Input("x", {2, 3, 4}).Output("y");
  b.IntInit("shape", {3}, {0, 1, -1}).IntInit("ax", {1}, {1});
  b.Node("Reshape", {"x", "shape"}, {"r"});     // [2, 1, 12]
  b.Node("Squeeze", {"r", "ax"}, {"s"});        // [2, 12]
  b.Node("Unsqueeze", {"s", "ax"}, {"u"});      // [2, 1, 12]
  b.Node("Flatten", {"u"}, {"f"});              // [2, 12]
  b.Node("Relu", {"f"}, {"y"});
  CompareWithCpu(b.Write("aliases"), {{"x", {2, 3, 4}}});
}

TEST(CudaOpsTest, GemmVariants) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.Input("a", {5, 7}).Input("at", {7, 5}).Output("y1").Output("y2");
  b.FloatInit("w", {3, 7}, Pattern(21, 2)).FloatInit("bias", {3}, Pattern(3, 3));
  b.FloatInit("w2", {7, 3}, Pattern(21, 4)).FloatInit("c2", {5, 1}, Pattern(5, 5));
  auto* g1 = b.Node("Gemm", {"a", "w", "bias"}, {"y1"});
  IntAttr(g1, "transB", 1);
  auto* g2 = b.Node("Gemm", {"at", "w2", "c2"}, {"y2"});
  IntAttr(g2, "transA", 1);
  FloatAttr(g2, "alpha", 0.5f);
  FloatAttr(g2, "beta", 2.0f);
  CompareWithCpu(b.Write("gemm"), {{"a", {5, 7}}, {"at", {7, 5}}});
}

TEST(CudaOpsTest, MatMulBatchedAndBroadcast) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.Input("q", {2, 3, 4, 8}).Input("k", {2, 3, 8, 4}).Input("x", {2, 4, 8}).Output("s");
  b.Output("p").Output("o");
  b.FloatInit("w", {8, 6}, Pattern(48, 8)).FloatInit("left", {5, 4}, Pattern(20, 9));
  b.Node("MatMul", {"q", "k"}, {"s"});   // [b,h,s,d] x [b,h,d,s]
  b.Node("MatMul", {"x", "w"}, {"p"});   // batch folded into rows
  b.Node("MatMul", {"left", "x"}, {"o"});  // A shared across batches
  CompareWithCpu(b.Write("matmul"), {{"q", {2, 3, 4, 8}}, {"k", {2, 3, 8, 4}}, {"x", {2, 4, 8}}});
}

TEST(CudaOpsTest, ConvGroupsStridesPadsAndPools) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.Input("x", {2, 4, 11, 9}).Output("c").Output("mp").Output("mpc").Output("ap").Output("api");
  b.Output("gap");
  b.FloatInit("w", {6, 2, 3, 3}, Pattern(108, 21)).FloatInit("bias", {6}, Pattern(6, 22));
  auto* conv = b.Node("Conv", {"x", "w", "bias"}, {"c"});
  IntAttr(conv, "group", 2);
  IntsAttr(conv, "strides", {2, 1});
  IntsAttr(conv, "pads", {1, 1, 1, 1});
  auto* mp = b.Node("MaxPool", {"x"}, {"mp"});
  IntsAttr(mp, "kernel_shape", {3, 3});
  IntsAttr(mp, "strides", {2, 2});
  IntsAttr(mp, "pads", {1, 1, 1, 1});
  auto* mpc = b.Node("MaxPool", {"x"}, {"mpc"});  // ceil_mode: the own pooling kernel
  IntsAttr(mpc, "kernel_shape", {2, 2});
  IntsAttr(mpc, "strides", {2, 2});
  IntAttr(mpc, "ceil_mode", 1);
  auto* ap = b.Node("AveragePool", {"x"}, {"ap"});
  IntsAttr(ap, "kernel_shape", {3, 3});
  IntsAttr(ap, "pads", {1, 1, 1, 1});
  auto* api = b.Node("AveragePool", {"x"}, {"api"});
  IntsAttr(api, "kernel_shape", {3, 3});
  IntsAttr(api, "pads", {1, 1, 1, 1});
  IntAttr(api, "count_include_pad", 1);
  b.Node("GlobalAveragePool", {"x"}, {"gap"});
  CompareWithCpu(b.Write("conv_pool"), {{"x", {2, 4, 11, 9}}});
}

// The attributes graph passes put on a fused Conv; this build's CPU Conv ignores them, so the
// reference applies the activation to the CPU output.
void FusedConvCase(const std::string& act, bool bias) {
  ModelBuilder b(13);
  b.Input("x", {2, 3, 8, 8}).Output("y");
  b.FloatInit("w", {5, 3, 3, 3}, Pattern(135, 31)).FloatInit("bias", {5}, Pattern(5, 32));
  auto* conv = b.Node("Conv", bias ? std::vector<std::string>{"x", "w", "bias"}
                                   : std::vector<std::string>{"x", "w"},
                      {"y"});
  IntsAttr(conv, "pads", {1, 1, 1, 1});
  StringAttr(conv, "tessera_activation", act);
  if (act == "Clip") {
    FloatAttr(conv, "tessera_clip_min", 0.0f);
    FloatAttr(conv, "tessera_clip_max", 0.3f);
  }
  CompareWithCpu(b.Write("fused_" + act + std::to_string(bias)), {{"x", {2, 3, 8, 8}}},
                 [&](std::vector<Tensor>* outs) {
                   auto* v = reinterpret_cast<float*>((*outs)[0].bytes.data());
                   for (int64_t i = 0; i < ElementCount((*outs)[0].shape); ++i) {
                     v[i] = act == "Relu" ? std::max(v[i], 0.0f) : std::clamp(v[i], 0.0f, 0.3f);
                   }
                 });
}

TEST(CudaOpsTest, ConvFusedReluWithAndWithoutBias) {
  TESSERA_REQUIRE_GPU();
  FusedConvCase("Relu", true);
  FusedConvCase("Relu", false);
}

TEST(CudaOpsTest, ConvFusedClip) {
  TESSERA_REQUIRE_GPU();
  FusedConvCase("Clip", true);
}

// An input over two 4 MiB chunks (20 MB, not a whole number of chunks) is staged in parallel
// chunks overlapping their transfers (CudaModel::UploadInput); every element must arrive.
TEST(CudaOpsTest, LargeInputStagedInChunks) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.Input("x", {5, 1000, 1001}).Output("y");
  b.Node("Neg", {"x"}, {"y"});
  CompareWithCpu(b.Write("large_input"), {{"x", {5, 1000, 1001}}});
}

// The epilogues the CUDA load fuses (graph_passes.h FuseMatMulEpilogues, FuseConvResidual):
// a MatMul's bias Add and erf GELU as PyTorch exports them, and ResNet's Conv + Add + Relu.
TEST(CudaOpsTest, MatMulBiasAndGeluEpilogue) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.Input("x", {2, 5, 32}).Output("y").Output("plain");
  b.FloatInit("w", {32, 48}, Pattern(32 * 48, 41, -0.3f, 0.3f))
      .FloatInit("bias", {48}, Pattern(48, 42));
  b.FloatInit("w2", {32, 24}, Pattern(32 * 24, 43, -0.3f, 0.3f))
      .FloatInit("bias2", {24}, Pattern(24, 44));
  b.FloatInit("sqrt2", {}, {1.41421356f})
      .FloatInit("one", {}, {1.0f})
      .FloatInit("half", {}, {0.5f});
  b.Node("MatMul", {"x", "w"}, {"mm"});
  b.Node("Add", {"mm", "bias"}, {"h"});
  b.Node("Div", {"h", "sqrt2"}, {"d"});
  b.Node("Erf", {"d"}, {"e"});
  b.Node("Add", {"e", "one"}, {"e1"});
  b.Node("Mul", {"h", "e1"}, {"g"});
  b.Node("Mul", {"g", "half"}, {"y"});
  b.Node("MatMul", {"x", "w2"}, {"mm2"});  // bias only
  b.Node("Add", {"mm2", "bias2"}, {"plain"});
  CompareWithCpu(b.Write("matmul_gelu"), {{"x", {2, 5, 32}}});
}

TEST(CudaOpsTest, ConvResidualAddAndRelu) {
  TESSERA_REQUIRE_GPU();
  for (bool relu : {true, false}) {
    SCOPED_TRACE(relu ? "with Relu" : "without Relu");
    ModelBuilder b(13);
    b.Input("x", {2, 8, 6, 6}).Output("y");
    b.FloatInit("w", {8, 8, 3, 3}, Pattern(576, 51, -0.2f, 0.2f))
        .FloatInit("bias", {8}, Pattern(8, 52));
    auto* conv = b.Node("Conv", {"x", "w", "bias"}, {"c"});
    IntsAttr(conv, "pads", {1, 1, 1, 1});
    b.Node("Add", {"c", "x"}, {relu ? "s" : "y"});
    if (relu) b.Node("Relu", {"s"}, {"y"});
    CompareWithCpu(b.Write(std::string("conv_residual") + (relu ? "_relu" : "")),
                   {{"x", {2, 8, 6, 6}}});
  }
}

// PyTorch-style flatten: Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])) with a dynamic
// batch; the shape chain runs on the host and must follow each batch size.
TEST(CudaOpsTest, HostShapeChainFollowsDynamicBatch) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.Input("x", {-1, 3, 4}).Output("y");
  b.IntInit("zero", {}, {0}).IntInit("ax0", {1}, {0}).IntInit("rest", {1}, {-1});
  b.Node("Shape", {"x"}, {"shape"});
  auto* g = b.Node("Gather", {"shape", "zero"}, {"n"});
  IntAttr(g, "axis", 0);
  b.Node("Unsqueeze", {"n", "ax0"}, {"n1"});
  auto* c = b.Node("Concat", {"n1", "rest"}, {"target"});
  IntAttr(c, "axis", 0);
  b.Node("Reshape", {"x", "target"}, {"flat"});
  b.Node("Relu", {"flat"}, {"y"});
  const std::string path = b.Write("shape_chain");
  auto cpu = LoadOrFail(path, ModelOptions{});
  auto gpu = LoadOrFail(path, CudaOptions(Precision::kFp32, true));
  ASSERT_NE(gpu, nullptr);
  for (int64_t batch : {1, 4, 8, 4, 1, 8, 8, 1}) {
    Tensor x = FloatTensor("x", {batch, 3, 4}, Pattern(batch * 12, static_cast<uint32_t>(batch)));
    std::vector<Tensor> want, got;
    ASSERT_TRUE(cpu->Run({x.View()}, &want).ok());
    Status status = gpu->Run({x.View()}, &got);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(got[0].shape, (Shape{batch, 12}));
    ExpectTensorsClose(got[0], want[0], 1e-4f, "batch " + std::to_string(batch));
  }
}

TEST(CudaOpsTest, UnsupportedOpIsReportedAtLoadWithItsNode) {
  TESSERA_REQUIRE_GPU();
  // Constant and Shape run on the host; a device op the CUDA backend lacks must be named at load.
  // Any op the CPU has and CUDA lacks works; if the CPU lacks it too, import reports it instead.
  ModelBuilder b(13);
  b.Input("x", {2, 3}).Output("y");
  auto* n = b.Node("Hardmax", {"x"}, {"y"});
  n->set_name("the_hardmax");
  auto model = LoadOnnxModel(b.Write("unsupported"), CudaOptions(Precision::kFp32, true));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kUnimplemented) << model.status();
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("Hardmax"));
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("the_hardmax"));
}

}  // namespace
}  // namespace tessera::engine
