// Per-kernel tests on tiny hand-computed cases, plus randomized comparisons against naive loops for
// the blocked GEMM and im2col convolution (sizes chosen to cross every tile boundary).
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "engine/cpu/conv_slices.h"
#include "engine/cpu/fast_math.h"
#include "engine/cpu/ops.h"
#include "gtest/gtest.h"

namespace tessera::engine::cpu {
namespace {

Value Floats(Shape shape, std::vector<float> data) {
  Value v = Value::Allocate(DataType::kFp32, shape);
  EXPECT_EQ(static_cast<int64_t>(data.size()), v.num_elements());
  std::copy(data.begin(), data.end(), v.mutable_data<float>());
  return v;
}

Value Ints(std::vector<int64_t> data) {
  Value v = Value::Allocate(DataType::kInt64, {static_cast<int64_t>(data.size())});
  std::copy(data.begin(), data.end(), v.mutable_data<int64_t>());
  return v;
}

std::vector<float> ToVector(const Value& v) {
  return std::vector<float>(v.data<float>(), v.data<float>() + v.num_elements());
}

Attribute IntAttr(int64_t i) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = i;
  return a;
}

Attribute IntsAttr(std::vector<int64_t> ints) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(ints);
  return a;
}

// Runs one op kernel; returns its first output or fails the test.
StatusOr<Value> RunOp(const std::string& op_type, const Inputs& inputs, Attributes attrs = {},
                      int opset = 13, ThreadPool* pool = nullptr) {
  const OpDef* def = FindOp(op_type);
  if (def == nullptr) return absl::NotFoundError(op_type);
  Node node;
  node.op_type = op_type;
  node.opset = opset;
  node.attributes = std::move(attrs);
  std::vector<Value> outputs(1);
  OpContext ctx{pool};
  TESSERA_RETURN_IF_ERROR(def->run(ctx, node, inputs, &outputs));
  // The oneDNN kernels (the default where built) may answer channels-last.
  return ToRowMajor(outputs[0]);
}

void ExpectNear(const std::vector<float>& actual, const std::vector<float>& expected,
                float tolerance = 1e-5f) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance) << "at " << i;
  }
}

TEST(SgemmTest, AllTransposeCombinations) {
  // A = [[1,2,3],[4,5,6]] (2x3), B = [[1,2],[3,4],[5,6]] (3x2); A*B = [[22,28],[49,64]].
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, at = {1, 4, 2, 5, 3, 6};
  const std::vector<float> b = {1, 2, 3, 4, 5, 6}, bt = {1, 3, 5, 2, 4, 6};
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<float> c = {1, 1, 1, 1};
      // C = 2 * op(A) op(B) + 0.5 * C
      Sgemm(ta, tb, 2, 2, 3, 2.0f, ta ? at.data() : a.data(), ta ? 2 : 3,
            tb ? bt.data() : b.data(), tb ? 3 : 2, 0.5f, c.data(), 2, nullptr);
      ExpectNear(c, {44.5f, 56.5f, 98.5f, 128.5f});
    }
  }
}

TEST(SgemmTest, BetaZeroIgnoresGarbageInC) {
  std::vector<float> a = {1, 2}, b = {3, 4};
  std::vector<float> c = {std::nanf("")};
  Sgemm(false, false, 1, 1, 2, 1.0f, a.data(), 2, b.data(), 1, 0.0f, c.data(), 1, nullptr);
  EXPECT_FLOAT_EQ(c[0], 11.0f);
}

TEST(SgemmTest, BlockedMatchesNaiveAcrossTilesAndThreads) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  const int64_t m = 103, n = 531, k = 300;  // not multiples of MR/NR/KC/MC
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<float> a(m * k), b(k * n);
      for (auto& x : a) x = dist(rng);
      for (auto& x : b) x = dist(rng);
      std::vector<float> expected(m * n, 0.0f);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < k; ++p) {
            sum += double(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
          }
          expected[i * n + j] = static_cast<float>(sum);
        }
      }
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        std::vector<float> c(m * n, 0.0f);
        Sgemm(ta, tb, m, n, k, 1.0f, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.0f, c.data(),
              n, &pool);
        ExpectNear(c, expected, 1e-3f);
      }
    }
  }
}

// oneDNN's sgemm cut into parts across the pool: by C's rows (m >= n) or columns, or, for one or
// two rows against a long B, by the inner dim with the parts' products summed; on matrices with
// padded leading dimensions, alpha and beta, against a double-precision reference.
TEST(SgemmTest, OneDnnPartsMatchNaiveForRowColumnAndInnerCuts) {
  if (!UsingOneDnn()) GTEST_SKIP() << "built without oneDNN";
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-1, 1);
  const int64_t pad = 5;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{37, 533, 70},
                         {533, 37, 70},
                         {20, 9, 70},
                         {1, 533, 300},
                         {2, 40, 301}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
        std::vector<float> a((ta ? k : m) * lda), b((tb ? n : k) * ldb), c0(m * ldc);
        for (auto* v : {&a, &b, &c0}) {
          for (float& x : *v) x = dist(rng);
        }
        std::vector<float> expected = c0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0;
            for (int64_t p = 0; p < k; ++p) {
              sum += double(ta ? a[p * lda + i] : a[i * lda + p]) *
                     (tb ? b[j * ldb + p] : b[p * ldb + j]);
            }
            expected[i * ldc + j] = static_cast<float>(1.5 * sum + 0.5 * c0[i * ldc + j]);
          }
        }
        for (int threads : {1, 2, 3}) {
          ThreadPool pool(threads);
          std::vector<float> c = c0;
          Sgemm(ta, tb, m, n, k, 1.5f, a.data(), lda, b.data(), ldb, 0.5f, c.data(), ldc, &pool,
                /*onednn=*/true);
          ExpectNear(c, expected, 1e-3f);  // the padding columns too: they must be untouched
        }
      }
    }
  }
}

TEST(GemmOpTest, TransBAndBroadcastBias) {
  // Y = A * B^T + C with C a row vector.
  Value a = Floats({2, 2}, {1, 2, 3, 4});
  Value b = Floats({3, 2}, {1, 0, 0, 1, 1, 1});
  Value c = Floats({3}, {10, 20, 30});
  Attributes attrs;
  attrs.Set("transB", IntAttr(1));
  auto y = RunOp("Gemm", {&a, &b, &c}, attrs);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 3}));
  ExpectNear(ToVector(*y), {11, 22, 33, 13, 24, 37});
}

TEST(GemmOpTest, InnerDimMismatchIsAnError) {
  Value a = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Value b = Floats({2, 2}, {1, 2, 3, 4});
  auto y = RunOp("Gemm", {&a, &b});
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MatMulOpTest, BatchedWithBroadcast) {
  // [2, 1, 2] x [2, 1]: each batch row times the same column.
  Value a = Floats({2, 1, 2}, {1, 2, 3, 4});
  Value b = Floats({2, 1}, {10, 1});
  auto y = RunOp("MatMul", {&a, &b});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 1, 1}));
  ExpectNear(ToVector(*y), {12, 34});
  // [2, 2] x [3, 2, 1] broadcasts A over B's batch.
  Value a2 = Floats({1, 2}, {1, 1});
  Value b2 = Floats({3, 2, 1}, {1, 2, 3, 4, 5, 6});
  auto y2 = RunOp("MatMul", {&a2, &b2});
  ASSERT_TRUE(y2.ok()) << y2.status();
  EXPECT_EQ(y2->shape(), (Shape{3, 1, 1}));
  ExpectNear(ToVector(*y2), {3, 7, 11});
}

TEST(ConvTest, PadsAndStrides) {
  // 3x3 input 1..9, 2x2 kernel of ones, pad 1, stride 2 → 2x2 windows over the padded 5x5.
  Value x = Floats({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Value w = Floats({1, 1, 2, 2}, {1, 1, 1, 1});
  Value b = Floats({1}, {0.5f});
  Attributes attrs;
  attrs.Set("pads", IntsAttr({1, 1, 1, 1}));
  attrs.Set("strides", IntsAttr({2, 2}));
  auto y = RunOp("Conv", {&x, &w, &b}, attrs);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{1, 1, 2, 2}));
  // Windows: {1}, {2,3}, {4,7}, {5,6,8,9}.
  ExpectNear(ToVector(*y), {1.5f, 5.5f, 11.5f, 28.5f});
}

TEST(ConvTest, Groups) {
  // Two channels, group=2, 1x1 kernels: each output channel scales only its own input channel.
  Value x = Floats({1, 2, 1, 2}, {1, 2, 3, 4});
  Value w = Floats({2, 1, 1, 1}, {10, 100});
  Attributes attrs;
  attrs.Set("group", IntAttr(2));
  auto y = RunOp("Conv", {&x, &w}, attrs);
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectNear(ToVector(*y), {10, 20, 300, 400});
}

TEST(ConvTest, ChannelMismatchIsAnError) {
  Value x = Floats({1, 3, 2, 2}, std::vector<float>(12, 1));
  Value w = Floats({1, 2, 1, 1}, {1, 1});
  auto y = RunOp("Conv", {&x, &w});
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConvTest, MatchesNaiveWithDilationGroupsAndThreads) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  const int64_t n = 2, c = 6, h = 11, wd = 9, cout = 4, groups = 2, kh = 3, kw = 2;
  const Window2d win{kh, kw, 2, 1, 2, 1, 1, 0, 2, 1};
  std::vector<float> x(n * c * h * wd), w(cout * (c / groups) * kh * kw), bias(cout);
  for (auto& v : x) v = dist(rng);
  for (auto& v : w) v = dist(rng);
  for (auto& v : bias) v = dist(rng);
  const int64_t oh = (h + win.pad_top + win.pad_bottom - (kh - 1) * win.dilation_h - 1) / 2 + 1;
  const int64_t ow = (wd + win.pad_left + win.pad_right - (kw - 1) * win.dilation_w - 1) / 1 + 1;
  std::vector<float> expected(n * cout * oh * ow);
  const int64_t cg = c / groups, og = cout / groups;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < cout; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double sum = bias[o];
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t iy = y * win.stride_h - win.pad_top + i * win.dilation_h;
                int64_t ix = xx * win.stride_w - win.pad_left + j * win.dilation_w;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                int64_t channel = (o / og) * cg + ci;
                sum += double(x[((b * c + channel) * h + iy) * wd + ix]) *
                       w[((o * cg + ci) * kh + i) * kw + j];
              }
          expected[((b * cout + o) * oh + y) * ow + xx] = static_cast<float>(sum);
        }
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    std::vector<float> out(expected.size(), -7.0f);
    Conv2d(x.data(), n, c, h, wd, w.data(), bias.data(), cout, groups, win, out.data(), oh, ow,
           &pool);
    ExpectNear(out, expected, 1e-4f);
  }
}

TEST(PoolTest, MaxPoolStride2) {
  Value x = Floats({1, 1, 4, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  Attributes attrs;
  attrs.Set("kernel_shape", IntsAttr({2, 2}));
  attrs.Set("strides", IntsAttr({2, 2}));
  auto y = RunOp("MaxPool", {&x}, attrs);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{1, 1, 2, 2}));
  ExpectNear(ToVector(*y), {6, 8, 14, 16});
}

TEST(PoolTest, AveragePoolPaddingCountsOnlyWhenAsked) {
  Value x = Floats({1, 1, 2, 2}, {1, 2, 3, 4});
  Attributes attrs;
  attrs.Set("kernel_shape", IntsAttr({2, 2}));
  attrs.Set("pads", IntsAttr({1, 1, 0, 0}));
  auto excluded = RunOp("AveragePool", {&x}, attrs);
  ASSERT_TRUE(excluded.ok()) << excluded.status();
  // Windows at (-1,-1)..: {1}, {1,2}, {1,3}, {1,2,3,4}.
  ExpectNear(ToVector(*excluded), {1, 1.5f, 2, 2.5f});
  attrs.Set("count_include_pad", IntAttr(1));
  auto included = RunOp("AveragePool", {&x}, attrs);
  ASSERT_TRUE(included.ok()) << included.status();
  ExpectNear(ToVector(*included), {0.25f, 0.75f, 1, 2.5f});
}

TEST(PoolTest, GlobalAveragePool) {
  Value x = Floats({1, 2, 2, 2}, {1, 2, 3, 4, 10, 10, 10, 30});
  auto y = RunOp("GlobalAveragePool", {&x});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{1, 2, 1, 1}));
  ExpectNear(ToVector(*y), {2.5f, 15});
}

TEST(SoftmaxTest, Opset13NormalisesOneAxisOlderOpsetsFlatten) {
  Value x = Floats({2, 2}, {0, std::log(3.0f), 1, 1});
  Attributes axis0;
  axis0.Set("axis", IntAttr(0));
  auto columns = RunOp("Softmax", {&x}, axis0, 13);
  ASSERT_TRUE(columns.ok()) << columns.status();
  const float e = std::exp(1.0f);
  ExpectNear(ToVector(*columns), {1 / (1 + e), 3 / (3 + e), e / (1 + e), e / (3 + e)});
  // Opset 11 with axis 0 flattens everything into one row of 4.
  auto whole = RunOp("Softmax", {&x}, axis0, 11);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const float total = 1 + 3 + 2 * e;
  ExpectNear(ToVector(*whole), {1 / total, 3 / total, e / total, e / total});
  // Default axis (-1) in opset 13: per row.
  auto rows = RunOp("Softmax", {&x}, {}, 13);
  ASSERT_TRUE(rows.ok());
  ExpectNear(ToVector(*rows), {0.25f, 0.75f, 0.5f, 0.5f});
}

TEST(ElementwiseTest, BroadcastingAdd) {
  Value a = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Value row = Floats({3}, {10, 20, 30});
  auto y = RunOp("Add", {&a, &row});
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectNear(ToVector(*y), {11, 22, 33, 14, 25, 36});
  Value column = Floats({2, 1}, {100, 200});
  Value row2 = Floats({1, 3}, {1, 2, 3});
  auto outer = RunOp("Add", {&column, &row2});
  ASSERT_TRUE(outer.ok()) << outer.status();
  EXPECT_EQ(outer->shape(), (Shape{2, 3}));
  ExpectNear(ToVector(*outer), {101, 102, 103, 201, 202, 203});
  Value bad = Floats({2}, {1, 2});
  EXPECT_EQ(RunOp("Add", {&a, &bad}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseTest, SubDivMulAndMixedDtypesRejected) {
  Value a = Floats({2}, {6, 8});
  Value b = Floats({}, {2});
  ExpectNear(ToVector(*RunOp("Sub", {&a, &b})), {4, 6});
  ExpectNear(ToVector(*RunOp("Div", {&a, &b})), {3, 4});
  ExpectNear(ToVector(*RunOp("Mul", {&b, &a})), {12, 16});
  Value i = Ints({1, 2});
  EXPECT_EQ(RunOp("Add", {&a, &i}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseTest, ClipWithOptionalBounds) {
  Value x = Floats({4}, {-2, -0.5f, 0.5f, 2});
  Value lo = Floats({}, {-1});
  ExpectNear(ToVector(*RunOp("Clip", {&x, &lo})), {-1, -0.5f, 0.5f, 2});
  Value hi = Floats({}, {1});
  ExpectNear(ToVector(*RunOp("Clip", {&x, nullptr, &hi})), {-2, -0.5f, 0.5f, 1});
}

TEST(ShapeOpsTest, ReshapeZeroAndMinusOne) {
  Value x = Floats({2, 3, 4}, std::vector<float>(24, 1));
  Value shape = Ints({0, -1});
  auto y = RunOp("Reshape", {&x, &shape});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 12}));
  Value bad = Ints({5, -1});
  EXPECT_EQ(RunOp("Reshape", {&x, &bad}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShapeOpsTest, DynamicBatchShapeChain) {
  // Shape → Gather(0) → Unsqueeze → Concat with [-1] → Reshape, as PyTorch emits for view(n, -1).
  Value x = Floats({3, 2, 1, 1}, {1, 2, 3, 4, 5, 6});
  auto shape = RunOp("Shape", {&x});
  ASSERT_TRUE(shape.ok());
  Value zero = Value::Allocate(DataType::kInt64, {});
  zero.mutable_data<int64_t>()[0] = 0;
  auto batch = RunOp("Gather", {&*shape, &zero});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->rank(), 0);
  Value axes = Ints({0});
  auto unsqueezed = RunOp("Unsqueeze", {&*batch, &axes});
  ASSERT_TRUE(unsqueezed.ok()) << unsqueezed.status();
  Value minus_one = Ints({-1});
  auto target = RunOp("Concat", {&*unsqueezed, &minus_one}, [] {
    Attributes a;
    a.Set("axis", IntAttr(0));
    return a;
  }());
  ASSERT_TRUE(target.ok()) << target.status();
  auto y = RunOp("Reshape", {&x, &*target});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{3, 2}));
}

TEST(ShapeOpsTest, TransposeAndGatherBounds) {
  Value x = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto t = RunOp("Transpose", {&x});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->shape(), (Shape{3, 2}));
  ExpectNear(ToVector(*t), {1, 4, 2, 5, 3, 6});
  Value out_of_range = Ints({2});
  EXPECT_EQ(RunOp("Gather", {&x, &out_of_range}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Large enough to split rows across the pool; every permutation of a rank-4 tensor, against the
// element-by-element definition (the last dim kept last is a row copy, the rest are gathers).
TEST(ShapeOpsTest, TransposeOfEveryRank4PermutationOnThePool) {
  const Shape shape = {3, 40, 12, 50};
  std::vector<float> data(ElementCount(shape));
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  Value x = Floats(shape, data);
  ThreadPool pool(2);
  std::vector<int64_t> perm = {0, 1, 2, 3};
  do {
    Attributes attrs;
    attrs.Set("perm", IntsAttr(perm));
    auto y = RunOp("Transpose", {&x}, attrs, 13, &pool);
    ASSERT_TRUE(y.ok()) << y.status();
    const Shape out = {shape[perm[0]], shape[perm[1]], shape[perm[2]], shape[perm[3]]};
    ASSERT_EQ(y->shape(), out);
    const std::vector<float> got = ToVector(*y);
    int64_t i = 0, mismatches = 0;
    int64_t c[4];
    for (c[0] = 0; c[0] < out[0]; ++c[0]) {
      for (c[1] = 0; c[1] < out[1]; ++c[1]) {
        for (c[2] = 0; c[2] < out[2]; ++c[2]) {
          for (c[3] = 0; c[3] < out[3]; ++c[3], ++i) {
            int64_t in[4];
            for (int d = 0; d < 4; ++d) in[perm[d]] = c[d];
            const int64_t src = ((in[0] * shape[1] + in[1]) * shape[2] + in[2]) * shape[3] + in[3];
            if (got[i] != data[src]) ++mismatches;
          }
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << "perm " << perm[0] << perm[1] << perm[2] << perm[3];
  } while (std::next_permutation(perm.begin(), perm.end()));
}

// Rows longer than the kernel's 16 partial lanes and not a multiple of them, with a masked
// (-1e4) position and large logits, against the formula in double.
TEST(SoftmaxTest, LongRowsMatchTheFormula) {
  for (int64_t n : {16, 37, 128, 129}) {
    std::vector<float> data(3 * n);
    for (int64_t i = 0; i < 3 * n; ++i) data[i] = static_cast<float>((i * 7919) % 23) * 0.9f;
    data[1] = -1e4f;
    data[n + 2] = 80.0f;
    Value x = Floats({3, n}, data);
    auto y = RunOp("Softmax", {&x});
    ASSERT_TRUE(y.ok()) << y.status();
    std::vector<float> expected;
    for (int64_t r = 0; r < 3; ++r) {
      double max_value = -1e30, sum = 0;
      for (int64_t j = 0; j < n; ++j) max_value = std::max<double>(max_value, data[r * n + j]);
      for (int64_t j = 0; j < n; ++j) sum += std::exp(data[r * n + j] - max_value);
      for (int64_t j = 0; j < n; ++j) {
        expected.push_back(static_cast<float>(std::exp(data[r * n + j] - max_value) / sum));
      }
    }
    ExpectNear(ToVector(*y), expected, 1e-6f);
  }
}

TEST(BatchNormTest, InferenceFormula) {
  Value x = Floats({1, 2, 1, 2}, {1, 2, 3, 4});
  Value scale = Floats({2}, {1, 2});
  Value bias = Floats({2}, {0, 1});
  Value mean = Floats({2}, {1, 3});
  Value var = Floats({2}, {4, 1});
  Attributes attrs;
  Attribute eps;
  eps.kind = Attribute::Kind::kFloat;
  eps.f = 0.0f;
  attrs.Set("epsilon", eps);
  auto y = RunOp("BatchNormalization", {&x, &scale, &bias, &mean, &var}, attrs);
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectNear(ToVector(*y), {0, 0.5f, 1, 3});
}

TEST(SliceConvTest, ResidualPointwisePartsAreRunsOfPixelsThatFitTheChunk) {
  // ResNet-50's first-stage residual Conv at batch 8: 8 * 56 * 56 pixels of 256 channels.
  const ConvGeometry stage1{8, 56, 56, 56, 56};
  constexpr int64_t kChunk = 384 * 1024;
  for (int threads : {1, 2, 3}) {
    const std::vector<ConvSlice> parts = SliceResidualPointwiseConv(stage1, 256, threads, kChunk);
    ASSERT_FALSE(parts.empty()) << threads;
    EXPECT_EQ(parts.size() % threads, 0u) << threads;
    int64_t next = 0;
    for (const ConvSlice& p : parts) {
      EXPECT_EQ(p.image, 0);
      EXPECT_EQ(p.images, 1);
      EXPECT_EQ(p.h, 8 * 56 * 56);  // the batch seen as one image of pixels
      EXPECT_EQ(p.w, 1);
      EXPECT_EQ(p.in_row, next);
      EXPECT_EQ(p.out_row, next);
      EXPECT_EQ(p.in_rows, p.out_rows);
      EXPECT_GT(p.out_rows, 0);
      EXPECT_LE(p.out_rows * 256 * 4, kChunk);
      next += p.out_rows;
    }
    EXPECT_EQ(next, 8 * 56 * 56) << threads;
  }
  // An output that fits in a chunk per thread, and Convs that are not pointwise: other cuts.
  EXPECT_TRUE(SliceResidualPointwiseConv(ConvGeometry{1, 14, 14, 14, 14}, 256, 2, kChunk).empty());
  const ConvGeometry three_by_three{8, 56, 56, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_TRUE(SliceResidualPointwiseConv(three_by_three, 256, 2, kChunk).empty());
  const ConvGeometry strided{8, 56, 56, 28, 28, 1, 1, 2, 2};
  EXPECT_TRUE(SliceResidualPointwiseConv(strided, 256, 2, kChunk).empty());
}

}  // namespace
}  // namespace tessera::engine::cpu

namespace tessera::engine::cpu {
namespace {

TEST(FastMathTest, ExpAndErfStayWithinTheirStatedErrors) {
  float worst_exp = 0.0f, worst_erf = 0.0f;
  for (float x = -86.9f; x <= 88.0f; x += 0.0137f) {
    const float want = std::exp(x);
    worst_exp = std::max(worst_exp, std::fabs(FastExp(x) - want) / want);
  }
  for (float x = -6.0f; x <= 6.0f; x += 0.00071f) {
    worst_erf = std::max(worst_erf, std::fabs(FastErf(x) - std::erf(x)));
  }
  EXPECT_LT(worst_exp, 5e-7f);
  EXPECT_LT(worst_erf, 6e-7f);
  // Softmax masks with -inf and -1e4: both must come out as (next to) zero, never NaN.
  EXPECT_EQ(FastExp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(FastExp(-1e4f), 0.0f);
  // Never a denormal (they slow every later op): the smallest nonzero result is a normal float.
  for (float x = -87.5f; x <= -86.0f; x += 0.001f) {
    const float e = FastExp(x);
    EXPECT_TRUE(e == 0.0f || std::fpclassify(e) == FP_NORMAL) << x;
  }
  EXPECT_EQ(FastErf(0.0f), 0.0f);
  EXPECT_EQ(FastErf(-10.0f), -1.0f);
}

TEST(FastMathTest, TanhIsRelativelyExactNearZeroAndSaturatesCleanly) {
  // Relative error over both branches (the polynomial below 0.625, the exp form above), where
  // 1 - 2 / (e^2x + 1) alone would be off by 1e-3 relative at x = 1e-4.
  float worst = 0.0f;
  for (float x = -12.0f; x <= 12.0f; x += 0.00037f) {
    const double want = std::tanh(static_cast<double>(x));
    if (want != 0.0) {
      worst = std::max(worst, static_cast<float>(std::fabs(FastTanh(x) - want) / std::fabs(want)));
    }
  }
  EXPECT_LT(worst, 3e-7f);
  for (float x : {1e-4f, -3e-6f, 1e-30f}) EXPECT_NEAR(FastTanh(x) / x, 1.0f, 1e-6f) << x;
  EXPECT_EQ(FastTanh(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(FastTanh(-0.0f)));
  EXPECT_EQ(FastTanh(50.0f), 1.0f);
  EXPECT_EQ(FastTanh(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_TRUE(std::isnan(FastTanh(std::nanf(""))));
}

// Every output row of every image is in exactly one part, and each part reads exactly the input
// rows its taps reach inside the image, the rest being its padding.
TEST(SliceConvTest, PartsCoverEveryOutputRowOnceAndReadWhatTheirTapsReach) {
  std::mt19937 rng(11);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (int trial = 0; trial < 2000; ++trial) {
    ConvGeometry g;
    g.batch = pick(1, 5);
    g.h = pick(1, 30);
    g.w = pick(1, 9);
    g.kernel_h = pick(1, 5);
    g.kernel_w = pick(1, 3);
    g.stride_h = pick(1, 3);
    g.dilation_h = pick(1, 2);
    g.pad_top = pick(0, 3);
    g.pad_bottom = pick(0, 3);
    if (trial % 3 == 0) g = ConvGeometry{g.batch, g.h, g.w};  // pointwise: cut by pixels
    const int64_t reach = (g.kernel_h - 1) * g.dilation_h + 1;
    if (g.h + g.pad_top + g.pad_bottom < reach) continue;
    g.oh = (g.h + g.pad_top + g.pad_bottom - reach) / g.stride_h + 1;
    g.ow = g.w - g.kernel_w + 1;
    if (g.ow < 1) continue;
    const int threads = static_cast<int>(pick(1, 4));
    const std::vector<ConvSlice> parts = SliceConv(g, threads);
    ASSERT_FALSE(parts.empty());
    const ConvSlice& first = parts.front();
    std::vector<int> covered(static_cast<size_t>(g.batch * first.oh), 0);
    for (const ConvSlice& p : parts) {
      ASSERT_EQ(p.h * p.w, g.h * g.w) << "trial " << trial;
      ASSERT_GE(p.in_row, 0);
      ASSERT_LE(p.in_row + p.in_rows, p.h);
      ASSERT_GT(p.in_rows, 0);
      for (int64_t image = p.image; image < p.image + p.images; ++image) {
        for (int64_t row = p.out_row; row < p.out_row + p.out_rows; ++row) {
          ++covered[static_cast<size_t>(image * p.oh + row)];
        }
      }
      if (p.out_rows == p.oh) continue;  // whole images keep the Conv's own pads
      // Parts of an image: the first tap of the first row and the last tap of the last row bound
      // what the part reads, with what falls outside the image as padding.
      const int64_t first_tap = p.out_row * g.stride_h - g.pad_top;
      const int64_t last_tap = (p.out_row + p.out_rows - 1) * g.stride_h - g.pad_top + reach - 1;
      EXPECT_EQ(p.in_row - p.pad_top, p.h == g.h ? first_tap : p.out_row) << "trial " << trial;
      EXPECT_EQ(p.in_row + p.in_rows - 1 + p.pad_bottom,
                p.h == g.h ? last_tap : p.out_row + p.out_rows - 1)
          << "trial " << trial;
    }
    for (size_t i = 0; i < covered.size(); ++i) ASSERT_EQ(covered[i], 1) << "trial " << trial;
    if (threads > 1 && g.batch % threads == 0) {
      EXPECT_EQ(parts.size(), static_cast<size_t>(threads));
    }
  }
}

TEST(SliceConvTest, ChannelPartsAreBlocksOf16CoveringEveryOutputChannelOnce) {
  // Weights outnumber outputs (1024 * 3 * 3 reads per output against 2 * 4 * 4 pixels) and
  // take 1 MiB or more.
  const ConvGeometry late{2, 8, 8, 4, 4, 3, 3, 2, 2};
  for (int64_t channels : {32, 48, 100, 512}) {
    for (int threads : {2, 3, 4}) {
      const std::vector<ChannelSlice> parts = SliceConvChannels(late, 1024, channels, threads);
      if (channels < threads * 16) {
        EXPECT_TRUE(parts.empty()) << channels << " channels, " << threads << " threads";
        continue;
      }
      ASSERT_EQ(parts.size(), static_cast<size_t>(threads)) << channels << " channels";
      int64_t next = 0;
      for (size_t i = 0; i < parts.size(); ++i) {
        EXPECT_EQ(parts[i].begin, next);
        EXPECT_GT(parts[i].count, 0);
        if (i + 1 < parts.size()) {
          EXPECT_EQ(parts[i].count % 16, 0) << channels;
        }
        next += parts[i].count;
      }
      EXPECT_EQ(next, channels) << channels << " channels, " << threads << " threads";
    }
  }
  // Image or row parts: one thread, outputs at least as many as the weights (an early layer), or
  // weights under 1 MiB (16 * 3 * 3 * 512 floats).
  EXPECT_TRUE(SliceConvChannels(late, 1024, 512, 1).empty());
  const ConvGeometry early{2, 56, 56, 56, 56, 3, 3};
  EXPECT_TRUE(SliceConvChannels(early, 64, 512, 2).empty());
  EXPECT_FALSE(SliceConvChannels(late, 64, 512, 2).empty());
  EXPECT_TRUE(SliceConvChannels(late, 16, 512, 2).empty());
}

}  // namespace
}  // namespace tessera::engine::cpu
