// End-to-end tests of LoadOnnxModel/Run on the bundled models (against torch's reference outputs)
// and on the error paths: bad files, unsupported ops, bad inputs.
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {
namespace {

using ::testing::HasSubstr;

std::string ModelPath(const std::string& name) {
  return std::string(TESSERA_SOURCE_DIR) + "/configs/models/" + name + "/1/model.onnx";
}

Tensor ReadReference(const std::string& name, const std::string& file) {
  auto tensor = ReadTensorProtoFile(std::string(TESSERA_SOURCE_DIR) + "/tests/data/reference/" +
                                    name + "/" + file);
  EXPECT_TRUE(tensor.ok()) << tensor.status();
  return tensor.ok() ? *std::move(tensor) : Tensor{};
}

std::unique_ptr<Model> Load(const std::string& path, int threads = 1) {
  ModelOptions options;
  options.num_threads = threads;
  auto model = LoadOnnxModel(path, options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

const float* Floats(const Tensor& t) { return reinterpret_cast<const float*>(t.bytes.data()); }

// |actual - expected| <= 1e-5 + 1e-4 * |expected| element-wise, over `count` floats.
void ExpectClose(const float* actual, const float* expected, int64_t count, const std::string& what) {
  int bad = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (!(std::fabs(actual[i] - expected[i]) <= 1e-5f + 1e-4f * std::fabs(expected[i]))) {
      if (++bad <= 5) ADD_FAILURE() << what << "[" << i << "] = " << actual[i] << ", expected "
                                    << expected[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

class BundledModelTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(BundledModelTest, MatchesTorchReferenceAtBatch4AndBatch1) {
  const auto& [name, threads] = GetParam();
  auto model = Load(ModelPath(name), threads);
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->inputs().size(), 1u);
  EXPECT_EQ(model->inputs()[0].name, "input");
  EXPECT_EQ(model->inputs()[0].shape[0], -1) << "batch dim should be dynamic";
  EXPECT_GT(model->weight_bytes(), 0u);

  Tensor input = ReadReference(name, "input_0.pb");
  Tensor expected = ReadReference(name, "output_0.pb");
  ASSERT_EQ(input.shape[0], 4);
  std::vector<Tensor> outputs;
  ASSERT_TRUE(model->Run({input.View()}, &outputs).ok());
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].name, model->outputs()[0].name);
  ASSERT_EQ(outputs[0].shape, expected.shape);
  ExpectClose(Floats(outputs[0]), Floats(expected), ElementCount(expected.shape), "batch 4");

  // Each row alone: the dynamic batch dim must work and rows must not depend on each other.
  const int64_t in_row = ElementCount(input.shape) / 4, out_row = ElementCount(expected.shape) / 4;
  for (int64_t r = 0; r < 4; ++r) {
    Tensor one = input;
    one.shape[0] = 1;
    one.bytes.assign(input.bytes.begin() + r * in_row * 4, input.bytes.begin() + (r + 1) * in_row * 4);
    std::vector<Tensor> out;
    Status status = model->Run({one.View()}, &out);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_EQ(out[0].shape[0], 1);
    ExpectClose(Floats(out[0]), Floats(expected) + r * out_row, out_row,
                "batch 1 row " + std::to_string(r));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BundledModelTest,
                         ::testing::Combine(::testing::Values("mlp", "small_cnn"),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_threads" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(ModelTest, OneAndTwoThreadsAgree) {
  auto one = Load(ModelPath("small_cnn"), 1);
  auto two = Load(ModelPath("small_cnn"), 2);
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  Tensor input = ReadReference("small_cnn", "input_0.pb");
  std::vector<Tensor> a, b;
  ASSERT_TRUE(one->Run({input.View()}, &a).ok());
  ASSERT_TRUE(two->Run({input.View()}, &b).ok());
  ExpectClose(Floats(a[0]), Floats(b[0]), ElementCount(a[0].shape), "1 vs 2 threads");
}

TEST(ModelTest, MissingFileIsNotFound) {
  auto model = LoadOnnxModel("/nonexistent/model.onnx", {});
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(model.status().message(), HasSubstr("/nonexistent/model.onnx"));
}

TEST(ModelTest, TruncatedFileIsInvalidArgumentNamingThePath) {
  std::ifstream in(ModelPath("small_cnn"), std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  std::string data = bytes.str();
  const std::string path = ::testing::TempDir() + "/truncated_model.onnx";
  std::ofstream(path, std::ios::binary) << data.substr(0, data.size() / 2);
  auto model = LoadOnnxModel(path, {});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr(path));
  EXPECT_THAT(model.status().message(), HasSubstr("not a valid ONNX model"));
}

void AddNode(onnx::GraphProto* graph, const std::string& op, const std::string& name,
             const std::string& in, const std::string& out) {
  onnx::NodeProto* node = graph->add_node();
  node->set_op_type(op);
  node->set_name(name);
  node->add_input(in);
  node->add_output(out);
}

void SetFloatTensor(onnx::ValueInfoProto* info, const std::string& name, std::vector<int64_t> dims) {
  info->set_name(name);
  auto* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tensor->mutable_shape()->add_dim()->set_dim_value(d);
}

std::string WriteModel(const onnx::ModelProto& model, const std::string& file) {
  const std::string path = ::testing::TempDir() + "/" + file;
  std::ofstream out(path, std::ios::binary);
  model.SerializeToOstream(&out);
  return path;
}

onnx::ModelProto TinyModel() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* graph = model.mutable_graph();
  SetFloatTensor(graph->add_input(), "x", {1, 4});
  SetFloatTensor(graph->add_output(), "y", {1, 4});
  return model;
}

TEST(ModelTest, UnsupportedOperatorsAreAllListedAtLoad) {
  onnx::ModelProto model = TinyModel();
  onnx::GraphProto* graph = model.mutable_graph();
  AddNode(graph, "Relu", "relu", "x", "a");
  AddNode(graph, "LSTM", "lstm_1", "a", "b");
  AddNode(graph, "NonMaxSuppression", "nms", "b", "y");
  auto loaded = LoadOnnxModel(WriteModel(model, "unsupported.onnx"), {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(loaded.status().message(), HasSubstr("unsupported operators: "));
  EXPECT_THAT(loaded.status().message(), HasSubstr("LSTM (node \"lstm_1\")"));
  EXPECT_THAT(loaded.status().message(), HasSubstr("NonMaxSuppression (node \"nms\")"));
  EXPECT_THAT(loaded.status().message(), Not(HasSubstr("Relu")));
}

TEST(ModelTest, UndefinedTensorIsInvalidArgument) {
  onnx::ModelProto model = TinyModel();
  AddNode(model.mutable_graph(), "Relu", "relu", "nowhere", "y");
  auto loaded = LoadOnnxModel(WriteModel(model, "undefined.onnx"), {});
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(), HasSubstr("nowhere"));
}

TEST(ModelTest, TinyHandBuiltModelRuns) {
  onnx::ModelProto model = TinyModel();
  AddNode(model.mutable_graph(), "Relu", "relu", "x", "y");
  auto loaded = LoadOnnxModel(WriteModel(model, "relu.onnx"), {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::vector<float> x = {-1, 2, -3, 4};
  TensorView view{"x", DataType::kFp32, {1, 4}, x.data(), x.size() * 4};
  std::vector<Tensor> out;
  ASSERT_TRUE((*loaded)->Run({view}, &out).ok());
  const float* y = Floats(out[0]);
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{0, 2, 0, 4}));
}

class RunErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = Load(ModelPath("mlp"));
    ASSERT_NE(model_, nullptr);
    data_.assign(2 * 64, 0.5f);
  }
  TensorView Good() { return {"input", DataType::kFp32, {2, 64}, data_.data(), data_.size() * 4}; }
  Status RunWith(std::vector<TensorView> inputs) {
    std::vector<Tensor> outputs;
    return model_->Run(inputs, &outputs);
  }
  void ExpectInvalid(std::vector<TensorView> inputs, const std::string& needle) {
    Status status = RunWith(std::move(inputs));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr(needle));
    // The model stays usable after a rejected request.
    EXPECT_TRUE(RunWith({Good()}).ok());
  }
  std::unique_ptr<Model> model_;
  std::vector<float> data_;
};

TEST_F(RunErrorTest, MissingInput) { ExpectInvalid({}, "missing input \"input\""); }

TEST_F(RunErrorTest, UnknownInput) {
  TensorView extra = Good();
  extra.name = "bogus";
  ExpectInvalid({Good(), extra}, "\"bogus\"");
}

TEST_F(RunErrorTest, WrongDtype) {
  TensorView v = Good();
  v.dtype = DataType::kInt32;
  v.byte_size = 2 * 64 * 4;
  ExpectInvalid({v}, "input \"input\" has data type INT32");
}

TEST_F(RunErrorTest, WrongRank) {
  TensorView v = Good();
  v.shape = {128};
  ExpectInvalid({v}, "input \"input\" has shape [128]");
}

TEST_F(RunErrorTest, WrongStaticDim) {
  TensorView v = Good();
  v.shape = {4, 32};
  ExpectInvalid({v}, "input \"input\" has shape [4, 32]");
}

TEST_F(RunErrorTest, ByteSizeDisagreesWithShape) {
  TensorView v = Good();
  v.byte_size = 100;
  ExpectInvalid({v}, "input \"input\" has 100 bytes");
}

}  // namespace
}  // namespace tessera::engine
