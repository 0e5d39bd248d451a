// Tests of the transformer-era CPU kernels (broadcasting, MatMul batching, Slice, Where,
// LayerNorm, reductions, Cast, CumSum) on hand-computed values and against naive loops, plus the
// INVALID_ARGUMENT paths for bad inputs.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "engine/cpu/ops.h"
#include "engine/cpu_op_runner_for_test.h"
#include "gtest/gtest.h"

namespace tessera::engine::cpu {
namespace {

// Element of a row-major tensor of `shape` at `coord` (right-aligned, broadcast dims read 0).
float At(const Value& v, const std::vector<int64_t>& coord) {
  int64_t offset = 0;
  const size_t skip = coord.size() - v.shape().size();
  for (size_t d = 0; d < v.shape().size(); ++d) {
    const int64_t c = v.shape()[d] == 1 ? 0 : coord[d + skip];
    offset = offset * v.shape()[d] + c;
  }
  return v.data<float>()[offset];
}

std::vector<int64_t> Unravel(int64_t index, const Shape& shape) {
  std::vector<int64_t> coord(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    coord[d] = index % shape[d];
    index /= shape[d];
  }
  return coord;
}

TEST(BroadcastTest, BinaryOpsMatchNaiveForEveryPatternAndThreadCount) {
  std::mt19937 rng(3);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{4, 33, 768}, {768}},          // bias add: trailing-dim broadcast
      {{4, 33, 768}, {4, 33, 768}},   // equal shapes
      {{4, 33, 768}, {}},             // scalar
      {{2, 12, 9, 9}, {2, 1, 1, 9}},  // attention mask over heads and queries
      {{3, 1, 5}, {1, 4, 1}},         // both sides broadcast
      {{5, 1}, {5, 70000}},           // column against a long row, threaded
  };
  for (const auto& [sa, sb] : cases) {
    Value a = RandomFloats(sa, &rng), b = RandomFloats(sb, &rng);
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      auto y = RunOp("Sub", {&a, &b}, {}, &pool);
      ASSERT_TRUE(y.ok()) << y.status();
      for (int64_t i = 0; i < y->num_elements(); ++i) {
        std::vector<int64_t> c = Unravel(i, y->shape());
        ASSERT_EQ(y->data<float>()[i], At(a, c) - At(b, c))
            << ShapeToString(sa) << " - " << ShapeToString(sb) << " at " << i;
      }
    }
  }
  Value a = Floats({2}, {1, 2}), b = Floats({3}, {1, 2, 3});
  EXPECT_EQ(RunOp("Add", {&a, &b}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MatMulTest, BatchedAndBroadcastMatchNaive) {
  std::mt19937 rng(5);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 7, 8}, {2, 3, 8, 5}},  // attention scores [b,h,s,d] x [b,h,d,s]
      {{2, 7, 8}, {8, 5}},           // [b,s,k] x [k,n]: one big GEMM
      {{2, 1, 7, 8}, {3, 8, 5}},     // batch dims broadcast both ways
      {{8}, {2, 8, 5}},              // vector x batched matrix
  };
  for (const auto& [sa, sb] : cases) {
    Value a = RandomFloats(sa, &rng), b = RandomFloats(sb, &rng);
    auto y = RunOp("MatMul", {&a, &b});
    ASSERT_TRUE(y.ok()) << y.status();
    // Naive reference with explicit padding of both to rank 4.
    Shape pa = sa, pb = sb;
    const bool a_vec = pa.size() == 1;
    if (a_vec) pa.insert(pa.begin(), 1);
    while (pa.size() < 4) pa.insert(pa.begin(), 1);
    while (pb.size() < 4) pb.insert(pb.begin(), 1);
    Value ra = a.Reshaped(pa), rb = b.Reshaped(pb);
    const int64_t m = pa[2], k = pa[3], n = pb[3];
    const int64_t b0 = std::max(pa[0], pb[0]), b1 = std::max(pa[1], pb[1]);
    ASSERT_EQ(y->num_elements(), b0 * b1 * m * n) << ShapeToString(y->shape());
    for (int64_t i0 = 0; i0 < b0; ++i0) {
      for (int64_t i1 = 0; i1 < b1; ++i1) {
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0;
            for (int64_t p = 0; p < k; ++p) sum += At(ra, {i0, i1, i, p}) * At(rb, {i0, i1, p, j});
            const float got = y->data<float>()[((i0 * b1 + i1) * m + i) * n + j];
            ASSERT_NEAR(got, sum, 1e-4) << ShapeToString(sa) << " x " << ShapeToString(sb);
          }
        }
      }
    }
  }
  Value a = Floats({2, 3}, {1, 2, 3, 4, 5, 6}), b = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(RunOp("MatMul", {&a, &b}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SliceTest, NegativeIndicesHugeEndsAndSteps) {
  Value x = Floats({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  // x[:, -3:INT64_MAX] -> columns 2..4.
  Value starts = Int64s({1}, {-3}), ends = Int64s({1}, {kMax}), axes = Int64s({1}, {1});
  auto y = RunOp("Slice", {&x, &starts, &ends, &axes});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 3}));
  EXPECT_EQ(Elements<float>(*y), (std::vector<float>{2, 3, 4, 7, 8, 9}));
  // x[::-1, -1:INT64_MIN:-2] (reverse rows, every second column from the end).
  Value s2 = Int64s({2}, {-1, -1}),
        e2 =
            Int64s({2}, {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min()});
  Value a2 = Int64s({2}, {0, 1}), st2 = Int64s({2}, {-1, -2});
  y = RunOp("Slice", {&x, &s2, &e2, &a2, &st2});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 3}));
  EXPECT_EQ(Elements<float>(*y), (std::vector<float>{9, 7, 5, 4, 2, 0}));
  // Start past the end: empty, not an error.
  Value s3 = Int64s({1}, {10}), e3 = Int64s({1}, {20});
  y = RunOp("Slice", {&x, &s3, &e3, &axes});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 0}));
  // Bad: step 0, axis out of range, mismatched lengths.
  Value zero = Int64s({1}, {0}), bad_axis = Int64s({1}, {2}), two = Int64s({2}, {0, 1});
  EXPECT_EQ(RunOp("Slice", {&x, &starts, &ends, &axes, &zero}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Slice", {&x, &starts, &ends, &bad_axis}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOp("Slice", {&x, &two, &ends}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WhereTest, BroadcastsConditionAndScalarFill) {
  // masked_fill: cond [1, 1, 2, 2] (causal), fill a scalar, y [2, 1, 2, 2].
  Value cond = Bools({1, 1, 2, 2}, {1, 0, 1, 1});
  Value fill = Floats({}, {-100});
  Value y = Floats({2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto out = RunOp("Where", {&cond, &fill, &y});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape(), (Shape{2, 1, 2, 2}));
  EXPECT_EQ(Elements<float>(*out), (std::vector<float>{-100, 2, -100, -100, -100, 6, -100, -100}));
  Value x = Floats({3}, {10, 20, 30}), col = Floats({2, 1}, {-1, -2});
  Value c2 = Bools({3}, {1, 0, 1});
  out = RunOp("Where", {&c2, &x, &col});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Elements<float>(*out), (std::vector<float>{10, -1, 30, 10, -2, 30}));
  Value float_cond = Floats({3}, {1, 0, 1});
  EXPECT_EQ(RunOp("Where", {&float_cond, &x, &x}).status().code(),
            absl::StatusCode::kInvalidArgument);
  Value i64 = Int64s({3}, {1, 2, 3});
  EXPECT_EQ(RunOp("Where", {&c2, &x, &i64}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LayerNormTest, MatchesHandComputedValuesAndStatistics) {
  // Row [1, 2, 3, 4]: mean 2.5, variance 1.25.
  Value x = Floats({2, 4}, {1, 2, 3, 4, 2, 2, 2, 2});
  Value scale = Floats({4}, {1, 1, 1, 2}), bias = Floats({4}, {0.5f, 0.5f, 0.5f, 0.5f});
  Attributes attrs;
  attrs.Set("epsilon", FloatAttr(1e-5f));
  auto out = RunOpN("LayerNormalization", {&x, &scale, &bias}, attrs, 3);
  ASSERT_TRUE(out.ok()) << out.status();
  const float inv = 1.0f / std::sqrt(1.25f + 1e-5f);
  const std::vector<float> expected = {-1.5f * inv + 0.5f,
                                       -0.5f * inv + 0.5f,
                                       0.5f * inv + 0.5f,
                                       3.0f * inv + 0.5f,
                                       0.5f,
                                       0.5f,
                                       0.5f,
                                       0.5f};
  std::vector<float> got = Elements<float>((*out)[0]);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5) << i;
  EXPECT_EQ((*out)[1].shape(), (Shape{2, 1}));
  EXPECT_NEAR((*out)[1].data<float>()[0], 2.5f, 1e-6);
  EXPECT_NEAR((*out)[2].data<float>()[0], inv, 1e-5);
  EXPECT_NEAR((*out)[2].data<float>()[1], 1.0f / std::sqrt(1e-5f), 1e-1);
  Value short_scale = Floats({3}, {1, 1, 1});
  EXPECT_EQ(RunOp("LayerNormalization", {&x, &short_scale}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LayerNormTest, RowsOfVectorLanesAndATailMatchDoublePrecision) {
  // 37 and 64 columns: the statistics run in 16-lane partial sums plus a tail of 5, and in whole
  // lanes; values offset by 100 so that a wrong mean shows in the variance.
  std::mt19937 rng(4);
  for (int64_t cols : {37, 64}) {
    Value x = RandomFloats({3, cols}, &rng);
    float* data = x.mutable_data<float>();
    for (int64_t i = 0; i < x.num_elements(); ++i) data[i] += 100.0f;
    Value scale = Floats({cols}, std::vector<float>(static_cast<size_t>(cols), 1.0f));
    auto out = RunOpN("LayerNormalization", {&x, &scale}, {}, 3);
    ASSERT_TRUE(out.ok()) << out.status();
    for (int64_t r = 0; r < 3; ++r) {
      const float* row = data + r * cols;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < cols; ++i) mean += row[i];
      mean /= static_cast<double>(cols);
      for (int64_t i = 0; i < cols; ++i) var += (row[i] - mean) * (row[i] - mean);
      var /= static_cast<double>(cols);
      EXPECT_NEAR((*out)[1].data<float>()[r], mean, 1e-4) << cols;
      EXPECT_NEAR((*out)[2].data<float>()[r], 1.0 / std::sqrt(var + 1e-5), 1e-3) << cols;
    }
  }
}

TEST(ReduceTest, ContiguousAndScatteredAxesAgree) {
  std::mt19937 rng(9);
  Value x = RandomFloats({3, 4, 5, 6}, &rng);
  Value axes = Int64s({2}, {0, 2});  // not contiguous: the general path
  auto sum = RunOp("ReduceSum", {&x, &axes});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(sum->shape(), (Shape{1, 4, 1, 6}));
  for (int64_t j = 0; j < 4; ++j) {
    for (int64_t l = 0; l < 6; ++l) {
      double expected = 0;
      for (int64_t i = 0; i < 3; ++i) {
        for (int64_t k = 0; k < 5; ++k) expected += At(x, {i, j, k, l});
      }
      EXPECT_NEAR(sum->data<float>()[j * 6 + l], expected, 1e-5);
    }
  }
  Attributes attrs;
  Attribute ax;
  ax.kind = Attribute::Kind::kInts;
  ax.ints = {-1};
  attrs.Set("axes", ax);
  attrs.Set("keepdims", IntAttr(0));
  auto mean = RunOp("ReduceMean", {&x}, attrs);
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ(mean->shape(), (Shape{3, 4, 5}));
  double row = 0;
  for (int64_t l = 0; l < 6; ++l) row += At(x, {2, 3, 4, l});
  EXPECT_NEAR(mean->data<float>()[59], row / 6, 1e-6);
  Value bad_axes = Int64s({1}, {4});
  EXPECT_EQ(RunOp("ReduceSum", {&x, &bad_axes}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CastTest, TruncatesSaturatesAndMapsBool) {
  Value x = Floats({6}, {1.9f, -1.9f, 3e20f, -3e20f, std::nanf(""), 0.0f});
  Attributes to_int64, to_bool;
  to_int64.Set("to", IntAttr(7));
  to_bool.Set("to", IntAttr(9));
  auto y = RunOp("Cast", {&x}, to_int64);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<int64_t>(*y),
            (std::vector<int64_t>{1, -1, std::numeric_limits<int64_t>::max(),
                                  std::numeric_limits<int64_t>::min(), 0, 0}));
  y = RunOp("Cast", {&x}, to_bool);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<uint8_t>(*y), (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
  // UINT8 (GPT-2 mask buffers) shares BOOL's storage but keeps its values; to BOOL maps to 0/1.
  Value bytes = Make(DataType::kUint8, {3}, std::vector<uint8_t>{0, 2, 255});
  to_int64.Set("to", IntAttr(7));
  y = RunOp("Cast", {&bytes}, to_int64);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<int64_t>(*y), (std::vector<int64_t>{0, 2, 255}));
  y = RunOp("Cast", {&bytes}, to_bool);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), DataType::kBool);
  EXPECT_EQ(Elements<uint8_t>(*y), (std::vector<uint8_t>{0, 1, 1}));
  Attributes to_uint8;
  to_uint8.Set("to", IntAttr(2));
  Value wide = Floats({3}, {-4.0f, 7.9f, 300.0f});
  y = RunOp("Cast", {&wide}, to_uint8);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<uint8_t>(*y), (std::vector<uint8_t>{0, 7, 255}));
  Node node;
  node.op_type = "Cast";
  node.attributes.Set("to", IntAttr(10));  // FLOAT16
  EXPECT_EQ(FindOp("Cast")->check(node, Graph{}).code(), absl::StatusCode::kUnimplemented);
}

TEST(CumSumTest, ExclusiveAndReverse) {
  Value x = Int64s({2, 3}, {1, 2, 3, 4, 5, 6});
  Value axis = Int64s({}, {1});
  auto y = RunOp("CumSum", {&x, &axis});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<int64_t>(*y), (std::vector<int64_t>{1, 3, 6, 4, 9, 15}));
  Attributes attrs;
  attrs.Set("exclusive", IntAttr(1));
  attrs.Set("reverse", IntAttr(1));
  y = RunOp("CumSum", {&x, &axis}, attrs);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<int64_t>(*y), (std::vector<int64_t>{5, 3, 0, 11, 6, 0}));
  Value bad = Int64s({}, {2});
  EXPECT_EQ(RunOp("CumSum", {&x, &bad}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShapeBuildingTest, BadArgumentsAreInvalidArgument) {
  Value x = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Value split = Int64s({2}, {1, 1});  // sums to 2, dim is 3
  Attributes axis1;
  axis1.Set("axis", IntAttr(1));
  EXPECT_EQ(RunOpN("Split", {&x, &split}, axis1, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  Value shape = Int64s({2}, {4, 3});  // 2 does not broadcast to 4
  EXPECT_EQ(RunOp("Expand", {&x, &shape}).status().code(), absl::StatusCode::kInvalidArgument);
  Value start = Int64s({}, {0}), limit = Int64s({}, {5}), zero = Int64s({}, {0});
  EXPECT_EQ(RunOp("Range", {&start, &limit, &zero}).status().code(),
            absl::StatusCode::kInvalidArgument);
  Value pads = Int64s({2}, {1, 1});  // needs 4 values for rank 2
  EXPECT_EQ(RunOp("Pad", {&x, &pads}).status().code(), absl::StatusCode::kInvalidArgument);
  // And the good paths of the same ops.
  Value ok_shape = Int64s({3}, {2, 2, 3});
  auto expanded = RunOp("Expand", {&x, &ok_shape});
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  EXPECT_EQ(Elements<float>(*expanded), (std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
  Value parts = Int64s({2}, {1, 2});
  auto halves = RunOpN("Split", {&x, &parts}, axis1, 2);
  ASSERT_TRUE(halves.ok()) << halves.status();
  EXPECT_EQ(Elements<float>((*halves)[0]), (std::vector<float>{1, 4}));
  EXPECT_EQ(Elements<float>((*halves)[1]), (std::vector<float>{2, 3, 5, 6}));
}

}  // namespace
}  // namespace tessera::engine::cpu
