// The CUDA backend's load checks, which need no GPU: CheckBackendSupport names every node the
// backend cannot run (missing ops, operands it needs on the host, dtypes and forms its kernels
// lack) and accepts what it can. These run in CI; the GPU tests check that loading agrees.
#include <string>

#include "engine/cuda/cuda_op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

Status CheckCuda(const std::string& path) { return CheckBackendSupport(path, Backend::kCuda); }

// Debian's absl::string_view is not std::string_view, which gmock's string matchers take.
std::string Message(const Status& status) { return std::string(status.message()); }

TEST(CudaSupportTest, AcceptsConvNetAndHostShapeChain) {
  ModelBuilder b(13);
  b.Input("x", {-1, 3, 8, 8}).Output("y");
  b.FloatInit("w", {4, 3, 3, 3}, std::vector<float>(4 * 27, 0.1f));
  b.Node("Conv", {"x", "w"}, {"c"});
  b.Node("Relu", {"c"}, {"r"});
  // Shape -> Gather -> Unsqueeze -> Concat -> Reshape: the shape chain runs on the host.
  b.IntInit("zero", {}, {0}).IntInit("minus_one", {1}, {-1}).IntInit("axes0", {1}, {0});
  b.Node("Shape", {"r"}, {"s"});
  b.Node("Gather", {"s", "zero"}, {"n"});
  b.Node("Unsqueeze", {"n", "axes0"}, {"n1"});
  IntAttr(b.Node("Concat", {"n1", "minus_one"}, {"spec"}), "axis", 0);
  b.Node("Reshape", {"r", "spec"}, {"y"});
  const std::string path = b.Write("support_convnet");
  EXPECT_TRUE(CheckCuda(path).ok()) << CheckCuda(path);
  EXPECT_TRUE(CheckBackendSupport(path, Backend::kCpu).ok());
}

TEST(CudaSupportTest, NamesAMissingOpWithItsNode) {
  ModelBuilder b(13);
  b.Input("x", {2, 3}).Output("y");
  b.Node("Hardmax", {"x"}, {"y"})->set_name("the_hardmax");
  const Status status = CheckCuda(b.Write("support_missing"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_THAT(Message(status),
              AllOf(HasSubstr("the_hardmax"), HasSubstr("Hardmax"), HasSubstr("no CUDA kernel")));
}

TEST(CudaSupportTest, ReshapeByADeviceComputedShapeIsRefused) {
  ModelBuilder b(13);
  b.Input("x", {2, 6}).IntInput("spec", {2}).Output("y");
  b.Node("Reshape", {"x", "spec"}, {"y"});
  const Status status = CheckCuda(b.Write("support_reshape"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_THAT(Message(status), AllOf(HasSubstr("Reshape"), HasSubstr("\"spec\""),
                                     HasSubstr("needs it on the host")));
}

TEST(CudaSupportTest, KernelFormsTheBackendLacksAreRefused) {
  {  // Softmax over the first of two axes (opset 13 normalises one axis only).
    ModelBuilder b(13);
    b.Input("x", {2, 3}).Output("y");
    IntAttr(b.Node("Softmax", {"x"}, {"y"}), "axis", 0);
    EXPECT_THAT(Message(CheckCuda(b.Write("support_softmax"))),
                HasSubstr("axis other than the last"));
  }
  {  // ReduceMean over a leading axis.
    ModelBuilder b(13);
    b.Input("x", {2, 3}).Output("y");
    IntsAttr(b.Node("ReduceMean", {"x"}, {"y"}), "axes", {0});
    EXPECT_THAT(Message(CheckCuda(b.Write("support_reducemean"))),
                HasSubstr("not the trailing ones"));
  }
  {  // LayerNormalization's optional Mean output.
    ModelBuilder b(17);
    b.Input("x", {2, 4}).Output("y").Output("mean");
    b.FloatInit("g", {4}, {1, 1, 1, 1});
    b.Node("LayerNormalization", {"x", "g"}, {"y", "mean"});
    EXPECT_THAT(Message(CheckCuda(b.Write("support_layernorm"))), HasSubstr("Mean and InvStdDev"));
  }
}

TEST(CudaSupportTest, EveryProblemIsListedTogether) {
  ModelBuilder b(13);
  b.Input("x", {2, 3}).Output("y1").Output("y2");
  b.Node("Hardmax", {"x"}, {"y1"})->set_name("first");
  IntAttr(b.Node("Softmax", {"x"}, {"y2"}), "axis", 0);
  const Status status = CheckCuda(b.Write("support_two"));
  EXPECT_THAT(Message(status), AllOf(HasSubstr("first"), HasSubstr("axis other than the last")));
}

TEST(CudaSupportTest, PositionIdsOnTheDeviceAreSupported) {
  // RoBERTa's position ids from the token ids: integer and boolean ops the device runs.
  ModelBuilder b(13);
  b.IntInput("ids", {2, 8}).Output("positions", onnx::TensorProto::INT64);
  b.IntInit("pad", {}, {1}).IntInit("axis", {}, {1});
  b.Node("Equal", {"ids", "pad"}, {"is_pad"});
  b.Node("Not", {"is_pad"}, {"keep"});
  IntAttr(b.Node("Cast", {"keep"}, {"mask"}), "to", 6);
  b.Node("CumSum", {"mask", "axis"}, {"sums"});
  b.Node("Mul", {"sums", "mask"}, {"masked"});
  IntAttr(b.Node("Cast", {"masked"}, {"wide"}), "to", 7);
  b.Node("Add", {"wide", "pad"}, {"positions"});
  const Status status = CheckCuda(b.Write("support_positions"));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(CudaSupportTest, OperandsReadOnTheHostMustNotComeFromTheDevice) {
  {  // CumSum's axis.
    ModelBuilder b(13);
    b.Input("x", {2, 8}).IntInput("axis", {}).Output("y");
    b.Node("CumSum", {"x", "axis"}, {"y"});
    EXPECT_THAT(Message(CheckCuda(b.Write("support_cumsum_axis"))),
                AllOf(HasSubstr("CumSum"), HasSubstr("\"axis\""), HasSubstr("on the host")));
  }
  {  // Split's sizes.
    ModelBuilder b(13);
    b.Input("x", {2, 8}).IntInput("sizes", {2}).Output("a").Output("c");
    IntAttr(b.Node("Split", {"x", "sizes"}, {"a", "c"}), "axis", 1);
    EXPECT_THAT(Message(CheckCuda(b.Write("support_split_sizes"))),
                AllOf(HasSubstr("Split"), HasSubstr("\"sizes\""), HasSubstr("on the host")));
  }
  {  // Pow on integers has no CUDA kernel (the arithmetic ops take INT32/INT64; Pow does not).
    ModelBuilder b(13);
    b.IntInput("a", {4}).IntInput("e", {4}).Output("y");
    IntAttr(b.Node("Cast", {b.Node("Pow", {"a", "e"}, {"p"})->output(0)}, {"y"}), "to", 1);
    EXPECT_THAT(Message(CheckCuda(b.Write("support_int_pow"))),
                AllOf(HasSubstr("Pow"), HasSubstr("FP32 only")));
  }
}

TEST(CudaSupportTest, PlansShapesWithoutADevice) {
  // GPT-2's fused QKV split, after a Conv: the plan steps give the outputs' shapes.
  ModelBuilder b(13);
  b.Input("x", {-1, 3, 8, 8}).Output("q").Output("k").Output("v");
  b.FloatInit("w", {6, 3, 3, 3}, std::vector<float>(6 * 27, 0.1f));
  IntsAttr(b.Node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
  IntAttr(b.Node("Split", {"c"}, {"q", "k", "v"}), "axis", 1);
  const std::vector<Shape> inputs = {{5, 3, 8, 8}};
  std::vector<Shape> outputs;
  const Status status =
      CheckBackendSupport(b.Write("support_plan"), Backend::kCuda, &inputs, &outputs);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(outputs, (std::vector<Shape>(3, Shape{5, 2, 8, 8})));
}

TEST(CudaSupportTest, ShapeDependentRefusalsShowWhenPlanned) {
  // Asymmetric pads: the load check cannot see them (they may come from auto_pad and the input
  // size), planning for a shape does.
  ModelBuilder b(13);
  b.Input("x", {1, 2, 6, 6}).Output("y");
  b.FloatInit("w", {2, 2, 3, 3}, std::vector<float>(36, 0.1f));
  IntsAttr(b.Node("Conv", {"x", "w"}, {"y"}), "pads", {0, 0, 1, 1});
  const std::string path = b.Write("support_asymmetric");
  EXPECT_TRUE(CheckCuda(path).ok());
  const std::vector<Shape> inputs = {{1, 2, 6, 6}};
  const Status status = CheckBackendSupport(path, Backend::kCuda, &inputs, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_THAT(Message(status), AllOf(HasSubstr("planning"), HasSubstr("asymmetric")));
}

TEST(CudaSupportTest, FileErrorsComeFirst) {
  const Status status = CheckCuda(::testing::TempDir() + "/no_such_model.onnx");
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(Message(status), AllOf(HasSubstr("no_such_model.onnx"), Not(HasSubstr("CUDA"))));
}

TEST(CudaSupportTest, RefusesStringTensorsNamingThem) {
  ModelBuilder b(13);
  b.Input("text", {-1}, onnx::TensorProto::STRING).Output("same", onnx::TensorProto::STRING);
  b.Node("Identity", {"text"}, {"same"});
  const std::string path = b.Write("support_strings");
  const Status status = CheckCuda(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Message(status),
              AllOf(HasSubstr("BYTES (string) tensor 'text'"), HasSubstr("CPU backend only")));
  EXPECT_TRUE(CheckBackendSupport(path, Backend::kCpu).ok());
}

}  // namespace
}  // namespace tessera::engine
