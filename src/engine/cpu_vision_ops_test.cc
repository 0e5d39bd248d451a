// Resize, ConvTranspose, NonMaxSuppression and the channel normalisations beyond what the ONNX
// project's node tests cover: ConvTranspose against a naive scatter for strides, dilations, pads,
// groups and 1-D to 3-D; threaded runs equal to single-threaded ones; and the INVALID_ARGUMENT
// paths for bad inputs.
#include <random>

#include "engine/cpu_op_runner_for_test.h"
#include "gtest/gtest.h"

namespace tessera::engine::cpu {
namespace {

StatusOr<Value> Resize(const Value& x, const Value* scales, const Value* sizes, Attributes attrs,
                       ThreadPool* pool = nullptr) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> out, RunOpN("Resize", {&x, nullptr, scales, sizes},
                                                          std::move(attrs), 1, pool, 13));
  return out[0];
}

TEST(ResizeTest, NearestUpsamplingRepeatsPixelsForAnyElementType) {
  Value x = Make<uint8_t>(DataType::kUint8, {1, 1, 2, 2}, {1, 2, 3, 4});
  Value scales = Floats({4}, {1, 1, 2, 2});
  Attributes attrs;
  attrs.Set("mode", StringAttr("nearest"));
  auto y = Resize(x, &scales, nullptr, attrs);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(Elements<uint8_t>(*y),
            (std::vector<uint8_t>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(ResizeTest, BilinearThreadedEqualsSingleThreadedAndSizesGiveTheShape) {
  std::mt19937 rng(5);
  Value x = RandomFloats({2, 8, 33, 47}, &rng);
  Value sizes = Int64s({4}, {2, 8, 70, 91});
  Attributes attrs;
  attrs.Set("mode", StringAttr("linear"));
  ThreadPool pool(2);
  auto single = Resize(x, nullptr, &sizes, attrs);
  auto threaded = Resize(x, nullptr, &sizes, attrs, &pool);
  ASSERT_TRUE(single.ok() && threaded.ok()) << single.status() << threaded.status();
  EXPECT_EQ(single->shape(), (Shape{2, 8, 70, 91}));
  EXPECT_EQ(Elements<float>(*single), Elements<float>(*threaded));
  // Unit scales copy the input.
  Value ones = Floats({4}, {1, 1, 1, 1});
  auto same = Resize(x, &ones, nullptr, attrs);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(Elements<float>(*same), Elements<float>(x));
}

TEST(ResizeTest, BadScalesSizesAndTypesAreRefused) {
  Value x = Floats({1, 1, 2, 2}, {1, 2, 3, 4});
  Value scales = Floats({4}, {1, 1, 2, 2}), short_scales = Floats({2}, {2, 2});
  Value negative = Floats({4}, {1, 1, -2, 2}), huge = Floats({4}, {1, 1, 1e12f, 1e12f});
  Value sizes = Int64s({4}, {1, 1, 4, 4});
  Attributes linear;
  linear.Set("mode", StringAttr("linear"));
  ExpectInvalidArgument(Resize(x, &scales, &sizes, {}), "exactly one of scales and sizes");
  ExpectInvalidArgument(Resize(x, nullptr, nullptr, {}), "exactly one of scales and sizes");
  ExpectInvalidArgument(Resize(x, &short_scales, nullptr, {}),
                        "has 2 entries for the 4 resized axes");
  ExpectInvalidArgument(Resize(x, &negative, nullptr, {}), "must be positive");
  ExpectInvalidArgument(Resize(x, &huge, nullptr, {}), "too large");
  Value ints = Int64s({1, 1, 2, 2}, {1, 2, 3, 4});
  ExpectInvalidArgument(Resize(ints, &scales, nullptr, linear), "only FP32 inputs take linear");
  Attributes bad_mode;
  bad_mode.Set("mode", StringAttr("bicubic"));
  ExpectInvalidArgument(Resize(x, &scales, nullptr, bad_mode), "mode \"bicubic\"");
  Attributes crop;
  crop.Set("coordinate_transformation_mode", StringAttr("tf_crop_and_resize"));
  ExpectInvalidArgument(Resize(x, &scales, nullptr, crop), "roi has 0 entries");
  // Antialiasing (opset 18) is refused at load, as UNIMPLEMENTED.
  Node node;
  node.op_type = "Resize";
  node.opset = 18;
  node.attributes.Set("antialias", IntAttr(1));
  EXPECT_EQ(CheckResize(node, Graph{}).code(), absl::StatusCode::kUnimplemented);
}

// out[n, g*Mg+co, o] += x[n, g*Cg+ci, i] * w[g*Cg+ci, co, k] where o = i*s - pad + k*d, for
// 1 to 3 spatial dims.
std::vector<float> NaiveConvTranspose(const Value& x, const Value& w, const Value* bias,
                                      int64_t groups, const std::vector<int64_t>& stride,
                                      const std::vector<int64_t>& dilation,
                                      const std::vector<int64_t>& pad, const Shape& out_shape) {
  const size_t s = x.shape().size() - 2;
  const int64_t batch = x.dim(0), channels = x.dim(1), cg = channels / groups, mg = w.dim(1);
  auto volume = [](const Shape& shape) {
    int64_t v = 1;
    for (size_t d = 2; d < shape.size(); ++d) v *= shape[d];
    return v;
  };
  const int64_t in_vol = volume(x.shape()), k_vol = volume(w.shape()), out_vol = volume(out_shape);
  std::vector<float> out(static_cast<size_t>(batch * out_shape[1] * out_vol), 0.0f);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t g = c / cg;
      for (int64_t co = 0; co < mg; ++co) {
        for (int64_t i = 0; i < in_vol; ++i) {
          for (int64_t k = 0; k < k_vol; ++k) {
            int64_t o = 0, irest = i, krest = k;
            bool inside = true;
            std::vector<int64_t> od(s);
            for (size_t d = s; d-- > 0;) {
              const int64_t id = irest % x.dim(static_cast<int>(d + 2)),
                            kd = krest % w.dim(static_cast<int>(d + 2));
              irest /= x.dim(static_cast<int>(d + 2));
              krest /= w.dim(static_cast<int>(d + 2));
              od[d] = id * stride[d] - pad[d] + kd * dilation[d];
              inside = inside && od[d] >= 0 && od[d] < out_shape[d + 2];
            }
            if (!inside) continue;
            for (size_t d = 0; d < s; ++d) o = o * out_shape[d + 2] + od[d];
            out[static_cast<size_t>((n * out_shape[1] + g * mg + co) * out_vol + o)] +=
                x.data<float>()[(n * channels + c) * in_vol + i] *
                w.data<float>()[(c * mg + co) * k_vol + k];
          }
        }
      }
    }
    if (bias != nullptr) {
      for (int64_t m = 0; m < out_shape[1]; ++m) {
        for (int64_t o = 0; o < out_vol; ++o) {
          out[static_cast<size_t>((n * out_shape[1] + m) * out_vol + o)] += bias->data<float>()[m];
        }
      }
    }
  }
  return out;
}

TEST(ConvTransposeTest, MatchesNaiveScatterForOneToThreeSpatialDims) {
  std::mt19937 rng(9);
  ThreadPool pool(2);
  struct Case {
    Shape x, w;
    int64_t groups;
    std::vector<int64_t> stride, dilation, pads, output_padding;
  };
  const std::vector<Case> cases = {
      {{2, 4, 5, 6}, {4, 3, 3, 3}, 2, {2, 2}, {1, 1}, {1, 0, 1, 0}, {1, 0}},
      {{1, 3, 4, 4}, {3, 2, 2, 3}, 1, {1, 2}, {2, 1}, {0, 1, 0, 1}, {0, 1}},
      {{2, 2, 7}, {2, 5, 4}, 1, {3}, {1}, {2, 1}, {0}},
      {{1, 2, 3, 2, 3}, {2, 2, 2, 2, 2}, 2, {2, 1, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, {1, 0, 0}},
      // Kernel = stride, no padding: with oneDNN, one GEMM whose rows are scattered into place.
      {{3, 5, 4, 6}, {5, 7, 2, 3}, 1, {2, 3}, {1, 1}, {0, 0, 0, 0}, {0, 0}},
  };
  for (const Case& c : cases) {
    Value x = RandomFloats(c.x, &rng), w = RandomFloats(c.w, &rng);
    Value bias = RandomFloats({c.w[1] * c.groups}, &rng);
    const size_t s = c.x.size() - 2;
    Shape out_shape{c.x[0], c.w[1] * c.groups};
    for (size_t d = 0; d < s; ++d) {
      out_shape.push_back(c.stride[d] * (c.x[d + 2] - 1) + c.output_padding[d] +
                          (c.w[d + 2] - 1) * c.dilation[d] + 1 - c.pads[d] - c.pads[s + d]);
    }
    Attributes attrs;
    attrs.Set("group", IntAttr(c.groups));
    attrs.Set("strides", IntsAttr(c.stride));
    attrs.Set("dilations", IntsAttr(c.dilation));
    attrs.Set("pads", IntsAttr(c.pads));
    attrs.Set("output_padding", IntsAttr(c.output_padding));
    const std::vector<float> expected =
        NaiveConvTranspose(x, w, &bias, c.groups, c.stride, c.dilation, c.pads, out_shape);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      auto y = RunOp("ConvTranspose", {&x, &w, &bias}, attrs, p);
      ASSERT_TRUE(y.ok()) << y.status();
      ASSERT_EQ(y->shape(), out_shape);
      const Value row_major = ToRowMajor(*y);  // oneDNN's 2-D deconvolution answers channels-last
      for (size_t i = 0; i < expected.size(); ++i) {
        ASSERT_NEAR(row_major.data<float>()[i], expected[i], 1e-4f)
            << ShapeToString(c.x) << " at " << i;
      }
    }
  }
}

TEST(ConvTransposeTest, MismatchedShapesAreRefused) {
  Value x = Floats({1, 2, 2, 2}, std::vector<float>(8, 1.0f));
  Value w = Floats({2, 1, 2, 2}, std::vector<float>(8, 1.0f));
  Value w3 = Floats({2, 1, 2}, std::vector<float>(4, 1.0f));
  Value w_wrong_in = Floats({3, 1, 2, 2}, std::vector<float>(12, 1.0f));
  Value bias = Floats({3}, {1, 2, 3});
  ExpectInvalidArgument(RunOp("ConvTranspose", {&x, &w3}), "must have one rank");
  ExpectInvalidArgument(RunOp("ConvTranspose", {&x, &w_wrong_in}), "do not fit group=1");
  ExpectInvalidArgument(RunOp("ConvTranspose", {&x, &w, &bias}), "must be FP32[1]");
  Attributes kernel;
  kernel.Set("kernel_shape", IntsAttr({3, 3}));
  ExpectInvalidArgument(RunOp("ConvTranspose", {&x, &w}, kernel),
                        "kernel_shape [3,3] does not match W");
  Attributes huge_stride;
  huge_stride.Set("strides", IntsAttr({int64_t{1} << 62, 1}));
  ExpectInvalidArgument(RunOp("ConvTranspose", {&x, &w}, huge_stride), "must be in [1, 1048576]");
  Attributes pads;
  pads.Set("pads", IntsAttr({5, 5, 5, 5}));
  ExpectInvalidArgument(RunOp("ConvTranspose", {&x, &w}, pads), "out of range");
}

TEST(NonMaxSuppressionTest, KeepsTheBestOfOverlappingBoxesPerClass) {
  // Box 0 and 1 overlap (IoU 0.81), box 2 is apart. Class 1 ranks box 1 first.
  Value boxes = Floats({1, 3, 4}, {0, 0, 10, 10, 0, 1, 10, 11, 20, 20, 30, 30});
  Value scores = Floats({1, 2, 3}, {0.9f, 0.8f, 0.3f, 0.1f, 0.7f, 0.6f});
  Value max_boxes = Int64s({1}, {10});
  Value iou = Floats({1}, {0.5f});
  Value threshold = Floats({1}, {0.2f});
  auto y = RunOp("NonMaxSuppression", {&boxes, &scores, &max_boxes, &iou, &threshold});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{4, 3}));
  EXPECT_EQ(Elements<int64_t>(*y), (std::vector<int64_t>{0, 0, 0, 0, 0, 2, 0, 1, 1, 0, 1, 2}));
  // No score threshold: box 0 of class 1 (score 0.1) is still suppressed by box 1.
  Value one = Int64s({1}, {1});
  auto top = RunOp("NonMaxSuppression", {&boxes, &scores, &one, &iou});
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(Elements<int64_t>(*top), (std::vector<int64_t>{0, 0, 0, 0, 1, 1}));
  // Without max_output_boxes_per_class nothing is selected.
  auto none = RunOp("NonMaxSuppression", {&boxes, &scores});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->shape(), (Shape{0, 3}));
  Value bad_scores = Floats({1, 2, 2}, {0, 0, 0, 0});
  ExpectInvalidArgument(RunOp("NonMaxSuppression", {&boxes, &bad_scores, &max_boxes}),
                        "must be [batches, boxes, 4] and [batches, classes, boxes]");
  Value float_max = Floats({1}, {3});
  ExpectInvalidArgument(RunOp("NonMaxSuppression", {&boxes, &scores, &float_max}),
                        "max_output_boxes_per_class");
}

TEST(ChannelNormalizationTest, InstanceNormOnChannelsLastEqualsRowMajor) {
  std::mt19937 rng(13);
  Value x = RandomFloats({3, 5, 7, 6}, &rng);
  Value scale = RandomFloats({5}, &rng), bias = RandomFloats({5}, &rng);
  ThreadPool pool(2);
  auto row_major = RunOp("InstanceNormalization", {&x, &scale, &bias});
  Value x_last = ToChannelsLast(x);
  auto channels_last = RunOp("InstanceNormalization", {&x_last, &scale, &bias}, {}, &pool);
  ASSERT_TRUE(row_major.ok() && channels_last.ok()) << row_major.status() << channels_last.status();
  ASSERT_TRUE(channels_last->channels_last());
  const Value back = ToRowMajor(*channels_last);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    ASSERT_NEAR(back.data<float>()[i], row_major->data<float>()[i], 1e-5f) << "at " << i;
  }
}

TEST(ChannelNormalizationTest, BadShapesAreRefused) {
  Value flat = Floats({2, 2}, {1, 2, 3, 4});
  Value x = Floats({1, 2, 2}, {1, 2, 3, 4});
  Value scale = Floats({3}, {1, 1, 1}), bias = Floats({2}, {0, 0});
  ExpectInvalidArgument(RunOp("InstanceNormalization", {&flat, &bias, &bias}),
                        "must be [N, C, D1, ...]");
  ExpectInvalidArgument(RunOp("InstanceNormalization", {&x, &scale, &bias}), "must be FLOAT[2]");
  Attributes size;
  size.Set("size", IntAttr(3));
  ExpectInvalidArgument(RunOp("LRN", {&flat}, size), "must be [N, C, D1, ...]");
  ExpectInvalidArgument(RunOp("LRN", {&x}), "size attribute");
  Attributes axes;
  axes.Set("axes", IntsAttr({0, 5}));
  ExpectInvalidArgument(RunOp("MeanVarianceNormalization", {&x}, axes), "out of range");
}

}  // namespace
}  // namespace tessera::engine::cpu
