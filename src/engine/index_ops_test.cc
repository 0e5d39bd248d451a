// Tests of the index and layout kernels (index_ops.cc, layout_ops.cc, CastLike, GlobalMaxPool)
// beyond the ONNX node tests: the INVALID_ARGUMENT paths for indices, ranks and sizes taken from
// tensor data, ties and NaN in TopK, and the threaded paths against naive loops.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "engine/cpu/ops.h"
#include "engine/cpu_op_runner_for_test.h"
#include "gtest/gtest.h"

namespace tessera::engine::cpu {
namespace {

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

Attributes Attrs(std::initializer_list<std::pair<std::string, int64_t>> ints,
                 std::initializer_list<std::pair<std::string, std::string>> strings = {}) {
  Attributes attrs;
  for (const auto& [name, value] : ints) attrs.Set(name, IntAttr(value));
  for (const auto& [name, value] : strings) attrs.Set(name, StringAttr(value));
  return attrs;
}

Node MakeNode(const std::string& op_type, Attributes attrs, int opset) {
  Node node;
  node.op_type = op_type;
  node.opset = opset;
  node.attributes = std::move(attrs);
  return node;
}

// The kernels at opset 18 unless a test says otherwise (ScatterElements' max/min reductions).
StatusOr<std::vector<Value>> RunIndexOpN(const std::string& op_type, const Inputs& inputs,
                                         Attributes attrs = {}, size_t num_outputs = 1,
                                         ThreadPool* pool = nullptr, int opset = 18) {
  return RunOpN(op_type, inputs, std::move(attrs), num_outputs, pool, opset);
}

StatusOr<Value> RunIndexOp(const std::string& op_type, const Inputs& inputs, Attributes attrs = {},
                           ThreadPool* pool = nullptr) {
  return RunOp(op_type, inputs, std::move(attrs), pool, 18);
}

TEST(GatherElementsTest, GathersAlongAnAxisWithNegativeAndInt32Indices) {
  Value data = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Value idx = Int64s({2, 2}, {2, -3, 0, -1});
  auto y = RunIndexOp("GatherElements", {&data, &idx}, Attrs({{"axis", 1}}));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 2}));
  EXPECT_EQ(Elements<float>(*y), (std::vector<float>{3, 1, 4, 6}));
  Value idx32 = Int32s({1, 3}, {1, 0, 1});
  y = RunIndexOp("GatherElements", {&data, &idx32}, Attrs({{"axis", 0}}));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<float>(*y), (std::vector<float>{4, 2, 6}));
}

TEST(GatherElementsTest, RefusesBadIndicesAndShapes) {
  Value data = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Value too_big = Int64s({1, 1}, {3});
  ExpectInvalidArgument(RunIndexOp("GatherElements", {&data, &too_big}, Attrs({{"axis", 1}})),
                        "index 3");
  Value too_negative = Int64s({1, 1}, {-4});
  ExpectInvalidArgument(RunIndexOp("GatherElements", {&data, &too_negative}, Attrs({{"axis", 1}})),
                        "index -4");
  Value flat = Int64s({2}, {0, 1});
  ExpectInvalidArgument(RunIndexOp("GatherElements", {&data, &flat}), "rank");
  Value wide = Int64s({3, 1}, {0, 0, 0});  // 3 rows of a 2-row tensor
  ExpectInvalidArgument(RunIndexOp("GatherElements", {&data, &wide}, Attrs({{"axis", 1}})),
                        "exceed");
  ExpectInvalidArgument(RunIndexOp("GatherElements", {&data, &flat}, Attrs({{"axis", 2}})), "rank");
}

TEST(GatherElementsTest, ThreadedMatchesNaive) {
  std::mt19937 rng(5);
  const Shape shape = {7, 300, 40};
  Value data = Value::Allocate(DataType::kInt64, shape);
  for (int64_t i = 0; i < data.num_elements(); ++i) data.mutable_data<int64_t>()[i] = i;
  Value idx = Value::Allocate(DataType::kInt64, {7, 250, 40});
  std::uniform_int_distribution<int64_t> pick(-300, 299);
  for (int64_t i = 0; i < idx.num_elements(); ++i) idx.mutable_data<int64_t>()[i] = pick(rng);
  ThreadPool pool(3);
  auto y = RunIndexOp("GatherElements", {&data, &idx}, Attrs({{"axis", 1}}), &pool);
  ASSERT_TRUE(y.ok()) << y.status();
  for (int64_t a = 0; a < 7; ++a) {
    for (int64_t b = 0; b < 250; ++b) {
      for (int64_t c = 0; c < 40; ++c) {
        int64_t i = idx.data<int64_t>()[(a * 250 + b) * 40 + c];
        if (i < 0) i += 300;
        ASSERT_EQ(y->data<int64_t>()[(a * 250 + b) * 40 + c], (a * 300 + i) * 40 + c);
      }
    }
  }
}

TEST(GatherNDTest, BatchDimsAndErrors) {
  Value data = Floats({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Value idx = Int64s({2, 1, 1}, {1, -2});
  auto y = RunIndexOp("GatherND", {&data, &idx}, Attrs({{"batch_dims", 1}}));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(Elements<float>(*y), (std::vector<float>{2, 3, 4, 5}));
  Value full = Int64s({2, 3}, {0, 1, 1, 1, 0, -1});
  y = RunIndexOp("GatherND", {&data, &full});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<float>(*y), (std::vector<float>{3, 5}));

  // An empty last indices dim selects whole batch slices.
  Value whole = Value::Allocate(DataType::kInt64, {3, 0});
  y = RunIndexOp("GatherND", {&data, &whole});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{3, 2, 2, 2}));
  EXPECT_EQ(Elements<float>(*y)[8 + 5], 5);

  Value out_of_range = Int64s({1, 2}, {0, 2});
  ExpectInvalidArgument(RunIndexOp("GatherND", {&data, &out_of_range}), "index 2");
  Value too_long = Int64s({1, 4}, {0, 0, 0, 0});
  ExpectInvalidArgument(RunIndexOp("GatherND", {&data, &too_long}), "dims");
  Value other_batch = Int64s({3, 1}, {0, 0, 0});
  ExpectInvalidArgument(RunIndexOp("GatherND", {&data, &other_batch}, Attrs({{"batch_dims", 1}})),
                        "batch");
  ExpectInvalidArgument(RunIndexOp("GatherND", {&data, &idx}, Attrs({{"batch_dims", 3}})),
                        "batch_dims");
  ExpectInvalidArgument(RunIndexOp("GatherND", {&data, &idx}, Attrs({{"batch_dims", -1}})),
                        "batch_dims");
}

TEST(ScatterElementsTest, ReductionsAndTheDeprecatedScatter) {
  Value data = Floats({1, 4}, {1, 2, 3, 4});
  Value idx = Int64s({1, 3}, {1, -1, 1});
  Value upd = Floats({1, 3}, {10, 20, 30});
  const std::vector<std::pair<std::string, std::vector<float>>> cases = {{"none", {1, 30, 3, 20}},
                                                                         {"add", {1, 42, 3, 24}},
                                                                         {"mul", {1, 600, 3, 80}},
                                                                         {"max", {1, 30, 3, 20}},
                                                                         {"min", {1, 2, 3, 4}}};
  for (const auto& [reduction, expected] : cases) {
    auto y = RunIndexOp("ScatterElements", {&data, &idx, &upd},
                        Attrs({{"axis", 1}}, {{"reduction", reduction}}));
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(Elements<float>(*y), expected) << reduction;
  }
  auto y = RunIndexOp("Scatter", {&data, &idx, &upd}, Attrs({{"axis", 1}}));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<float>(*y), (std::vector<float>{1, 30, 3, 20}));
  EXPECT_EQ(Elements<float>(data), (std::vector<float>{1, 2, 3, 4}));  // input untouched

  // BOOL add stays a BOOL (logical or), never 2.
  Value flags = Bools({3}, {1, 0, 0});
  Value bool_idx = Int64s({2}, {0, 0});
  Value bool_upd = Bools({2}, {1, 1});
  y = RunIndexOp("ScatterElements", {&flags, &bool_idx, &bool_upd},
                 Attrs({}, {{"reduction", "add"}}));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<uint8_t>(*y), (std::vector<uint8_t>{1, 0, 0}));

  Node bad = MakeNode("ScatterElements", Attrs({}, {{"reduction", "avg"}}), 18);
  EXPECT_EQ(FindOp("ScatterElements")->check(bad, Graph{}).code(), kInvalid);
}

TEST(ScatterElementsTest, RefusesBadIndicesAndShapes) {
  Value data = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Value idx = Int64s({1, 2}, {0, 3});
  Value upd = Floats({1, 2}, {9, 9});
  ExpectInvalidArgument(RunIndexOp("ScatterElements", {&data, &idx, &upd}, Attrs({{"axis", 1}})),
                        "index 3");
  Value neg = Int32s({1, 2}, {0, -4});
  ExpectInvalidArgument(RunIndexOp("ScatterElements", {&data, &neg, &upd}, Attrs({{"axis", 1}})),
                        "index -4");
  Value short_upd = Floats({2}, {9, 9});
  Value ok_idx = Int64s({1, 2}, {0, 1});
  ExpectInvalidArgument(RunIndexOp("ScatterElements", {&data, &ok_idx, &short_upd}), "shape");
  Value tall_idx = Int64s({3, 1}, {0, 0, 0});
  Value tall_upd = Floats({3, 1}, {9, 9, 9});
  ExpectInvalidArgument(
      RunIndexOp("ScatterElements", {&data, &tall_idx, &tall_upd}, Attrs({{"axis", 1}})), "exceed");
  Value wrong_type = Int64s({1, 2}, {9, 9});
  EXPECT_EQ(RunIndexOp("ScatterElements", {&data, &ok_idx, &wrong_type}).status().code(), kInvalid);
}

TEST(ScatterNDTest, UpdatesSlicesInIndexOrder) {
  Value data = Int64s({3, 2}, {1, 2, 3, 4, 5, 6});
  Value idx = Int64s({3, 1}, {2, -1, 0});
  Value upd = Int64s({3, 2}, {10, 20, 30, 40, 50, 60});
  auto y = RunIndexOp("ScatterND", {&data, &idx, &upd});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<int64_t>(*y), (std::vector<int64_t>{50, 60, 3, 4, 30, 40}));  // last wins
  y = RunIndexOp("ScatterND", {&data, &idx, &upd}, Attrs({}, {{"reduction", "add"}}));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<int64_t>(*y), (std::vector<int64_t>{51, 62, 3, 4, 45, 66}));

  Value bad = Int64s({1, 1}, {3});
  Value one = Int64s({1, 2}, {0, 0});
  ExpectInvalidArgument(RunIndexOp("ScatterND", {&data, &bad, &one}), "index 3");
  Value too_long = Int64s({1, 3}, {0, 0, 0});
  Value scalar_upd = Int64s({1}, {0});
  ExpectInvalidArgument(RunIndexOp("ScatterND", {&data, &too_long, &scalar_upd}), "dims");
  Value wrong_upd = Int64s({1, 3}, {0, 0, 0});
  Value good_idx = Int64s({1, 1}, {0});
  ExpectInvalidArgument(RunIndexOp("ScatterND", {&data, &good_idx, &wrong_upd}), "shape");
}

TEST(TopKTest, TiesKeepTheLowerIndexBothWays) {
  Value x = Floats({1, 6}, {3, 1, 3, 2, 1, 3});
  Value k = Int64s({1}, {4});
  auto out = RunIndexOpN("TopK", {&x, &k}, Attrs({{"axis", 1}}), 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Elements<float>((*out)[0]), (std::vector<float>{3, 3, 3, 2}));
  EXPECT_EQ(Elements<int64_t>((*out)[1]), (std::vector<int64_t>{0, 2, 5, 3}));
  out = RunIndexOpN("TopK", {&x, &k}, Attrs({{"largest", 0}}), 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Elements<float>((*out)[0]), (std::vector<float>{1, 1, 2, 3}));
  EXPECT_EQ(Elements<int64_t>((*out)[1]), (std::vector<int64_t>{1, 4, 3, 0}));
}

TEST(TopKTest, NanRanksAboveEveryNumber) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Value x = Floats({5}, {1, nan, 5, nan, -1});
  Value k = Int64s({1}, {3});
  auto out = RunIndexOpN("TopK", {&x, &k}, {}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Elements<int64_t>((*out)[1]), (std::vector<int64_t>{1, 3, 2}));
  out = RunIndexOpN("TopK", {&x, &k}, Attrs({{"largest", 0}}), 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Elements<int64_t>((*out)[1]), (std::vector<int64_t>{4, 0, 2}));
}

TEST(TopKTest, AttributeKBeforeOpset10AndInnerAxes) {
  Value x = Int32s({3, 2}, {5, 1, 7, 8, 6, 2});
  auto out = RunIndexOpN("TopK", {&x}, Attrs({{"k", 2}, {"axis", 0}}), 2, nullptr, /*opset=*/9);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(Elements<int32_t>((*out)[0]), (std::vector<int32_t>{7, 8, 6, 2}));
  EXPECT_EQ(Elements<int64_t>((*out)[1]), (std::vector<int64_t>{1, 1, 2, 2}));
  Node no_k = MakeNode("TopK", {}, 9);
  EXPECT_EQ(FindOp("TopK")->check(no_k, Graph{}).code(), kInvalid);
}

TEST(TopKTest, RefusesKOutsideTheAxis) {
  Value x = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Value big = Int64s({1}, {4});
  ExpectInvalidArgument(RunIndexOpN("TopK", {&x, &big}, {}, 2).status(), "K = 4");
  Value negative = Int64s({1}, {-1});
  ExpectInvalidArgument(RunIndexOpN("TopK", {&x, &negative}, {}, 2).status(), "K = -1");
  Value two = Int64s({2}, {1, 1});
  ExpectInvalidArgument(RunIndexOpN("TopK", {&x, &two}, {}, 2).status(), "one element");
  Value zero = Int64s({1}, {0});
  auto out = RunIndexOpN("TopK", {&x, &zero}, {}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 0}));
}

TEST(TopKTest, ThreadedMatchesSorting) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> dist(0, 50);  // many ties
  Value x = Value::Allocate(DataType::kFp32, {40, 3000});
  for (int64_t i = 0; i < x.num_elements(); ++i) x.mutable_data<float>()[i] = dist(rng);
  Value k = Int64s({1}, {17});
  ThreadPool pool(3);
  auto out = RunIndexOpN("TopK", {&x, &k}, {}, 2, &pool);
  ASSERT_TRUE(out.ok()) << out.status();
  for (int64_t r = 0; r < 40; ++r) {
    std::vector<int64_t> order(3000);
    for (int64_t j = 0; j < 3000; ++j) order[j] = j;
    const float* row = x.data<float>() + r * 3000;
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return row[a] > row[b]; });
    for (int64_t j = 0; j < 17; ++j) {
      ASSERT_EQ((*out)[1].data<int64_t>()[r * 17 + j], order[j]) << r << "," << j;
      ASSERT_EQ((*out)[0].data<float>()[r * 17 + j], row[order[j]]);
    }
  }
}

TEST(TileTest, RepeatsEveryDimAndRefusesBadRepeats) {
  Value x = Int32s({2, 2}, {1, 2, 3, 4});
  Value reps = Int64s({2}, {2, 3});
  auto y = RunIndexOp("Tile", {&x, &reps});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{4, 6}));
  EXPECT_EQ(Elements<int32_t>(*y), (std::vector<int32_t>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4,
                                                         1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  Value zero = Int64s({2}, {0, 5});
  y = RunIndexOp("Tile", {&x, &zero});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{0, 10}));

  Value negative = Int64s({2}, {1, -1});
  ExpectInvalidArgument(RunIndexOp("Tile", {&x, &negative}), "negative");
  Value short_reps = Int64s({1}, {2});
  ExpectInvalidArgument(RunIndexOp("Tile", {&x, &short_reps}), "repeats");
  Value huge = Int64s({2}, {kInt64Max, 1});
  ExpectInvalidArgument(RunIndexOp("Tile", {&x, &huge}), "overflows");
  // Each dim fits, but the byte size does not.
  Value huge_total = Int64s({2}, {int64_t{1} << 31, int64_t{1} << 31});
  ExpectInvalidArgument(RunIndexOp("Tile", {&x, &huge_total}), "too large");
}

TEST(OneHotTest, AxesOutOfRangeIndicesAndFloatInputs) {
  Value idx = Int64s({3}, {0, -1, 7});
  Value depth = Floats({}, {3});
  Value values = Int64s({2}, {0, 5});
  auto y = RunIndexOp("OneHot", {&idx, &depth, &values});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{3, 3}));
  EXPECT_EQ(Elements<int64_t>(*y), (std::vector<int64_t>{5, 0, 0, 0, 0, 5, 0, 0, 0}));
  Value fidx = Floats({2}, {1.9f, std::numeric_limits<float>::quiet_NaN()});
  Value idepth = Int32s({1}, {2});
  y = RunIndexOp("OneHot", {&fidx, &idepth, &values}, Attrs({{"axis", 0}}));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 2}));
  EXPECT_EQ(Elements<int64_t>(*y), (std::vector<int64_t>{0, 0, 5, 0}));
}

TEST(OneHotTest, RefusesBadDepthAndValues) {
  Value idx = Int64s({2}, {0, 1});
  Value values = Floats({2}, {0, 1});
  Value huge = Int64s({}, {kInt64Max});
  ExpectInvalidArgument(RunIndexOp("OneHot", {&idx, &huge, &values}), "too large");
  Value negative = Int64s({}, {-3});
  ExpectInvalidArgument(RunIndexOp("OneHot", {&idx, &negative, &values}), "depth");
  Value nan = Floats({}, {std::numeric_limits<float>::quiet_NaN()});
  ExpectInvalidArgument(RunIndexOp("OneHot", {&idx, &nan, &values}), "depth");
  Value two = Int64s({2}, {2, 2});
  ExpectInvalidArgument(RunIndexOp("OneHot", {&idx, &two, &values}), "depth");
  Value depth = Int64s({}, {4});
  Value three = Floats({3}, {0, 1, 2});
  ExpectInvalidArgument(RunIndexOp("OneHot", {&idx, &depth, &three}), "values");
  ExpectInvalidArgument(RunIndexOp("OneHot", {&idx, &depth, &values}, Attrs({{"axis", 2}})),
                        "axis");
}

TEST(NonZeroTest, CoordinatesOfNonZeroElements) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Value x = Floats({2, 3}, {0, -0.0f, 2, nan, 0, 1});
  auto y = RunIndexOp("NonZero", {&x});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), DataType::kInt64);
  EXPECT_EQ(y->shape(), (Shape{2, 3}));
  EXPECT_EQ(Elements<int64_t>(*y), (std::vector<int64_t>{0, 1, 1, 2, 0, 2}));
  Value scalar = Int32s({}, {7});
  y = RunIndexOp("NonZero", {&scalar});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{1, 1}));
  Value none = Bools({4}, {0, 0, 0, 0});
  y = RunIndexOp("NonZero", {&none});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{1, 0}));
}

TEST(EyeLikeTest, DiagonalsAndTypes) {
  Value x = Int64s({3, 2}, {9, 9, 9, 9, 9, 9});
  auto y = RunIndexOp("EyeLike", {&x});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<int64_t>(*y), (std::vector<int64_t>{1, 0, 0, 1, 0, 0}));
  y = RunIndexOp("EyeLike", {&x}, Attrs({{"k", -1}, {"dtype", 1}}));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), DataType::kFp32);
  EXPECT_EQ(Elements<float>(*y), (std::vector<float>{0, 0, 1, 0, 0, 1}));
  for (int64_t k : {kInt64Max, std::numeric_limits<int64_t>::min(), int64_t{2}, int64_t{-3}}) {
    y = RunIndexOp("EyeLike", {&x}, Attrs({{"k", k}}));
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(Elements<int64_t>(*y), (std::vector<int64_t>(6, 0))) << k;
  }
  Value cube = Floats({1, 1, 1}, {0});
  ExpectInvalidArgument(RunIndexOp("EyeLike", {&cube}), "2-D");
  Node dbl = MakeNode("EyeLike", Attrs({{"dtype", 11}}), 18);  // DOUBLE
  EXPECT_EQ(FindOp("EyeLike")->check(dbl, Graph{}).code(), absl::StatusCode::kUnimplemented);
}

TEST(SizeAndCastLikeTest, Values) {
  Value x = Floats({2, 0, 3}, {});
  auto y = RunIndexOp("Size", {&x});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), Shape{});
  EXPECT_EQ(y->data<int64_t>()[0], 0);

  Value f = Floats({3}, {1.7f, -2.5f, 1e30f});
  Value like = Int32s({}, {0});
  y = RunIndexOp("CastLike", {&f, &like});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), DataType::kInt32);
  EXPECT_EQ(Elements<int32_t>(*y),
            (std::vector<int32_t>{1, -2, std::numeric_limits<int32_t>::max()}));
  Value flag = Bools({}, {0});
  y = RunIndexOp("CastLike", {&f, &flag});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<uint8_t>(*y), (std::vector<uint8_t>{1, 1, 1}));
}

TEST(DepthToSpaceTest, ModesMatchReshapeTransposeAndSpaceToDepthInvertsDcr) {
  const int64_t n = 2, c = 8, h = 3, w = 2, b = 2, oc = 2;
  Value x = Value::Allocate(DataType::kFp32, {n, c, h, w});
  for (int64_t i = 0; i < x.num_elements(); ++i) x.mutable_data<float>()[i] = i;
  for (const std::string mode : {"DCR", "CRD"}) {
    auto y = RunIndexOp("DepthToSpace", {&x}, Attrs({{"blocksize", b}}, {{"mode", mode}}));
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->shape(), (Shape{n, oc, h * b, w * b}));
    for (int64_t i0 = 0; i0 < n; ++i0) {
      for (int64_t ch = 0; ch < oc; ++ch) {
        for (int64_t yy = 0; yy < h * b; ++yy) {
          for (int64_t xx = 0; xx < w * b; ++xx) {
            const int64_t by = yy % b, bx = xx % b;
            const int64_t in_ch =
                mode == "DCR" ? (by * b + bx) * oc + ch : ch * b * b + by * b + bx;
            const float expected = ((i0 * c + in_ch) * h + yy / b) * w + xx / b;
            ASSERT_EQ(y->data<float>()[((i0 * oc + ch) * h * b + yy) * w * b + xx], expected)
                << mode;
          }
        }
      }
    }
    if (mode == "DCR") {
      auto back = RunIndexOp("SpaceToDepth", {&*y}, Attrs({{"blocksize", b}}));
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->shape(), x.shape());
      EXPECT_EQ(Elements<float>(*back), Elements<float>(x));
    }
  }
}

TEST(DepthToSpaceTest, RefusesBadBlocksAndShapes) {
  Value x = Floats({1, 3, 2, 2}, std::vector<float>(12, 0));
  ExpectInvalidArgument(RunIndexOp("DepthToSpace", {&x}, Attrs({{"blocksize", 2}})), "multiple");
  ExpectInvalidArgument(RunIndexOp("DepthToSpace", {&x}, Attrs({{"blocksize", 0}})), "blocksize");
  ExpectInvalidArgument(RunIndexOp("DepthToSpace", {&x}, Attrs({{"blocksize", kInt64Max}})),
                        "multiple");
  ExpectInvalidArgument(RunIndexOp("SpaceToDepth", {&x}, Attrs({{"blocksize", 3}})), "multiples");
  ExpectInvalidArgument(RunIndexOp("SpaceToDepth", {&x}), "blocksize");
  Value flat = Floats({3, 2, 2}, std::vector<float>(12, 0));
  ExpectInvalidArgument(RunIndexOp("SpaceToDepth", {&flat}, Attrs({{"blocksize", 1}})), "4-D");
  // Empty, but with dims that a huge block would overflow.
  Value empty = Floats({1, 0, int64_t{1} << 40, 1}, {});
  ExpectInvalidArgument(
      RunIndexOp("DepthToSpace", {&empty}, Attrs({{"blocksize", int64_t{1} << 30}})), "overflows");
  Node bad = MakeNode("DepthToSpace", Attrs({{"blocksize", 2}}, {{"mode", "XYZ"}}), 18);
  EXPECT_EQ(FindOp("DepthToSpace")->check(bad, Graph{}).code(), kInvalid);
}

TEST(CompressTest, AlongAnAxisAndFlattened) {
  Value x = Int64s({2, 3}, {1, 2, 3, 4, 5, 6});
  Value cond = Bools({2}, {0, 1});  // shorter than the axis: the rest is dropped
  auto y = RunIndexOp("Compress", {&x, &cond}, Attrs({{"axis", -1}}));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 1}));
  EXPECT_EQ(Elements<int64_t>(*y), (std::vector<int64_t>{2, 5}));
  Value flat_cond = Bools({6}, {1, 0, 0, 0, 1, 1});
  y = RunIndexOp("Compress", {&x, &flat_cond});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{3}));
  EXPECT_EQ(Elements<int64_t>(*y), (std::vector<int64_t>{1, 5, 6}));

  Value past_end = Bools({4}, {0, 0, 0, 1});
  ExpectInvalidArgument(RunIndexOp("Compress", {&x, &past_end}, Attrs({{"axis", 1}})),
                        "position 3");
  Value false_past_end = Bools({4}, {1, 0, 0, 0});
  y = RunIndexOp("Compress", {&x, &false_past_end}, Attrs({{"axis", 1}}));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(Elements<int64_t>(*y), (std::vector<int64_t>{1, 4}));
  Value matrix = Bools({1, 1}, {1});
  ExpectInvalidArgument(RunIndexOp("Compress", {&x, &matrix}), "1-D");
  ExpectInvalidArgument(RunIndexOp("Compress", {&x, &cond}, Attrs({{"axis", 2}})), "axis");
}

TEST(GlobalMaxPoolTest, MaximumPerPlane) {
  Value x = Floats({1, 2, 2, 2}, {-5, -3, -4, -9, 1, 8, 2, 0});
  auto y = RunIndexOp("GlobalMaxPool", {&x});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{1, 2, 1, 1}));
  EXPECT_EQ(Elements<float>(*y), (std::vector<float>{-3, 8}));
  Value flat = Floats({2, 2}, {1, 2, 3, 4});
  ExpectInvalidArgument(RunIndexOp("GlobalMaxPool", {&flat}), "rank");
  Value empty = Floats({1, 2, 0}, {});
  ExpectInvalidArgument(RunIndexOp("GlobalMaxPool", {&empty}), "no elements");
}

}  // namespace
}  // namespace tessera::engine::cpu
