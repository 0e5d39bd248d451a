// DynamicQuantizeLinear, MatMulInteger, QLinearMatMul and ConvInteger against their ONNX formulas
// computed here element by element in plain integer loops: shapes that leave tails in the vector
// paths, batched and broadcast products, per-row / per-column / per-channel zero points, sums deep
// enough to leave FP32's exact range, and the inputs each kernel must refuse. And the fused
// MatMulIntegerToFloat's own kernel.
#include <cmath>
#include <limits>
#include <random>

#include "engine/cpu_op_runner_for_test.h"
#include "engine/thread_pool.h"

namespace tessera::engine::cpu {
namespace {

template <typename Q>
Value RandomEightBit(DataType type, Shape shape, std::mt19937* rng) {
  std::uniform_int_distribution<int> dist(std::numeric_limits<Q>::min(),
                                          std::numeric_limits<Q>::max());
  Value v = Value::Allocate(type, shape);
  for (int64_t i = 0; i < v.num_elements(); ++i)
    v.mutable_data<Q>()[i] = static_cast<Q>(dist(*rng));
  return v;
}

Value Uint8s(Shape s, std::vector<uint8_t> d) { return Make(DataType::kUint8, s, std::move(d)); }
Value Int8s(Shape s, std::vector<int8_t> d) { return Make(DataType::kInt8, s, std::move(d)); }

int At(const Value& v, int64_t i) {
  return v.dtype() == DataType::kUint8 ? v.data<uint8_t>()[i] : v.data<int8_t>()[i];
}

// ---- DynamicQuantizeLinear ---------------------------------------------------------------------

TEST(DynamicQuantizeLinearTest, MatchesTheOnnxFormulaOverARangeWidenedToZero) {
  std::mt19937 rng(3);
  // All positive (the range is widened down to 0), all negative (up to 0), and mixed; 45
  // elements so the vector loop leaves a tail.
  for (auto [lo, hi] : {std::pair{0.5f, 3.0f}, {-4.0f, -1.0f}, {-2.0f, 7.0f}}) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> xs(45);
    for (float& x : xs) x = dist(rng);
    Value x = Floats({5, 9}, xs);
    auto out = RunOpN("DynamicQuantizeLinear", {&x}, {}, 3);
    ASSERT_TRUE(out.ok()) << out.status();
    const float mn = std::min(0.0f, *std::min_element(xs.begin(), xs.end()));
    const float mx = std::max(0.0f, *std::max_element(xs.begin(), xs.end()));
    const float scale = (mx - mn) / 255.0f;
    const float zero = std::nearbyint(std::fmin(std::fmax(-mn / scale, 0.0f), 255.0f));
    ASSERT_EQ((*out)[0].dtype(), DataType::kUint8);
    ASSERT_EQ((*out)[0].shape(), (Shape{5, 9}));
    EXPECT_EQ((*out)[1].data<float>()[0], scale);
    EXPECT_EQ((*out)[2].dtype(), DataType::kUint8);
    EXPECT_EQ((*out)[2].data<uint8_t>()[0], static_cast<uint8_t>(zero));
    for (int i = 0; i < 45; ++i) {
      const float q = std::fmin(std::fmax(std::nearbyint(xs[i] / scale) + zero, 0.0f), 255.0f);
      EXPECT_EQ((*out)[0].data<uint8_t>()[i], static_cast<uint8_t>(q)) << i;
    }
  }
}

TEST(DynamicQuantizeLinearTest, AllZeroOrEmptyInputGetsScaleOneAndNaNsAreIgnored) {
  for (int64_t n : {0, 3, 20}) {
    Value x = Floats({n}, std::vector<float>(n, 0.0f));
    auto out = RunOpN("DynamicQuantizeLinear", {&x}, {}, 3);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[1].data<float>()[0], 1.0f) << n;
    EXPECT_EQ((*out)[2].data<uint8_t>()[0], 0) << n;
    EXPECT_EQ(Elements<uint8_t>((*out)[0]), std::vector<uint8_t>(n, 0));
  }
  // 17 values: a NaN inside the vector loop after the minimum in its lane (which it must not
  // replace) and one in the tail; the range is [-2, 1].
  std::vector<float> xs(17, 0.5f);
  xs[0] = 1.0f;
  xs[1] = -2.0f;
  xs[9] = std::nanf("");
  xs[16] = std::nanf("");
  Value x = Floats({17}, xs);
  auto out = RunOpN("DynamicQuantizeLinear", {&x}, {}, 3);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[1].data<float>()[0], 3.0f / 255.0f);
  EXPECT_EQ((*out)[2].data<uint8_t>()[0], 170);
  EXPECT_EQ((*out)[0].data<uint8_t>()[0], 255);
  EXPECT_EQ((*out)[0].data<uint8_t>()[1], 0);
}

TEST(DynamicQuantizeLinearTest, LargeInputsFindTheirRangeAcrossChunksAndThreads) {
  // Over 3 chunks of the pool's range search, the extremes in different chunks, a NaN among
  // them, and an odd tail. The minimum moves through the four 8-value lanes of the 32-value loop.
  ThreadPool pool(2);
  const int64_t n = 100003;
  for (int64_t shift : {0, 8, 16, 24}) {
    std::vector<float> xs(n);
    for (int64_t i = 0; i < n; ++i) xs[i] = std::sin(static_cast<float>(i));
    xs[13] = 6.5f;
    const int64_t min_at = n - 40 - shift;
    xs[min_at] = -3.25f;
    xs[n / 2 + 5] = std::nanf("");
    Value x = Floats({n}, xs);
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      auto out = RunOpN("DynamicQuantizeLinear", {&x}, {}, 3, p);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[1].data<float>()[0], (6.5f + 3.25f) / 255.0f) << shift;
      EXPECT_EQ((*out)[2].data<uint8_t>()[0], 85) << shift;  // round(3.25 / (9.75 / 255))
      EXPECT_EQ((*out)[0].data<uint8_t>()[13], 255);
      EXPECT_EQ((*out)[0].data<uint8_t>()[min_at], 0);
    }
  }
}

// ---- MatMulInteger / QLinearMatMul -------------------------------------------------------------

// sum_k (A[.., m, k] - a_zero(row)) * (B[.., k, n] - b_zero(col)) for A [batch, M, K] and B
// [K, N] (b_batch false) or [batch, K, N].
std::vector<int32_t> ReferenceProduct(const Value& a, const Value& b, int64_t batch, int64_t m,
                                      int64_t k, int64_t n, bool b_batch,
                                      const std::vector<int>& a_zero,
                                      const std::vector<int>& b_zero) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        int64_t sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          const int64_t bi = (b_batch ? i * k * n : 0) + p * n + c;
          sum += static_cast<int64_t>(At(a, (i * m + r) * k + p) - a_zero[r]) *
                 (At(b, bi) - b_zero[c]);
        }
        out.push_back(static_cast<int32_t>(sum));
      }
    }
  }
  return out;
}

TEST(MatMulIntegerTest, BatchedProductsWithPerRowAndPerColumnZeroPointsAreExact) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  const int64_t batch = 3, m = 7, k = 37, n = 11;  // odd sizes: every tail of the 2x4 kernel
  Value a = RandomEightBit<uint8_t>(DataType::kUint8, {batch, m, k}, &rng);
  Value b = RandomEightBit<int8_t>(DataType::kInt8, {k, n}, &rng);
  std::vector<int> a_zero(m), b_zero(n);
  std::vector<uint8_t> az(m);
  std::vector<int8_t> bz(n);
  for (int64_t r = 0; r < m; ++r) a_zero[r] = az[r] = static_cast<uint8_t>(100 + 9 * r);
  for (int64_t c = 0; c < n; ++c) b_zero[c] = bz[c] = static_cast<int8_t>(5 * c - 30);
  Value a_zp = Uint8s({m}, az), b_zp = Int8s({n}, bz);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    auto y = RunOp("MatMulInteger", {&a, &b, &a_zp, &b_zp}, {}, p);
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->dtype(), DataType::kInt32);
    ASSERT_EQ(y->shape(), (Shape{batch, m, n}));
    EXPECT_EQ(Elements<int32_t>(*y), ReferenceProduct(a, b, batch, m, k, n, false, a_zero, b_zero));
  }
  // Without zero points, and B batched too (per-matrix products).
  Value b3 = RandomEightBit<int8_t>(DataType::kInt8, {batch, k, n}, &rng);
  auto y = RunOp("MatMulInteger", {&a, &b3});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<int32_t>(*y),
            ReferenceProduct(a, b3, batch, m, k, n, true, std::vector<int>(m, 0),
                             std::vector<int>(n, 0)));
}

TEST(MatMulIntegerTest, DeepSumsOfFullRangeValuesStayExact) {
  // 255 * 127 * 4608 = 149e6: beyond FP32's exact integers (2^24), well inside INT32.
  const int64_t k = 4608;
  Value a = Uint8s({2, k}, std::vector<uint8_t>(2 * k, 255));
  Value b = Int8s({k, 3}, std::vector<int8_t>(3 * k, 127));
  b.mutable_data<int8_t>()[1] = 126;  // one product less: a difference FP32 sums would lose
  auto y = RunOp("MatMulInteger", {&a, &b});
  ASSERT_TRUE(y.ok()) << y.status();
  const int32_t full = 255 * 127 * static_cast<int32_t>(k);
  EXPECT_EQ(Elements<int32_t>(*y),
            (std::vector<int32_t>{full, full - 255, full, full, full - 255, full}));
}

TEST(MatMulIntegerTest, VectorOperandsDropTheirDimLikeMatMul) {
  Value a = Uint8s({3}, {1, 2, 3});
  Value b = Uint8s({3, 2}, {1, 2, 3, 4, 5, 6});
  auto y = RunOp("MatMulInteger", {&a, &b});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2}));
  EXPECT_EQ(Elements<int32_t>(*y), (std::vector<int32_t>{22, 28}));
}

TEST(MatMulIntegerTest, RefusesMismatchedTypesAndZeroPointsOfTheWrongSize) {
  Value a = Uint8s({2, 3}, {1, 2, 3, 4, 5, 6});
  Value b = Int8s({3, 2}, {1, 2, 3, 4, 5, 6});
  Value f = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  ExpectInvalidArgument(RunOp("MatMulInteger", {&f, &b}), "(A) is FP32");
  Value wrong_type = Int8s({}, {1});
  ExpectInvalidArgument(RunOp("MatMulInteger", {&a, &b, &wrong_type}),
                        "is not of its operand's type");
  Value three = Uint8s({3}, {1, 2, 3});
  ExpectInvalidArgument(RunOp("MatMulInteger", {&a, &b, &three}), "one value per row of A (2)");
  Value b_zp = Int8s({3}, {1, 2, 3});
  ExpectInvalidArgument(RunOp("MatMulInteger", {&a, &b, nullptr, &b_zp}),
                        "one value per column of B (2)");
  ExpectInvalidArgument(RunOp("MatMulInteger", {&a, &a}), "inner dims differ");
}

// The own kernel (RunOp has no oneDNN state): the same FP32 operations as the nodes it replaces.
TEST(MatMulIntegerToFloatTest, ScalesEachColumnThenAddsTheBiasAndAppliesGelu) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  const int64_t batch = 2, m = 5, k = 13, n = 4;
  Value a = RandomEightBit<uint8_t>(DataType::kUint8, {batch, m, k}, &rng);
  Value b = RandomEightBit<int8_t>(DataType::kInt8, {k, n}, &rng);
  Value a_zp = Uint8s({}, {131}), b_zp = Int8s({n}, {0, 3, -7, 1});
  Value a_scale = Floats({}, {0.0173f});
  Value b_scale = Floats({n}, {0.011f, 0.029f, 0.0037f, 0.05f});
  Value bias = Floats({n}, {0.5f, -1.25f, 2.0f, 0.0f});
  const std::vector<int32_t> acc =
      ReferenceProduct(a, b, batch, m, k, n, false, std::vector<int>(m, 131), {0, 3, -7, 1});
  for (bool gelu : {false, true}) {
    Attributes attrs;
    if (gelu) attrs.Set("tessera_activation", StringAttr("Gelu"));
    auto y = RunOp(kMatMulIntegerToFloat, {&a, &b, &a_scale, &b_scale, &a_zp, &b_zp, &bias}, attrs,
                   &pool);
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->dtype(), DataType::kFp32);
    ASSERT_EQ(y->shape(), (Shape{batch, m, n}));
    for (size_t i = 0; i < acc.size(); ++i) {
      const int64_t c = static_cast<int64_t>(i) % n;
      float want =
          static_cast<float>(acc[i]) * (a_scale.data<float>()[0] * b_scale.data<float>()[c]);
      want += bias.data<float>()[c];
      if (!gelu) {
        EXPECT_EQ(y->data<float>()[i], want) << i;
        continue;
      }
      want = 0.5f * want * (1.0f + std::erf(want / std::sqrt(2.0f)));
      EXPECT_NEAR(y->data<float>()[i], want, 1e-5f * (1.0f + std::fabs(want))) << i;
    }
  }
}

TEST(MatMulIntegerToFloatTest, RefusesScalesPerColumnOfAAndBScalesOfTheWrongSize) {
  Value a = Uint8s({2, 3}, {1, 2, 3, 4, 5, 6});
  Value b = Int8s({3, 2}, {1, 2, 3, 4, 5, 6});
  Value one = Floats({}, {0.5f}), three = Floats({3}, {1, 2, 3});
  ExpectInvalidArgument(RunOp(kMatMulIntegerToFloat, {&a, &b, &three, &one}),
                        "a_scale FP32[3] must hold one value");
  Value a_zp = Uint8s({3}, {1, 2, 3});
  ExpectInvalidArgument(RunOp(kMatMulIntegerToFloat, {&a, &b, &one, &one, &a_zp}),
                        "a_zero_point UINT8[3] must hold one value");
  ExpectInvalidArgument(RunOp(kMatMulIntegerToFloat, {&a, &b, &one, &three}),
                        "neither one value nor one per column of B (2)");
  Value bias = Floats({3}, {1, 2, 3});
  ExpectInvalidArgument(RunOp(kMatMulIntegerToFloat, {&a, &b, &one, &one, nullptr, nullptr, &bias}),
                        "does not match the product's last dim of 2");
}

TEST(QLinearMatMulTest, RequantizesEachProductWithPerColumnScales) {
  std::mt19937 rng(11);
  const int64_t m = 5, k = 19, n = 6;
  Value a = RandomEightBit<uint8_t>(DataType::kUint8, {m, k}, &rng);
  Value b = RandomEightBit<int8_t>(DataType::kInt8, {k, n}, &rng);
  Value a_scale = Floats({}, {0.02f}), a_zp = Uint8s({}, {128});
  std::vector<float> bs;
  for (int64_t c = 0; c < n; ++c) bs.push_back(0.001f * static_cast<float>(c + 1));
  Value b_scale = Floats({n}, bs), b_zp = Int8s({n}, std::vector<int8_t>(n, 0));
  for (DataType y_type : {DataType::kUint8, DataType::kInt8}) {
    Value y_scale = Floats({}, {0.05f});
    Value y_zp = y_type == DataType::kUint8 ? Uint8s({}, {100}) : Int8s({}, {-3});
    auto y = RunOp("QLinearMatMul", {&a, &a_scale, &a_zp, &b, &b_scale, &b_zp, &y_scale, &y_zp});
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->dtype(), y_type);
    const std::vector<int32_t> acc =
        ReferenceProduct(a, b, 1, m, k, n, false, std::vector<int>(m, 128), std::vector<int>(n, 0));
    const float lo = y_type == DataType::kUint8 ? 0 : -128,
                hi = y_type == DataType::kUint8 ? 255 : 127;
    const int zero = At(y_zp, 0);
    int saturated = 0;
    for (int64_t i = 0; i < m * n; ++i) {
      const float multiplier = 0.02f * bs[i % n] / 0.05f;
      const float q = std::nearbyint(static_cast<float>(acc[i]) * multiplier) + zero;
      saturated += q < lo || q > hi;
      EXPECT_EQ(At(*y, i), static_cast<int>(std::fmin(std::fmax(q, lo), hi))) << i;
    }
    EXPECT_LT(saturated, m * n / 2);  // the scales keep most results inside the range
  }
  Value zero_scale = Floats({}, {0.0f});
  Value y_zp = Uint8s({}, {0});
  ExpectInvalidArgument(
      RunOp("QLinearMatMul", {&a, &a_scale, &a_zp, &b, &b_scale, &b_zp, &zero_scale, &y_zp}),
      "y_scale (0) must be positive");
  ExpectInvalidArgument(
      RunOp("QLinearMatMul", {&a, &a_scale, nullptr, &b, &b_scale, &b_zp, &a_scale, &y_zp}),
      "a_zero_point");
}

// ---- ConvInteger -------------------------------------------------------------------------------

TEST(ConvIntegerTest, MatchesADirectConvolutionWithPaddingStridesGroupsAndChannelZeroPoints) {
  std::mt19937 rng(13);
  // w = 8: the last window of a row reaches x = 8, just past the edge (the padding).
  const int64_t batch = 2, cin = 4, h = 7, w = 8, cout = 6, groups = 2, kh = 3, kw = 2;
  const int64_t stride = 2, dilation = 2, pad = 2;
  Value x = RandomEightBit<uint8_t>(DataType::kUint8, {batch, cin, h, w}, &rng);
  Value wt = RandomEightBit<int8_t>(DataType::kInt8, {cout, cin / groups, kh, kw}, &rng);
  Value x_zp = Uint8s({}, {77});
  std::vector<int8_t> wz = {0, 3, -5, 7, -1, 2};
  Value w_zp = Int8s({cout}, wz);
  Attributes attrs;
  attrs.Set("group", IntAttr(groups));
  attrs.Set("strides", IntsAttr({stride, stride}));
  attrs.Set("dilations", IntsAttr({dilation, dilation}));
  attrs.Set("pads", IntsAttr({pad, pad, pad, pad}));
  ThreadPool pool(2);
  auto y = RunOp("ConvInteger", {&x, &wt, &x_zp, &w_zp}, attrs, &pool);
  ASSERT_TRUE(y.ok()) << y.status();
  const int64_t oh = (h + 2 * pad - dilation * (kh - 1) - 1) / stride + 1;
  const int64_t ow = (w + 2 * pad - dilation * (kw - 1) - 1) / stride + 1;
  ASSERT_EQ(y->dtype(), DataType::kInt32);
  ASSERT_EQ(y->shape(), (Shape{batch, cout, oh, ow}));
  const int64_t cin_g = cin / groups, cout_g = cout / groups;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t o = 0; o < cout; ++o) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          int32_t sum = 0;
          for (int64_t c = 0; c < cin_g; ++c) {
            const int64_t ic = o / cout_g * cin_g + c;
            for (int64_t i = 0; i < kh; ++i) {
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t iy = oy * stride - pad + i * dilation;
                const int64_t ix = ox * stride - pad + j * dilation;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;  // padding: x - x_zp = 0
                sum += (At(x, ((n * cin + ic) * h + iy) * w + ix) - 77) *
                       (At(wt, ((o * cin_g + c) * kh + i) * kw + j) - wz[o]);
              }
            }
          }
          ASSERT_EQ(y->data<int32_t>()[((n * cout + o) * oh + oy) * ow + ox], sum)
              << n << " " << o << " " << oy << " " << ox;
        }
      }
    }
  }
}

TEST(ConvIntegerTest, RefusesZeroPointsOfTheWrongSizeOrType) {
  Value x = Uint8s({1, 1, 2, 2}, {1, 2, 3, 4});
  Value wt = Uint8s({2, 1, 1, 1}, {1, 2});
  Value three = Uint8s({3}, {1, 2, 3});
  ExpectInvalidArgument(RunOp("ConvInteger", {&x, &wt, nullptr, &three}),
                        "one value per output channel (2)");
  ExpectInvalidArgument(RunOp("ConvInteger", {&x, &wt, &three}), "must hold one value");
  Value signed_zp = Int8s({}, {1});
  ExpectInvalidArgument(RunOp("ConvInteger", {&x, &wt, &signed_zp}), "x_zero_point");
  auto y = RunOp("ConvInteger", {&x, &wt});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<int32_t>(*y), (std::vector<int32_t>{1, 2, 3, 4, 2, 4, 6, 8}));
}

// The fused node's own kernel (RunOp has no oneDNN state), as the nodes it replaces compute it.
TEST(ConvIntegerToFloatTest, ScalesPerChannelAddsTheBiasAndRectifies) {
  Value x = Uint8s({1, 1, 2, 2}, {1, 2, 3, 4});
  Value wt = Int8s({2, 1, 1, 1}, {1, -2});
  Value x_zero = Uint8s({}, {2});
  Value x_scale = Floats({}, {0.5f}), w_scale = Floats({2}, {0.25f, 1.0f});
  Value bias = Floats({2}, {0.125f, 1.0f});
  Attributes relu;
  relu.Set("tessera_activation", StringAttr("Relu"));
  // Sums: channel 0: x - 2 = {-1, 0, 1, 2}; channel 1: -2 (x - 2) = {2, 0, -2, -4}.
  auto y = RunOp(kConvIntegerToFloat, {&x, &wt, &x_scale, &w_scale, &x_zero, nullptr, &bias}, relu);
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->dtype(), DataType::kFp32);
  EXPECT_EQ(Elements<float>(*y),
            (std::vector<float>{0.0f, 0.125f, 0.25f, 0.375f, 2.0f, 1.0f, 0.0f, 0.0f}));
}

TEST(ConvIntegerToFloatTest, RefusesScalesBiasesAndResidualsOfTheWrongSize) {
  Value x = Uint8s({1, 1, 2, 2}, {1, 2, 3, 4});
  Value wt = Int8s({2, 1, 1, 1}, {1, 2});
  Value one = Floats({}, {0.5f}), three = Floats({3}, {1, 2, 3});
  ExpectInvalidArgument(RunOp(kConvIntegerToFloat, {&x, &wt, &three, &one}),
                        "x_scale FP32[3] must hold one value");
  ExpectInvalidArgument(RunOp(kConvIntegerToFloat, {&x, &wt, &one, &three}),
                        "w_scale FP32[3] is neither one value nor one per output channel (2)");
  ExpectInvalidArgument(RunOp(kConvIntegerToFloat, {&x, &wt, &one, &one, nullptr, nullptr, &three}),
                        "bias FP32[3] is neither one value nor one per output channel (2)");
  Value residual = Floats({1, 2, 2, 1}, {1, 2, 3, 4});
  ExpectInvalidArgument(
      RunOp(kConvIntegerToFloat, {&x, &wt, &one, &one, nullptr, nullptr, nullptr, &residual}),
      "residual FP32[1, 2, 2, 1] is not FP32 of the output's shape [1, 2, 2, 2]");
}

}  // namespace
}  // namespace tessera::engine::cpu
