// The image-to-image CUDA ops (cuda_image_ops.cc) on small graphs built here, against the CPU
// engine on the same file (CompareWithCpu: FP32 at 1e-4, FP16 at 1e-2 relative, three Runs so the
// replayed CUDA graph is compared too): Pad, Resize/Upsample in every coordinate and rounding mode
// the kernel takes, InstanceNormalization, ConvTranspose, and a small U-Net-like decoder that
// chains them. Every test needs a GPU and skips without one.
#include <string>
#include <vector>

#include "engine/cuda/cuda_op_test_util.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace tessera::engine {
namespace {

void FloatsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<float>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}

// ---- Pad ----------------------------------------------------------------------------------------

TEST(CudaImageOpsTest, PadModesOn4d) {
  TESSERA_REQUIRE_GPU();
  const Shape shape = {2, 3, 5, 7};
  for (const std::string mode : {"constant", "edge", "reflect"}) {
    SCOPED_TRACE(mode);
    ModelBuilder b(13);
    b.Input("x", shape).Output("y");
    b.IntInit("pads", {8}, {0, 1, 2, 3, 1, 0, 4, 6});
    b.FloatInit("value", {}, {2.5f});
    std::vector<std::string> inputs = {"x", "pads"};
    if (mode == "constant") inputs.push_back("value");
    StringAttr(b.Node("Pad", inputs, {"y"}), "mode", mode);
    CompareWithCpu(b.Write("pad_" + mode), {{"x", shape}});
  }
}

TEST(CudaImageOpsTest, PadSpatialOnlyAsDenseNetAndNegativeCrop) {
  TESSERA_REQUIRE_GPU();
  {  // Zero pads on N and C (merged into one dim by the plan), default constant value 0.
    ModelBuilder b(13);
    b.Input("x", {2, 4, 6, 6}).Output("y");
    b.IntInit("pads", {8}, {0, 0, 1, 1, 0, 0, 1, 1});
    b.Node("Pad", {"x", "pads"}, {"y"});
    CompareWithCpu(b.Write("pad_spatial"), {{"x", {2, 4, 6, 6}}});
  }
  {  // Constant mode crops with negative pads.
    ModelBuilder b(13);
    b.Input("x", {1, 2, 6, 5}).Output("y");
    b.IntInit("pads", {8}, {0, 0, -2, 1, 0, 0, 1, -3});
    b.Node("Pad", {"x", "pads"}, {"y"});
    CompareWithCpu(b.Write("pad_crop"), {{"x", {1, 2, 6, 5}}});
  }
}

TEST(CudaImageOpsTest, PadAttributeFormBeforeOpset11) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(10);
  b.Input("x", {1, 3, 4, 5}).Output("y");
  auto* pad = b.Node("Pad", {"x"}, {"y"});
  IntsAttr(pad, "pads", {0, 0, 2, 1, 0, 0, 1, 2});
  FloatAttr(pad, "value", -1.5f);
  CompareWithCpu(b.Write("pad_opset10"), {{"x", {1, 3, 4, 5}}});
}

// ---- Resize -------------------------------------------------------------------------------------

// One Resize-13 of X [2, 3, 5, 7] ([1, 1, 5, 7] where N and C would move) by constant scales or
// sizes.
struct ResizeCase {
  std::string mode, transform, nearest;
  std::vector<float> scales;   // empty: sizes
  std::vector<int64_t> sizes;  // N and C as X's
};

void RunResizeCase(const ResizeCase& c, const std::string& file) {
  // tf_half_pixel_for_nn with ceil, round_prefer_ceil or linear moves N and C at scale 1 too,
  // which the kernel refuses unless both are 1.
  const bool scale_one_moves =
      c.transform == "tf_half_pixel_for_nn" &&
      (c.mode == "linear" || c.nearest == "ceil" || c.nearest == "round_prefer_ceil");
  const Shape shape = scale_one_moves ? Shape{1, 1, 5, 7} : Shape{2, 3, 5, 7};
  ModelBuilder b(13);
  b.Input("x", shape).Output("y");
  std::vector<std::string> inputs = {"x", "", "", ""};
  if (!c.scales.empty()) {
    b.FloatInit("scales", {4}, c.scales);
    inputs[2] = "scales";
    inputs.pop_back();
  } else {
    std::vector<int64_t> sizes = c.sizes;
    sizes[0] = shape[0], sizes[1] = shape[1];
    b.IntInit("sizes", {4}, sizes);
    inputs[3] = "sizes";
  }
  auto* node = b.Node("Resize", inputs, {"y"});
  StringAttr(node, "mode", c.mode);
  StringAttr(node, "coordinate_transformation_mode", c.transform);
  if (!c.nearest.empty()) StringAttr(node, "nearest_mode", c.nearest);
  CompareWithCpu(b.Write(file), {{"x", shape}});
}

// Upsampling, downsampling, non-integer ratios both ways, and a single-pixel output (the branches
// of pytorch_half_pixel and align_corners for a length-1 output).
const std::vector<std::pair<std::vector<float>, std::vector<int64_t>>>& ResizeTargets() {
  static const auto* const kTargets =
      new std::vector<std::pair<std::vector<float>, std::vector<int64_t>>>{
          {{1, 1, 2, 3}, {}}, {{1, 1, 0.5f, 0.6f}, {}}, {{1, 1, 1.7f, 0.35f}, {}},
          {{}, {2, 3, 9, 4}}, {{}, {2, 3, 3, 11}},      {{}, {2, 3, 1, 7}},
      };
  return *kTargets;
}

TEST(CudaImageOpsTest, ResizeNearestEveryTransformAndRounding) {
  TESSERA_REQUIRE_GPU();
  int file = 0;
  for (const std::string transform : {"half_pixel", "pytorch_half_pixel", "align_corners",
                                      "asymmetric", "tf_half_pixel_for_nn"}) {
    for (const std::string nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      for (const auto& [scales, sizes] : ResizeTargets()) {
        SCOPED_TRACE(transform + " " + nearest + " target " + std::to_string(file % 6));
        RunResizeCase({"nearest", transform, nearest, scales, sizes},
                      "resize_nearest_" + std::to_string(file++));
      }
    }
  }
}

TEST(CudaImageOpsTest, ResizeLinearEveryTransform) {
  TESSERA_REQUIRE_GPU();
  int file = 0;
  for (const std::string transform : {"half_pixel", "pytorch_half_pixel", "align_corners",
                                      "asymmetric", "tf_half_pixel_for_nn"}) {
    for (const auto& [scales, sizes] : ResizeTargets()) {
      SCOPED_TRACE(transform + " target " + std::to_string(file % 6));
      RunResizeCase({"linear", transform, "", scales, sizes},
                    "resize_linear_" + std::to_string(file++));
    }
  }
}

TEST(CudaImageOpsTest, ResizeOpset11WithEmptyRoiAndScales) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(11);
  b.Input("x", {1, 2, 4, 6}).Output("y");
  b.FloatInit("roi", {0}, {}).FloatInit("scales", {0}, {}).IntInit("sizes", {4}, {1, 2, 7, 3});
  StringAttr(b.Node("Resize", {"x", "roi", "scales", "sizes"}, {"y"}), "mode", "linear");
  CompareWithCpu(b.Write("resize_opset11"), {{"x", {1, 2, 4, 6}}});
}

TEST(CudaImageOpsTest, ResizeOpset18AxesAttribute) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(18);
  b.Input("x", {1, 2, 4, 6}).Output("y");
  b.FloatInit("scales", {2}, {1.5f, 0.5f});
  auto* node = b.Node("Resize", {"x", "", "scales"}, {"y"});
  IntsAttr(node, "axes", {2, 3});
  StringAttr(node, "mode", "linear");
  CompareWithCpu(b.Write("resize_axes"), {{"x", {1, 2, 4, 6}}});
}

// Upsample-7 (scales attribute), Upsample-9 and Resize-10 (scales input): asymmetric coordinates
// and the legacy nearest rounding, which rounds up when downsampling.
TEST(CudaImageOpsTest, UpsampleAndResize10LegacyForms) {
  TESSERA_REQUIRE_GPU();
  const Shape shape = {1, 2, 5, 6};
  {
    ModelBuilder b(7);
    b.Input("x", shape).Output("y");
    auto* node = b.Node("Upsample", {"x"}, {"y"});
    FloatsAttr(node, "scales", {1, 1, 2, 3});
    StringAttr(node, "mode", "nearest");
    CompareWithCpu(b.Write("upsample7"), {{"x", shape}});
  }
  for (const std::string mode : {"nearest", "linear"}) {
    SCOPED_TRACE(mode);
    ModelBuilder b(9);
    b.Input("x", shape).Output("y");
    b.FloatInit("scales", {4}, {1, 1, 2, 1.5f});
    StringAttr(b.Node("Upsample", {"x", "scales"}, {"y"}), "mode", mode);
    CompareWithCpu(b.Write("upsample9_" + mode), {{"x", shape}});
  }
  for (const std::string mode : {"nearest", "linear"}) {
    SCOPED_TRACE(mode);
    ModelBuilder b(10);
    b.Input("x", shape).Output("y");
    b.FloatInit("scales", {4}, {1, 1, 0.6f, 0.5f});
    StringAttr(b.Node("Resize", {"x", "scales"}, {"y"}), "mode", mode);
    CompareWithCpu(b.Write("resize10_" + mode), {{"x", shape}});
  }
}

// ---- InstanceNormalization ----------------------------------------------------------------------

TEST(CudaImageOpsTest, InstanceNormalizationSmallAndLargePlanes) {
  TESSERA_REQUIRE_GPU();
  for (const Shape& shape : {Shape{2, 3, 5, 7}, Shape{1, 4, 64, 64}, Shape{2, 3, 10}}) {
    SCOPED_TRACE(ShapeToString(shape));
    const int64_t c = shape[1];
    ModelBuilder b(13);
    b.Input("x", shape).Output("y");
    b.FloatInit("scale", {c}, Pattern(c, 7, 0.5f, 2.0f));
    b.FloatInit("bias", {c}, Pattern(c, 8, -1.0f, 1.0f));
    FloatAttr(b.Node("InstanceNormalization", {"x", "scale", "bias"}, {"y"}), "epsilon", 1e-3f);
    // Values offset from 0, so that the mean matters.
    CompareWithCpu(b.Write("instnorm_" + std::to_string(shape.back())), {{"x", shape, 1.0f, 3.0f}});
  }
}

// ---- ConvTranspose ------------------------------------------------------------------------------

struct ConvTransposeCase {
  std::string name;
  Shape x, w;
  int64_t group;
  std::vector<std::pair<std::string, std::vector<int64_t>>> ints;  // strides, pads, ...
  std::string auto_pad;
};

void RunConvTransposeCase(const ConvTransposeCase& c, bool bias) {
  SCOPED_TRACE(c.name + (bias ? " with bias" : " without bias"));
  ModelBuilder b(13);
  b.Input("x", c.x).Output("y");
  b.FloatInit("w", c.w, Pattern(ElementCount(c.w), 3, -0.5f, 0.5f));
  std::vector<std::string> inputs = {"x", "w"};
  if (bias) {
    const int64_t cout = c.w[1] * c.group;
    b.FloatInit("b", {cout}, Pattern(cout, 4, -1.0f, 1.0f));
    inputs.push_back("b");
  }
  auto* node = b.Node("ConvTranspose", inputs, {"y"});
  if (c.group != 1) IntAttr(node, "group", c.group);
  for (const auto& [name, values] : c.ints) IntsAttr(node, name, values);
  if (!c.auto_pad.empty()) StringAttr(node, "auto_pad", c.auto_pad);
  CompareWithCpu(b.Write("convtranspose_" + c.name + (bias ? "_bias" : "")), {{"x", c.x}});
}

TEST(CudaImageOpsTest, ConvTransposeGeometries) {
  TESSERA_REQUIRE_GPU();
  const std::vector<ConvTransposeCase> cases = {
      // U-Net's 2x upsampling.
      {"unet_k2s2", {2, 8, 5, 6}, {8, 4, 2, 2}, 1, {{"strides", {2, 2}}}, ""},
      // PyTorch's ConvTranspose2d(k=3, s=2, padding=1, output_padding=1): exactly 2x.
      {"k3s2p1op1",
       {1, 4, 6, 5},
       {4, 3, 3, 3},
       1,
       {{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"output_padding", {1, 1}}},
       ""},
      {"groups2", {2, 4, 5, 5}, {4, 3, 3, 3}, 2, {{"strides", {2, 1}}, {"pads", {1, 0, 1, 0}}}, ""},
      {"dilation2", {1, 3, 4, 5}, {3, 2, 3, 2}, 1, {{"dilations", {2, 1}}}, ""},
      // Asymmetric pads that cuDNN's one pad still expresses (output_padding + begin - end = 0).
      {"asymmetric_fit",
       {1, 2, 4, 4},
       {2, 2, 3, 3},
       1,
       {{"strides", {2, 2}}, {"pads", {0, 0, 1, 1}}, {"output_padding", {1, 1}}},
       ""},
      {"same_lower", {1, 2, 4, 5}, {2, 3, 3, 3}, 1, {{"strides", {2, 2}}}, "SAME_LOWER"},
      {"output_shape",
       {1, 2, 4, 5},
       {2, 3, 3, 3},
       1,
       {{"strides", {2, 2}}, {"output_shape", {8, 10}}},
       ""},
      {"1d", {2, 3, 9}, {3, 2, 4}, 1, {{"strides", {3}}, {"pads", {1, 1}}}, ""},
  };
  for (const ConvTransposeCase& c : cases) {
    for (bool bias : {false, true}) RunConvTransposeCase(c, bias);
  }
}

// ---- Together -----------------------------------------------------------------------------------

// unet_tiny's decoder pattern without its LeakyRelu: Conv + InstanceNorm, MaxPool down, a stride-2
// ConvTranspose up added to a nearest Resize of a lateral 1x1 conv, Concat with the skip, a
// bilinear half_pixel Resize and a Sigmoid mask.
TEST(CudaImageOpsTest, UnetLikeDecoder) {
  TESSERA_REQUIRE_GPU();
  const Shape shape = {2, 3, 16, 16};
  ModelBuilder b(13);
  b.Input("x", shape).Output("y");
  b.FloatInit("w1", {8, 3, 3, 3}, Pattern(8 * 27, 11, -0.3f, 0.3f));
  b.FloatInit("s1", {8}, Pattern(8, 12, 0.5f, 1.5f)).FloatInit("b1", {8}, Pattern(8, 13));
  b.FloatInit("wl", {8, 8, 1, 1}, Pattern(64, 14, -0.3f, 0.3f));
  b.FloatInit("wt", {8, 8, 2, 2}, Pattern(256, 15, -0.3f, 0.3f));
  b.FloatInit("bt", {8}, Pattern(8, 16));
  b.FloatInit("up2", {4}, {1, 1, 2, 2}).FloatInit("up15", {4}, {1, 1, 1.5f, 1.5f});
  IntsAttr(b.Node("Conv", {"x", "w1"}, {"c1"}), "pads", {1, 1, 1, 1});
  b.Node("InstanceNormalization", {"c1", "s1", "b1"}, {"n1"});
  auto* pool = b.Node("MaxPool", {"n1"}, {"p1"});
  IntsAttr(pool, "kernel_shape", {2, 2});
  IntsAttr(pool, "strides", {2, 2});
  IntsAttr(b.Node("ConvTranspose", {"p1", "wt", "bt"}, {"t1"}), "strides", {2, 2});
  b.Node("Conv", {"p1", "wl"}, {"l1"});
  auto* near = b.Node("Resize", {"l1", "", "up2"}, {"r1"});
  StringAttr(near, "mode", "nearest");
  StringAttr(near, "coordinate_transformation_mode", "asymmetric");
  StringAttr(near, "nearest_mode", "floor");
  b.Node("Add", {"t1", "r1"}, {"a1"});
  IntAttr(b.Node("Concat", {"a1", "n1"}, {"cat"}), "axis", 1);
  StringAttr(b.Node("Resize", {"cat", "", "up15"}, {"r2"}), "mode", "linear");
  b.Node("Sigmoid", {"r2"}, {"y"});
  CompareWithCpu(b.Write("unet_like"), {{"x", shape}});
}

}  // namespace
}  // namespace tessera::engine
