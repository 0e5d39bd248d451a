// The oneDNN path (channels-last Conv/pools, layout conversions in the CPU model) against the
// engine's own kernels on the same graphs: results must agree whatever mix of layout-aware and
// row-major-only nodes a graph has.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/onnx_builder_for_test.h"
#include "engine/thread_pool.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {
namespace {

using GraphBuilder = OnnxBuilderForTest;

// A CNN mixing every case the layout logic distinguishes: Conv chains (channels-last kept),
// element-wise ops on same-shape channels-last inputs (kept) and on a broadcast constant
// (converted), pools with ceil mode and padding, a depthwise and a strided 1x1 Conv, a row-major-
// only op (Transpose) reading a channels-last value, and a channels-last graph output.
std::string MixedCnn() {
  GraphBuilder b;
  b.Input("input", {-1, 3, 20, 20});
  b.Weight("w1", {8, 3, 3, 3}, 0.3f);
  b.Weight("b1", {8}, 0.1f);
  b.Weight("w2", {8, 1, 3, 3}, 0.3f);
  b.Weight("w3", {16, 8, 1, 1}, 0.3f);
  b.Weight("b3", {16}, 0.1f);
  b.Weight("scale", {1, 8, 1, 1}, 1.0f);
  b.Weight("fc", {16, 5}, 0.3f);
  auto* c1 = b.Node("Conv", {"input", "w1", "b1"}, {"c1"});
  GraphBuilder::Ints(c1, "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c1"}, {"r1"});
  auto* p1 = b.Node("MaxPool", {"r1"}, {"p1"});
  GraphBuilder::Ints(p1, "kernel_shape", {3, 3});
  GraphBuilder::Ints(p1, "strides", {2, 2});
  GraphBuilder::Ints(p1, "pads", {1, 1, 0, 0});
  GraphBuilder::Int(p1, "ceil_mode", 1);
  auto* c2 = b.Node("Conv", {"p1", "w2"}, {"c2"});
  GraphBuilder::Ints(c2, "pads", {1, 1, 1, 1});
  GraphBuilder::Int(c2, "group", 8);
  b.Node("Add", {"c2", "p1"}, {"sum"});
  b.Node("Mul", {"sum", "scale"}, {"scaled"});
  auto* a1 = b.Node("AveragePool", {"scaled"}, {"a1"});
  GraphBuilder::Ints(a1, "kernel_shape", {3, 3});
  GraphBuilder::Ints(a1, "strides", {2, 2});
  GraphBuilder::Ints(a1, "pads", {1, 1, 1, 1});
  auto* c3 = b.Node("Conv", {"a1", "w3", "b3"}, {"c3"});
  GraphBuilder::Ints(c3, "strides", {2, 2});
  b.Node("Sigmoid", {"c3"}, {"s3"});
  auto* t = b.Node("Transpose", {"s3"}, {"transposed"});
  GraphBuilder::Ints(t, "perm", {0, 2, 3, 1});
  b.Node("GlobalAveragePool", {"s3"}, {"gap"});
  auto* f = b.Node("Flatten", {"gap"}, {"flat"});
  GraphBuilder::Int(f, "axis", 1);
  b.Node("MatMul", {"flat", "fc"}, {"logits"});
  b.Output("logits");
  b.Output("transposed");
  b.Output("sum");
  return b.Write("onednn_mixed_cnn.onnx");
}

// A U-Net-like decoder on channels-last Conv outputs: Resize (linear, cubic, and nearest to given
// sizes) and Concat on the channel and on a spatial axis, of channels-last values, of a mix where
// most bytes are channels-last (the row-major input is converted) and of a mix where most are
// row-major (the channels-last one is converted instead); InstanceNormalization of channels-last
// values whose pixel counts (144, 432, 67) give different widened views; ConvTranspose; Pad;
// BatchNormalization before a Conv (DenseNet's order, which cannot fold into the Conv); Split on
// the channel axis (YOLOv8's C2f) and on W.
std::string DecoderCnn() {
  GraphBuilder b;
  b.Opsets(18);
  b.Input("input", {-1, 3, 12, 12});
  b.Weight("w1", {8, 3, 3, 3}, 0.3f);
  b.Weight("w2", {16, 8, 3, 3}, 0.3f);
  b.Weight("w3", {4, 24, 3, 3}, 0.3f);
  b.Weight("w4", {1, 3, 1, 1}, 0.3f);
  b.FloatConstant("double", {4}, {1.0f, 1.0f, 2.0f, 2.0f});
  b.FloatConstant("one_and_half", {4}, {1.0f, 1.0f, 1.5f, 1.5f});
  b.Int64Constant("sizes", {24, 18});
  b.Int64Constant("prime_sizes", {67, 1});  // 67 pixels: no wider view of the channels
  b.Weight("wt_up", {16, 8, 2, 2}, 0.3f);   // ConvTranspose W: [C_in, C_out / group, kH, kW]
  b.Weight("wt_group", {16, 3, 3, 3}, 0.3f);  // 2 groups: 16 -> 6 channels
  b.Weight("bt_group", {6}, 0.2f);
  b.Int64Constant("spatial_pads", {0, 0, 1, 2, 0, 0, 3, 0});
  b.Int64Constant("zero_pads", {0, 0, 0, 0, 0, 0, 0, 0});
  b.FloatConstant("pad_value", {}, {0.5f});
  b.FloatConstant("bn_var", {4}, {0.5f, 1.0f, 2.0f, 0.25f});
  b.Weight("in_scale", {4}, 1.0f);
  b.Weight("in_bias", {4}, 0.5f);
  auto padded_conv = [&](const char* in, const char* w, const char* out) {
    GraphBuilder::Ints(b.Node("Conv", {in, w}, {out}), "pads", {1, 1, 1, 1});
  };
  padded_conv("input", "w1", "c1");
  auto* p1 = b.Node("MaxPool", {"c1"}, {"p1"});
  GraphBuilder::Ints(p1, "kernel_shape", {2, 2});
  GraphBuilder::Ints(p1, "strides", {2, 2});
  padded_conv("p1", "w2", "c2");
  auto* up = b.Node("Resize", {"c2", "", "double"}, {"up"});
  GraphBuilder::String(up, "mode", "linear");
  auto* cubic = b.Node("Resize", {"c2", "", "one_and_half"}, {"cubic"});
  GraphBuilder::String(cubic, "mode", "cubic");
  GraphBuilder::String(cubic, "coordinate_transformation_mode", "align_corners");
  GraphBuilder::Int(b.Node("Concat", {"up", "c1"}, {"cat"}), "axis", 1);
  padded_conv("cat", "w3", "c3");
  GraphBuilder::Int(b.Node("Concat", {"c3", "input"}, {"mostly_channels_last"}), "axis", 1);
  b.Node("Conv", {"input", "w4"}, {"thin"});
  GraphBuilder::Int(b.Node("Concat", {"thin", "input", "input"}, {"mostly_row_major"}), "axis", 1);
  auto* nearest = b.Node("Resize", {"c3", "", "", "sizes"}, {"nearest"});
  GraphBuilder::Ints(nearest, "axes", {2, 3});
  // ConvTranspose: U-Net's 2x2 stride-2 upsampling; grouped, padded, dilated, with a bias; and
  // with output_padding, whose output oneDNN cannot express (the own kernel runs it).
  auto* deconv = b.Node("ConvTranspose", {"c2", "wt_up"}, {"deconv"});
  GraphBuilder::Ints(deconv, "strides", {2, 2});
  auto* grouped = b.Node("ConvTranspose", {"c2", "wt_group", "bt_group"}, {"deconv_grouped"});
  GraphBuilder::Int(grouped, "group", 2);
  GraphBuilder::Ints(grouped, "strides", {2, 1});
  GraphBuilder::Ints(grouped, "pads", {1, 0, 2, 1});
  GraphBuilder::Ints(grouped, "dilations", {1, 2});
  auto* padded = b.Node("ConvTranspose", {"c2", "wt_up"}, {"deconv_output_padding"});
  GraphBuilder::Ints(padded, "strides", {3, 3});
  GraphBuilder::Ints(padded, "output_padding", {1, 2});
  b.Node("BatchNormalization", {"c3", "in_scale", "in_bias", "in_bias", "bn_var"}, {"bn"});
  // Element-wise ops broadcasting per image and channel over a channels-last value (a squeeze-
  // excitation gate, a [C, 1, 1] scale) run on its bytes; one broadcasting along W cannot.
  b.Node("GlobalAveragePool", {"c3"}, {"pooled"});
  b.Node("Sigmoid", {"pooled"}, {"gate"});
  b.Node("Mul", {"c3", "gate"}, {"excited"});
  b.Weight("w_gate", {4, 4, 1, 1}, 0.5f);  // a gate from a Conv is channels-last [N, C, 1, 1]
  b.Node("Conv", {"pooled", "w_gate"}, {"gate_conv"});
  b.Node("Sigmoid", {"gate_conv"}, {"conv_gate"});
  b.Node("Mul", {"c3", "conv_gate"}, {"excited_by_conv"});
  b.Weight("channel_scale", {4, 1, 1}, 1.0f);
  b.Node("Mul", {"channel_scale", "c3"}, {"scaled_per_channel"});
  b.Weight("row_bias", {1, 1, 1, 12}, 1.0f);
  b.Node("Add", {"c3", "row_bias"}, {"biased_per_column"});
  b.Int64Constant("channel_split", {6, 10});
  GraphBuilder::Int(b.Node("Split", {"c2", "channel_split"}, {"head", "tail"}), "axis", 1);
  GraphBuilder::Int(b.Node("Split", {"c3"}, {"left", "right"}), "axis", 3);
  b.Node("Pad", {"c3", "spatial_pads", "pad_value"}, {"padded"});
  GraphBuilder::String(b.Node("Pad", {"c3", "spatial_pads"}, {"reflected"}), "mode", "reflect");
  b.Node("Pad", {"c3", "zero_pads"}, {"unpadded"});
  auto* tall = b.Node("Resize", {"c3", "", "", "prime_sizes"}, {"tall"});
  GraphBuilder::Ints(tall, "axes", {2, 3});
  for (const char* in : {"c3", "nearest", "tall"}) {
    b.Node("InstanceNormalization", {in, "in_scale", "in_bias"}, {std::string(in) + "_normed"});
  }
  b.Node("Relu", {"c3"}, {"r3"});
  GraphBuilder::Int(b.Node("Concat", {"c3", "r3"}, {"stacked"}), "axis", -2);
  // Every value above is an output, so each path is compared.
  const char* const kOutputs[] = {"up",
                                  "cubic",
                                  "cat",
                                  "mostly_channels_last",
                                  "mostly_row_major",
                                  "nearest",
                                  "stacked",
                                  "c3_normed",
                                  "nearest_normed",
                                  "tall_normed",
                                  "deconv",
                                  "deconv_grouped",
                                  "deconv_output_padding",
                                  "padded",
                                  "reflected",
                                  "unpadded",
                                  "bn",
                                  "head",
                                  "tail",
                                  "left",
                                  "right",
                                  "excited",
                                  "excited_by_conv",
                                  "scaled_per_channel",
                                  "biased_per_column"};
  for (const char* out : kOutputs) {
    b.Output(out);
  }
  return b.Write("onednn_decoder_cnn.onnx");
}

// Conv geometries the pool cuts into rows (conv_slices.h) in every way a cut can go wrong: a
// 5x5 stride-2 kernel with uneven pads, a dilated one, a grouped one whose bottom pad exceeds
// what its last rows read, pointwise ones cut by pixels, one with a fused residual sum and
// activation, and a strided pointwise one (cut by rows); strided ones whose weights outnumber
// their outputs (cut by output channels, 48 of them: parts of 16 and 32, or three of 16), one
// with a bias and one with a residual sum and activation; then Transposes and reductions.
std::string ConvGeometriesCnn() {
  GraphBuilder b;
  b.Input("input", {-1, 3, 20, 20});
  b.Weight("w_k5", {8, 3, 5, 5}, 0.2f);
  b.Weight("b_k5", {8}, 0.1f);
  b.Weight("w_dilated", {8, 8, 3, 3}, 0.2f);
  b.Weight("w_grouped", {8, 4, 3, 3}, 0.2f);
  b.Weight("w_point", {8, 8, 1, 1}, 0.3f);
  b.Weight("w_wide", {16, 8, 1, 1}, 0.3f);
  b.Weight("w_expand", {128, 8, 1, 1}, 0.3f);
  b.Weight("w_heavy", {48, 128, 7, 7}, 0.02f);  // 1.15 MiB
  b.Weight("b_heavy", {48}, 0.2f);
  b.Weight("w_heavy_sum", {48, 128, 7, 7}, 0.02f);
  auto* k5 = b.Node("Conv", {"input", "w_k5", "b_k5"}, {"k5"});
  GraphBuilder::Ints(k5, "strides", {2, 2});
  GraphBuilder::Ints(k5, "pads", {2, 1, 1, 2});
  auto* dilated = b.Node("Conv", {"k5", "w_dilated"}, {"dilated"});
  GraphBuilder::Ints(dilated, "dilations", {2, 2});
  GraphBuilder::Ints(dilated, "pads", {2, 2, 2, 2});
  auto* grouped = b.Node("Conv", {"dilated", "w_grouped"}, {"grouped"});
  GraphBuilder::Int(grouped, "group", 2);
  GraphBuilder::Ints(grouped, "pads", {0, 1, 3, 1});
  b.Node("Conv", {"k5", "w_point"}, {"point"});
  b.Node("Add", {"point", "dilated"}, {"residual_sum"});  // fused: Conv with a residual sum
  b.Node("Relu", {"residual_sum"}, {"residual_relu"});
  auto* strided = b.Node("Conv", {"residual_relu", "w_wide"}, {"strided_point"});
  GraphBuilder::Ints(strided, "strides", {2, 2});
  b.Node("Conv", {"residual_relu", "w_wide"}, {"wide_point"});
  b.Node("Conv", {"residual_relu", "w_expand"}, {"expanded"});
  auto* heavy = b.Node("Conv", {"expanded", "w_heavy", "b_heavy"}, {"heavy"});
  GraphBuilder::Ints(heavy, "strides", {4, 4});
  GraphBuilder::Ints(heavy, "pads", {3, 3, 3, 3});
  auto* heavy_sum = b.Node("Conv", {"expanded", "w_heavy_sum"}, {"heavy_sum_conv"});
  GraphBuilder::Ints(heavy_sum, "strides", {4, 4});
  GraphBuilder::Ints(heavy_sum, "pads", {3, 3, 3, 3});
  b.Node("Add", {"heavy_sum_conv", "heavy"}, {"heavy_sum"});  // fused: a residual sum
  b.Node("Relu", {"heavy_sum"}, {"heavy_relu"});
  // Transposes of channels-last Conv outputs: NHWC (their bytes as they are) and two others.
  GraphBuilder::Ints(b.Node("Transpose", {"wide_point"}, {"nhwc"}), "perm", {0, 2, 3, 1});
  GraphBuilder::Ints(b.Node("Transpose", {"wide_point"}, {"nwch"}), "perm", {0, 3, 1, 2});
  GraphBuilder::Ints(b.Node("Transpose", {"grouped"}, {"hcwn"}), "perm", {2, 1, 3, 0});
  // Reductions of a channels-last value: as stored where the kept axes keep their order (over H
  // and W, over C), converted first where they do not (over H alone).
  auto* spatial_mean = b.Node("ReduceMean", {"wide_point"}, {"spatial_mean"});
  GraphBuilder::Ints(spatial_mean, "axes", {2, 3});
  auto* flat_mean = b.Node("ReduceMean", {"wide_point"}, {"flat_mean"});
  GraphBuilder::Ints(flat_mean, "axes", {-1, -2});
  GraphBuilder::Int(flat_mean, "keepdims", 0);
  b.Int64Constant("channel_axis", {1});
  b.Node("ReduceSum", {"grouped", "channel_axis"}, {"channel_sum"});
  auto* row_max = b.Node("ReduceMax", {"grouped"}, {"row_max"});
  GraphBuilder::Ints(row_max, "axes", {2});
  GraphBuilder::Int(row_max, "keepdims", 0);
  auto* lse = b.Node("ReduceLogSumExp", {"grouped"}, {"image_lse"});
  GraphBuilder::Ints(lse, "axes", {1, 2, 3});
  for (const char* out :
       {"grouped", "residual_relu", "strided_point", "wide_point", "heavy", "heavy_relu", "nhwc",
        "nwch", "hcwn", "spatial_mean", "flat_mean", "channel_sum", "row_max", "image_lse"}) {
    b.Output(out);
  }
  return b.Write("onednn_conv_geometries.onnx");
}

// input [N, 3, S, S] -> 1x1 Convs of 64 channels: a; c = Conv(a); y = Relu(Conv(c) + a), whose
// output may go over a (last read there); e = Conv(c) + c, which reads c as X too, so its residual
// is copied. At S = 64 both outputs take 1 MiB an image: oneDNN runs them in parts of pixels
// across images, the residual read into the cache first (SliceResidualPointwiseConv).
std::string ResidualPointwiseCnn() {
  GraphBuilder b;
  b.Input("input", {-1, 3, 64, 64});
  b.Weight("w_a", {64, 3, 1, 1}, 0.4f);
  b.Weight("b_a", {64}, 0.2f);
  for (const char* w : {"w_c", "w_b", "w_e"}) b.Weight(w, {64, 64, 1, 1}, 0.15f);
  b.Node("Conv", {"input", "w_a", "b_a"}, {"a"});
  b.Node("Conv", {"a", "w_c"}, {"c"});
  b.Node("Conv", {"c", "w_b"}, {"b"});
  b.Node("Add", {"b", "a"}, {"sum"});
  b.Node("Relu", {"sum"}, {"y"});
  b.Node("Conv", {"c", "w_e"}, {"e_conv"});
  b.Node("Add", {"c", "e_conv"}, {"e"});
  b.Output("y");
  b.Output("e");
  return b.Write("onednn_residual_pointwise.onnx");
}

Tensor RandomInput(int64_t batch, uint32_t seed, int64_t size = 20) {
  Tensor t;
  t.name = "input";
  t.dtype = DataType::kFp32;
  t.shape = {batch, 3, size, size};
  t.bytes.resize(static_cast<size_t>(batch * 3 * size * size) * sizeof(float));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  auto* p = reinterpret_cast<float*>(t.bytes.data());
  for (int64_t i = 0; i < batch * 3 * size * size; ++i) p[i] = dist(rng);
  return t;
}

std::vector<Tensor> RunModel(Model* model, Tensor input) {
  std::vector<Tensor> outputs;
  std::vector<TensorView> views = {input.View()};
  Status status = model->Run(views, &outputs);
  EXPECT_TRUE(status.ok()) << status;
  return outputs;
}

void ExpectAllClose(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected,
                    const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_EQ(actual[i].shape, expected[i].shape) << what << " output " << expected[i].name;
    const auto* a = reinterpret_cast<const float*>(actual[i].bytes.data());
    const auto* e = reinterpret_cast<const float*>(expected[i].bytes.data());
    const size_t count = actual[i].bytes.size() / sizeof(float);
    float max_ref = 0.0f;
    for (size_t j = 0; j < count; ++j) max_ref = std::max(max_ref, std::fabs(e[j]));
    for (size_t j = 0; j < count; ++j) {
      ASSERT_NEAR(a[j], e[j], 1e-4f * std::max(1.0f, max_ref))
          << what << " output " << expected[i].name << " element " << j;
    }
  }
}

TEST(OneDnnTest, BuildReportsWhetherItUsesOneDnn) {
#ifdef TESSERA_HAVE_ONEDNN
  EXPECT_TRUE(cpu::UsingOneDnn());
  EXPECT_NE(cpu::OneDnnIsa(), "none");
#else
  EXPECT_FALSE(cpu::UsingOneDnn());
#endif
}

class OneDnnVersusOwnKernels : public ::testing::TestWithParam<int> {
 protected:
  // Runs the file through oneDNN on GetParam() threads and through the own kernels (row-major
  // values only), `rounds` times over `batches` of random [batch, 3, size, size] inputs, and
  // expects the same outputs. Repeated runs of a shape go through every stage of the CPU model:
  // the Run that plans memory, then with 2 threads the Runs that time each node alone and on the
  // pool (NodeParallelism), then the decided ones.
  void ExpectAgreement(const std::string& path, int rounds, std::initializer_list<int64_t> batches,
                       int64_t size, uint32_t seed) {
    ModelOptions own_options;
    own_options.onednn = false;
    ModelOptions dnnl_options;
    dnnl_options.num_threads = GetParam();
    auto own = LoadOnnxModel(path, own_options);
    auto dnnl = LoadOnnxModel(path, dnnl_options);
    ASSERT_TRUE(own.ok()) << own.status();
    ASSERT_TRUE(dnnl.ok()) << dnnl.status();
    for (int round = 0; round < rounds; ++round) {
      for (int64_t batch : batches) {
        Tensor input = RandomInput(batch, seed++, size);
        ExpectAllClose(RunModel(dnnl->get(), input), RunModel(own->get(), input),
                       "round " + std::to_string(round) + " batch " + std::to_string(batch));
      }
    }
  }
};

TEST_P(OneDnnVersusOwnKernels, MixedLayoutGraphAgreesAcrossBatchSizes) {
  ExpectAgreement(MixedCnn(), 10, {1, 3, 1, 3, 2}, 20, 1);
}

TEST_P(OneDnnVersusOwnKernels, DecoderResizesAndConcatenatesChannelsLastValues) {
  ExpectAgreement(DecoderCnn(), 4, {1, 2}, 12, 50);
}

TEST_P(OneDnnVersusOwnKernels, ConvsCutIntoRowsAndPixelsAgree) {
  // Batches 1 and 3 cut each image into rows; 2 (on 2 threads) and 6 give each thread images.
  ExpectAgreement(ConvGeometriesCnn(), 6, {1, 3, 2, 6}, 20, 90);
}

TEST_P(OneDnnVersusOwnKernels, ResidualConvsInPartsOfPixelsAgree) {
  ExpectAgreement(ResidualPointwiseCnn(), 4, {1, 2, 3}, 64, 70);
}

INSTANTIATE_TEST_SUITE_P(Threads, OneDnnVersusOwnKernels, ::testing::Values(1, 2, 3));

TEST(OneDnnTest, PlannedMemoryStillReportsAnArena) {
  auto model = LoadOnnxModel(MixedCnn(), ModelOptions{});
  ASSERT_TRUE(model.ok()) << model.status();
  auto plan = (*model)->PlanMemory(4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GT(plan->arena_bytes, 0u);
  EXPECT_LE(plan->arena_bytes, plan->naive_bytes);
}

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

TEST(OneDnnTest, InstancesShareTheReorderedConvWeights) {
  // One 512x512 3x3 Conv: 9 MiB of weights, which oneDNN reorders into its own layout.
  GraphBuilder b;
  b.Input("input", {-1, 512, 4, 4});
  b.Weight("w", {512, 512, 3, 3}, 0.01f);
  auto* conv = b.Node("Conv", {"input", "w"}, {"output"});
  GraphBuilder::Ints(conv, "pads", {1, 1, 1, 1});
  b.Output("output");
  const std::string path = b.Write("onednn_big_conv.onnx");
  Tensor input;
  input.name = "input";
  input.dtype = DataType::kFp32;
  input.shape = {1, 512, 4, 4};
  input.bytes.assign(512 * 16 * sizeof(float), std::byte{0});
  std::vector<std::unique_ptr<Model>> models;
  auto load_and_run = [&] {
    auto model = LoadOnnxModel(path, ModelOptions{});
    ASSERT_TRUE(model.ok()) << model.status();
    RunModel(model->get(), input);
    models.push_back(std::move(*model));
  };
  load_and_run();
  const int64_t after_first = ResidentBytes();
  for (int i = 0; i < 3; ++i) load_and_run();
  const int64_t growth = ResidentBytes() - after_first;
  // Three more reordered copies would add 27 MiB.
  EXPECT_LT(growth, 6 << 20) << "resident memory grew by " << growth << " bytes";
}

// oneDNN's library-managed scratchpad belongs to the thread that created a primitive. The server
// builds a model's cached Conv primitives on one thread (the warm-up) and runs each instance on
// its own thread, several at once (workers of several batch sizes on one executor): the
// primitives must not share a scratchpad then.
TEST(OneDnnTest, InstancesWarmedUpOnOneThreadRunConcurrentlyOnOthers) {
  constexpr int kInstances = 3, kRuns = 40;
  const std::string path = MixedCnn();
  std::vector<std::unique_ptr<Model>> models;
  std::vector<Tensor> inputs;
  std::vector<std::vector<Tensor>> expected;
  for (int i = 0; i < kInstances; ++i) {
    auto model = LoadOnnxModel(path, ModelOptions{});
    ASSERT_TRUE(model.ok()) << model.status();
    models.push_back(std::move(*model));
    inputs.push_back(RandomInput(3, 100 + i));
  }
  // Every primitive is built here, on the test's thread; the expected outputs too.
  for (int i = 0; i < kInstances; ++i) expected.push_back(RunModel(models[i].get(), inputs[i]));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kInstances; ++i) {
    threads.emplace_back([&, i] {
      for (int run = 0; run < kRuns; ++run) {
        std::vector<Tensor> out = RunModel(models[i].get(), inputs[i]);
        if (out.size() != expected[i].size() || out[0].bytes != expected[i][0].bytes) {
          ++mismatches;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0) << "of " << kInstances * kRuns << " concurrent runs";
}

TEST(LayoutTest, RowMajorAndChannelsLastRoundTrip) {
  Value v = Value::Allocate(DataType::kFp32, {2, 3, 4, 5});
  for (int64_t i = 0; i < v.num_elements(); ++i) v.mutable_data<float>()[i] = static_cast<float>(i);
  Value cl = cpu::ToChannelsLast(v);
  ASSERT_TRUE(cl.channels_last());
  // Element (n=1, c=2, h=3, w=4) sits at ((1*4+3)*5+4)*3+2 in NHWC order.
  EXPECT_EQ(cl.data<float>()[((1 * 4 + 3) * 5 + 4) * 3 + 2], v.data<float>()[119]);
  Value back = cpu::ToRowMajor(cl);
  EXPECT_FALSE(back.channels_last());
  for (int64_t i = 0; i < v.num_elements(); ++i) {
    ASSERT_EQ(back.data<float>()[i], v.data<float>()[i]) << i;
  }
  // A 1x1 spatial value has the same bytes in both layouts: relabelled, not copied.
  Value pooled = Value::Allocate(DataType::kFp32, {2, 3, 1, 1});
  EXPECT_EQ(cpu::ToChannelsLast(pooled).raw(), pooled.raw());
}

TEST(LayoutTest, ConversionsSplitOverAPoolMatchTheSerialOnes) {
  // 3 channels (split by bands of pixels) and 70 (by bands of channels), 2 images, sizes that
  // leave partial bands and tiles.
  ThreadPool pool(3);
  for (Shape shape : {Shape{2, 3, 33, 31}, Shape{2, 70, 9, 7}}) {
    Value v = Value::Allocate(DataType::kFp32, shape);
    for (int64_t i = 0; i < v.num_elements(); ++i) v.mutable_data<float>()[i] = i * 0.5f;
    const Value serial = cpu::ToChannelsLast(v);
    const Value split = cpu::ToChannelsLast(v, &pool);
    ASSERT_TRUE(split.channels_last());
    for (int64_t i = 0; i < v.num_elements(); ++i) {
      ASSERT_EQ(split.data<float>()[i], serial.data<float>()[i]) << i;
    }
    const Value back = cpu::ToRowMajor(split, &pool);
    for (int64_t i = 0; i < v.num_elements(); ++i) {
      ASSERT_EQ(back.data<float>()[i], v.data<float>()[i]) << i;
    }
  }
}

TEST(LayoutTest, FewChannelsMatchTheIndexFormula) {
  // 2..4 channels take their own interleaving path; 130 x 131 pixels is more than one of its
  // 16384-pixel tasks. Checked against the layouts' index formulas, serial and over a pool.
  ThreadPool pool(2);
  for (int64_t c : {2, 3, 4}) {
    const int64_t n = 2, h = 130, w = 131;
    Value v = Value::Allocate(DataType::kFp32, {n, c, h, w});
    for (int64_t i = 0; i < v.num_elements(); ++i) v.mutable_data<float>()[i] = i * 0.25f;
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      const Value cl = cpu::ToChannelsLast(v, p);
      ASSERT_TRUE(cl.channels_last());
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t ch = 0; ch < c; ++ch) {
          for (int64_t px = 0; px < h * w; ++px) {
            ASSERT_EQ(cl.data<float>()[(b * h * w + px) * c + ch],
                      v.data<float>()[(b * c + ch) * h * w + px])
                << "c " << c << " image " << b << " channel " << ch << " pixel " << px;
          }
        }
      }
      const Value back = cpu::ToRowMajor(cl, p);
      for (int64_t i = 0; i < v.num_elements(); ++i) {
        ASSERT_EQ(back.data<float>()[i], v.data<float>()[i]) << "c " << c << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::engine
