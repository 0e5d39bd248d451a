// Config completion from the ONNX file: the reader against the bundled export and hand-built
// models (weights listed as inputs, large and sparse initializers, symbolic dims, bad files), and
// Triton's completion rules.
#include "tessera/repository/model_completion.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace tessera::repository {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

std::string BundledMlp() {
  return std::string(TESSERA_SOURCE_DIR) + "/configs/models/mlp/1/model.onnx";
}

// dims: > 0 a size, -1 a symbolic dim ("batch"), -2 a dim with neither value nor name.
void SetTensor(onnx::ValueInfoProto* info, const std::string& name, int elem_type,
               const std::vector<int64_t>& dims) {
  info->set_name(name);
  auto* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(elem_type);
  auto* shape = tensor->mutable_shape();
  for (int64_t d : dims) {
    auto* dim = shape->add_dim();
    if (d > 0) dim->set_dim_value(d);
    if (d == -1) dim->set_dim_param("batch");
  }
}

class ModelCompletionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) / "tessera_model_completion_test" / info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Save(const onnx::ModelProto& model, const std::string& name = "model.onnx") {
    std::string bytes;
    EXPECT_TRUE(model.SerializeToString(&bytes));
    return SaveBytes(bytes, name);
  }
  std::string SaveBytes(const std::string& bytes, const std::string& name) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  // A graph x [batch, 4] FP32 -> y [batch, 2] FP32 whose weight is 2 MiB of raw data, listed as
  // a graph input as well (ONNX IR < 4 style), with a sparse initializer beside it.
  static onnx::ModelProto TwoLayerModel() {
    onnx::ModelProto model;
    model.set_ir_version(3);
    model.add_opset_import()->set_version(11);
    model.set_producer_name("model_completion_test");
    onnx::GraphProto* graph = model.mutable_graph();
    graph->set_name("g");
    onnx::TensorProto* weight = graph->add_initializer();
    weight->set_name("w");
    weight->set_data_type(onnx::TensorProto::FLOAT);
    weight->add_dims(4);
    weight->add_dims(131072);
    weight->set_raw_data(std::string(4 * 131072 * 4, '\1'));
    onnx::SparseTensorProto* sparse = graph->add_sparse_initializer();
    sparse->mutable_values()->set_name("sparse_w");
    SetTensor(graph->add_input(), "x", onnx::TensorProto::FLOAT, {-1, 4});
    SetTensor(graph->add_input(), "w", onnx::TensorProto::FLOAT, {4, 131072});
    SetTensor(graph->add_input(), "sparse_w", onnx::TensorProto::FLOAT, {4});
    SetTensor(graph->add_input(), "mask", onnx::TensorProto::INT64, {-1, -2});
    SetTensor(graph->add_output(), "y", onnx::TensorProto::FLOAT16, {-1, 2});
    onnx::NodeProto* node = graph->add_node();
    node->set_op_type("MatMul");
    node->add_input("x");
    node->add_input("w");
    node->add_output("y");
    return model;
  }

  fs::path dir_;
};

TEST_F(ModelCompletionTest, ReadsTheBundledExport) {
  StatusOr<OnnxSignature> s = ReadOnnxSignature(BundledMlp());
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_THAT(s->inputs, SizeIs(1));
  EXPECT_EQ(s->inputs[0].name, "input");
  EXPECT_EQ(s->inputs[0].data_type, DataType::kFp32);
  EXPECT_THAT(s->inputs[0].dims, ElementsAre(-1, 64));
  ASSERT_THAT(s->outputs, SizeIs(1));
  EXPECT_EQ(s->outputs[0].name, "output");
  EXPECT_THAT(s->outputs[0].dims, ElementsAre(-1, 10));
}

TEST_F(ModelCompletionTest, WeightsListedAsInputsAreNotInputs) {
  StatusOr<OnnxSignature> s = ReadOnnxSignature(Save(TwoLayerModel()));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_THAT(s->inputs, SizeIs(2));
  EXPECT_EQ(s->inputs[0].name, "x");
  EXPECT_EQ(s->inputs[1].name, "mask");
  EXPECT_EQ(s->inputs[1].data_type, DataType::kInt64);
  EXPECT_THAT(s->inputs[1].dims, ElementsAre(-1, -1));
  ASSERT_THAT(s->outputs, SizeIs(1));
  EXPECT_EQ(s->outputs[0].data_type, DataType::kFp16);
}

TEST_F(ModelCompletionTest, ReadsTheNodesOpTypes) {
  onnx::ModelProto model = TwoLayerModel();
  StatusOr<OnnxSignature> s = ReadOnnxSignature(Save(model));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->op_types, ElementsAre("MatMul"));
  EXPECT_FALSE(QuantizesOverTheBatch(*s));
  // quantize_dynamic's form: the activation quantized over its own range at run time.
  onnx::NodeProto* quantize = model.mutable_graph()->add_node();
  quantize->set_op_type("DynamicQuantizeLinear");
  quantize->set_name("q");
  quantize->add_input("x");
  for (const char* out : {"x_q", "x_scale", "x_zero"}) quantize->add_output(out);
  s = ReadOnnxSignature(Save(model, "dynamic.onnx"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(s->op_types, ElementsAre("DynamicQuantizeLinear", "MatMul"));
  EXPECT_TRUE(QuantizesOverTheBatch(*s));
}

TEST_F(ModelCompletionTest, BadFilesAreNamed) {
  StatusOr<OnnxSignature> s = ReadOnnxSignature((dir_ / "missing.onnx").string());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("missing.onnx"));

  std::string bytes;
  ASSERT_TRUE(TwoLayerModel().SerializeToString(&bytes));
  for (size_t cut : {bytes.size() / 2, bytes.size() - 3, size_t{7}}) {
    s = ReadOnnxSignature(SaveBytes(bytes.substr(0, cut), "truncated.onnx"));
    ASSERT_FALSE(s.ok()) << "cut at " << cut;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("truncated.onnx is not a valid ONNX"));
  }
  s = ReadOnnxSignature(SaveBytes("name: \"not a model\"\n", "text.onnx"));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("text.onnx is not a valid ONNX"));

  onnx::ModelProto no_shape = TwoLayerModel();
  no_shape.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  s = ReadOnnxSignature(Save(no_shape, "no_shape.onnx"));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("no_shape.onnx: input 'x' has no shape in the model file"));

  onnx::ModelProto complex = TwoLayerModel();
  complex.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::COMPLEX64);
  s = ReadOnnxSignature(Save(complex, "complex.onnx"));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("complex.onnx: output 'y' has ONNX element type COMPLEX64"));

  // A dim of size 0 would hold every request to no elements (configs refuse 0 dims too).
  onnx::ModelProto zero_dim = TwoLayerModel();
  zero_dim.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()
      ->mutable_shape()->mutable_dim(1)->set_dim_value(0);
  s = ReadOnnxSignature(Save(zero_dim, "zero_dim.onnx"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("zero_dim.onnx: input 'x' has a dim of size 0 in the model file (dim 1)"));

  // A name that is not UTF-8 could not travel in any response: refused, shown with '?'.
  onnx::ModelProto bad_name = TwoLayerModel();
  bad_name.mutable_graph()->mutable_input(0)->set_name("x\xFF");
  s = ReadOnnxSignature(Save(bad_name, "bad_name.onnx"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("bad_name.onnx: input 'x?' has a name that is not valid UTF-8"));
}

// Corrupt files (bytes flipped, cut, or both) never crash the reader: it answers with the
// signature or a clear error naming the file.
TEST_F(ModelCompletionTest, CorruptFilesNeverCrash) {
  std::string bytes;
  onnx::ModelProto model = TwoLayerModel();
  model.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(64, '\1'));
  ASSERT_TRUE(model.SerializeToString(&bytes));
  std::mt19937 rng(7);
  int failures = 0;
  for (int round = 0; round < 400; ++round) {
    std::string mutated = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      mutated[rng() % mutated.size()] = static_cast<char>(rng() & 0xff);
    }
    if (round % 3 == 0) mutated.resize(rng() % mutated.size());
    StatusOr<OnnxSignature> s = ReadOnnxSignature(SaveBytes(mutated, "corrupt.onnx"));
    if (!s.ok()) {
      ++failures;
      EXPECT_THAT(std::string(s.status().message()), HasSubstr("corrupt.onnx")) << round;
    }
  }
  EXPECT_GT(failures, 100);  // most mutations are caught; the rest decode to some signature
}

OnnxSignature Signature(std::vector<int64_t> input_dims, std::vector<int64_t> output_dims) {
  OnnxSignature s;
  s.inputs.push_back({"x", DataType::kFp32, std::move(input_dims)});
  s.outputs.push_back({"y", DataType::kFp32, std::move(output_dims)});
  return s;
}

TEST(CompleteFromSignatureTest, BatchableModelGetsTritonsDefaults) {
  ModelConfig config;
  config.name = "m";
  StatusOr<ModelConfig> c = CompleteFromSignature(config, Signature({-1, 64}, {-1, 10}), "m.onnx");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_batch_size, kCompletedMaxBatchSize);
  EXPECT_TRUE(c->dynamic_batching.enabled);
  EXPECT_EQ(c->dynamic_batching.max_queue_delay_microseconds, 0u);
  ASSERT_THAT(c->inputs, SizeIs(1));
  EXPECT_THAT(c->inputs[0].dims, ElementsAre(64));
  EXPECT_THAT(c->outputs[0].dims, ElementsAre(10));
  EXPECT_THAT(c->notes, ElementsAre(HasSubstr("max_batch_size 4"), HasSubstr("dynamic_batching"),
                                    HasSubstr("input x TYPE_FP32 [64]"),
                                    HasSubstr("output y TYPE_FP32 [10]")));
  EXPECT_FALSE(NeedsCompletion(*c));
}

TEST(CompleteFromSignatureTest, KeepsWhatTheConfigSays) {
  ModelConfig config;
  config.name = "m";
  config.max_batch_size = 16;
  config.notes = {"from the config file"};
  config.outputs.push_back({"y", DataType::kFp32, {10}});
  StatusOr<ModelConfig> c = CompleteFromSignature(config, Signature({-1, 64}, {-1, 10}), "m.onnx");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_batch_size, 16);
  EXPECT_FALSE(c->dynamic_batching.enabled);  // only a completed max_batch_size turns it on
  EXPECT_THAT(c->inputs[0].dims, ElementsAre(64));
  EXPECT_THAT(c->notes, ElementsAre(HasSubstr("input x")));

  // A model with a fixed first dim is served without batching, with its exact shapes.
  config = ModelConfig{};
  config.name = "m";
  c = CompleteFromSignature(config, Signature({1, 3, -1}, {1, 10}), "m.onnx");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_batch_size, 0);
  EXPECT_FALSE(c->dynamic_batching.enabled);
  EXPECT_THAT(c->inputs[0].dims, ElementsAre(1, 3, -1));
}

TEST(CompleteFromSignatureTest, RefusesWhatTheModelCannotCarry) {
  ModelConfig config;
  config.name = "m";
  config.max_batch_size = 8;
  StatusOr<ModelConfig> c = CompleteFromSignature(config, Signature({1, 64}, {-1, 10}), "m.onnx");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("model 'm': cannot complete its config from m.onnx: max_batch_size is 8, "
                        "but 'x' has shape [1, 64]"));

  config.max_batch_size = 0;
  config.dynamic_batching.enabled = true;
  c = CompleteFromSignature(config, Signature({1, 64}, {1, 10}), "m.onnx");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("dynamic_batching needs"));

  config.dynamic_batching.preferred_batch_sizes = {8};
  c = CompleteFromSignature(config, Signature({-1, 64}, {-1, 10}), "m.onnx");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("preferred_batch_size 8 is above max_batch_size 4"));
}

TEST_F(ModelCompletionTest, CompleteFromModelFileReadsOnlyWhenNeeded) {
  ModelConfig complete;
  complete.name = "m";
  complete.inputs.push_back({"a", DataType::kFp32, {1}});
  complete.outputs.push_back({"b", DataType::kFp32, {1}});
  // Complete already: the file is not read (it does not exist).
  StatusOr<ModelConfig> c = CompleteFromModelFile(complete, (dir_ / "absent.onnx").string());
  ASSERT_TRUE(c.ok()) << c.status();

  ModelConfig empty;
  empty.name = "mlp";
  c = CompleteFromModelFile(empty, BundledMlp());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_batch_size, 4);
  EXPECT_THAT(c->inputs[0].dims, ElementsAre(64));
  c = CompleteFromModelFile(empty, (dir_ / "absent.onnx").string());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera::repository
