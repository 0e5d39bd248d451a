// Tests of the load-time graph passes: shape inference, shape-subgraph folding, BatchNorm folding,
// Conv+activation fusion and the dynamic-batch check, on graphs built here and on torch exports.
// Numerics compare the passed graph (LoadOnnxModel) with the same file interpreted node by node
// without passes (RunGraphForTest).
#include "engine/graph_passes.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>

#include "engine/cpu/ops.h"
#include "engine/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {
namespace {

using ::testing::HasSubstr;

constexpr int64_t B = kBatchDim;
constexpr int64_t U = kUnknownDim;

Value Int64s(std::vector<int64_t> v, bool scalar = false) {
  Value out =
      Value::Allocate(DataType::kInt64, scalar ? Shape{} : Shape{static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), out.mutable_data<int64_t>());
  return out;
}

Value Floats(Shape shape, float seed) {
  Value out = Value::Allocate(DataType::kFp32, shape);
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    out.mutable_data<float>()[i] = std::sin(seed + 0.37f * static_cast<float>(i));
  }
  return out;
}

// Builds Graph IR directly, by value name.
class GraphBuilder {
 public:
  void Input(const std::string& name, Shape shape, DataType dtype = DataType::kFp32) {
    const int id = Id(name);
    graph_.input_ids.push_back(id);
    graph_.inputs.push_back(TensorInfo{name, dtype, shape});
    graph_.input_rank_known.push_back(true);
  }
  void Const(const std::string& name, Value v) { graph_.constants[Id(name)] = std::move(v); }
  Node& Op(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    Node node;
    node.op_type = op;
    node.name = op + "_" + std::to_string(graph_.nodes.size());
    node.opset = 13;
    for (const auto& n : in) node.inputs.push_back(n.empty() ? kNoValue : Id(n));
    for (const auto& n : out) node.outputs.push_back(Id(n));
    graph_.nodes.push_back(std::move(node));
    return graph_.nodes.back();
  }
  void Output(const std::string& name) {
    graph_.output_ids.push_back(Id(name));
    graph_.outputs.push_back(TensorInfo{name, DataType::kFp32, {}});
  }
  int Id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const int id = graph_.AddValue(name);
    ids_[name] = id;
    return id;
  }
  Graph& graph() { return graph_; }

 private:
  Graph graph_;
  std::map<std::string, int> ids_;
};

void SetInts(Node* node, const std::string& name, std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  node->attributes.Set(name, a);
}
void SetInt(Node* node, const std::string& name, int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  node->attributes.Set(name, a);
}

std::optional<Shape> ShapeOf(GraphBuilder& b, const std::string& name) {
  return b.graph().shapes[b.Id(name)];
}

// The reference: every node run in order with the CPU kernels, no passes.
std::vector<Value> RunGraphForTest(const Graph& graph, const std::vector<Value>& inputs) {
  std::vector<Value> slots(graph.value_names.size());
  for (size_t i = 0; i < inputs.size(); ++i) slots[graph.input_ids[i]] = inputs[i];
  cpu::OpContext ctx;
  for (const Node& node : graph.nodes) {
    cpu::Inputs in;
    for (int id : node.inputs) {
      in.push_back(id == kNoValue         ? nullptr
                   : graph.IsConstant(id) ? &*graph.constants[id]
                                          : &slots[id]);
    }
    std::vector<Value> out(node.outputs.size());
    Status status = cpu::FindOp(node.op_type, /*onednn=*/false)->run(ctx, node, in, &out);
    EXPECT_TRUE(status.ok()) << node.Describe(graph.value_names) << ": " << status;
    for (size_t i = 0; i < out.size(); ++i) slots[node.outputs[i]] = out[i];
  }
  std::vector<Value> outputs;
  for (int id : graph.output_ids) {
    outputs.push_back(graph.IsConstant(id) ? *graph.constants[id] : slots[id]);
  }
  return outputs;
}

int CountOp(const Graph& graph, const std::string& op) {
  int n = 0;
  for (const Node& node : graph.nodes) n += node.op_type == op;
  return n;
}

// ---- Shape inference ---------------------------------------------------------------------------

TEST(InferShapesTest, CnnHeadWithSymbolicBatch) {
  GraphBuilder b;
  b.Input("x", {-1, 3, 8, 8});
  b.Const("w", Floats({4, 3, 3, 3}, 1));
  b.Const("fc", Floats({10, 4}, 2));
  b.Const("idx1", Int64s({1}, true));
  Node& conv = b.Op("Conv", {"x", "w"}, {"c"});
  SetInts(&conv, "pads", {1, 1, 1, 1});
  SetInts(&conv, "strides", {2, 2});
  b.Op("Relu", {"c"}, {"r"});
  Node& pool = b.Op("MaxPool", {"r"}, {"p"});
  SetInts(&pool, "kernel_shape", {3, 3});
  SetInt(&pool, "ceil_mode", 1);
  SetInts(&pool, "strides", {2, 2});
  b.Op("GlobalAveragePool", {"p"}, {"g"});
  b.Op("Flatten", {"g"}, {"f"});
  Node& gemm = b.Op("Gemm", {"f", "fc"}, {"y"});
  SetInt(&gemm, "transB", 1);
  b.Op("Shape", {"x"}, {"s"});
  b.Op("Gather", {"s", "idx1"}, {"s1"});
  Node& tr = b.Op("Transpose", {"c"}, {"t"});
  SetInts(&tr, "perm", {0, 2, 3, 1});
  b.Op("MatMul", {"t", "r"}, {"m"});
  b.Op("Add", {"y", "fc"}, {"bad"});  // [B,10] + [10,4]: inconsistent, never a wrong guess
  b.Op("NotAnOp", {"y"}, {"z"});
  b.Output("y");
  InferShapes(&b.graph());
  EXPECT_TRUE(b.graph().dynamic_batch);
  EXPECT_EQ(ShapeOf(b, "x"), (Shape{B, 3, 8, 8}));
  EXPECT_EQ(ShapeOf(b, "c"), (Shape{B, 4, 4, 4}));
  EXPECT_EQ(ShapeOf(b, "r"), (Shape{B, 4, 4, 4}));
  EXPECT_EQ(ShapeOf(b, "p"), (Shape{B, 4, 2, 2}));
  EXPECT_EQ(ShapeOf(b, "g"), (Shape{B, 4, 1, 1}));
  EXPECT_EQ(ShapeOf(b, "f"), (Shape{B, 4}));
  EXPECT_EQ(ShapeOf(b, "y"), (Shape{B, 10}));
  EXPECT_EQ(ShapeOf(b, "s"), (Shape{4}));
  EXPECT_EQ(ShapeOf(b, "s1"), (Shape{}));
  EXPECT_EQ(b.graph().dtypes[b.Id("s1")], DataType::kInt64);
  EXPECT_EQ(ShapeOf(b, "t"), (Shape{B, 4, 4, 4}));
  EXPECT_EQ(ShapeOf(b, "m"), (Shape{B, 4, 4, 4}));
  ASSERT_TRUE(ShapeOf(b, "bad").has_value());
  EXPECT_EQ((*ShapeOf(b, "bad"))[1], U);
  EXPECT_FALSE(ShapeOf(b, "z").has_value());
  EXPECT_EQ(b.graph().dtypes[b.Id("z")], DataType::kInvalid);
}

TEST(InferShapesTest, ReshapeConcatUnsqueezeSqueeze) {
  GraphBuilder b;
  b.Input("x", {-1, 6, 2});
  b.Input("q", {-1, 5, -1});
  b.Const("to_b3", Int64s({0, 3, -1}));
  b.Const("to_flat", Int64s({-1}));
  b.Const("to_rows", Int64s({-1, 4}));
  b.Const("ax", Int64s({1}));
  b.Op("Reshape", {"x", "to_b3"}, {"r1"});    // [B, 3, 4]
  b.Op("Reshape", {"x", "to_flat"}, {"r2"});  // [12B] is not a dim: unknown
  b.Op("Reshape", {"x", "to_rows"}, {"r3"});  // [3B, 4]: unknown rows
  SetInt(&b.Op("Concat", {"r1", "r1"}, {"cat"}), "axis", 1);
  b.Op("Unsqueeze", {"r1", "ax"}, {"u"});
  b.Op("Squeeze", {"u", "ax"}, {"sq"});
  SetInt(&b.Op("Concat", {"q", "q"}, {"qq"}), "axis", 2);
  b.Op("Softmax", {"q"}, {"qs"});
  b.Output("r1");
  InferShapes(&b.graph());
  EXPECT_EQ(ShapeOf(b, "q"), (Shape{B, 5, U}));
  EXPECT_EQ(ShapeOf(b, "r1"), (Shape{B, 3, 4}));
  EXPECT_EQ(ShapeOf(b, "r2"), (Shape{U}));
  EXPECT_EQ(ShapeOf(b, "r3"), (Shape{U, 4}));
  EXPECT_EQ(ShapeOf(b, "cat"), (Shape{B, 6, 4}));
  EXPECT_EQ(ShapeOf(b, "u"), (Shape{B, 1, 3, 4}));
  EXPECT_EQ(ShapeOf(b, "sq"), (Shape{B, 3, 4}));
  EXPECT_EQ(ShapeOf(b, "qq"), (Shape{B, 5, U}));
  EXPECT_EQ(ShapeOf(b, "qs"), (Shape{B, 5, U}));
}

TEST(InferShapesTest, PadGrowsThePaddedDims) {
  GraphBuilder b;
  b.Input("x", {-1, 4, 6, 6});
  b.Const("zeros", Int64s({0, 0, 0, 0, 0, 0, 0, 0}));  // PyTorch's before DenseNet's pools
  b.Const("rows", Int64s({0, 0, 1, 0, 0, 0, 2, 0}));
  b.Const("batch", Int64s({1, 0, 0, 0, 0, 0, 0, 0}));
  b.Const("cols", Int64s({2, 3}));
  b.Const("axis3", Int64s({3}));
  b.Op("Pad", {"x", "zeros"}, {"same"});
  b.Op("Pad", {"x", "rows"}, {"taller"});
  b.Op("Pad", {"x", "batch"}, {"more"});
  b.Op("Pad", {"x", "cols", "", "axis3"}, {"wider"});                       // opset 18's axes
  SetInts(&b.Op("Pad", {"x"}, {"old"}), "pads", {0, 1, 0, 0, 0, 1, 0, 0});  // opset < 11
  InferShapes(&b.graph());
  EXPECT_EQ(ShapeOf(b, "same"), (Shape{B, 4, 6, 6}));
  EXPECT_EQ(ShapeOf(b, "taller"), (Shape{B, 4, 9, 6}));
  EXPECT_EQ(ShapeOf(b, "more"), (Shape{U, 4, 6, 6}));  // the batch plus one is no known dim
  EXPECT_EQ(ShapeOf(b, "wider"), (Shape{B, 4, 6, 11}));
  EXPECT_EQ(ShapeOf(b, "old"), (Shape{B, 6, 6, 6}));
}

TEST(InferShapesTest, FixedLeadingDimIsNotDynamic) {
  GraphBuilder b;
  b.Input("x", {1, 8});
  b.Op("Relu", {"x"}, {"y"});
  b.Output("y");
  InferShapes(&b.graph());
  EXPECT_FALSE(b.graph().dynamic_batch);
  EXPECT_EQ(ShapeOf(b, "y"), (Shape{1, 8}));
}

TEST(InferShapesTest, SliceAndCastTrackShapeVectors) {
  // Kernels for Slice and Cast may not exist yet: only inference and folding are exercised.
  GraphBuilder b;
  b.Input("x", {-1, 4, 6});
  b.Const("from1", Int64s({1}));
  b.Const("to_end", Int64s({std::numeric_limits<int64_t>::max()}));
  b.Const("zero", Int64s({0}));
  b.Const("three", Int64s({3}));
  b.Const("axis2", Int64s({2}));
  b.Op("Shape", {"x"}, {"s"});
  b.Op("Slice", {"s", "from1", "to_end"}, {"tail"});  // [4, 6]
  SetInt(&b.Op("Cast", {"tail"}, {"tail64"}), "to", 7);
  b.Op("Slice", {"x", "zero", "three", "axis2"}, {"x3"});
  b.Op("Slice", {"x", "zero", "to_end"}, {"xall"});
  b.Output("x3");
  InferShapes(&b.graph());
  EXPECT_EQ(ShapeOf(b, "tail"), (Shape{2}));
  EXPECT_EQ(ShapeOf(b, "x3"), (Shape{B, 4, 3}));
  EXPECT_EQ(ShapeOf(b, "xall"), (Shape{B, 4, 6}));
  EXPECT_EQ(b.graph().dtypes[b.Id("tail64")], DataType::kInt64);
  FoldShapeSubgraphs(&b.graph());
  ASSERT_TRUE(b.graph().IsConstant(b.Id("tail64")));
  const Value& v = *b.graph().constants[b.Id("tail64")];
  EXPECT_EQ(std::vector<int64_t>(v.data<int64_t>(), v.data<int64_t>() + 2),
            (std::vector<int64_t>{4, 6}));
  EXPECT_FALSE(b.graph().IsConstant(b.Id("s")));  // holds the batch
}

// ---- Shape-subgraph folding --------------------------------------------------------------------

// x.view(x.size(0), x.size(1), -1) as PyTorch exports it with a dynamic batch.
void AddTorchViewChain(GraphBuilder& b) {
  b.Const("i0", Int64s({0}, true));
  b.Const("i1", Int64s({1}, true));
  b.Const("ax0", Int64s({0}));
  b.Const("minus1", Int64s({-1}));
  b.Op("Shape", {"x"}, {"s"});
  b.Op("Gather", {"s", "i0"}, {"d0"});
  b.Op("Gather", {"s", "i1"}, {"d1"});
  b.Op("Unsqueeze", {"d0", "ax0"}, {"u0"});
  b.Op("Unsqueeze", {"d1", "ax0"}, {"u1"});
  b.Op("Concat", {"u0", "u1", "minus1"}, {"target"});
  b.Op("Reshape", {"x", "target"}, {"v"});
  b.Op("Relu", {"v"}, {"y"});
  b.Output("y");
}

TEST(FoldShapeSubgraphsTest, StaticDimsFoldWhileTheBatchStaysRuntime) {
  GraphBuilder b;
  b.Input("x", {-1, 4, 2, 3});
  AddTorchViewChain(b);
  InferShapes(&b.graph());
  int rewritten = -1;
  EXPECT_GT(FoldShapeSubgraphs(&b.graph(), &rewritten), 0);
  // Shape(x)→Gather(1) does not depend on the batch: a constant 4 now.
  ASSERT_TRUE(b.graph().IsConstant(b.Id("d1")));
  EXPECT_EQ(b.graph().constants[b.Id("d1")]->data<int64_t>()[0], 4);
  EXPECT_TRUE(b.graph().IsConstant(b.Id("u1")));
  EXPECT_FALSE(b.graph().IsConstant(b.Id("d0")));  // the batch
  EXPECT_FALSE(b.graph().IsConstant(b.Id("target")));
  // The Reshape reads a constant [0, 4, -1] instead: the chain is dead.
  EXPECT_EQ(rewritten, 1);
  const Node& reshape = b.graph().nodes[6];
  ASSERT_EQ(reshape.op_type, "Reshape");
  ASSERT_TRUE(b.graph().IsConstant(reshape.inputs[1]));
  const Value& t = *b.graph().constants[reshape.inputs[1]];
  EXPECT_EQ(std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + 3),
            (std::vector<int64_t>{0, 4, -1}));
  EXPECT_EQ(ShapeOf(b, "v"), (Shape{B, 4, 6}));
  EXPECT_EQ(RemoveDeadNodes(&b.graph()), 6);
  EXPECT_EQ(b.graph().nodes.size(), 2u);
}

TEST(FoldShapeSubgraphsTest, PipelineKeepsResultsAtSeveralBatchSizes) {
  GraphBuilder b;
  b.Input("x", {-1, 4, 2, 3});
  AddTorchViewChain(b);
  Graph original = b.graph();
  Graph passed = b.graph();
  auto summary = RunGraphPasses(&passed);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->nodes_before, 8);
  EXPECT_EQ(summary->nodes_after, 2);
  EXPECT_EQ(summary->reshapes_rewritten, 1);
  EXPECT_EQ(CountOp(passed, "Shape"), 0);
  EXPECT_EQ(CountOp(passed, "Concat"), 0);
  EXPECT_TRUE(summary->batch_pinned_by.empty());
  for (int64_t batch : {1, 3}) {
    Value x = Floats({batch, 4, 2, 3}, static_cast<float>(batch));
    Value want = RunGraphForTest(original, {x})[0];
    Value got = RunGraphForTest(passed, {x})[0];
    ASSERT_EQ(got.shape(), want.shape());
    EXPECT_EQ(got.shape(), (Shape{batch, 4, 6}));
    for (int64_t i = 0; i < got.num_elements(); ++i) {
      EXPECT_EQ(got.data<float>()[i], want.data<float>()[i]);
    }
  }
}

TEST(FoldShapeSubgraphsTest, FixedBatchFoldsTheWholeChain) {
  GraphBuilder b;
  b.Input("x", {1, 4, 2, 3});
  AddTorchViewChain(b);
  auto summary = RunGraphPasses(&b.graph());
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_FALSE(b.graph().dynamic_batch);
  EXPECT_EQ(summary->reshapes_rewritten, 0);
  EXPECT_GT(summary->shape_values_folded, 0);
  ASSERT_EQ(b.graph().nodes.size(), 2u);
  const Value& t = *b.graph().constants[b.graph().nodes[0].inputs[1]];
  EXPECT_EQ(std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + 3),
            (std::vector<int64_t>{1, 4, -1}));
}

TEST(GraphOutputTypeTest, AnOutputDeclaredAsAnotherTypeThanItIsComputedIsRefused) {
  GraphBuilder b;
  b.Input("x", {-1, 4});
  b.Op("Relu", {"x"}, {"r"});
  b.Op("Shape", {"r"}, {"y"});
  b.Output("r");
  b.Output("y");  // declared FP32 by the builder, computed as INT64
  auto summary = RunGraphPasses(&b.graph());
  ASSERT_EQ(summary.status().code(), absl::StatusCode::kInvalidArgument) << summary.status();
  EXPECT_NE(summary.status().message().find(
                "graph output \"y\" is declared as FP32, but the graph computes it as INT64"),
            std::string::npos)
      << summary.status();
}

TEST(GraphOutputTypeTest, TypesOfOpsWhoseShapesAreNotInferredAreCheckedToo) {
  // Found by model_fuzz.py: a ReduceSum of an INT64 input, its output declared FP32, loaded and
  // failed every request.
  GraphBuilder b;
  b.Input("x", {-1, 4}, DataType::kInt64);
  b.Op("ReduceSum", {"x"}, {"sum"});
  b.Op("Equal", {"sum", "sum"}, {"same"});
  b.Output("sum");
  auto summary = RunGraphPasses(&b.graph());
  ASSERT_EQ(summary.status().code(), absl::StatusCode::kInvalidArgument) << summary.status();
  EXPECT_NE(summary.status().message().find("\"sum\" is declared as FP32, but the graph computes "
                                            "it as INT64"),
            std::string::npos)
      << summary.status();

  GraphBuilder c;
  c.Input("x", {-1, 4});
  c.Op("Equal", {"x", "x"}, {"same"});
  c.Output("same");
  summary = RunGraphPasses(&c.graph());
  EXPECT_NE(summary.status().message().find("computes it as BOOL"), std::string::npos)
      << summary.status();
}

// ---- Dynamic batch -----------------------------------------------------------------------------

TEST(DynamicBatchTest, ReshapeHardCodingBatchOnePinsTheModel) {
  GraphBuilder b;
  b.Input("x", {-1, 2, 2});
  b.Const("flat", Int64s({1, -1}));
  b.Op("Reshape", {"x", "flat"}, {"v"}).name = "view_1";
  b.Op("Relu", {"v"}, {"y"});
  b.Output("y");
  auto summary = RunGraphPasses(&b.graph());
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_THAT(summary->batch_pinned_by, HasSubstr("view_1"));
  EXPECT_FALSE(b.graph().dynamic_batch);
  EXPECT_EQ(b.graph().inputs[0].shape, (Shape{1, 2, 2}));
  EXPECT_EQ(ShapeOf(b, "y"), (Shape{1, 4}));
}

TEST(DynamicBatchTest, ReshapeKeepingTheBatchDoesNotPin) {
  GraphBuilder b;
  b.Input("x", {-1, 2, 2});
  b.Const("flat", Int64s({-1, 4}));
  b.Op("Reshape", {"x", "flat"}, {"y"});
  b.Output("y");
  auto summary = RunGraphPasses(&b.graph());
  ASSERT_TRUE(summary.ok());
  EXPECT_TRUE(summary->batch_pinned_by.empty());
  EXPECT_TRUE(b.graph().dynamic_batch);
  EXPECT_EQ(ShapeOf(b, "y"), (Shape{B, 4}));
}

// ---- BatchNorm folding and activation fusion on ONNX files -------------------------------------

void AddInitializer(onnx::GraphProto* g, const std::string& name, const Value& v) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : v.shape()) t->add_dims(d);
  for (int64_t i = 0; i < v.num_elements(); ++i) t->add_float_data(v.data<float>()[i]);
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                         const std::string& out) {
  onnx::NodeProto* node = g->add_node();
  node->set_op_type(op);
  node->set_name(op + "_" + out);
  for (const auto& i : in) node->add_input(i);
  node->add_output(out);
  return node;
}

void SetFloatInfo(onnx::ValueInfoProto* info, const std::string& name, std::vector<int64_t> dims) {
  info->set_name(name);
  auto* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) {
    if (d < 0) {
      tensor->mutable_shape()->add_dim()->set_dim_param("batch");
    } else {
      tensor->mutable_shape()->add_dim()->set_dim_value(d);
    }
  }
}

std::string WriteModel(const onnx::ModelProto& model, const std::string& file) {
  const std::string path = ::testing::TempDir() + "/" + file;
  std::ofstream out(path, std::ios::binary);
  model.SerializeToOstream(&out);
  return path;
}

// x[N,3,6,6] → Conv(3→8, 3x3, pad 1, bias) → BatchNorm → `activation` (Relu, Clip or none) →
// Conv(8→4, 1x1, no bias) → BatchNorm → y. Non-trivial BN statistics so folding errors show.
onnx::ModelProto ConvBnModel(const std::string& activation) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* g = model.mutable_graph();
  SetFloatInfo(g->add_input(), "x", {-1, 3, 6, 6});
  SetFloatInfo(g->add_output(), "y", {-1, 4, 6, 6});
  AddInitializer(g, "w1", Floats({8, 3, 3, 3}, 0.1f));
  AddInitializer(g, "b1", Floats({8}, 0.2f));
  AddInitializer(g, "w2", Floats({4, 8, 1, 1}, 0.3f));
  for (const auto& [prefix, c] : {std::pair<std::string, int64_t>{"bn1", 8}, {"bn2", 4}}) {
    Value var = Floats({c}, 0.4f);
    for (int64_t i = 0; i < c; ++i)
      var.mutable_data<float>()[i] = 0.5f + std::fabs(var.data<float>()[i]);
    AddInitializer(g, prefix + "_gamma", Floats({c}, 0.5f));
    AddInitializer(g, prefix + "_beta", Floats({c}, 0.6f));
    AddInitializer(g, prefix + "_mean", Floats({c}, 0.7f));
    AddInitializer(g, prefix + "_var", var);
  }
  onnx::NodeProto* conv = AddNode(g, "Conv", {"x", "w1", "b1"}, "c1");
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  AddNode(g, "BatchNormalization", {"c1", "bn1_gamma", "bn1_beta", "bn1_mean", "bn1_var"}, "n1");
  std::string h = "n1";
  if (activation == "Relu") {
    AddNode(g, "Relu", {"n1"}, "a1");
    h = "a1";
  } else if (activation == "Clip") {
    onnx::TensorProto* lo = g->add_initializer();
    lo->set_name("lo");
    lo->set_data_type(onnx::TensorProto::FLOAT);
    lo->add_float_data(0.0f);
    onnx::TensorProto* hi = g->add_initializer();
    hi->set_name("hi");
    hi->set_data_type(onnx::TensorProto::FLOAT);
    hi->add_float_data(0.5f);  // low enough that the clamp really cuts
    AddNode(g, "Clip", {"n1", "lo", "hi"}, "a1");
    h = "a1";
  }
  AddNode(g, "Conv", {h, "w2"}, "c2");
  AddNode(g, "BatchNormalization", {"c2", "bn2_gamma", "bn2_beta", "bn2_mean", "bn2_var"}, "y");
  return model;
}

Graph Import(const std::string& path) {
  auto graph =
      ImportOnnxModel(path, [](const std::string& op) { return cpu::FindOp(op) != nullptr; });
  EXPECT_TRUE(graph.ok()) << graph.status();
  return graph.ok() ? *std::move(graph) : Graph{};
}

// Worst |a - b| / (|b| + 1e-6) over the elements, the tensors being the same shape.
double MaxRelativeError(const float* a, const float* b, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(double{a[i]} - b[i]) / (std::fabs(double{b[i]}) + 1e-6));
  }
  return worst;
}

// Runs `path` through LoadOnnxModel (passes) and through RunGraphForTest (no passes) on the same
// input; expects agreement within `tolerance` relative (1e-5 absolute floor).
void ExpectSameOutputs(const std::string& path, Shape input_shape, double tolerance) {
  Graph original = Import(path);
  ModelOptions options;
  auto model = LoadOnnxModel(path, options);
  ASSERT_TRUE(model.ok()) << model.status();
  Value x = Floats(input_shape, 0.9f);
  std::vector<Value> want = RunGraphForTest(original, {x});
  TensorView view{(*model)->inputs()[0].name, DataType::kFp32, input_shape, x.mutable_data<void>(),
                  x.byte_size()};
  std::vector<Tensor> got;
  Status status = (*model)->Run({view}, &got);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    ASSERT_EQ(got[o].shape, want[o].shape());
    const auto* g = reinterpret_cast<const float*>(got[o].bytes.data());
    const float* w = want[o].data<float>();
    int bad = 0;
    for (int64_t i = 0; i < want[o].num_elements(); ++i) {
      if (!(std::fabs(g[i] - w[i]) <= 1e-5 + tolerance * std::fabs(w[i])) && ++bad <= 5) {
        ADD_FAILURE() << path << " output " << o << "[" << i << "] = " << g[i] << ", want " << w[i];
      }
    }
    EXPECT_EQ(bad, 0);
    std::printf("[ passes   ] %s output %zu: max relative error %.3g over %lld values\n",
                path.c_str(), o, MaxRelativeError(g, w, want[o].num_elements()),
                static_cast<long long>(want[o].num_elements()));
  }
}

class ConvBnActivationTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ConvBnActivationTest, FusedGraphIsSmallerAndComputesTheSame) {
  const std::string act = GetParam();
  const std::string path = WriteModel(ConvBnModel(act), "conv_bn_" + act + ".onnx");
  Graph graph = Import(path);
  const int before = static_cast<int>(graph.nodes.size());
  auto summary = RunGraphPasses(&graph);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->batchnorms_folded, 2);
  EXPECT_EQ(summary->activations_fused, act == "none" ? 0 : 1);
  EXPECT_EQ(summary->nodes_before, before);
  ASSERT_EQ(graph.nodes.size(), 2u) << summary->ToString();
  EXPECT_LT(static_cast<int>(graph.nodes.size()), before);
  EXPECT_EQ(CountOp(graph, "Conv"), 2);
  const Node& first = graph.nodes[0];
  EXPECT_EQ(first.attributes.GetString("tessera_activation"), act == "none" ? "" : act);
  if (act == "Clip") {
    EXPECT_EQ(first.attributes.GetFloat("tessera_clip_min", -1), 0.0f);
    EXPECT_EQ(first.attributes.GetFloat("tessera_clip_max", -1), 0.5f);
  }
  // Graph output names stay right: the last Conv produces "y".
  EXPECT_EQ(graph.value_names[graph.nodes[1].outputs[0]], "y");
  // The replaced weights and BN parameters are freed.
  EXPECT_LT(graph.ConstantBytes(), Import(path).ConstantBytes());
  for (Shape shape : {Shape{1, 3, 6, 6}, Shape{3, 3, 6, 6}}) ExpectSameOutputs(path, shape, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Activations, ConvBnActivationTest,
                         ::testing::Values("Relu", "Clip", "none"));

TEST(FusionTest, NotFusedWhenTheConvOutputIsAlsoRead) {
  GraphBuilder b;
  b.Input("x", {-1, 2, 4, 4});
  b.Const("w", Floats({2, 2, 1, 1}, 1));
  for (const char* p : {"g", "beta", "mean"}) b.Const(p, Floats({2}, 3));
  Value var = Floats({2}, 4);
  var.mutable_data<float>()[0] = var.mutable_data<float>()[1] = 1.0f;
  b.Const("var", var);
  b.Op("Conv", {"x", "w"}, {"c"});
  b.Op("Relu", {"c"}, {"r"});
  b.Op("Add", {"c", "r"}, {"y"});                                        // c has two readers
  b.Op("BatchNormalization", {"y", "g", "beta", "mean", "var"}, {"z"});  // not after a Conv
  b.Output("z");
  auto summary = RunGraphPasses(&b.graph());
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->activations_fused, 0);
  EXPECT_EQ(summary->batchnorms_folded, 0);
  EXPECT_EQ(b.graph().nodes.size(), 4u);
}

TEST(FusionTest, NotFusedWhenTheConvOutputIsAGraphOutput) {
  GraphBuilder b;
  b.Input("x", {-1, 2, 4, 4});
  b.Const("w", Floats({2, 2, 1, 1}, 1));
  b.Op("Conv", {"x", "w"}, {"c"});
  b.Op("Relu", {"c"}, {"r"});
  b.Output("c");
  b.Output("r");
  auto summary = RunGraphPasses(&b.graph());
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->activations_fused, 0);
  EXPECT_EQ(b.graph().nodes.size(), 2u);
}

// ---- Real torch exports ------------------------------------------------------------------------

TEST(TorchExportTest, BundledSmallCnnLosesItsBatchNormsAndShapeChain) {
  const std::string path =
      std::string(TESSERA_SOURCE_DIR) + "/configs/models/small_cnn/1/model.onnx";
  Graph graph = Import(path);
  auto summary = RunGraphPasses(&graph);
  ASSERT_TRUE(summary.ok()) << summary.status();
  std::printf("[ passes   ] small_cnn: %s\n", summary->ToString().c_str());
  EXPECT_EQ(summary->nodes_before, 26);
  EXPECT_EQ(CountOp(graph, "BatchNormalization"), 0);
  EXPECT_EQ(CountOp(graph, "Shape"), 0);
  EXPECT_EQ(CountOp(graph, "Concat"), 0);
  EXPECT_EQ(summary->batchnorms_folded, 4);
  EXPECT_EQ(summary->activations_fused, 4);  // the Relu after the residual Add stays
  EXPECT_EQ(summary->nodes_after, 11);
  EXPECT_TRUE(graph.dynamic_batch);
  EXPECT_TRUE(summary->batch_pinned_by.empty());
  ExpectSameOutputs(path, {2, 3, 32, 32}, 1e-4);
}

// Models named in TESSERA_PASSES_MODELS (colon-separated "path=CxHxW", e.g. torchvision exports)
// are compared with and without passes at batch 2 (or the file's fixed batch); skipped when unset.
TEST(TorchExportTest, ModelsFromEnvironment) {
  const char* env = std::getenv("TESSERA_PASSES_MODELS");
  if (env == nullptr) GTEST_SKIP() << "TESSERA_PASSES_MODELS not set";
  std::stringstream list(env);
  std::string item;
  while (std::getline(list, item, ':')) {
    const size_t eq = item.find('=');
    ASSERT_NE(eq, std::string::npos) << item;
    const std::string path = item.substr(0, eq);
    Shape shape = {2};
    std::stringstream dims(item.substr(eq + 1));
    std::string d;
    while (std::getline(dims, d, 'x')) shape.push_back(std::stoll(d));
    Graph graph = Import(path);
    auto summary = RunGraphPasses(&graph);
    ASSERT_TRUE(summary.ok()) << summary.status();
    std::printf("[ passes   ] %s: %s\n", path.c_str(), summary->ToString().c_str());
    if (!graph.dynamic_batch)
      shape[0] = graph.inputs[0].shape[0];  // an export without dynamic_axes
    ExpectSameOutputs(path, shape, 1e-4);
  }
}

TEST(DynamicBatchTest, PinnedModelRejectsOtherBatchSizesAtRun) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* g = model.mutable_graph();
  SetFloatInfo(g->add_input(), "x", {-1, 2, 2});
  SetFloatInfo(g->add_output(), "y", {-1, 4});
  onnx::TensorProto* target = g->add_initializer();
  target->set_name("target");
  target->set_data_type(onnx::TensorProto::INT64);
  target->add_dims(2);
  target->add_int64_data(1);  // x.view(1, -1), traced at batch 1
  target->add_int64_data(-1);
  AddNode(g, "Reshape", {"x", "target"}, "y");
  auto loaded = LoadOnnxModel(WriteModel(model, "pinned.onnx"), {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->inputs()[0].shape, (Shape{1, 2, 2}));
  std::vector<float> data(8, 1.0f);
  std::vector<Tensor> out;
  TensorView one{"x", DataType::kFp32, {1, 2, 2}, data.data(), 16};
  EXPECT_TRUE((*loaded)->Run({one}, &out).ok());
  TensorView two{"x", DataType::kFp32, {2, 2, 2}, data.data(), 32};
  Status status = (*loaded)->Run({two}, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("expected [1, 2, 2]"));
}

}  // namespace
}  // namespace tessera::engine
