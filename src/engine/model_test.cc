// End-to-end tests of LoadOnnxModel/Run on the bundled models (against torch's reference outputs)
// and on the error paths: bad files, unsupported ops, bad inputs.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <unistd.h>

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
  AddNode(graph, "RoiAlign", "roi", "b", "y");
  auto loaded = LoadOnnxModel(WriteModel(model, "unsupported.onnx"), {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(loaded.status().message(), HasSubstr("unsupported operators: "));
  EXPECT_THAT(loaded.status().message(), HasSubstr("LSTM (node \"lstm_1\")"));
  EXPECT_THAT(loaded.status().message(), HasSubstr("RoiAlign (node \"roi\")"));
  EXPECT_THAT(loaded.status().message(), Not(HasSubstr("Relu")));
}

TEST(ModelTest, UndefinedTensorIsInvalidArgument) {
  onnx::ModelProto model = TinyModel();
  AddNode(model.mutable_graph(), "Relu", "relu", "nowhere", "y");
  auto loaded = LoadOnnxModel(WriteModel(model, "undefined.onnx"), {});
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loaded.status().message(), HasSubstr("nowhere"));
}

// A Conv (or MaxPool) whose window attributes disagree on the rank is refused at load, naming
// the node and the attribute, not at its first request.
TEST(ModelTest, WindowAttributesThatDisagreeFailAtLoad) {
  struct Case {
    std::string op, attribute;
    std::vector<int64_t> values;
  };
  for (const Case& c : {Case{"Conv", "pads", {1, 1, 1}}, Case{"Conv", "strides", {1}},
                        Case{"MaxPool", "dilations", {1, 1, 1}}}) {
    onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(13);
    onnx::GraphProto* graph = model.mutable_graph();
    SetFloatTensor(graph->add_input(), "x", {1, 1, 4, 4});
    SetFloatTensor(graph->add_output(), "y", {1, 1, 2, 2});
    onnx::NodeProto* node = graph->add_node();
    node->set_op_type(c.op);
    node->set_name("window");
    node->add_input("x");
    if (c.op == "Conv") {
      onnx::TensorProto* w = graph->add_initializer();
      w->set_name("w");
      w->set_data_type(onnx::TensorProto::FLOAT);
      for (int64_t d : {1, 1, 3, 3}) w->add_dims(d);
      std::vector<float> ones(9, 1.0f);
      w->set_raw_data(ones.data(), ones.size() * sizeof(float));
      node->add_input("w");
    } else {
      onnx::AttributeProto* kernel = node->add_attribute();
      kernel->set_name("kernel_shape");
      kernel->set_type(onnx::AttributeProto::INTS);
      for (int64_t k : {3, 3}) kernel->add_ints(k);
    }
    node->add_output("y");
    onnx::AttributeProto* bad = node->add_attribute();
    bad->set_name(c.attribute);
    bad->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : c.values) bad->add_ints(v);
    auto loaded = LoadOnnxModel(WriteModel(model, "window_" + c.attribute + ".onnx"), {});
    ASSERT_FALSE(loaded.ok()) << c.op << " " << c.attribute;
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument) << loaded.status();
    EXPECT_THAT(loaded.status().message(), HasSubstr("\"window\"")) << loaded.status();
    EXPECT_THAT(loaded.status().message(), HasSubstr(c.attribute + " has ")) << loaded.status();
  }
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

// y = x + w with a constant w of `count` floats all equal to `value`.
onnx::ModelProto AddConstantModel(int64_t count, float value) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* graph = model.mutable_graph();
  SetFloatTensor(graph->add_input(), "x", {1, count});
  SetFloatTensor(graph->add_output(), "y", {1, count});
  onnx::TensorProto* w = graph->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(1);
  w->add_dims(count);
  std::vector<float> values(static_cast<size_t>(count), value);
  w->set_raw_data(values.data(), values.size() * sizeof(float));
  onnx::NodeProto* node = graph->add_node();
  node->set_op_type("Add");
  node->add_input("x");
  node->add_input("w");
  node->add_output("y");
  return model;
}

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

float FirstOutput(Model* model, int64_t count) {
  std::vector<float> x(static_cast<size_t>(count), 1.0f);
  TensorView view{"x", DataType::kFp32, {1, count}, x.data(), x.size() * 4};
  std::vector<Tensor> out;
  EXPECT_TRUE(model->Run({view}, &out).ok());
  return out.empty() ? 0.0f : Floats(out[0])[0];
}

TEST(ModelTest, InstancesOfOneFileShareTheirWeights) {
  constexpr int64_t kCount = 8 << 20;  // 32 MiB of weights
  const std::string path = WriteModel(AddConstantModel(kCount, 2.0f), "big_weights.onnx");
  std::vector<std::unique_ptr<Model>> models;
  models.push_back(Load(path));
  const int64_t after_first = ResidentBytes();
  for (int i = 0; i < 3; ++i) models.push_back(Load(path));
  const int64_t growth = ResidentBytes() - after_first;
  // Three unshared copies would add 96 MiB; shared, the three loads add next to nothing.
  EXPECT_LT(growth, 16 << 20) << "resident memory grew by " << growth << " bytes";
  for (auto& model : models) {
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->weight_bytes(), static_cast<uint64_t>(kCount) * 4);
  }
  EXPECT_EQ(FirstOutput(models.back().get(), kCount), 3.0f);
}

TEST(ModelTest, AChangedFileIsReadAgainNotServedFromTheSharedCopy) {
  constexpr int64_t kCount = 16;
  const std::string path = WriteModel(AddConstantModel(kCount, 2.0f), "changing.onnx");
  std::unique_ptr<Model> before = Load(path);
  ASSERT_NE(before, nullptr);
  // A new file under the same name (as a repository update writes it: new inode, new mtime).
  const std::string next = WriteModel(AddConstantModel(kCount, 5.0f), "changing.onnx.next");
  ASSERT_EQ(std::rename(next.c_str(), path.c_str()), 0);
  std::unique_ptr<Model> after = Load(path);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(FirstOutput(before.get(), kCount), 3.0f);
  EXPECT_EQ(FirstOutput(after.get(), kCount), 6.0f);
}

// AddConstantModel with w's bytes in `data_file` (after `junk` leading bytes) instead of inside
// the model, as ONNX's external-data format stores weights of models over 2 GiB.
std::string WriteExternalDataModel(const std::string& name, int64_t count, float value,
                                   const std::string& location, int junk, bool with_length) {
  onnx::ModelProto model = AddConstantModel(count, value);
  onnx::TensorProto* w = model.mutable_graph()->mutable_initializer(0);
  const std::string bytes = w->raw_data();
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const std::string& key, const std::string& v) {
    onnx::StringStringEntryProto* entry = w->add_external_data();
    entry->set_key(key);
    entry->set_value(v);
  };
  add("location", location);
  add("offset", std::to_string(junk));
  if (with_length) add("length", std::to_string(bytes.size()));
  std::ofstream(::testing::TempDir() + "/" + name + ".bin", std::ios::binary)
      << std::string(static_cast<size_t>(junk), 'j') << bytes;
  return WriteModel(model, name + ".onnx");
}

TEST(ModelTest, ExternalDataIsReadFromBesideTheModel) {
  for (bool with_length : {true, false}) {
    std::unique_ptr<Model> model =
        Load(WriteExternalDataModel("external", 1000, 2.5f, "external.bin", 7, with_length));
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->weight_bytes(), 4000u);
    EXPECT_EQ(FirstOutput(model.get(), 1000), 3.5f);
  }
}

TEST(ModelTest, WeightDimsLargerThanTheirDataFailBeforeAnythingIsAllocated) {
  // Found by model_fuzz.py: an initializer's dims corrupted to 2^40 made the loader allocate
  // 4 TiB before comparing them with the 16 bytes of data the file holds.
  auto error_of = [](onnx::ModelProto model, const std::string& name) {
    auto loaded = LoadOnnxModel(WriteModel(model, name), {});
    EXPECT_FALSE(loaded.ok()) << name;
    return loaded.ok() ? Status() : loaded.status();
  };
  onnx::ModelProto model = AddConstantModel(4, 1.0f);
  model.mutable_graph()->mutable_initializer(0)->set_dims(1, int64_t{1} << 40);
  Status s = error_of(model, "huge_raw.onnx");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("has 16 bytes of data for shape [1, 1099511627776]"));

  onnx::TensorProto* w = model.mutable_graph()->mutable_initializer(0);
  w->clear_raw_data();
  w->add_float_data(1.0f);
  s = error_of(model, "huge_typed.onnx");
  EXPECT_THAT(s.message(), HasSubstr("has 1 values for shape [1, 1099511627776]"));

  w->set_dims(1, int64_t{1} << 62);  // 2^64 bytes: the product must not wrap to 0
  s = error_of(model, "wrapping.onnx");
  EXPECT_THAT(s.message(), HasSubstr("has shape [1, 4611686018427387904]: more than 2^64 bytes"));

  std::string path = WriteExternalDataModel("huge_external", 4, 1.0f, "huge_external.bin", 0, true);
  onnx::ModelProto external;
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(external.ParseFromIstream(&in));
  external.mutable_graph()->mutable_initializer(0)->set_dims(1, int64_t{1} << 40);
  s = error_of(external, "huge_external.onnx");
  EXPECT_THAT(s.message(), HasSubstr("has 16 bytes of external data for shape [1, 1099511627776]"));
}

TEST(ModelTest, BadExternalDataIsAClearError) {
  auto error_of = [](const std::string& path) {
    auto loaded = LoadOnnxModel(path, {});
    EXPECT_FALSE(loaded.ok()) << path;
    return loaded.ok() ? Status() : loaded.status();
  };
  Status s = error_of(WriteExternalDataModel("escape", 4, 1.0f, "../escape.bin", 0, true));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor \"w\": external data location \"../escape.bin\" "
                                     "must be a relative path inside the model's folder"));
  s = error_of(WriteExternalDataModel("absolute", 4, 1.0f, "/etc/hostname", 0, true));
  EXPECT_THAT(s.message(), HasSubstr("must be a relative path"));
  s = error_of(WriteExternalDataModel("missing", 4, 1.0f, "no_such.bin", 0, true));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("cannot open its external data file"));
  EXPECT_THAT(s.message(), HasSubstr("no_such.bin"));
  // The file is shorter than offset + length.
  const std::string path = WriteExternalDataModel("short", 4, 1.0f, "short.bin", 0, true);
  std::ofstream(::testing::TempDir() + "/short.bin", std::ios::binary) << "12345678";
  s = error_of(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("holds 8 bytes, less than offset 0 + length 16"));
  // Without a length, the rest of the file must be exactly the tensor.
  WriteExternalDataModel("long", 4, 1.0f, "long.bin", 0, false);
  std::ofstream(::testing::TempDir() + "/long.bin", std::ios::binary) << std::string(20, 'x');
  s = error_of(::testing::TempDir() + "/long.onnx");
  EXPECT_THAT(s.message(), HasSubstr("has 20 bytes of external data for shape [1, 4] (16 bytes)"));
  // From bytes there is no folder to read the data from.
  std::ifstream in(::testing::TempDir() + "/escape.onnx", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  auto graph =
      ImportOnnxModelBytes(bytes.str(), "in-memory", [](const std::string&) { return true; });
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("read only for a model loaded from its file"));
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

namespace tessera::engine {
namespace {

// ---- Memory planner and per-layer timing on whole models -----------------------------------------

// Batch `rows` of the reference input, repeated cyclically from its 4 rows.
Tensor InputRows(const Tensor& input, int64_t rows) {
  Tensor t = input;
  const size_t row_bytes = input.bytes.size() / static_cast<size_t>(input.shape[0]);
  t.shape[0] = rows;
  t.bytes.clear();
  for (int64_t r = 0; r < rows; ++r) {
    const size_t src = static_cast<size_t>(r % input.shape[0]) * row_bytes;
    t.bytes.insert(t.bytes.end(), input.bytes.begin() + src, input.bytes.begin() + src + row_bytes);
  }
  return t;
}

class PlannedModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PlannedModelTest, PlannedRunsMatchReferenceAndUnplannedBitForBit) {
  const std::string name = GetParam();
  ModelOptions off;
  off.plan_memory = false;
  auto planned = Load(ModelPath(name));
  auto reference_model = LoadOnnxModel(ModelPath(name), off);
  ASSERT_NE(planned, nullptr);
  ASSERT_TRUE(reference_model.ok());
  Tensor input = ReadReference(name, "input_0.pb");
  Tensor expected = ReadReference(name, "output_0.pb");
  for (int64_t batch : {4, 1, 4, 1, 8, 4}) {
    Tensor in = InputRows(input, batch);
    std::vector<Tensor> want;
    ASSERT_TRUE((*reference_model)->Run({in.View()}, &want).ok());
    // Twice per batch size: the first Run records and plans, the second runs in the arena.
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<Tensor> got;
      Status status = planned->Run({in.View()}, &got);
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_EQ(got.size(), 1u);
      ASSERT_EQ(got[0].shape, want[0].shape);
      EXPECT_EQ(got[0].bytes, want[0].bytes) << name << " batch " << batch << " pass " << pass;
      if (batch == 4) {
        ExpectClose(Floats(got[0]), Floats(expected), ElementCount(expected.shape), "batch 4");
      }
    }
  }
}

TEST_P(PlannedModelTest, ArenaIsSmallerThanNaive) {
  const std::string name = GetParam();
  auto model = Load(ModelPath(name));
  ASSERT_NE(model, nullptr);
  uint64_t previous = 0;
  for (int64_t batch : {1, 4, 8}) {
    auto info = model->PlanMemory(batch);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->batch, batch);
    EXPECT_GT(info->num_values, 0);
    EXPECT_LT(info->arena_bytes, info->naive_bytes) << name << " batch " << batch;
    EXPECT_GE(info->arena_bytes, previous);
    previous = info->arena_bytes;
    // Figures for the change log: arena vs naive activation bytes.
    std::printf("[ plan     ] %s batch %lld: arena %llu B, naive %llu B, %d values\n", name.c_str(),
                static_cast<long long>(batch), static_cast<unsigned long long>(info->arena_bytes),
                static_cast<unsigned long long>(info->naive_bytes), info->num_values);
  }
  EXPECT_EQ(model->PlanMemory(0).status().code(), absl::StatusCode::kInvalidArgument);
  // A plan made by PlanMemory is then used by Run: results still match the reference.
  Tensor input = ReadReference(name, "input_0.pb");
  Tensor expected = ReadReference(name, "output_0.pb");
  std::vector<Tensor> got;
  ASSERT_TRUE(model->Run({input.View()}, &got).ok());
  ExpectClose(Floats(got[0]), Floats(expected), ElementCount(expected.shape), "planned batch 4");
}

TEST_P(PlannedModelTest, RunTimedReportsEveryNode) {
  const std::string name = GetParam();
  auto model = Load(ModelPath(name));
  ASSERT_NE(model, nullptr);
  Tensor input = ReadReference(name, "input_0.pb");
  std::vector<Tensor> plain, timed;
  std::vector<LayerTiming> timings;
  ASSERT_TRUE(model->Run({input.View()}, &plain).ok());
  ASSERT_TRUE(model->RunTimed({input.View()}, &timed, &timings).ok());
  EXPECT_EQ(timed[0].bytes, plain[0].bytes);
  auto graph = ImportOnnxModel(ModelPath(name), [](const std::string&) { return true; });
  ASSERT_TRUE(graph.ok());
  EXPECT_GT(timings.size(), 0u);
  EXPECT_LE(timings.size(), graph->nodes.size());  // constant-folded nodes do not run
  uint64_t total = 0;
  for (const LayerTiming& t : timings) {
    EXPECT_FALSE(t.op.empty());
    total += t.ns;
  }
  EXPECT_GT(total, 0u);
  EXPECT_EQ(model->RunTimed({input.View()}, &timed, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Models, PlannedModelTest, ::testing::Values("mlp", "small_cnn"));

TEST(ModelTest, ReluChainReusesBuffersAndTimesEachNode) {
  onnx::ModelProto model = TinyModel();
  AddNode(model.mutable_graph(), "Relu", "r1", "x", "a");
  AddNode(model.mutable_graph(), "Relu", "r2", "a", "b");
  AddNode(model.mutable_graph(), "Relu", "r3", "b", "c");
  AddNode(model.mutable_graph(), "Relu", "r4", "c", "y");
  auto loaded = LoadOnnxModel(WriteModel(model, "relu_chain.onnx"), {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  // Four 16-byte values (64 aligned); a/c and b/y pair up; y lives to the end.
  auto info = (*loaded)->PlanMemory(1);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->num_values, 4);
  EXPECT_EQ(info->naive_bytes, 256u);
  EXPECT_EQ(info->arena_bytes, 128u);

  std::vector<float> x = {-1, 2, -3, 4};
  TensorView view{"x", DataType::kFp32, {1, 4}, x.data(), x.size() * 4};
  std::vector<Tensor> out;
  std::vector<LayerTiming> timings;
  ASSERT_TRUE((*loaded)->RunTimed({view}, &out, &timings).ok());
  const float* y = Floats(out[0]);
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{0, 2, 0, 4}));
  ASSERT_EQ(timings.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(timings[i].node, "r" + std::to_string(i + 1));
    EXPECT_EQ(timings[i].op, "Relu");
  }
}

}  // namespace
}  // namespace tessera::engine
