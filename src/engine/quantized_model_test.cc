// A QDQ-quantized model (onnxruntime.quantization's format) through LoadOnnxModel: INT8 and INT32
// initializers, the weights' DequantizeLinear folded at load, activations rounded to their 8-bit
// grids, with oneDNN's channels-last Conv and with the engine's own. And a dynamically quantized
// one (quantize_dynamic's MatMul: DynamicQuantizeLinear, MatMulInteger, Cast and the scales),
// which the CPU model runs as one MatMulIntegerToFloat node with its bias and GELU.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/ops.h"
#include "engine/fusion_test_util.h"
#include "engine/onnx_builder_for_test.h"
#include "gtest/gtest.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {
namespace {

constexpr int kIn = 4, kOut = 3, kSide = 6;
constexpr float kXScale = 0.05f, kYScale = 0.1f;
constexpr uint8_t kXZero = 128, kYZero = 100;
const std::vector<float> kWScales = {0.02f, 0.03f, 0.01f};

std::vector<int8_t> Weights() {
  std::vector<int8_t> w(kOut * kIn * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>((i * 37 % 255) - 127);
  return w;
}
const std::vector<int32_t> kBias = {200, -150, 75};

onnx::TensorProto* Scalar(OnnxBuilderForTest& b, const std::string& name, int type) {
  auto* t = b.AddInitializer();
  t->set_name(name);
  t->set_data_type(type);
  return t;
}

struct QdqVariant {
  bool relu = false;        // Conv -> Relu -> QuantizeLinear
  int8_t weight_zero = 0;   // not 0: no integer convolution (oneDNN takes no weight zero point)
  bool float_bias = false;  // an FP32 bias instead of DequantizeLinear of INT32
};

// y = DQ(Q(Conv(DQ(Q(x)), DQ(W), DQ(bias)))), pads 1.
std::string QdqConvModel(QdqVariant v = {}) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, kIn, kSide, kSide});
  b.Output("y");
  Scalar(b, "x_scale", onnx::TensorProto::FLOAT)->add_float_data(kXScale);
  Scalar(b, "x_zero", onnx::TensorProto::UINT8)->add_int32_data(kXZero);
  Scalar(b, "y_scale", onnx::TensorProto::FLOAT)->add_float_data(kYScale);
  Scalar(b, "y_zero", onnx::TensorProto::UINT8)->add_int32_data(kYZero);
  auto* w = b.AddInitializer();  // raw bytes
  w->set_name("w_q");
  w->set_data_type(onnx::TensorProto::INT8);
  for (int64_t d : {kOut, kIn, 3, 3}) w->add_dims(d);
  const std::vector<int8_t> weights = Weights();
  w->set_raw_data(std::string(reinterpret_cast<const char*>(weights.data()), weights.size()));
  auto* ws = b.AddInitializer();
  ws->set_name("w_scale");
  ws->set_data_type(onnx::TensorProto::FLOAT);
  ws->add_dims(kOut);
  auto* wz = b.AddInitializer();  // one int32_data entry per value
  wz->set_name("w_zero");
  wz->set_data_type(onnx::TensorProto::INT8);
  wz->add_dims(kOut);
  auto* bq = b.AddInitializer();
  bq->set_name("b_q");
  bq->set_data_type(onnx::TensorProto::INT32);
  bq->add_dims(kOut);
  auto* bs = b.AddInitializer();
  bs->set_name("b_scale");
  bs->set_data_type(onnx::TensorProto::FLOAT);
  bs->add_dims(kOut);
  for (int c = 0; c < kOut; ++c) {
    ws->add_float_data(kWScales[c]);
    wz->add_int32_data(v.weight_zero);
    bq->add_int32_data(kBias[c]);
    bs->add_float_data(kXScale * kWScales[c]);
  }
  b.Node("QuantizeLinear", {"x", "x_scale", "x_zero"}, {"x_q"});
  b.Node("DequantizeLinear", {"x_q", "x_scale", "x_zero"}, {"x_dq"});
  OnnxBuilderForTest::Int(b.Node("DequantizeLinear", {"w_q", "w_scale", "w_zero"}, {"w"}), "axis",
                          0);
  if (v.float_bias) {
    std::vector<float> bias;
    for (int c = 0; c < kOut; ++c) bias.push_back(kBias[c] * kXScale * kWScales[c]);
    b.FloatConstant("bias", {kOut}, bias);
  } else {
    // With an explicit INT32 zero point of 0, as onnxruntime's quantizer writes it.
    auto* bz = b.AddInitializer();
    bz->set_name("b_zero");
    bz->set_data_type(onnx::TensorProto::INT32);
    bz->add_dims(kOut);
    for (int c = 0; c < kOut; ++c) bz->add_int32_data(0);
    OnnxBuilderForTest::Int(b.Node("DequantizeLinear", {"b_q", "b_scale", "b_zero"}, {"bias"}),
                            "axis", 0);
  }
  OnnxBuilderForTest::Ints(b.Node("Conv", {"x_dq", "w", "bias"}, {"conv"}), "pads", {1, 1, 1, 1});
  if (v.relu) b.Node("Relu", {"conv"}, {"relu"});
  b.Node("QuantizeLinear", {v.relu ? "relu" : "conv", "y_scale", "y_zero"}, {"y_q"});
  b.Node("DequantizeLinear", {"y_q", "y_scale", "y_zero"}, {"y"});
  return b.Write(absl::StrCat("qdq_conv_", v.relu, v.weight_zero, v.float_bias, ".onnx"));
}

float FakeQuant(double v, float scale, int zero) {
  const double q = std::nearbyint(v / scale) + zero;
  return static_cast<float>((std::fmin(std::fmax(q, 0.0), 255.0) - zero) * scale);
}

TEST(QuantizedModelTest, QdqConvComputesTheDequantizedModelOnItsGrids) {
  for (bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "Conv, Relu" : "Conv");
    const std::string path = QdqConvModel({.relu = relu});
    auto graph = PreparedGraph(path);
    ASSERT_TRUE(graph.ok()) << graph.status();
    // The weight and bias DequantizeLinear nodes are folded into FP32 constants (a Relu into the
    // Conv).
    EXPECT_EQ(graph->nodes.size(), 5u);

    RandomX x({2, kIn, kSide, kSide}, 3, 1.5f);
    const std::vector<int8_t> weights = Weights();
    std::vector<float> expected(2 * kOut * kSide * kSide);
    for (int n = 0; n < 2; ++n) {
      for (int o = 0; o < kOut; ++o) {
        for (int h = 0; h < kSide; ++h) {
          for (int w = 0; w < kSide; ++w) {
            double sum = kBias[o] * double{kXScale * kWScales[o]};
            for (int i = 0; i < kIn; ++i) {
              for (int kh = 0; kh < 3; ++kh) {
                for (int kw = 0; kw < 3; ++kw) {
                  const int ih = h + kh - 1, iw = w + kw - 1;
                  if (ih < 0 || iw < 0 || ih >= kSide || iw >= kSide) continue;
                  const float xv = FakeQuant(x.values[((n * kIn + i) * kSide + ih) * kSide + iw],
                                             kXScale, kXZero);
                  sum += double{xv} * weights[((o * kIn + i) * 3 + kh) * 3 + kw] * kWScales[o];
                }
              }
            }
            if (relu) sum = std::max(sum, 0.0);
            expected[((n * kOut + o) * kSide + h) * kSide + w] = FakeQuant(sum, kYScale, kYZero);
          }
        }
      }
    }
    for (bool onednn : {true, false}) {
      SCOPED_TRACE(onednn ? "oneDNN" : "own kernels");
      size_t kernels = 0;
      const std::vector<float> y = FirstOutput(path, onednn, x, &kernels);
      // Q, DQ, Conv, Q, DQ (the weights' DQ ran at load), or Q, QLinearConv, DQ where the Conv
      // runs on integers (FuseQdqConv).
      EXPECT_EQ(kernels, cpu::FastQLinearConv() ? 3u : 5u);
      ASSERT_EQ(y.size(), expected.size());
      int exact = 0;
      for (size_t i = 0; i < expected.size(); ++i) {
        // A sum within rounding of a grid boundary may land one step over (FP32 sum order).
        EXPECT_LE(std::fabs(y[i] - expected[i]), kYScale * 1.001f) << i;
        exact += y[i] == expected[i];
      }
      EXPECT_GE(exact, static_cast<int>(expected.size()) - 2);
    }
  }
}

std::vector<std::string> OpTypes(const Graph& graph) {
  std::vector<std::string> ops;
  for (const Node& node : graph.nodes) ops.push_back(node.op_type);
  return ops;
}

TEST(QuantizedModelTest, FuseQdqConvMakesOneQLinearConvOfTheQdqGroup) {
  GraphPassOptions fuse;
  fuse.fuse_qdq_convs = true;
  for (bool float_bias : {false, true}) {
    for (bool relu : {false, true}) {
      SCOPED_TRACE(absl::StrCat("float bias ", float_bias, ", relu ", relu));
      auto graph = PreparedGraph(QdqConvModel({.relu = relu, .float_bias = float_bias}), fuse);
      ASSERT_TRUE(graph.ok()) << graph.status();
      ASSERT_EQ(OpTypes(*graph),
                (std::vector<std::string>{"QuantizeLinear", "QLinearConv", "DequantizeLinear"}));
      const Node& conv = graph->nodes[1];
      EXPECT_EQ(conv.attributes.GetString("tessera_activation", ""), relu ? "Relu" : "");
      EXPECT_EQ(conv.attributes.GetInts("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
      ASSERT_EQ(conv.inputs.size(), 9u);
      ASSERT_TRUE(graph->IsConstant(conv.inputs[3]));
      EXPECT_EQ(graph->constants[conv.inputs[3]]->dtype(), DataType::kInt8);
      // The bias in units of x_scale * w_scale[m]: the INT32 one as it was, the FP32 one
      // converted back to it.
      ASSERT_TRUE(graph->IsConstant(conv.inputs[8]));
      const Value& bias = *graph->constants[conv.inputs[8]];
      ASSERT_EQ(bias.dtype(), DataType::kInt32);
      EXPECT_EQ(std::vector<int32_t>(bias.data<int32_t>(), bias.data<int32_t>() + kOut), kBias);
    }
  }
  // oneDNN takes no weight zero point: that group stays as it was (its weights' DQ folded).
  auto kept = PreparedGraph(QdqConvModel({.weight_zero = 3}), fuse);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(OpTypes(*kept), (std::vector<std::string>{"QuantizeLinear", "DequantizeLinear", "Conv",
                                                      "QuantizeLinear", "DequantizeLinear"}));
  // Nothing is fused unless the backend asks for it.
  auto plain = PreparedGraph(QdqConvModel({.relu = true}));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(OpTypes(*plain), (std::vector<std::string>{"QuantizeLinear", "DequantizeLinear", "Conv",
                                                       "QuantizeLinear", "DequantizeLinear"}));
}

// y = DQ(Q(DQ(Q(x)) + DQ(c))) with c a constant UINT8 tensor of x's shape [2, 4, 5, 5], or of
// [1, 4, 1, 1] when `broadcast` (which the fused kernel does not take).
std::string QdqAddModel(bool broadcast) {
  OnnxBuilderForTest b;
  b.Input("x", {2, 4, 5, 5});
  b.Output("y");
  Scalar(b, "x_scale", onnx::TensorProto::FLOAT)->add_float_data(0.04f);
  Scalar(b, "x_zero", onnx::TensorProto::UINT8)->add_int32_data(120);
  Scalar(b, "c_scale", onnx::TensorProto::FLOAT)->add_float_data(0.03f);
  Scalar(b, "c_zero", onnx::TensorProto::UINT8)->add_int32_data(10);
  Scalar(b, "y_scale", onnx::TensorProto::FLOAT)->add_float_data(0.05f);
  Scalar(b, "y_zero", onnx::TensorProto::UINT8)->add_int32_data(128);
  auto* c = b.AddInitializer();
  c->set_name("c_q");
  c->set_data_type(onnx::TensorProto::UINT8);
  const std::vector<int64_t> dims =
      broadcast ? std::vector<int64_t>{1, 4, 1, 1} : std::vector<int64_t>{2, 4, 5, 5};
  int64_t count = 1;
  for (int64_t d : dims) {
    c->add_dims(d);
    count *= d;
  }
  for (int64_t i = 0; i < count; ++i) c->add_int32_data(static_cast<int32_t>(i * 41 % 256));
  b.Node("QuantizeLinear", {"x", "x_scale", "x_zero"}, {"x_q"});
  b.Node("DequantizeLinear", {"x_q", "x_scale", "x_zero"}, {"x_dq"});
  b.Node("DequantizeLinear", {"c_q", "c_scale", "c_zero"}, {"c_dq"});
  b.Node("Add", {"x_dq", "c_dq"}, {"sum"});
  b.Node("QuantizeLinear", {"sum", "y_scale", "y_zero"}, {"y_q"});
  b.Node("DequantizeLinear", {"y_q", "y_scale", "y_zero"}, {"y"});
  return b.Write(broadcast ? "qdq_add_broadcast.onnx" : "qdq_add.onnx");
}

uint8_t Quantize8(float v, float scale, int zero) {
  return static_cast<uint8_t>(std::fmin(std::fmax(std::nearbyint(v / scale) + zero, 0.0f), 255.0f));
}

TEST(QuantizedModelTest, FuseQdqAddJoinsTheResidualAddIntoOnePassOverTheBytes) {
  GraphPassOptions fuse;
  fuse.fuse_qdq_adds = true;
  auto graph = PreparedGraph(QdqAddModel(false), fuse);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(OpTypes(*graph), (std::vector<std::string>{"QuantizeLinear", "com.microsoft.QLinearAdd",
                                                       "DequantizeLinear"}));
  // A broadcast Add stays (its constant operand's DequantizeLinear folded).
  auto kept = PreparedGraph(QdqAddModel(true), fuse);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(OpTypes(*kept), (std::vector<std::string>{"QuantizeLinear", "DequantizeLinear", "Add",
                                                      "QuantizeLinear", "DequantizeLinear"}));

  // Served as loaded (the CPU fuses): the unfused nodes' FP32 operations, bit for bit.
  RandomX x({2, 4, 5, 5}, 4, 2.0f);
  for (bool onednn : {true, false}) {
    size_t kernels = 0;
    const std::vector<float> y = FirstOutput(QdqAddModel(false), onednn, x, &kernels);
    EXPECT_EQ(kernels, 3u);
    ASSERT_EQ(y.size(), x.values.size());
    int inside = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      const float fx = static_cast<float>(Quantize8(x.values[i], 0.04f, 120) - 120) * 0.04f;
      const float fc = static_cast<float>(static_cast<int>(i * 41 % 256) - 10) * 0.03f;
      const uint8_t q = Quantize8(fx + fc, 0.05f, 128);
      EXPECT_EQ(y[i], static_cast<float>(q - 128) * 0.05f) << i;
      inside += q != 0 && q != 255;
    }
    EXPECT_GT(inside, 150);
  }
}

// What quantize_dynamic makes of x [batch, 5, 8] times a constant W [8, 3] plus a bias:
// y = Cast(MatMulInteger(x_q, W_q, x_zero, 0)) * (x_scale * w_scale) + bias, with x_q, x_scale,
// x_zero = DynamicQuantizeLinear(x).
constexpr float kDynWScale = 0.01f;
const std::vector<float> kDynBias = {0.5f, -0.25f, 1.0f};

int8_t DynWeight(int k, int n) { return static_cast<int8_t>((k * 3 + n) * 29 % 255 - 127); }

const std::vector<float> kDynWScales = {0.01f, 0.02f, 0.005f};

struct DynVariant {
  bool per_column = false;     // w_scale [3] (kDynWScales) instead of kDynWScale
  bool gelu = false;           // erf-form GELU after the bias
  bool acc_is_output = false;  // the cast product is a graph output too: no fusion
  bool uint8_weights = false;  // w_q UINT8 (DynWeight + 128) with zero point kDynWZeroU8
};

constexpr int kDynWZeroU8 = 131;

std::string DynamicMatMulModel(DynVariant v = {}) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 5, 8});
  b.Output("y");
  if (v.acc_is_output) b.Output("acc_f");
  auto* w = b.AddInitializer();
  w->set_name("w_q");
  const auto w_type = v.uint8_weights ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
  w->set_data_type(w_type);
  w->add_dims(8);
  w->add_dims(3);
  for (int k = 0; k < 8; ++k) {
    for (int n = 0; n < 3; ++n) w->add_int32_data(DynWeight(k, n) + (v.uint8_weights ? 128 : 0));
  }
  Scalar(b, "w_zero", w_type)->add_int32_data(v.uint8_weights ? kDynWZeroU8 : 0);
  if (v.per_column) {
    b.FloatConstant("w_scale", {3}, kDynWScales);
  } else {
    Scalar(b, "w_scale", onnx::TensorProto::FLOAT)->add_float_data(kDynWScale);
  }
  b.FloatConstant("bias", {3}, kDynBias);
  b.Node("DynamicQuantizeLinear", {"x"}, {"x_q", "x_scale", "x_zero"});
  b.Node("MatMulInteger", {"x_q", "w_q", "x_zero", "w_zero"}, {"acc"});
  OnnxBuilderForTest::Int(b.Node("Cast", {"acc"}, {"acc_f"}), "to", onnx::TensorProto::FLOAT);
  b.Node("Mul", {"x_scale", "w_scale"}, {"scale"});
  b.Node("Mul", {"acc_f", "scale"}, {"scaled"});
  b.Node("Add", {"scaled", "bias"}, {v.gelu ? "biased" : "y"});
  if (v.gelu) {
    b.FloatConstant("sqrt2", {}, {1.41421354f});
    b.FloatConstant("one", {}, {1.0f});
    b.FloatConstant("half", {}, {0.5f});
    b.Node("Div", {"biased", "sqrt2"}, {"over_sqrt2"});
    b.Node("Erf", {"over_sqrt2"}, {"erf"});
    b.Node("Add", {"erf", "one"}, {"one_plus_erf"});
    b.Node("Mul", {"biased", "one_plus_erf"}, {"product"});
    b.Node("Mul", {"product", "half"}, {"y"});
  }
  return b.Write("dynamic_matmul.onnx");
}

// DynamicQuantizeLinear's scale and zero point for `values` (ONNX's formula, the range widened to
// include 0).
std::pair<float, int> DynamicGrid(const std::vector<float>& values) {
  const float lo = std::min(0.0f, *std::min_element(values.begin(), values.end()));
  const float hi = std::max(0.0f, *std::max_element(values.begin(), values.end()));
  const float scale = (hi - lo) / 255.0f;
  return {scale, static_cast<int>(std::nearbyint(-lo / scale))};
}

void ExpectDynamicMatMulResults(int64_t batch, DynVariant v = {}) {
  RandomX x({batch, 5, 8}, 9, 1.0f);
  const auto [x_scale, x_zero] = DynamicGrid(x.values);
  for (bool onednn : {true, false}) {
    SCOPED_TRACE(onednn ? "oneDNN" : "own kernels");
    // Two threads: oneDNN's product in one part per thread where there are rows enough.
    const std::vector<float> y = FirstOutput(DynamicMatMulModel(v), onednn, x, nullptr, 2);
    ASSERT_EQ(y.size(), static_cast<size_t>(batch * 5 * 3));
    for (int row = 0; row < batch * 5; ++row) {
      for (int n = 0; n < 3; ++n) {
        int32_t acc = 0;
        for (int k = 0; k < 8; ++k) {
          const int w = v.uint8_weights ? DynWeight(k, n) + 128 - kDynWZeroU8 : DynWeight(k, n);
          acc += (Quantize8(x.values[row * 8 + k], x_scale, x_zero) - x_zero) * w;
        }
        const float w_scale = v.per_column ? kDynWScales[n] : kDynWScale;
        float want = static_cast<float>(acc) * (x_scale * w_scale) + kDynBias[n];
        if (v.gelu) want = 0.5f * want * (1.0f + std::erf(want / std::sqrt(2.0f)));
        EXPECT_NEAR(y[row * 3 + n], want, 1e-5f * (1.0f + std::fabs(want))) << row << " " << n;
      }
    }
  }
}

TEST(QuantizedModelTest, DynamicallyQuantizedMatMulComputesOnTheRunTimeGrid) {
  // 10 rows: one part in oneDNN's product; 40: one per thread.
  for (int64_t batch : {2, 8}) {
    SCOPED_TRACE(batch);
    ExpectDynamicMatMulResults(batch);
  }
}

TEST(QuantizedModelTest, FusedIntegerMatMulAppliesPerColumnScalesBiasAndGelu) {
  for (DynVariant v : {DynVariant{true, false, false}, DynVariant{false, true, false},
                       DynVariant{true, true, false}, DynVariant{true, true, true},
                       DynVariant{false, false, false, true}, DynVariant{true, true, false, true},
                       DynVariant{true, true, true, true}}) {
    SCOPED_TRACE(::testing::Message()
                 << "per-column " << v.per_column << ", GELU " << v.gelu << ", unfused "
                 << v.acc_is_output << ", UINT8 weights " << v.uint8_weights);
    for (int64_t batch : {2, 8}) {
      SCOPED_TRACE(batch);
      ExpectDynamicMatMulResults(batch, v);
    }
  }
}

// The CPU model's graph: MatMulInteger, Cast, both Muls, the bias Add and the GELU become one
// node taking the dynamic scale and the weights' scale apart.
TEST(QuantizedModelTest, FuseIntegerToFloatJoinsAMatMulsCastScalesBiasAndGelu) {
  for (bool per_column : {false, true}) {
    for (bool known_product_shape : {true, false}) {
      SCOPED_TRACE(per_column ? "per-column weight scales" : "one weight scale");
      SCOPED_TRACE(known_product_shape ? "static product shape" : "product shape unknown");
      auto graph = PreparedGraph(DynamicMatMulModel({per_column, true, false}));
      ASSERT_TRUE(graph.ok()) << graph.status();
      // DynamicQuantizeLinear, MatMulInteger, Cast, 2 Mul, Add, 5 GELU nodes.
      EXPECT_EQ(graph->nodes.size(), 11u);
      if (!known_product_shape) {
        // As after a LayerNormalization, which shape inference leaves unknown.
        for (const Node& node : graph->nodes) {
          if (node.op_type == "MatMulInteger") {
            graph->shapes[node.inputs[0]].reset();
            graph->shapes[node.outputs[0]].reset();
          }
        }
      }
      EXPECT_EQ(FuseIntegerToFloat(&*graph), 1);
      EXPECT_EQ(FuseMatMulEpilogues(&*graph), 1);
      RemoveDeadNodes(&*graph);
      ASSERT_EQ(graph->nodes.size(), 2u);
      const Node& mm = graph->nodes[1];
      EXPECT_EQ(mm.op_type, kMatMulIntegerToFloat);
      ASSERT_EQ(mm.inputs.size(), 7u);
      EXPECT_EQ(graph->value_names[mm.inputs[2]], "x_scale");
      EXPECT_EQ(graph->value_names[mm.inputs[3]], "w_scale");
      EXPECT_EQ(graph->value_names[mm.inputs[4]], "x_zero");
      EXPECT_EQ(graph->value_names[mm.inputs[6]], "bias");
      EXPECT_EQ(mm.attributes.GetString("tessera_activation"), "Gelu");
      EXPECT_EQ(graph->value_names[mm.outputs[0]], "y");
    }
  }
  // A cast product that is also a graph output stays as it is.
  auto graph = PreparedGraph(DynamicMatMulModel({false, false, true}));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(FuseIntegerToFloat(&*graph), 0);
}

// What quantize_dynamic makes of a Conv: x [batch, 4, 6, 6] -> DynamicQuantizeLinear ->
// ConvInteger with INT8 W [3, 4, 3, 3] (pads 1) -> Cast -> Mul by x_scale * w_scale -> Add a bias
// [3, 1, 1] -> Relu.
struct DynConvVariant {
  bool per_channel = false;  // w_scale [3, 1, 1] (kConvWScales) instead of kDynWScale
  bool relu = true;
  bool acc_is_output = false;  // the cast sums are a graph output too: no fusion
  bool residual = false;       // x's first 3 channels added after the bias, before the Relu
  bool twin = false;           // instead, a second chain of the same nodes: the two sums meet
  bool uint8_weights = false;  // w_q UINT8 (ConvWeight + 128) with zero point uint8_zero
  int uint8_zero = kDynWZeroU8;
  int stride = 1;
  int dilation = 1;
  float clip_max = 0.0f;  // with relu, > 0: Clip(0, clip_max) (a Relu6) instead of the Relu
  // Output rows and columns for the 6 x 6 input, pads 1.
  int out_size() const { return (6 + 2 - (dilation * 2 + 1)) / stride + 1; }
};
const std::vector<float> kConvWScales = {0.01f, 0.02f, 0.005f};
const std::vector<float> kConvBias = {0.5f, -0.25f, 1.0f};

int8_t ConvWeight(int i) { return static_cast<int8_t>(i * 53 % 255 - 127); }

std::string DynamicConvModel(DynConvVariant v) {
  OnnxBuilderForTest b;
  b.Input("x", {-1, 4, 6, 6});
  b.Output("y");
  if (v.acc_is_output) b.Output("acc_f");
  auto* w = b.AddInitializer();
  w->set_name("w_q");
  const auto w_type = v.uint8_weights ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
  w->set_data_type(w_type);
  for (int64_t d : {3, 4, 3, 3}) w->add_dims(d);
  for (int i = 0; i < 3 * 4 * 9; ++i) {
    w->add_int32_data(ConvWeight(i) + (v.uint8_weights ? 128 : 0));
  }
  Scalar(b, "w_zero", w_type)->add_int32_data(v.uint8_weights ? v.uint8_zero : 0);
  if (v.per_channel) {
    b.FloatConstant("w_scale", {3, 1, 1}, kConvWScales);
  } else {
    Scalar(b, "w_scale", onnx::TensorProto::FLOAT)->add_float_data(kDynWScale);
  }
  b.FloatConstant("bias", {3, 1, 1}, kConvBias);
  b.Node("DynamicQuantizeLinear", {"x"}, {"x_q", "x_scale", "x_zero"});
  const bool joined = v.residual || v.twin;
  for (const std::string suffix : {"", "_twin"}) {
    if (suffix == "_twin" && !v.twin) break;
    auto* conv = b.Node("ConvInteger", {"x_q", "w_q", "x_zero", "w_zero"}, {"acc" + suffix});
    OnnxBuilderForTest::Ints(conv, "pads", {1, 1, 1, 1});
    OnnxBuilderForTest::Ints(conv, "kernel_shape", {3, 3});
    OnnxBuilderForTest::Ints(conv, "strides", {v.stride, v.stride});
    OnnxBuilderForTest::Ints(conv, "dilations", {v.dilation, v.dilation});
    OnnxBuilderForTest::Int(b.Node("Cast", {"acc" + suffix}, {"acc_f" + suffix}), "to",
                            onnx::TensorProto::FLOAT);
    b.Node("Mul", {"x_scale", "w_scale"}, {"scale" + suffix});
    b.Node("Mul", {"acc_f" + suffix, "scale" + suffix}, {"scaled" + suffix});
    b.Node("Add", {"scaled" + suffix, "bias"},
           {v.relu || joined ? "biased" + suffix : std::string("y")});
  }
  const std::string sum = joined ? "summed" : "biased";
  if (v.twin) b.Node("Add", {"biased", "biased_twin"}, {v.relu ? "summed" : "y"});
  if (v.residual) {
    b.Int64Constant("starts", {0});
    b.Int64Constant("ends", {3});
    b.Int64Constant("axes", {1});
    b.Node("Slice", {"x", "starts", "ends", "axes"}, {"r"});
    b.Node("Add", {"biased", "r"}, {v.relu ? "summed" : "y"});
  }
  if (v.relu && v.clip_max > 0.0f) {
    b.FloatConstant("clip_lo", {}, {0.0f});
    b.FloatConstant("clip_hi", {}, {v.clip_max});
    b.Node("Clip", {sum, "clip_lo", "clip_hi"}, {"y"});
  } else if (v.relu) {
    b.Node("Relu", {sum}, {"y"});
  }
  return b.Write("dynamic_conv.onnx");
}

TEST(QuantizedModelTest, FusedIntegerConvScalesAddsTheBiasAndRectifies) {
  std::vector<DynConvVariant> variants = {DynConvVariant{},
                                          DynConvVariant{true, true, false},
                                          DynConvVariant{true, false, false},
                                          DynConvVariant{false, true, true},
                                          DynConvVariant{true, true, false, true},
                                          DynConvVariant{false, false, false, true},
                                          DynConvVariant{true, true, false, false, true}};
  // UINT8 weights (oneDNN: w - 128 and a correction per pixel): windows clipped by the padding,
  // strided and dilated ones, fused and not.
  for (DynConvVariant v : {DynConvVariant{true, true, false, true}, DynConvVariant{},
                           DynConvVariant{false, false, true}}) {
    v.uint8_weights = true;
    variants.push_back(v);
    if (v.residual) continue;  // the residual is the input's size
    v.stride = 2;
    variants.push_back(v);
    v.stride = 1;
    v.dilation = 2;
    variants.push_back(v);
  }
  // A Relu6 (Clip) in the Relu's place, with INT8 and UINT8 weights, and after a residual.
  for (DynConvVariant v : {DynConvVariant{}, DynConvVariant{true, true, false, true}}) {
    v.clip_max = 0.5f;
    variants.push_back(v);
    v.uint8_weights = true;
    variants.push_back(v);
  }
  // Zero point 128: w - 128 is the weights less their zero point, and the corrections are 0.
  DynConvVariant centred;
  centred.uint8_weights = true;
  centred.uint8_zero = 128;
  variants.push_back(centred);
  for (const DynConvVariant& v : variants) {
    SCOPED_TRACE(::testing::Message()
                 << "per-channel " << v.per_channel << ", Relu " << v.relu << ", unfused "
                 << v.acc_is_output << ", residual " << v.residual << ", twin " << v.twin
                 << ", UINT8 weights " << v.uint8_weights << " (zero point " << v.uint8_zero
                 << "), stride " << v.stride << ", dilation " << v.dilation << ", Clip max "
                 << v.clip_max);
    const int64_t batch = 2;
    const int side = v.out_size(), pixels = side * side;
    RandomX x({batch, 4, 6, 6}, 21, 1.0f);
    const auto [x_scale, x_zero] = DynamicGrid(x.values);
    for (bool onednn : {true, false}) {
      SCOPED_TRACE(onednn ? "oneDNN" : "own kernels");
      int clipped = 0;
      const std::vector<float> y = FirstOutput(DynamicConvModel(v), onednn, x, nullptr, 2);
      ASSERT_EQ(y.size(), static_cast<size_t>(batch * 3 * pixels));
      for (int64_t n = 0; n < batch; ++n) {
        for (int m = 0; m < 3; ++m) {
          for (int p = 0; p < pixels; ++p) {
            const int oy = p / side, ox = p % side;
            int32_t acc = 0;
            for (int c = 0; c < 4; ++c) {
              for (int k = 0; k < 9; ++k) {
                const int iy = oy * v.stride + (k / 3) * v.dilation - 1;
                const int ix = ox * v.stride + (k % 3) * v.dilation - 1;
                if (iy < 0 || iy >= 6 || ix < 0 || ix >= 6) continue;  // x_zero: adds 0
                const float xv = x.values[((n * 4 + c) * 6 + iy) * 6 + ix];
                const int wv =
                    ConvWeight((m * 4 + c) * 9 + k) + (v.uint8_weights ? 128 - v.uint8_zero : 0);
                acc += (Quantize8(xv, x_scale, x_zero) - x_zero) * wv;
              }
            }
            const float w_scale = v.per_channel ? kConvWScales[m] : kDynWScale;
            float want = static_cast<float>(acc) * (x_scale * w_scale) + kConvBias[m];
            if (v.residual) want += x.values[(n * 4 + m) * 36 + p];
            if (v.twin) want += want;
            if (v.relu) want = std::max(want, 0.0f);
            if (v.clip_max > 0.0f) {
              want = std::min(want, v.clip_max);
              clipped += want == v.clip_max;
            }
            EXPECT_EQ(y[(n * 3 + m) * pixels + p], want) << n << " " << m << " " << p;
          }
        }
      }
      if (v.clip_max > 0.0f) {  // some outputs reach the bound and some stay under it
        EXPECT_GT(clipped, 0);
        EXPECT_LT(clipped, batch * 3 * pixels / 2);
      }
    }
  }
}

TEST(QuantizedModelTest, FuseIntegerToFloatJoinsAConvsCastScalesBiasAndRelu) {
  auto graph = PreparedGraph(DynamicConvModel({true, true, false}));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->nodes.size(), 7u);
  EXPECT_EQ(FuseIntegerToFloat(&*graph), 1);
  RemoveDeadNodes(&*graph);
  ASSERT_EQ(graph->nodes.size(), 2u);
  const Node& conv = graph->nodes[1];
  EXPECT_EQ(conv.op_type, kConvIntegerToFloat);
  ASSERT_EQ(conv.inputs.size(), 7u);
  EXPECT_EQ(graph->value_names[conv.inputs[2]], "x_scale");
  EXPECT_EQ(graph->value_names[conv.inputs[3]], "w_scale");
  EXPECT_EQ(graph->value_names[conv.inputs[6]], "bias");
  EXPECT_EQ(conv.attributes.GetString("tessera_activation"), "Relu");
  EXPECT_EQ(conv.attributes.GetInts("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(graph->value_names[conv.outputs[0]], "y");
  // With a residual: the Slice stays, the Add goes into the node as input 7.
  auto with_residual = PreparedGraph(DynamicConvModel({true, true, false, true}));
  ASSERT_TRUE(with_residual.ok()) << with_residual.status();
  EXPECT_EQ(FuseIntegerToFloat(&*with_residual), 1);
  RemoveDeadNodes(&*with_residual);
  ASSERT_EQ(with_residual->nodes.size(), 3u);
  const Node& fused = with_residual->nodes.back();
  ASSERT_EQ(fused.inputs.size(), 8u);
  EXPECT_EQ(with_residual->value_names[fused.inputs[7]], "r");
  EXPECT_EQ(fused.attributes.GetString("tessera_activation"), "Relu");
  // Two chains meeting in one Add: the first takes the other's sum as its residual.
  auto twins = PreparedGraph(DynamicConvModel({true, true, false, false, true}));
  ASSERT_TRUE(twins.ok()) << twins.status();
  EXPECT_EQ(FuseIntegerToFloat(&*twins), 2);
  RemoveDeadNodes(&*twins);
  ASSERT_EQ(twins->nodes.size(), 3u);
  EXPECT_EQ(twins->nodes[1].inputs.size(), 7u);
  EXPECT_EQ(twins->nodes[2].inputs.size(), 8u);
  EXPECT_EQ(twins->nodes[2].inputs[7], twins->nodes[1].outputs[0]);
  // A Relu6 (Clip with constant bounds) in the Relu's place.
  DynConvVariant relu6;
  relu6.clip_max = 6.0f;
  auto clipped = PreparedGraph(DynamicConvModel(relu6));
  ASSERT_TRUE(clipped.ok()) << clipped.status();
  EXPECT_EQ(FuseIntegerToFloat(&*clipped), 1);
  RemoveDeadNodes(&*clipped);
  ASSERT_EQ(clipped->nodes.size(), 2u);
  EXPECT_EQ(clipped->nodes[1].attributes.GetString("tessera_activation"), "Clip");
  EXPECT_EQ(clipped->nodes[1].attributes.GetFloat("tessera_clip_min", -1.0f), 0.0f);
  EXPECT_EQ(clipped->nodes[1].attributes.GetFloat("tessera_clip_max", -1.0f), 6.0f);
  auto unfused = PreparedGraph(DynamicConvModel({false, true, true}));
  ASSERT_TRUE(unfused.ok()) << unfused.status();
  EXPECT_EQ(FuseIntegerToFloat(&*unfused), 0);
}

}  // namespace
}  // namespace tessera::engine
