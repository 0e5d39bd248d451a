// QLinearConv through LoadOnnxModel, with oneDNN (an integer convolution where the CPU has 8-bit
// dot products) and with the own kernel, against the ONNX formula computed here in integers: the
// activation kinds (UINT8, INT8, zero points), per-tensor and per-channel weight scales, groups,
// strides and pads, with and without a bias, and on 2 threads so that oneDNN's parts run.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/cpu_op_runner_for_test.h"
#include "engine/fusion_test_util.h"
#include "engine/onnx_builder_for_test.h"
#include "engine/thread_pool.h"
#include "gtest/gtest.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {
namespace {

struct QConvCase {
  std::string name;
  int batch = 2, cin = 4, cout = 6, side = 7, kernel = 3, stride = 1, pad = 1, group = 1;
  bool signed_x = false, signed_y = false, per_channel = true, bias = true;
  bool uint8_weights = false;  // UINT8 weights with a zero point (the own kernel's case)
  int x_zero = 128, y_zero = 100, w_zero = 0;
  float x_scale = 0.05f, y_scale = 0.2f;
};

int64_t WeightCount(const QConvCase& c) {
  return int64_t{c.cout} * (c.cin / c.group) * c.kernel * c.kernel;
}

int WeightAt(const QConvCase& c, int64_t i) {
  return c.uint8_weights ? static_cast<int>(i * 53 % 256) : static_cast<int>(i * 37 % 255) - 127;
}

float WeightScale(const QConvCase& c, int m) { return c.per_channel ? 0.01f + 0.003f * m : 0.02f; }

int32_t BiasAt(int m) { return 300 * m - 700; }

void AddScalar(OnnxBuilderForTest& b, const std::string& name, int type, float f, int i) {
  auto* t = b.AddInitializer();
  t->set_name(name);
  t->set_data_type(type);
  if (type == onnx::TensorProto::FLOAT) {
    t->add_float_data(f);
  } else {
    t->add_int32_data(i);
  }
}

// x -> QuantizeLinear -> QLinearConv -> DequantizeLinear -> y.
std::string QLinearConvModel(const QConvCase& c) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, c.cin, c.side, c.side});
  b.Output("y");
  const int x_type = c.signed_x ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  const int y_type = c.signed_y ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  const int w_type = c.uint8_weights ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
  AddScalar(b, "x_scale", onnx::TensorProto::FLOAT, c.x_scale, 0);
  AddScalar(b, "x_zero", x_type, 0, c.x_zero);
  AddScalar(b, "y_scale", onnx::TensorProto::FLOAT, c.y_scale, 0);
  AddScalar(b, "y_zero", y_type, 0, c.y_zero);
  auto* w = b.AddInitializer();
  w->set_name("w");
  w->set_data_type(w_type);
  for (int64_t d : {c.cout, c.cin / c.group, c.kernel, c.kernel}) w->add_dims(d);
  std::string bytes;
  for (int64_t i = 0; i < WeightCount(c); ++i) bytes.push_back(static_cast<char>(WeightAt(c, i)));
  w->set_raw_data(bytes);
  auto* ws = b.AddInitializer();
  ws->set_name("w_scale");
  ws->set_data_type(onnx::TensorProto::FLOAT);
  if (c.per_channel) ws->add_dims(c.cout);
  for (int m = 0; m < (c.per_channel ? c.cout : 1); ++m) ws->add_float_data(WeightScale(c, m));
  AddScalar(b, "w_zero", w_type, 0, c.w_zero);
  std::vector<std::string> inputs = {"x_q",     "x_scale", "x_zero",  "w",
                                     "w_scale", "w_zero",  "y_scale", "y_zero"};
  if (c.bias) {
    auto* bias = b.AddInitializer();
    bias->set_name("bias");
    bias->set_data_type(onnx::TensorProto::INT32);
    bias->add_dims(c.cout);
    for (int m = 0; m < c.cout; ++m) bias->add_int32_data(BiasAt(m));
    inputs.push_back("bias");
  }
  b.Node("QuantizeLinear", {"x", "x_scale", "x_zero"}, {"x_q"});
  auto* conv = b.Node("QLinearConv", inputs, {"y_q"});
  OnnxBuilderForTest::Ints(conv, "pads", {c.pad, c.pad, c.pad, c.pad});
  OnnxBuilderForTest::Ints(conv, "strides", {c.stride, c.stride});
  OnnxBuilderForTest::Int(conv, "group", c.group);
  b.Node("DequantizeLinear", {"y_q", "y_scale", "y_zero"}, {"y"});
  return b.Write("qlinear_conv_" + c.name + ".onnx");
}

int Saturate(double v, bool is_signed) {
  const double lo = is_signed ? -128 : 0, hi = is_signed ? 127 : 255;
  return static_cast<int>(std::fmin(std::fmax(v, lo), hi));
}

// The model's output by the ONNX formulas, with the convolution summed in integers.
std::vector<float> Expected(const QConvCase& c, const std::vector<float>& x) {
  const int oside = (c.side + 2 * c.pad - c.kernel) / c.stride + 1;
  const int in_per_group = c.cin / c.group, out_per_group = c.cout / c.group;
  std::vector<int> xq(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    xq[i] = Saturate(std::nearbyint(x[i] / c.x_scale) + c.x_zero, c.signed_x);
  }
  std::vector<float> y;
  for (int n = 0; n < c.batch; ++n) {
    for (int m = 0; m < c.cout; ++m) {
      const float multiplier = c.x_scale * WeightScale(c, m) / c.y_scale;
      for (int oh = 0; oh < oside; ++oh) {
        for (int ow = 0; ow < oside; ++ow) {
          int64_t acc = c.bias ? BiasAt(m) : 0;
          for (int i = 0; i < in_per_group; ++i) {
            const int ci = m / out_per_group * in_per_group + i;
            for (int kh = 0; kh < c.kernel; ++kh) {
              for (int kw = 0; kw < c.kernel; ++kw) {
                const int ih = oh * c.stride + kh - c.pad, iw = ow * c.stride + kw - c.pad;
                if (ih < 0 || iw < 0 || ih >= c.side || iw >= c.side) continue;
                const int64_t wi =
                    ((int64_t{m} * in_per_group + i) * c.kernel + kh) * c.kernel + kw;
                acc += int64_t{xq[((n * c.cin + ci) * c.side + ih) * c.side + iw] - c.x_zero} *
                       (WeightAt(c, wi) - c.w_zero);
              }
            }
          }
          const int q = Saturate(std::nearbyint(static_cast<double>(acc) * multiplier) + c.y_zero,
                                 c.signed_y);
          y.push_back(static_cast<float>(q - c.y_zero) * c.y_scale);
        }
      }
    }
  }
  return y;
}

std::vector<float> RunModel(const std::string& path, bool onednn, const RandomX& x) {
  ModelOptions options;
  options.onednn = onednn;
  options.num_threads = 2;
  auto model = LoadOnnxModel(path, options);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  std::vector<Tensor> out;
  const Status status = (*model)->Run({x.view}, &out);
  EXPECT_TRUE(status.ok()) << status;
  if (!status.ok()) return {};
  const auto* y = reinterpret_cast<const float*>(out[0].bytes.data());
  return std::vector<float>(y, y + out[0].bytes.size() / sizeof(float));
}

std::vector<QConvCase> Cases() {
  std::vector<QConvCase> cases;
  cases.push_back({.name = "uint8_per_channel"});
  cases.push_back({.name = "int8_per_tensor_stride2_no_bias",
                   .stride = 2,
                   .signed_x = true,
                   .signed_y = true,
                   .per_channel = false,
                   .bias = false,
                   .x_zero = -3,
                   .y_zero = 5});
  cases.push_back({.name = "depthwise", .cin = 16, .cout = 16, .group = 16, .x_zero = 20});
  cases.push_back({.name = "pointwise_rows",
                   .batch = 3,
                   .cin = 32,
                   .cout = 48,
                   .side = 9,
                   .kernel = 1,
                   .pad = 0,
                   .x_zero = 0,
                   .y_zero = 0});
  cases.push_back(
      {.name = "grouped_zero_points_only_x", .cin = 8, .cout = 4, .group = 2, .y_zero = 0});
  cases.push_back({.name = "uint8_weights_with_zero_point", .uint8_weights = true, .w_zero = 131});
  return cases;
}

TEST(QLinearConvTest, BothKernelsMatchTheIntegerFormula) {
  for (const QConvCase& c : Cases()) {
    const std::string path = QLinearConvModel(c);
    RandomX x({c.batch, c.cin, c.side, c.side}, 11, 2.0f);
    const std::vector<float> expected = Expected(c, x.values);
    for (bool onednn : {false, true}) {
      SCOPED_TRACE(c.name + (onednn ? ", oneDNN" : ", own kernel"));
      const std::vector<float> y = RunModel(path, onednn, x);
      ASSERT_EQ(y.size(), expected.size());
      int exact = 0, clipped = 0;
      for (size_t i = 0; i < expected.size(); ++i) {
        // oneDNN scales its sums in FP32: a value within rounding of a tie may go the other way.
        EXPECT_LE(std::fabs(y[i] - expected[i]), c.y_scale * 1.001f) << i;
        exact += y[i] == expected[i];
        clipped += std::fabs(expected[i]) > 0 && (expected[i] == (127 - c.y_zero) * c.y_scale ||
                                                  expected[i] == (255 - c.y_zero) * c.y_scale);
      }
      EXPECT_GE(exact, static_cast<int>(expected.size()) - 2);
      // The case is not all saturated: the values test the arithmetic.
      EXPECT_LT(clipped, static_cast<int>(expected.size()) / 2);
    }
  }
}

#ifdef TESSERA_HAVE_ONEDNN
// The test above passes whichever kernel runs; this one checks that the oneDNN kernel does the
// integer convolution itself (its output is channels-last; the own kernel's, which it falls back
// to, is row-major) and agrees with the own kernel.
TEST(QLinearConvTest, OneDnnKernelRunsTheIntegerConvolutionItself) {
  if (!cpu::FastQLinearConv()) GTEST_SKIP() << "no 8-bit dot products here: " << cpu::OneDnnIsa();
  const QConvCase c{.name = "direct", .cin = 16, .cout = 32, .side = 8, .y_scale = 1.0f};
  std::vector<uint8_t> x_bytes(int64_t{c.batch} * c.cin * c.side * c.side);
  for (size_t i = 0; i < x_bytes.size(); ++i) x_bytes[i] = static_cast<uint8_t>(i * 29 % 256);
  std::vector<int8_t> w_bytes(WeightCount(c));
  for (size_t i = 0; i < w_bytes.size(); ++i) w_bytes[i] = static_cast<int8_t>(WeightAt(c, i));
  std::vector<float> w_scales;
  for (int m = 0; m < c.cout; ++m) w_scales.push_back(WeightScale(c, m));
  std::vector<Value> values = {
      cpu::Make(DataType::kUint8, {c.batch, c.cin, c.side, c.side}, x_bytes),
      cpu::Floats({}, {c.x_scale}),
      cpu::Make<uint8_t>(DataType::kUint8, {}, {static_cast<uint8_t>(c.x_zero)}),
      cpu::Make(DataType::kInt8, {c.cout, c.cin, c.kernel, c.kernel}, w_bytes),
      cpu::Floats({c.cout}, w_scales),
      cpu::Make<int8_t>(DataType::kInt8, {}, {0}),
      cpu::Floats({}, {c.y_scale}),
      cpu::Make<uint8_t>(DataType::kUint8, {}, {static_cast<uint8_t>(c.y_zero)})};
  Graph graph;
  Node node;
  node.op_type = "QLinearConv";
  node.attributes.Set("pads", cpu::IntsAttr({1, 1, 1, 1}));
  cpu::Inputs inputs;
  for (size_t i = 0; i < values.size(); ++i) {
    node.inputs.push_back(graph.AddValue("v" + std::to_string(i)));
    if (i > 0) graph.constants[i] = values[i];  // all but x
    inputs.push_back(&values[i]);
  }
  node.outputs = {graph.AddValue("y")};
  std::unique_ptr<cpu::KernelState> state = cpu::MakeDnnlQLinearConvState(node, graph);
  ThreadPool pool(2);
  cpu::OpContext ctx{&pool};
  ctx.state = state.get();
  std::vector<Value> integer(1), own(1);
  ASSERT_TRUE(cpu::RunDnnlQLinearConv(ctx, node, inputs, &integer).ok());
  EXPECT_TRUE(integer[0].channels_last());
  ASSERT_TRUE(cpu::RunQLinearConv(ctx, node, inputs, &own).ok());
  EXPECT_FALSE(own[0].channels_last());
  const Value a = cpu::ToRowMajor(integer[0]);
  ASSERT_EQ(a.num_elements(), own[0].num_elements());
  int exact = 0, varied = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    const int p = a.data<uint8_t>()[i], q = own[0].data<uint8_t>()[i];
    EXPECT_LE(std::abs(p - q), 1) << i;
    exact += p == q;
    varied += q != 0 && q != 255;
  }
  EXPECT_GE(exact, a.num_elements() - 4);
  EXPECT_GT(varied, a.num_elements() / 2);

  // Without the state saying every parameter is a constant, it hands the node to the own kernel.
  ctx.state = nullptr;
  std::vector<Value> fallback(1);
  ASSERT_TRUE(cpu::RunDnnlQLinearConv(ctx, node, inputs, &fallback).ok());
  EXPECT_FALSE(fallback[0].channels_last());
}
#endif

TEST(QLinearConvTest, MismatchedZeroPointTypeIsNamed) {
  QConvCase c{.name = "bad_zero_point"};
  std::string path = QLinearConvModel(c);
  // The same model with x's zero point INT8 while x is UINT8.
  OnnxBuilderForTest b;
  b.Input("x", {-1, c.cin, c.side, c.side}, onnx::TensorProto::UINT8);
  b.Output("y", onnx::TensorProto::UINT8);
  AddScalar(b, "x_scale", onnx::TensorProto::FLOAT, 0.1f, 0);
  AddScalar(b, "x_zero", onnx::TensorProto::INT8, 0, 3);
  AddScalar(b, "y_scale", onnx::TensorProto::FLOAT, 0.1f, 0);
  AddScalar(b, "y_zero", onnx::TensorProto::UINT8, 0, 3);
  AddScalar(b, "w_scale", onnx::TensorProto::FLOAT, 0.1f, 0);
  AddScalar(b, "w_zero", onnx::TensorProto::INT8, 0, 0);
  auto* w = b.AddInitializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::INT8);
  for (int64_t d : {2, c.cin, 1, 1}) w->add_dims(d);
  w->set_raw_data(std::string(2 * c.cin, '\1'));
  b.Node("QLinearConv", {"x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero"},
         {"y"});
  path = b.Write("qlinear_conv_bad_zero_point.onnx");
  std::vector<uint8_t> bytes(c.cin * c.side * c.side, 7);
  TensorView x{"x", DataType::kUint8, {1, c.cin, c.side, c.side}, bytes.data(), bytes.size()};
  for (bool onednn : {false, true}) {
    ModelOptions options;
    options.onednn = onednn;
    auto model = LoadOnnxModel(path, options);
    if (!model.ok()) {  // refused at load, by type inference: also fine, if it names the input
      EXPECT_NE(std::string(model.status().message()).find("x_zero_point"), std::string::npos)
          << model.status();
      continue;
    }
    std::vector<Tensor> out;
    const Status status = (*model)->Run({x}, &out);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(std::string(status.message()).find("x_zero_point"), std::string::npos) << status;
  }
}

}  // namespace
}  // namespace tessera::engine
