// kConvIntegerToFloat with UINT8 weights through oneDNN (dnnl_integer_conv.cc: weights - 128 and
// each output's correction, shifted_conv_sums.h) against the own kernel, node by node: one group,
// grouped and depthwise convolutions (one and two output channels per group); 1 x 1, strided,
// dilated and padded windows; UINT8 and INT8 activations; with a bias, a residual and a Relu, on
// 2 threads so that the work is split. Both finish the same INT32 sums the same way: exact.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/cpu_op_runner_for_test.h"
#include "engine/graph.h"
#include "engine/thread_pool.h"
#include "gtest/gtest.h"

namespace tessera::engine {
namespace {

#ifdef TESSERA_HAVE_ONEDNN
struct ShiftedConvCase {
  std::string name;
  int cin = 4, cout = 6, group = 1, kernel = 3, side = 9, stride = 1, dilation = 1, pad = 1;
  int w_zero = 131, x_zero = 117;
  bool signed_x = false, bias = true, residual = false, relu = true;
};

std::vector<ShiftedConvCase> Cases() {
  return {
      {.name = "one_group"},
      {.name = "one_group_deep", .cin = 32, .cout = 8, .residual = true},
      {.name = "pointwise_strided", .cin = 16, .cout = 24, .kernel = 1, .stride = 2, .pad = 0},
      {.name = "two_groups", .cin = 8, .cout = 6, .group = 2, .w_zero = 128, .relu = false},
      {.name = "two_groups_deep", .cin = 64, .cout = 4, .group = 2, .bias = false},
      {.name = "depthwise", .cin = 16, .cout = 16, .group = 16, .residual = true},
      {.name = "depthwise_strided_dilated",
       .cin = 16,
       .cout = 16,
       .group = 16,
       .side = 10,
       .stride = 2,
       .dilation = 2,
       .pad = 2,
       .w_zero = 0},
      {.name = "depthwise_signed_x",
       .cin = 24,
       .cout = 24,
       .group = 24,
       .x_zero = -5,
       .signed_x = true},
      {.name = "depthwise_multiplier_two", .cin = 8, .cout = 16, .group = 8, .stride = 2},
  };
}

// The node and its inputs: x [2, cin, side, side], UINT8 w [cout, cin / group, k, k], per-channel
// w_scale, and the case's bias, residual and Relu.
struct ShiftedConvNode {
  explicit ShiftedConvNode(const ShiftedConvCase& c) {
    const int64_t batch = 2;
    const int out_side = (c.side + 2 * c.pad - c.dilation * (c.kernel - 1) - 1) / c.stride + 1;
    std::vector<uint8_t> x(batch * c.cin * c.side * c.side);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>((i * 97 + i / 7) % 256);
    std::vector<uint8_t> w(static_cast<size_t>(c.cout) * (c.cin / c.group) * c.kernel * c.kernel);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>((i * 53 + 11) % 256);
    std::vector<float> w_scales, biases;
    for (int m = 0; m < c.cout; ++m) {
      w_scales.push_back(0.004f + 0.0007f * m);
      biases.push_back(0.25f * m - 1.0f);
    }
    const DataType x_type = c.signed_x ? DataType::kInt8 : DataType::kUint8;
    values = {cpu::Make(x_type, {batch, c.cin, c.side, c.side}, x),
              cpu::Make(DataType::kUint8, {c.cout, c.cin / c.group, c.kernel, c.kernel}, w),
              cpu::Floats({}, {0.031f}),
              cpu::Floats({c.cout}, w_scales),
              c.signed_x ? cpu::Make<int8_t>(x_type, {}, {static_cast<int8_t>(c.x_zero)})
                         : cpu::Make<uint8_t>(x_type, {}, {static_cast<uint8_t>(c.x_zero)}),
              cpu::Make<uint8_t>(DataType::kUint8, {}, {static_cast<uint8_t>(c.w_zero)}),
              cpu::Floats({c.cout}, biases)};
    if (c.residual) {
      std::vector<float> r(batch * c.cout * out_side * out_side);
      for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<float>(i % 13) * 0.5f - 3.0f;
      values.push_back(cpu::Floats({batch, c.cout, out_side, out_side}, r));
    }
    node.op_type = kConvIntegerToFloat;
    node.attributes.Set("group", cpu::IntAttr(c.group));
    node.attributes.Set("kernel_shape", cpu::IntsAttr({c.kernel, c.kernel}));
    node.attributes.Set("strides", cpu::IntsAttr({c.stride, c.stride}));
    node.attributes.Set("dilations", cpu::IntsAttr({c.dilation, c.dilation}));
    node.attributes.Set("pads", cpu::IntsAttr({c.pad, c.pad, c.pad, c.pad}));
    if (c.relu) {
      Attribute relu;
      relu.kind = Attribute::Kind::kString;
      relu.s = "Relu";
      node.attributes.Set("tessera_activation", relu);
    }
    for (size_t i = 0; i < values.size(); ++i) {
      node.inputs.push_back(graph.AddValue("v" + std::to_string(i)));
      if (i == 1 || i == 5)
        graph.constants[node.inputs.back()] = values[i];  // w and its zero point
      inputs.push_back(c.bias || i != 6 ? &values[i] : nullptr);
    }
    node.outputs = {graph.AddValue("y")};
  }

  std::vector<Value> values;
  Graph graph;
  Node node;
  cpu::Inputs inputs;
};

TEST(ShiftedConvTest, OneDnnMatchesTheOwnKernel) {
  if (!cpu::FastQLinearConv()) GTEST_SKIP() << "no 8-bit dot products here: " << cpu::OneDnnIsa();
  for (const ShiftedConvCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    ShiftedConvNode conv(c);
    std::unique_ptr<cpu::KernelState> state =
        cpu::MakeDnnlConvIntegerToFloatState(conv.node, conv.graph);
    ThreadPool pool(2);
    cpu::OpContext ctx{&pool};
    ctx.state = state.get();
    std::vector<Value> onednn(1), own(1);
    ASSERT_TRUE(cpu::RunDnnlConvIntegerToFloat(ctx, conv.node, conv.inputs, &onednn).ok());
    // The own kernel's output is row-major: channels-last means oneDNN ran it.
    EXPECT_TRUE(onednn[0].channels_last());
    ASSERT_TRUE(cpu::RunConvIntegerToFloat(ctx, conv.node, conv.inputs, &own).ok());
    const Value a = cpu::ToRowMajor(onednn[0]);
    ASSERT_EQ(a.shape(), own[0].shape());
    int varied = 0;
    for (int64_t i = 0; i < a.num_elements(); ++i) {
      const float p = a.data<float>()[i], q = own[0].data<float>()[i];
      ASSERT_EQ(p, q) << "element " << i;
      varied += q != 0.0f;
    }
    EXPECT_GT(varied, a.num_elements() / 4);
  }
}
#endif

}  // namespace
}  // namespace tessera::engine
