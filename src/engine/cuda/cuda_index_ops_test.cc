// The CUDA index ops (cuda_index_ops.cc, index_kernels.cu) and LeakyRelu against the CPU engine,
// in FP32 and FP16 with CUDA-graph replay (CompareWithCpu): integer arithmetic, comparisons and
// logic, CumSum and Split. Integer and BOOL results must match exactly. Needs a GPU.
#include <string>
#include <vector>

#include "engine/cuda/cuda_op_test_util.h"
#include "gtest/gtest.h"

namespace tessera::engine {
namespace {

// RoBERTa's position ids, as PyTorch exports them: (cumsum(ids != pad) * (ids != pad)) + pad,
// computed on the device from the token ids.
TEST(CudaIndexOpsTest, RobertaPositionIdsChain) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.IntInput("ids", {3, 9}).Output("positions", onnx::TensorProto::INT64);
  b.IntInit("pad", {}, {1}).IntInit("axis", {}, {1});
  b.Node("Equal", {"ids", "pad"}, {"is_pad"});
  b.Node("Not", {"is_pad"}, {"keep"});
  IntAttr(b.Node("Cast", {"keep"}, {"mask"}), "to", 6);  // INT32
  b.Node("CumSum", {"mask", "axis"}, {"sums"});
  b.Node("Mul", {"sums", "mask"}, {"masked"});
  IntAttr(b.Node("Cast", {"masked"}, {"wide"}), "to", 7);  // INT64
  b.Node("Add", {"wide", "pad"}, {"positions"});
  // Ids in [0, 4): about a quarter are the pad id.
  CompareWithCpu(b.Write("roberta_positions"), {{"ids", {3, 9}, 0, 4, true}});
}

TEST(CudaIndexOpsTest, IntegerArithmeticBroadcastsAndTruncates) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.IntInput("a", {2, 3, 4}).IntInput("b", {3, 1}).Output("y", onnx::TensorProto::INT64);
  b.Node("Sub", {"a", "b"}, {"d"});
  b.Node("Mul", {"d", "b"}, {"m"});
  b.Node("Div", {"m", "b"}, {"q"});  // b holds zeros and negatives: 0 and truncation toward 0
  b.Node("Add", {"q", "a"}, {"y"});
  CompareWithCpu(b.Write("int_arith"),
                 {{"a", {2, 3, 4}, -50, 50, true}, {"b", {3, 1}, -3, 3, true}});
}

TEST(CudaIndexOpsTest, ComparisonsAndLogicOnFloats) {
  TESSERA_REQUIRE_GPU();
  // Small integers made FLOAT on the device: exact in FP16 too, so FP16 storage cannot flip a
  // comparison of values closer than its rounding.
  ModelBuilder b(13);
  b.IntInput("ai", {2, 5, 6}).IntInput("bi", {5, 1}).Output("y");
  IntAttr(b.Node("Cast", {"ai"}, {"a"}), "to", 1);
  IntAttr(b.Node("Cast", {"bi"}, {"b"}), "to", 1);
  b.Node("Less", {"a", "b"}, {"lt"});
  b.Node("GreaterOrEqual", {"a", "b"}, {"ge"});
  b.Node("Greater", {"a", "b"}, {"gt"});
  b.Node("LessOrEqual", {"a", "b"}, {"le"});
  b.Node("Or", {"lt", "gt"}, {"ne"});
  b.Node("And", {"ge", "le"}, {"eq"});
  b.Node("Xor", {"ne", "eq"}, {"always"});  // exactly one holds: all ones
  b.Node("And", {"always", "lt"}, {"sel"});
  IntAttr(b.Node("Cast", {"sel"}, {"y"}), "to", 1);
  CompareWithCpu(b.Write("compare_float"),
                 {{"ai", {2, 5, 6}, -4, 4, true}, {"bi", {5, 1}, -4, 4, true}});
}

TEST(CudaIndexOpsTest, CumSumExclusiveReverseOnFloats) {
  TESSERA_REQUIRE_GPU();
  for (int exclusive : {0, 1}) {
    for (int reverse : {0, 1}) {
      ModelBuilder b(14);
      b.Input("x", {2, 7, 3}).Output("y");
      b.IntInit("axis", {}, {-2});
      auto* n = b.Node("CumSum", {"x", "axis"}, {"y"});
      IntAttr(n, "exclusive", exclusive);
      IntAttr(n, "reverse", reverse);
      SCOPED_TRACE("exclusive " + std::to_string(exclusive) + " reverse " +
                   std::to_string(reverse));
      CompareWithCpu(b.Write("cumsum_" + std::to_string(exclusive) + std::to_string(reverse)),
                     {{"x", {2, 7, 3}}});
    }
  }
}

TEST(CudaIndexOpsTest, SplitBySizesAndIntoEqualParts) {
  TESSERA_REQUIRE_GPU();
  {  // GPT-2's fused QKV: [batch, seq, 3 * hidden] into three equal parts on the last axis.
    ModelBuilder b(13);
    b.Input("x", {2, 5, 24}).Output("q").Output("k").Output("v");
    IntAttr(b.Node("Split", {"x"}, {"q", "k", "v"}), "axis", -1);
    CompareWithCpu(b.Write("split_equal"), {{"x", {2, 5, 24}}});
  }
  {  // Sizes from a constant input, on a middle axis, with an empty part.
    ModelBuilder b(13);
    b.Input("x", {3, 9, 4}).Output("a").Output("e").Output("c");
    b.IntInit("sizes", {3}, {2, 0, 7});
    IntAttr(b.Node("Split", {"x", "sizes"}, {"a", "e", "c"}), "axis", 1);
    CompareWithCpu(b.Write("split_sizes"), {{"x", {3, 9, 4}}});
  }
  {  // The first axis: each part is one contiguous copy.
    ModelBuilder b(13);
    b.Input("x", {4, 6}).Output("a").Output("c");
    b.Node("Split", {"x"}, {"a", "c"});
    CompareWithCpu(b.Write("split_outer"), {{"x", {4, 6}}});
  }
}

TEST(CudaIndexOpsTest, LeakyReluAlpha) {
  TESSERA_REQUIRE_GPU();
  ModelBuilder b(13);
  b.Input("x", {4, 33}).Output("y");
  FloatAttr(b.Node("LeakyRelu", {"x"}, {"y"}), "alpha", 0.2f);
  CompareWithCpu(b.Write("leaky_alpha"), {{"x", {4, 33}, -3, 3}});
}

}  // namespace
}  // namespace tessera::engine
