// Load checks of the image-to-image CUDA ops (cuda_image_ops.cc), which need no GPU:
// CheckBackendSupport accepts Pad, Resize/Upsample, InstanceNormalization and ConvTranspose in the
// forms the kernels take, and refuses the others naming the node and the reason. The zoo models
// these ops were added for (unet_tiny, densenet161) are checked by engine_zoo_test's
// ZooCudaSupport tests.
#include <string>
#include <vector>

#include "engine/cuda/cuda_op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

Status CheckCuda(const std::string& path) { return CheckBackendSupport(path, Backend::kCuda); }

// Debian's absl::string_view is not std::string_view, which gmock's string matchers take.
std::string Message(const Status& status) { return std::string(status.message()); }

// A one-Resize model: X [1, 3, 8, 8] resized by `scales` (a constant, or a graph input computed
// on the device when `scales_on_device`).
std::string ResizeModel(const std::string& file, const std::string& mode,
                        const std::vector<float>& scales, bool scales_on_device = false,
                        const std::string& transform = "half_pixel") {
  ModelBuilder b(13);
  b.Input("x", {1, 3, 8, 8}).Output("y");
  if (scales_on_device) {
    b.Input("scales", {4});
  } else {
    b.FloatInit("scales", {4}, scales);
  }
  auto* node = b.Node("Resize", {"x", "", "scales"}, {"y"});
  node->set_name("the_resize");
  StringAttr(node, "mode", mode);
  StringAttr(node, "coordinate_transformation_mode", transform);
  return b.Write(file);
}

TEST(CudaImageSupportTest, AcceptsEachOpInASupportedForm) {
  {  // Pad (opset 13, constant pads and value) into InstanceNormalization.
    ModelBuilder b(13);
    b.Input("x", {-1, 3, 8, 8}).Output("y");
    b.IntInit("pads", {8}, {0, 0, 1, 1, 0, 0, 1, 1}).FloatInit("value", {}, {0.5f});
    b.FloatInit("s", {3}, {1, 2, 3}).FloatInit("b", {3}, {0, 1, 0});
    b.Node("Pad", {"x", "pads", "value"}, {"p"});
    b.Node("InstanceNormalization", {"p", "s", "b"}, {"y"});
    const std::string path = b.Write("image_support_pad_instnorm");
    EXPECT_TRUE(CheckCuda(path).ok()) << CheckCuda(path);
  }
  {  // Pad before opset 11: pads and value as attributes; reflect mode.
    ModelBuilder b(10);
    b.Input("x", {1, 3, 8, 8}).Output("y");
    auto* pad = b.Node("Pad", {"x"}, {"y"});
    IntsAttr(pad, "pads", {0, 0, 2, 2, 0, 0, 2, 2});
    StringAttr(pad, "mode", "reflect");
    const std::string path = b.Write("image_support_pad10");
    EXPECT_TRUE(CheckCuda(path).ok()) << CheckCuda(path);
  }
  for (const std::string mode : {"nearest", "linear"}) {
    const std::string path = ResizeModel("image_support_resize_" + mode, mode, {1, 1, 2, 0.5f});
    EXPECT_TRUE(CheckCuda(path).ok()) << CheckCuda(path);
  }
  {  // Resize by sizes that a host shape chain computes (Shape -> Mul -> Concat).
    ModelBuilder b(13);
    b.Input("x", {-1, 3, 8, 8}).Output("y");
    b.IntInit("two", {2}, {2, 2}).IntInit("start", {1}, {0}).IntInit("mid", {1}, {2});
    b.IntInit("end", {1}, {4});
    b.Node("Shape", {"x"}, {"shape"});
    b.Node("Slice", {"shape", "start", "mid"}, {"nc"});
    b.Node("Slice", {"shape", "mid", "end"}, {"hw"});
    b.Node("Mul", {"hw", "two"}, {"hw2"});
    IntAttr(b.Node("Concat", {"nc", "hw2"}, {"sizes"}), "axis", 0);
    StringAttr(b.Node("Resize", {"x", "", "", "sizes"}, {"y"}), "mode", "nearest");
    const std::string path = b.Write("image_support_resize_sizes");
    EXPECT_TRUE(CheckCuda(path).ok()) << CheckCuda(path);
  }
  {  // ConvTranspose with bias, stride 2 kernel 3, symmetric pads and output_padding.
    ModelBuilder b(13);
    b.Input("x", {1, 4, 8, 8}).Output("y");
    b.FloatInit("w", {4, 2, 3, 3}, std::vector<float>(72, 0.1f));
    b.FloatInit("b", {2}, {0.5f, -0.5f});
    auto* node = b.Node("ConvTranspose", {"x", "w", "b"}, {"y"});
    IntsAttr(node, "strides", {2, 2});
    IntsAttr(node, "pads", {1, 1, 1, 1});
    IntsAttr(node, "output_padding", {1, 1});
    const std::string path = b.Write("image_support_convtranspose");
    EXPECT_TRUE(CheckCuda(path).ok()) << CheckCuda(path);
  }
}

TEST(CudaImageSupportTest, ResizeFormsTheKernelLacksAreRefused) {
  {
    const Status status = CheckCuda(ResizeModel("image_support_cubic", "cubic", {1, 1, 2, 2}));
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
    EXPECT_THAT(Message(status), AllOf(HasSubstr("the_resize"), HasSubstr("mode \"cubic\"")));
  }
  {
    const Status status = CheckCuda(ResizeModel("image_support_scales_input", "nearest", {}, true));
    EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
    EXPECT_THAT(Message(status), AllOf(HasSubstr("the_resize"), HasSubstr("\"scales\""),
                                       HasSubstr("needs it on the host")));
  }
  {
    const Status status = CheckCuda(ResizeModel("image_support_resize_c", "linear", {1, 2, 2, 2}));
    EXPECT_THAT(Message(status), AllOf(HasSubstr("the_resize"), HasSubstr("(N or C)")));
  }
  {
    const Status status = CheckCuda(
        ResizeModel("image_support_crop", "linear", {1, 1, 2, 2}, false, "tf_crop_and_resize"));
    EXPECT_THAT(Message(status),
                AllOf(HasSubstr("the_resize"), HasSubstr("\"tf_crop_and_resize\"")));
  }
  {  // tf_half_pixel_for_nn rounding up: x + 0.5 moves C (3 channels) even at scale 1.
    ModelBuilder b(13);
    b.Input("x", {1, 3, 8, 8}).Output("y");
    b.FloatInit("scales", {4}, {1, 1, 2, 2});
    auto* node = b.Node("Resize", {"x", "", "scales"}, {"y"});
    node->set_name("resize_tf_ceil");
    StringAttr(node, "coordinate_transformation_mode", "tf_half_pixel_for_nn");
    StringAttr(node, "nearest_mode", "round_prefer_ceil");
    EXPECT_THAT(Message(CheckCuda(b.Write("image_support_resize_tf_ceil"))),
                AllOf(HasSubstr("resize_tf_ceil"), HasSubstr("moves N and C")));
  }
  {  // A 3-D input: the kernel resizes 4-D NCHW.
    ModelBuilder b(13);
    b.Input("x", {1, 3, 8}).Output("y");
    b.FloatInit("scales", {3}, {1, 1, 2});
    b.Node("Resize", {"x", "", "scales"}, {"y"})->set_name("resize_3d");
    EXPECT_THAT(Message(CheckCuda(b.Write("image_support_resize_3d"))),
                AllOf(HasSubstr("resize_3d"), HasSubstr("rank-3")));
  }
}

TEST(CudaImageSupportTest, PadWithDevicePadsIsRefused) {
  ModelBuilder b(13);
  b.Input("x", {1, 3, 8, 8}).IntInput("pads", {8}).Output("y");
  b.Node("Pad", {"x", "pads"}, {"y"})->set_name("the_pad");
  const Status status = CheckCuda(b.Write("image_support_pad_device"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_THAT(Message(status), AllOf(HasSubstr("the_pad"), HasSubstr("\"pads\""),
                                     HasSubstr("needs it on the host")));
}

TEST(CudaImageSupportTest, ConvTransposePadsCudnnCannotExpressAreRefused) {
  // Pads begin 1, end 0 at stride 1: cuDNN's one pad per dim cannot express them
  // (output_padding + begin - end = 1 is not below the stride).
  ModelBuilder b(13);
  b.Input("x", {1, 4, 8, 8}).Output("y");
  b.FloatInit("w", {4, 2, 3, 3}, std::vector<float>(72, 0.1f));
  auto* node = b.Node("ConvTranspose", {"x", "w"}, {"y"});
  node->set_name("the_convtranspose");
  IntsAttr(node, "pads", {1, 1, 0, 0});
  const Status status = CheckCuda(b.Write("image_support_convtranspose_pads"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_THAT(Message(status),
              AllOf(HasSubstr("the_convtranspose"), HasSubstr("symmetric padding")));
}

}  // namespace
}  // namespace tessera::engine
