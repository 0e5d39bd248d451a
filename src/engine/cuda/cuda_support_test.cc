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
  b.Node("Softsign", {"x"}, {"y"})->set_name("the_softsign");
  const Status status = CheckCuda(b.Write("support_missing"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_THAT(Message(status),
              AllOf(HasSubstr("the_softsign"), HasSubstr("Softsign"), HasSubstr("no CUDA kernel")));
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
  {  // Arithmetic on INT64 values the device computes: the float kernels take FP32 only.
    ModelBuilder b(13);
    b.IntInput("a", {4}).IntInput("b", {4}).Output("y");
    IntAttr(b.Node("Cast", {b.Node("Add", {"a", "b"}, {"sum"})->output(0)}, {"y"}), "to", 1);
    EXPECT_THAT(Message(CheckCuda(b.Write("support_int_add"))),
                AllOf(HasSubstr("INT64"), HasSubstr("FP32 only")));
  }
}

TEST(CudaSupportTest, EveryProblemIsListedTogether) {
  ModelBuilder b(13);
  b.Input("x", {2, 3}).Output("y1").Output("y2");
  b.Node("Softsign", {"x"}, {"y1"})->set_name("first");
  IntAttr(b.Node("Softmax", {"x"}, {"y2"}), "axis", 0);
  const Status status = CheckCuda(b.Write("support_two"));
  EXPECT_THAT(Message(status), AllOf(HasSubstr("first"), HasSubstr("axis other than the last")));
}

TEST(CudaSupportTest, FileErrorsComeFirst) {
  const Status status = CheckCuda(::testing::TempDir() + "/no_such_model.onnx");
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(Message(status), AllOf(HasSubstr("no_such_model.onnx"), Not(HasSubstr("CUDA"))));
}

}  // namespace
}  // namespace tessera::engine
