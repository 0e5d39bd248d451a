// Einsum against naive loops (the ONNX project's own Einsum cases are all DOUBLE, which the engine
// does not load), on both of the kernel's paths: batched Sgemm and the direct loop.
#include <random>

#include "engine/cpu_op_runner_for_test.h"
#include "gtest/gtest.h"

namespace tessera::engine::cpu {
namespace {

StatusOr<Value> RunEinsum(const std::string& equation, const Inputs& inputs,
                          ThreadPool* pool = nullptr) {
  Attributes attrs;
  attrs.Set("equation", StringAttr(equation));
  return RunOp("Einsum", inputs, std::move(attrs), pool);
}

void ExpectNear(const Value& actual, const Shape& shape, const std::vector<float>& expected) {
  ASSERT_EQ(actual.shape(), shape);
  ASSERT_EQ(actual.num_elements(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(actual.data<float>()[i], expected[i], 1e-4f * (1 + std::abs(expected[i])))
        << "element " << i;
  }
}

TEST(EinsumTest, AttentionProductRunsAsBatchedGemmAndMatchesLoops) {
  std::mt19937 rng(7);
  const int64_t b = 2, h = 3, q = 5, k = 4, d = 8;
  Value x = RandomFloats({b, h, q, d}, &rng), y = RandomFloats({b, h, k, d}, &rng);
  std::vector<float> expected;
  for (int64_t i0 = 0; i0 < b * h; ++i0) {
    for (int64_t i = 0; i < q; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        float acc = 0;
        for (int64_t e = 0; e < d; ++e) {
          acc += x.data<float>()[(i0 * q + i) * d + e] * y.data<float>()[(i0 * k + j) * d + e];
        }
        expected.push_back(acc);
      }
    }
  }
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    auto out = RunEinsum("bhqd,bhkd->bhqk", {&x, &y}, p);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear(*out, {b, h, q, k}, expected);
  }
  // The same product with the output's dims permuted (the result is re-laid out).
  auto permuted = RunEinsum("bhqd,bhkd->hbkq", {&x, &y});
  ASSERT_TRUE(permuted.ok()) << permuted.status();
  ASSERT_EQ(permuted->shape(), (Shape{h, b, k, q}));
  for (int64_t i0 = 0; i0 < b; ++i0) {
    for (int64_t i1 = 0; i1 < h; ++i1) {
      for (int64_t i = 0; i < q; ++i) {
        for (int64_t j = 0; j < k; ++j) {
          EXPECT_NEAR(permuted->data<float>()[((i1 * b + i0) * k + j) * q + i],
                      expected[static_cast<size_t>(((i0 * h + i1) * q + i) * k + j)], 1e-4f);
        }
      }
    }
  }
}

TEST(EinsumTest, TransposeDiagonalSumAndImplicitOutputs) {
  Value m = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Value sq = Floats({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Value v = Floats({3}, {1, 2, 3}), w = Floats({3}, {4, 5, 6});
  ExpectNear(*RunEinsum("ij->ji", {&m}), {3, 2}, {1, 4, 2, 5, 3, 6});
  ExpectNear(*RunEinsum("ba", {&m}), {3, 2}, {1, 4, 2, 5, 3, 6});  // implicit: alphabetical
  ExpectNear(*RunEinsum("ii->i", {&sq}), {3}, {1, 5, 9});
  ExpectNear(*RunEinsum("ii", {&sq}), {}, {15});  // implicit trace
  ExpectNear(*RunEinsum("ij->", {&m}), {}, {21});
  ExpectNear(*RunEinsum("ij->i", {&m}), {2}, {6, 15});
  ExpectNear(*RunEinsum("i,i", {&v, &w}), {}, {32});
  ExpectNear(*RunEinsum("i,j->ij", {&v, &w}), {3, 3}, {4, 5, 6, 8, 10, 12, 12, 15, 18});
  ExpectNear(*RunEinsum("i, j, i -> j", {&v, &w, &v}), {3}, {56, 70, 84});
  ExpectNear(*RunEinsum("ij,j->i", {&m, &v}), {2}, {14, 32});
}

TEST(EinsumTest, EllipsisDimsBroadcastLikeNumpy) {
  std::mt19937 rng(11);
  Value a = RandomFloats({2, 1, 3, 4}, &rng), b = RandomFloats({5, 4, 2}, &rng);
  auto out = RunEinsum("...ij,...jk->...ik", {&a, &b});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->shape(), (Shape{2, 5, 3, 2}));
  for (int64_t p = 0; p < 2; ++p) {
    for (int64_t r = 0; r < 5; ++r) {
      for (int64_t i = 0; i < 3; ++i) {
        for (int64_t k = 0; k < 2; ++k) {
          float acc = 0;
          for (int64_t j = 0; j < 4; ++j) {
            acc += a.data<float>()[(p * 3 + i) * 4 + j] * b.data<float>()[(r * 4 + j) * 2 + k];
          }
          EXPECT_NEAR(out->data<float>()[((p * 5 + r) * 3 + i) * 2 + k], acc, 1e-5f);
        }
      }
    }
  }
}

TEST(EinsumTest, BadEquationsAndInputsAreRefusedByName) {
  Value m = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Value v = Floats({4}, {1, 2, 3, 4});
  Value ints = Int64s({2}, {1, 2});
  ExpectInvalidArgument(RunEinsum("ij,jk->ik", {&m}), "2 terms for 1 inputs");
  ExpectInvalidArgument(RunEinsum("ij,j->i", {&m, &v}), "labelled 'j'");
  ExpectInvalidArgument(RunEinsum("i1->i", {&v}), "not a letter");
  ExpectInvalidArgument(RunEinsum("ijk->i", {&m}), "does not fit");
  ExpectInvalidArgument(RunEinsum("ij->iz", {&m}), "names a label twice or one no input has");
  ExpectInvalidArgument(RunEinsum("ij->ii", {&m}), "names a label twice");
  ExpectInvalidArgument(RunEinsum("......->", {&m}), "two ellipses");
  ExpectInvalidArgument(RunEinsum("i->i", {&ints}), "expected FP32");
}

}  // namespace
}  // namespace tessera::engine::cpu
