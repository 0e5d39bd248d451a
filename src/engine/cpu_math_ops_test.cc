// Tests of the CPU math kernels the ONNX node tests leave uncovered: edge values (round half to
// even, |INT64_MIN|, overflow-safe Softplus, numerically stable LogSoftmax and LogSumExp), the
// opset < 13 axis semantics, the integer paths, the reductions against a naive double-precision
// walk on the pool, and the INVALID_ARGUMENT paths for bad inputs.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "engine/cpu/ops.h"
#include "engine/cpu_op_runner_for_test.h"
#include "gtest/gtest.h"

namespace tessera::engine::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Value RandomFloatsBetween(Shape shape, float lo, float hi, std::mt19937* rng) {
  Value v = Value::Allocate(DataType::kFp32, shape);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < v.num_elements(); ++i) v.mutable_data<float>()[i] = dist(*rng);
  return v;
}

// The kernels at opset 17 unless a test names another (axis rules changed at 13).
StatusOr<Value> RunMathOp(const std::string& op_type, const Inputs& inputs, Attributes attrs = {},
                          int opset = 17, ThreadPool* pool = nullptr) {
  return RunOp(op_type, inputs, std::move(attrs), pool, opset);
}

void ExpectFloats(const Value& v, const std::vector<float>& expected, float tolerance = 1e-6f) {
  ASSERT_EQ(v.dtype(), DataType::kFp32);
  const std::vector<float> actual = Elements<float>(v);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(actual[i])) << "at " << i;
    } else if (std::isinf(expected[i])) {
      EXPECT_EQ(actual[i], expected[i]) << "at " << i;
    } else {
      EXPECT_NEAR(actual[i], expected[i], tolerance * (1 + std::fabs(expected[i]))) << "at " << i;
    }
  }
}

TEST(UnaryOpsTest, EdgeValues) {
  Value halves = Floats({6}, {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 2.6f});
  auto round = RunMathOp("Round", {&halves});
  ASSERT_TRUE(round.ok()) << round.status();
  ExpectFloats(*round, {0, 2, 2, 0, -2, 3});  // half to even, not away from zero

  Value big = Floats({4}, {100, -100, 0, 1});
  auto softplus = RunMathOp("Softplus", {&big});
  ASSERT_TRUE(softplus.ok()) << softplus.status();
  ExpectFloats(*softplus, {100, std::exp(-100.0f), std::log(2.0f), std::log1p(std::exp(1.0f))});

  Value signs = Floats({4}, {-3, 0, 2, kNaN});
  auto sign = RunMathOp("Sign", {&signs});
  ASSERT_TRUE(sign.ok()) << sign.status();
  ExpectFloats(*sign, {-1, 0, 1, kNaN});

  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  Value ints = Int64s({4}, {-5, 0, 7, kMin});
  auto abs = RunMathOp("Abs", {&ints});
  ASSERT_TRUE(abs.ok()) << abs.status();
  EXPECT_EQ(Elements<int64_t>(*abs), (std::vector<int64_t>{5, 0, 7, kMin}));  // wraps, as numpy
  Value ints32 = Int32s({3}, {-5, 0, 7});
  auto sign32 = RunMathOp("Sign", {&ints32});
  ASSERT_TRUE(sign32.ok()) << sign32.status();
  EXPECT_EQ(Elements<int32_t>(*sign32), (std::vector<int32_t>{-1, 0, 1}));
}

TEST(UnaryOpsTest, AttributesOfTheActivations) {
  Value x = Floats({5}, {-2, -0.5f, 0, 0.5f, 2});
  Attributes alpha2;
  alpha2.Set("alpha", FloatAttr(2));
  auto elu = RunMathOp("Elu", {&x}, alpha2);
  ASSERT_TRUE(elu.ok()) << elu.status();
  ExpectFloats(*elu, {2 * std::expm1(-2.0f), 2 * std::expm1(-0.5f), 0, 0.5f, 2});
  auto celu = RunMathOp("Celu", {&x}, alpha2);
  ASSERT_TRUE(celu.ok()) << celu.status();
  ExpectFloats(*celu, {2 * std::expm1(-1.0f), 2 * std::expm1(-0.25f), 0, 0.5f, 2});
  auto thresholded = RunMathOp("ThresholdedRelu", {&x}, alpha2);
  ASSERT_TRUE(thresholded.ok()) << thresholded.status();
  ExpectFloats(*thresholded, {0, 0, 0, 0, 0});  // strictly above alpha
  Attributes selu;
  selu.Set("alpha", FloatAttr(2));
  selu.Set("gamma", FloatAttr(3));
  auto s = RunMathOp("Selu", {&x}, selu);
  ASSERT_TRUE(s.ok()) << s.status();
  ExpectFloats(*s, {6 * std::expm1(-2.0f), 6 * std::expm1(-0.5f), 0, 1.5f, 6});
  Attributes shrink;
  shrink.Set("bias", FloatAttr(0.25f));
  shrink.Set("lambd", FloatAttr(1));
  auto sh = RunMathOp("Shrink", {&x}, shrink);
  ASSERT_TRUE(sh.ok()) << sh.status();
  ExpectFloats(*sh, {-1.75f, 0, 0, 0, 1.75f});
  Attributes zero;
  zero.Set("alpha", FloatAttr(0));
  ExpectInvalidArgument(RunMathOp("Celu", {&x}, zero), "alpha");
}

TEST(UnaryOpsTest, IsNaNAndIsInfGiveBool) {
  Value x = Floats({5}, {1, kNaN, kInf, -kInf, 0});
  auto nan = RunMathOp("IsNaN", {&x});
  ASSERT_TRUE(nan.ok()) << nan.status();
  ASSERT_EQ(nan->dtype(), DataType::kBool);
  EXPECT_EQ(Elements<uint8_t>(*nan), (std::vector<uint8_t>{0, 1, 0, 0, 0}));
  auto inf = RunMathOp("IsInf", {&x});
  ASSERT_TRUE(inf.ok()) << inf.status();
  EXPECT_EQ(Elements<uint8_t>(*inf), (std::vector<uint8_t>{0, 0, 1, 1, 0}));
  Attributes positive_only;
  positive_only.Set("detect_negative", IntAttr(0));
  auto pos = RunMathOp("IsInf", {&x}, positive_only);
  ASSERT_TRUE(pos.ok()) << pos.status();
  EXPECT_EQ(Elements<uint8_t>(*pos), (std::vector<uint8_t>{0, 0, 1, 0, 0}));
}

TEST(UnaryOpsTest, WrongDtypesAreInvalidArgument) {
  Value ints = Int64s({2}, {1, 2});
  ExpectInvalidArgument(RunMathOp("Log", {&ints}), "expected FP32");
  ExpectInvalidArgument(RunMathOp("IsNaN", {&ints}), "expected FP32");
  Value flags = Make<uint8_t>(DataType::kBool, {2}, {1, 0});
  ExpectInvalidArgument(RunMathOp("Abs", {&flags}), "BOOL");
  ExpectInvalidArgument(RunMathOp("Sin", {}), "missing input 0");
}

TEST(UnaryOpsTest, ThreadedRunMatchesTheFormula) {
  std::mt19937 rng(5);
  Value x = RandomFloatsBetween({3, 100000}, -4, 4, &rng);
  ThreadPool pool(3);
  auto y = RunMathOp("Cosh", {&x}, {}, 17, &pool);
  ASSERT_TRUE(y.ok()) << y.status();
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    ASSERT_EQ(y->data<float>()[i], std::cosh(x.data<float>()[i])) << i;
  }
}

TEST(ModTest, PythonAndCSignConventions) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  Value a = Int64s({6}, {7, -7, 7, -7, 5, kMin});
  Value b = Int64s({6}, {3, 3, -3, -3, 0, -1});
  auto python = RunMathOp("Mod", {&a, &b});
  ASSERT_TRUE(python.ok()) << python.status();
  // The divisor's sign; a zero divisor gives 0 instead of trapping, and so does INT64_MIN % -1.
  EXPECT_EQ(Elements<int64_t>(*python), (std::vector<int64_t>{1, 2, -2, -1, 0, 0}));
  Attributes fmod;
  fmod.Set("fmod", IntAttr(1));
  auto c = RunMathOp("Mod", {&a, &b}, fmod);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(Elements<int64_t>(*c), (std::vector<int64_t>{1, -1, 1, -1, 0, 0}));

  Value a32 = Int32s({2, 2}, {-7, 8, 9, -10});
  Value b32 = Int32s({2}, {4, -3});  // broadcast over rows
  auto m32 = RunMathOp("Mod", {&a32, &b32});
  ASSERT_TRUE(m32.ok()) << m32.status();
  EXPECT_EQ(Elements<int32_t>(*m32), (std::vector<int32_t>{1, -1, 1, -1}));

  Value x = Floats({2}, {-7.5f, 7.5f});
  Value y = Floats({1}, {2});
  auto f = RunMathOp("Mod", {&x, &y}, fmod);
  ASSERT_TRUE(f.ok()) << f.status();
  ExpectFloats(*f, {-1.5f, 1.5f});
  ExpectInvalidArgument(RunMathOp("Mod", {&x, &y}), "fmod=1");
  ExpectInvalidArgument(RunMathOp("Mod", {&a, &y}), "expected INT64");
  Value wrong = Int64s({4}, {1, 2, 3, 4});
  ExpectInvalidArgument(RunMathOp("Mod", {&a, &wrong}), "do not broadcast");
}

TEST(PReluTest, BroadcastsTheSlopePerChannel) {
  Value x = Floats({1, 2, 2}, {-1, 2, -3, 4});
  Value slope = Floats({2, 1}, {0.5f, 0.25f});
  auto y = RunMathOp("PRelu", {&x, &slope});
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectFloats(*y, {-0.5f, 2, -0.75f, 4});
  Value bad = Floats({3}, {1, 2, 3});
  ExpectInvalidArgument(RunMathOp("PRelu", {&x, &bad}), "do not broadcast");
  Value ints = Int64s({2}, {1, 2});
  ExpectInvalidArgument(RunMathOp("PRelu", {&x, &ints}), "slope");
}

TEST(SumMeanTest, VariadicBroadcastAndDtypes) {
  Value a = Floats({2, 2}, {1, 2, 3, 4});
  Value b = Floats({2}, {10, 20});
  Value c = Floats({}, {100});
  auto sum = RunMathOp("Sum", {&a, &b, &c});
  ASSERT_TRUE(sum.ok()) << sum.status();
  ExpectFloats(*sum, {111, 122, 113, 124});
  auto mean = RunMathOp("Mean", {&a, &b, &c});
  ASSERT_TRUE(mean.ok()) << mean.status();
  ExpectFloats(*mean, {37, 122 / 3.0f, 113 / 3.0f, 124 / 3.0f});
  auto one = RunMathOp("Mean", {&a});
  ASSERT_TRUE(one.ok()) << one.status();
  ExpectFloats(*one, {1, 2, 3, 4});
  Value i = Int32s({2}, {1, 2}), j = Int32s({2}, {3, 4});
  auto int_sum = RunMathOp("Sum", {&i, &j});
  ASSERT_TRUE(int_sum.ok()) << int_sum.status();
  EXPECT_EQ(Elements<int32_t>(*int_sum), (std::vector<int32_t>{4, 6}));
  ExpectInvalidArgument(RunMathOp("Mean", {&i, &j}), "expected FP32");
  ExpectInvalidArgument(RunMathOp("Sum", {&a, &i}), "expected FP32");
  ExpectInvalidArgument(RunMathOp("Sum", {}), "missing input 0");
  Value three = Floats({3}, {1, 2, 3});
  ExpectInvalidArgument(RunMathOp("Mean", {&a, &three}), "do not broadcast");
}

TEST(LogSoftmaxHardmaxTest, AxisSemanticsByOpset) {
  Value x = Floats({2, 2}, {0, 1, 2, 2});
  Attributes axis0;
  axis0.Set("axis", IntAttr(0));
  // Opset 13, axis 0: per column.
  auto columns = RunMathOp("LogSoftmax", {&x}, axis0, 13);
  ASSERT_TRUE(columns.ok()) << columns.status();
  const float l02 = std::log(1 + std::exp(2.0f)), l12 = std::log(std::exp(1.0f) + std::exp(2.0f));
  ExpectFloats(*columns, {-l02, 1 - l12, 2 - l02, 2 - l12}, 1e-5f);
  // Opset 11, axis 0: everything is one row.
  auto whole = RunMathOp("LogSoftmax", {&x}, axis0, 11);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const float lall = std::log(1 + std::exp(1.0f) + 2 * std::exp(2.0f));
  ExpectFloats(*whole, {-lall, 1 - lall, 2 - lall, 2 - lall}, 1e-5f);
  auto hard_columns = RunMathOp("Hardmax", {&x}, axis0, 13);
  ASSERT_TRUE(hard_columns.ok()) << hard_columns.status();
  ExpectFloats(*hard_columns, {0, 0, 1, 1});
  auto hard_whole = RunMathOp("Hardmax", {&x}, axis0, 11);
  ASSERT_TRUE(hard_whole.ok()) << hard_whole.status();
  ExpectFloats(*hard_whole, {0, 0, 1, 0});  // the first of the tied maxima
  // Default axis: the last in opset 13, 1 (here the same rows) before.
  auto rows = RunMathOp("Hardmax", {&x}, {}, 11);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ExpectFloats(*rows, {0, 1, 1, 0});

  // Large logits keep full precision: the shift is subtracted before the log is.
  Value large = Floats({3}, {10000, 10001, 10002});
  auto l = RunMathOp("LogSoftmax", {&large});
  ASSERT_TRUE(l.ok()) << l.status();
  const float tail = std::log(1 + std::exp(-1.0f) + std::exp(-2.0f));
  ExpectFloats(*l, {-2 - tail, -1 - tail, -tail}, 1e-6f);

  Value scalar = Floats({}, {1});
  ExpectInvalidArgument(RunMathOp("LogSoftmax", {&scalar}), "of a scalar");
  Attributes axis2;
  axis2.Set("axis", IntAttr(2));
  ExpectInvalidArgument(RunMathOp("Hardmax", {&x}, axis2), "out of range");
  Value ints = Int64s({2}, {1, 2});
  ExpectInvalidArgument(RunMathOp("LogSoftmax", {&ints}), "expected FP32");
}

// ReduceProd/L1/L2/SumSquare/LogSum/LogSumExp of `x` over `reduced` (keepdims layout), in
// double precision.
std::vector<float> NaiveReduce(const std::string& op, const Value& x,
                               const std::vector<bool>& reduced) {
  Shape kept = x.shape();
  for (size_t d = 0; d < kept.size(); ++d) kept[d] = reduced[d] ? 1 : kept[d];
  std::vector<double> acc(ElementCount(kept), op == "ReduceProd" ? 1.0 : 0.0);
  std::vector<int64_t> coord(x.rank(), 0);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    int64_t offset = 0;
    for (int d = 0; d < x.rank(); ++d) offset = offset * kept[d] + (reduced[d] ? 0 : coord[d]);
    const double v = x.data<float>()[i];
    if (op == "ReduceProd") acc[offset] *= v;
    if (op == "ReduceL1") acc[offset] += std::fabs(v);
    if (op == "ReduceL2" || op == "ReduceSumSquare") acc[offset] += v * v;
    if (op == "ReduceLogSum") acc[offset] += v;
    if (op == "ReduceLogSumExp") acc[offset] += std::exp(v);
    for (int d = x.rank() - 1; d >= 0 && ++coord[d] == x.dim(d); --d) coord[d] = 0;
  }
  std::vector<float> out;
  for (double a : acc) {
    if (op == "ReduceL2") a = std::sqrt(a);
    if (op == "ReduceLogSum" || op == "ReduceLogSumExp") a = std::log(a);
    out.push_back(static_cast<float>(a));
  }
  return out;
}

TEST(ReduceOpsTest, MatchNaiveOverAxisSetsThreadsAndAxesInputs) {
  std::mt19937 rng(11);
  const Value x = RandomFloatsBetween({3, 4, 5}, 0.5f, 1.5f, &rng);
  const std::vector<std::vector<int64_t>> axis_sets = {{}, {1}, {-1}, {0, 2}, {0, 1}};
  ThreadPool pool(3);
  for (const char* op : {"ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
                         "ReduceLogSumExp"}) {
    for (const std::vector<int64_t>& axes : axis_sets) {
      std::vector<bool> reduced(3, axes.empty());
      for (int64_t a : axes) reduced[a < 0 ? a + 3 : a] = true;
      const std::vector<float> expected = NaiveReduce(op, x, reduced);
      for (bool keepdims : {false, true}) {
        // Axes as the attribute (opset 17) and as the second input (opset 18).
        Attributes attrs;
        attrs.Set("keepdims", IntAttr(keepdims ? 1 : 0));
        Attributes with_axes = attrs;
        if (!axes.empty()) with_axes.Set("axes", IntsAttr(axes));
        auto by_attr = RunMathOp(op, {&x}, with_axes, 17, &pool);
        ASSERT_TRUE(by_attr.ok()) << op << ": " << by_attr.status();
        ExpectFloats(*by_attr, expected, 1e-5f);
        Value axes_value = Int64s({static_cast<int64_t>(axes.size())}, axes);
        auto by_input = RunMathOp(op, {&x, &axes_value}, attrs, 18);
        ASSERT_TRUE(by_input.ok()) << op << ": " << by_input.status();
        EXPECT_EQ(by_input->shape(), by_attr->shape()) << op;
        ExpectFloats(*by_input, expected, 1e-5f);
        if (!keepdims) continue;
        Shape kept = x.shape();
        for (int d = 0; d < 3; ++d) kept[d] = reduced[d] ? 1 : kept[d];
        EXPECT_EQ(by_attr->shape(), kept) << op;
      }
    }
  }
}

TEST(ReduceOpsTest, EdgeCasesIntegersAndErrors) {
  // LogSumExp of large values neither overflows nor loses them; an all -inf slice gives -inf.
  Value big = Floats({2, 2}, {1000, 1000, -kInf, -kInf});
  Attributes last;
  last.Set("axes", IntsAttr({1}));
  last.Set("keepdims", IntAttr(0));
  auto lse = RunMathOp("ReduceLogSumExp", {&big}, last);
  ASSERT_TRUE(lse.ok()) << lse.status();
  ExpectFloats(*lse, {1000 + std::log(2.0f), -kInf});

  Value ints = Int64s({2, 3}, {-1, 2, -3, 4, -5, 6});
  auto l1 = RunMathOp("ReduceL1", {&ints}, last);
  ASSERT_TRUE(l1.ok()) << l1.status();
  EXPECT_EQ(Elements<int64_t>(*l1), (std::vector<int64_t>{6, 15}));
  auto prod = RunMathOp("ReduceProd", {&ints}, last);
  ASSERT_TRUE(prod.ok()) << prod.status();
  EXPECT_EQ(Elements<int64_t>(*prod), (std::vector<int64_t>{6, -120}));
  auto squares = RunMathOp("ReduceSumSquare", {&ints}, last);
  ASSERT_TRUE(squares.ok()) << squares.status();
  EXPECT_EQ(Elements<int64_t>(*squares), (std::vector<int64_t>{14, 77}));
  auto l2 = RunMathOp("ReduceL2", {&ints}, last);  // sqrt(14), sqrt(77), truncated
  ASSERT_TRUE(l2.ok()) << l2.status();
  EXPECT_EQ(Elements<int64_t>(*l2), (std::vector<int64_t>{3, 8}));
  ExpectInvalidArgument(RunMathOp("ReduceLogSum", {&ints}), "expected FP32");
  ExpectInvalidArgument(RunMathOp("ReduceLogSumExp", {&ints}), "expected FP32");

  // An empty reduction gives each op's identity.
  Value empty = Value::Allocate(DataType::kFp32, {2, 0});
  auto empty_prod = RunMathOp("ReduceProd", {&empty}, last);
  ASSERT_TRUE(empty_prod.ok()) << empty_prod.status();
  ExpectFloats(*empty_prod, {1, 1});
  auto empty_log = RunMathOp("ReduceLogSumExp", {&empty}, last);
  ASSERT_TRUE(empty_log.ok()) << empty_log.status();
  ExpectFloats(*empty_log, {-kInf, -kInf});

  Value x = Floats({2}, {1, 2});
  Attributes noop;
  noop.Set("noop_with_empty_axes", IntAttr(1));
  auto same = RunMathOp("ReduceL2", {&x}, noop);
  ASSERT_TRUE(same.ok()) << same.status();
  ExpectFloats(*same, {1, 2});
  Attributes bad_axis;
  bad_axis.Set("axes", IntsAttr({1}));
  ExpectInvalidArgument(RunMathOp("ReduceSumSquare", {&x}, bad_axis), "out of range");
  Value float_axes = Floats({1}, {0});
  ExpectInvalidArgument(RunMathOp("ReduceProd", {&x, &float_axes}, {}, 18), "1-D INT64");
}

TEST(ArgMaxMinTest, KeepdimsTiesNaNAndIntegers) {
  Value x = Floats({2, 3}, {1, 5, 5, 7, 2, 7});
  Attributes axis1;
  axis1.Set("axis", IntAttr(1));
  auto first = RunMathOp("ArgMax", {&x}, axis1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->dtype(), DataType::kInt64);
  EXPECT_EQ(first->shape(), (Shape{2, 1}));
  EXPECT_EQ(Elements<int64_t>(*first), (std::vector<int64_t>{1, 0}));
  Attributes last = axis1;
  last.Set("select_last_index", IntAttr(1));
  last.Set("keepdims", IntAttr(0));
  auto last_max = RunMathOp("ArgMax", {&x}, last);
  ASSERT_TRUE(last_max.ok()) << last_max.status();
  EXPECT_EQ(last_max->shape(), (Shape{2}));
  EXPECT_EQ(Elements<int64_t>(*last_max), (std::vector<int64_t>{2, 2}));
  auto columns = RunMathOp("ArgMin", {&x});  // axis 0 by default
  ASSERT_TRUE(columns.ok()) << columns.status();
  EXPECT_EQ(columns->shape(), (Shape{1, 3}));
  EXPECT_EQ(Elements<int64_t>(*columns), (std::vector<int64_t>{0, 1, 0}));

  Value nan = Floats({4}, {1, kNaN, 3, kNaN});
  auto nan_max = RunMathOp("ArgMax", {&nan});
  ASSERT_TRUE(nan_max.ok()) << nan_max.status();
  EXPECT_EQ(Elements<int64_t>(*nan_max), (std::vector<int64_t>{1}));  // as numpy.argmax
  auto nan_min = RunMathOp("ArgMin", {&nan});
  ASSERT_TRUE(nan_min.ok()) << nan_min.status();
  EXPECT_EQ(Elements<int64_t>(*nan_min), (std::vector<int64_t>{1}));

  Value ints = Int32s({4}, {3, -9, 4, -9});
  Attributes select_last;
  select_last.Set("select_last_index", IntAttr(1));
  auto int_min = RunMathOp("ArgMin", {&ints}, select_last);
  ASSERT_TRUE(int_min.ok()) << int_min.status();
  EXPECT_EQ(Elements<int64_t>(*int_min), (std::vector<int64_t>{3}));

  Attributes axis2;
  axis2.Set("axis", IntAttr(2));
  ExpectInvalidArgument(RunMathOp("ArgMax", {&x}, axis2), "out of range");
  Value scalar = Floats({}, {1});
  ExpectInvalidArgument(RunMathOp("ArgMin", {&scalar}), "out of range");
  Value empty = Value::Allocate(DataType::kFp32, {2, 0});
  ExpectInvalidArgument(RunMathOp("ArgMax", {&empty}, axis1), "is empty");
  Value flags = Make<uint8_t>(DataType::kBool, {2}, {1, 0});
  ExpectInvalidArgument(RunMathOp("ArgMax", {&flags}), "BOOL");
}

TEST(ArgMaxMinTest, ThreadedRunMatchesSingleThread) {
  std::mt19937 rng(17);
  Value x = RandomFloatsBetween({64, 300, 7}, -1, 1, &rng);
  ThreadPool pool(3);
  for (int64_t axis : {0, 1, 2}) {
    Attributes attrs;
    attrs.Set("axis", IntAttr(axis));
    auto serial = RunMathOp("ArgMax", {&x}, attrs);
    auto threaded = RunMathOp("ArgMax", {&x}, attrs, 17, &pool);
    ASSERT_TRUE(serial.ok() && threaded.ok());
    EXPECT_EQ(Elements<int64_t>(*serial), Elements<int64_t>(*threaded)) << axis;
    // Spot-check against a direct scan.
    const std::vector<int64_t> got = Elements<int64_t>(*serial);
    if (axis == 1) {
      for (int64_t o = 0; o < 64; o += 9) {
        int64_t best = 0;
        for (int64_t r = 1; r < 300; ++r) {
          if (x.data<float>()[(o * 300 + r) * 7] > x.data<float>()[(o * 300 + best) * 7]) best = r;
        }
        EXPECT_EQ(got[o * 7], best) << o;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::engine::cpu
