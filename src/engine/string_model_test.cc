// STRING (BYTES) tensors end to end: models with STRING inputs, outputs, initializers and Constant
// nodes loaded with LoadOnnxModel and run with serialized inputs (tessera/common/bytes_tensor.h),
// with and without the memory plan; the load-time refusals (numeric ops on strings, other ML ops).
#include <string>
#include <vector>

#include "engine/onnx_builder_for_test.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "tessera/common/bytes_tensor.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Message(const Status& status) { return std::string(status.message()); }

// The models below import the default domain at opset 17 and, where they use LabelEncoder,
// ai.onnx.ml at opset 2.
constexpr int kOpset = 17;
constexpr int kMlOpset = 2;

constexpr int kString = onnx::TensorProto::STRING;
constexpr int kInt64 = onnx::TensorProto::INT64;
constexpr int kFloat = onnx::TensorProto::FLOAT;

// A serialized BYTES tensor.
Tensor Texts(const std::string& name, Shape shape, const std::vector<std::string>& strings) {
  std::string bytes;
  for (const std::string& s : strings) AppendBytesElement(s, &bytes);
  Tensor t;
  t.name = name;
  t.dtype = DataType::kString;
  t.shape = std::move(shape);
  const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
  t.bytes.assign(data, data + bytes.size());
  return t;
}

std::vector<std::string> Strings(const Tensor& t) {
  EXPECT_EQ(t.dtype, DataType::kString);
  auto elements = SplitBytesElements(t.bytes.data(), t.bytes.size());
  EXPECT_TRUE(elements.ok()) << elements.status();
  if (!elements.ok()) return {};
  EXPECT_EQ(static_cast<int64_t>(elements->size()), ElementCount(t.shape));
  return std::vector<std::string>(elements->begin(), elements->end());
}

std::vector<int64_t> Int64s(const Tensor& t) {
  EXPECT_EQ(t.dtype, DataType::kInt64);
  const auto* p = reinterpret_cast<const int64_t*>(t.bytes.data());
  return std::vector<int64_t>(p, p + t.bytes.size() / sizeof(int64_t));
}

std::unique_ptr<Model> Load(const std::string& path, bool plan_memory = true) {
  ModelOptions options;
  options.plan_memory = plan_memory;
  auto model = LoadOnnxModel(path, options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// text [N] -> LabelEncoder -> ids (INT64) -> LabelEncoder -> label (STRING).
std::string WriteVocabModel() {
  OnnxBuilderForTest b;
  b.Opsets(kOpset, kMlOpset);
  b.Input("text", {-1}, kString);
  b.Output("ids", kInt64);
  b.Output("label", kString);
  auto* encode = b.Node("LabelEncoder", {"text"}, {"ids"}, "ai.onnx.ml");
  OnnxBuilderForTest::Strings(encode, "keys_strings", {"cat", "dog", "bird"});
  OnnxBuilderForTest::Ints(encode, "values_int64s", {0, 1, 2});
  OnnxBuilderForTest::Int(encode, "default_int64", -1);
  auto* decode = b.Node("LabelEncoder", {"ids"}, {"label"}, "ai.onnx.ml");
  OnnxBuilderForTest::Ints(decode, "keys_int64s", {0, 1, 2});
  OnnxBuilderForTest::Strings(decode, "values_strings", {"CAT", "DOG", ""});
  OnnxBuilderForTest::String(decode, "default_string", "unknown");
  return b.Write("vocab.onnx");
}

TEST(StringModelTest, LabelEncodersRoundTripWithAndWithoutAPlan) {
  const std::string path = WriteVocabModel();
  for (bool plan : {true, false}) {
    auto model = Load(path, plan);
    ASSERT_NE(model, nullptr);
    ASSERT_EQ(model->inputs().size(), 1u);
    EXPECT_EQ(model->inputs()[0].dtype, DataType::kString);
    EXPECT_EQ(model->outputs()[0].dtype, DataType::kInt64);
    EXPECT_EQ(model->outputs()[1].dtype, DataType::kString);
    // Three runs: the first records the plan, the later ones run in the planned arena, with a
    // different batch in between.
    for (const auto& text : std::vector<std::vector<std::string>>{
             {"dog", "fish", "cat", "bird"}, {"", "cat"}, {"bird", "dog", "x", "cat"}}) {
      Tensor input = Texts("text", {static_cast<int64_t>(text.size())}, text);
      std::vector<Tensor> outputs;
      ASSERT_TRUE(model->Run({input.View()}, &outputs).ok());
      ASSERT_EQ(outputs.size(), 2u);
      std::vector<int64_t> want_ids;
      std::vector<std::string> want_labels;
      for (const std::string& s : text) {
        const int64_t id = s == "cat" ? 0 : s == "dog" ? 1 : s == "bird" ? 2 : -1;
        want_ids.push_back(id);
        want_labels.push_back(id == 0 ? "CAT" : id == 1 ? "DOG" : id == 2 ? "" : "unknown");
      }
      EXPECT_EQ(Int64s(outputs[0]), want_ids);
      EXPECT_EQ(outputs[1].shape, input.shape);
      EXPECT_EQ(Strings(outputs[1]), want_labels);
    }
    auto info = model->PlanMemory(8);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_GT(info->arena_bytes, 0u);
  }
}

TEST(StringModelTest, MalformedSerializedInputIsInvalidArgumentNamingIt) {
  auto model = Load(WriteVocabModel());
  ASSERT_NE(model, nullptr);
  std::vector<Tensor> outputs;
  Tensor cut = Texts("text", {2}, {"cat", "dog"});
  cut.bytes.pop_back();  // the last element's bytes run past the end
  Status status = model->Run({cut.View()}, &outputs);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), HasSubstr("input \"text\""));
  Tensor too_few = Texts("text", {3}, {"cat", "dog"});
  status = model->Run({too_few.View()}, &outputs);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), AllOf(HasSubstr("input \"text\""), HasSubstr("needs 3")));
  // The model stays usable.
  Tensor good = Texts("text", {1}, {"dog"});
  ASSERT_TRUE(model->Run({good.View()}, &outputs).ok());
  EXPECT_THAT(Int64s(outputs[0]), ElementsAre(1));
}

TEST(StringModelTest, NormalizerThenIdentity) {
  OnnxBuilderForTest b;
  b.Opsets(kOpset);
  b.Input("words", {1, -1}, kString);
  b.Output("clean", kString);
  auto* norm = b.Node("StringNormalizer", {"words"}, {"norm"});
  OnnxBuilderForTest::String(norm, "case_change_action", "LOWER");
  OnnxBuilderForTest::Strings(norm, "stopwords", {"a", "the"});
  b.Node("Identity", {"norm"}, {"clean"});
  auto model = Load(b.Write("normalizer.onnx"));
  ASSERT_NE(model, nullptr);
  Tensor input = Texts("words", {1, 5}, {"The", "Cat", "sat", "ON", "A"});
  std::vector<Tensor> outputs;
  ASSERT_TRUE(model->Run({input.View()}, &outputs).ok());
  EXPECT_EQ(outputs[0].shape, Shape({1, 3}));
  EXPECT_THAT(Strings(outputs[0]), ElementsAre("cat", "sat", "on"));
}

TEST(StringModelTest, StringConstantsGatherConcatEqualAndCast) {
  OnnxBuilderForTest b;
  b.Opsets(kOpset);
  b.Input("ids", {-1}, kInt64);
  b.Input("text", {-1}, kString);
  b.Input("digits", {-1}, kString);
  b.Output("words", kString);
  b.Output("same", onnx::TensorProto::BOOL);
  b.Output("numbers", kFloat);
  b.StringConstant("vocab", {3}, {"zero", "one", "two"});
  b.Node("Gather", {"vocab", "ids"}, {"picked"});
  // A Constant node with a STRING tensor value.
  auto* constant = b.Node("Constant", {}, {"suffix"});
  auto* value = constant->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::STRING);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_string_data("end");
  OnnxBuilderForTest::Int(b.Node("Concat", {"picked", "suffix"}, {"words"}), "axis", 0);
  b.Node("Equal", {"text", "picked"}, {"same"});
  auto* cast = b.Node("Cast", {"digits"}, {"numbers"});
  OnnxBuilderForTest::Int(cast, "to", onnx::TensorProto::FLOAT);
  auto model = Load(b.Write("constants.onnx"));
  ASSERT_NE(model, nullptr);
  Tensor ids;
  ids.name = "ids";
  ids.dtype = DataType::kInt64;
  ids.shape = {2};
  const int64_t id_values[] = {2, 0};
  const auto* id_bytes = reinterpret_cast<const std::byte*>(id_values);
  ids.bytes.assign(id_bytes, id_bytes + sizeof(id_values));
  Tensor text = Texts("text", {2}, {"two", "one"});
  Tensor digits = Texts("digits", {2}, {"2", "zero"});
  std::vector<Tensor> outputs;
  Status status = model->Run({ids.View(), text.View(), digits.View()}, &outputs);
  ASSERT_FALSE(status.ok()) << "\"zero\" is not a number";
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(status), AllOf(HasSubstr("numbers_node"), HasSubstr("\"zero\"")));
  digits = Texts("digits", {2}, {"1.5", "0.25"});
  ASSERT_TRUE(model->Run({ids.View(), text.View(), digits.View()}, &outputs).ok());
  EXPECT_THAT(Strings(outputs[0]), ElementsAre("two", "zero", "end"));
  EXPECT_EQ(outputs[1].bytes, (std::vector<std::byte>{std::byte{1}, std::byte{0}}));
  EXPECT_EQ(outputs[2].bytes.size(), 8u);
  EXPECT_EQ(reinterpret_cast<const float*>(outputs[2].bytes.data())[1], 0.25f);
}

TEST(StringModelTest, StringSubgraphsOnConstantsAreFoldedAtLoad) {
  OnnxBuilderForTest b;
  b.Opsets(kOpset, kMlOpset);
  b.Input("x", {-1}, kInt64);
  b.Output("y", kString);
  b.StringConstant("names", {2}, {"Ada", "Bob"});
  auto* upper = b.Node("StringNormalizer", {"names"}, {"upper"});
  OnnxBuilderForTest::String(upper, "case_change_action", "UPPER");
  auto* ids = b.Node("LabelEncoder", {"upper"}, {"ids"}, "ai.onnx.ml");
  OnnxBuilderForTest::Strings(ids, "keys_strings", {"BOB"});
  OnnxBuilderForTest::Ints(ids, "values_int64s", {1});
  auto* back = b.Node("LabelEncoder", {"ids"}, {"labels"}, "ai.onnx.ml");
  OnnxBuilderForTest::Ints(back, "keys_int64s", {1, -1});
  OnnxBuilderForTest::Strings(back, "values_strings", {"known", "stranger"});
  b.Node("Gather", {"labels", "x"}, {"y"});
  auto model = Load(b.Write("folded.onnx"));
  ASSERT_NE(model, nullptr);
  EXPECT_GT(model->weight_bytes(), 0u);
  Tensor x;
  x.name = "x";
  x.dtype = DataType::kInt64;
  x.shape = {3};
  const int64_t values[] = {1, 0, 1};
  const auto* bytes = reinterpret_cast<const std::byte*>(values);
  x.bytes.assign(bytes, bytes + sizeof(values));
  std::vector<Tensor> outputs;
  ASSERT_TRUE(model->Run({x.View()}, &outputs).ok());
  EXPECT_THAT(Strings(outputs[0]), ElementsAre("known", "stranger", "known"));
}

TEST(StringModelTest, NumericOpsOnStringsAreRefusedAtLoad) {
  OnnxBuilderForTest b;
  b.Opsets(kOpset);
  b.Input("text", {-1}, kString);
  b.Output("y", kString);
  b.Node("Add", {"text", "text"}, {"y"});
  const auto model = LoadOnnxModel(b.Write("add_strings.onnx"), {});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Message(model.status()),
              AllOf(HasSubstr("BYTES (string)"), HasSubstr("y_node"), HasSubstr("\"text\"")));
}

TEST(StringModelTest, OnlyTheImplementedMlOpsAreImported) {
  OnnxBuilderForTest b;
  b.Opsets(kOpset, kMlOpset);
  b.Input("x", {-1}, kFloat);
  b.Output("y", kFloat);
  b.Node("Binarizer", {"x"}, {"y"}, "ai.onnx.ml");
  auto model = LoadOnnxModel(b.Write("binarizer.onnx"), {});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(Message(model.status()), HasSubstr("unsupported operators: ai.onnx.ml.Binarizer"));

  OnnxBuilderForTest no_ml;
  no_ml.Opsets(kOpset);
  no_ml.Input("text", {-1}, kString);
  no_ml.Output("ids", kInt64);
  auto* encode = no_ml.Node("LabelEncoder", {"text"}, {"ids"}, "ai.onnx.ml");
  OnnxBuilderForTest::Strings(encode, "keys_strings", {"a"});
  OnnxBuilderForTest::Ints(encode, "values_int64s", {1});
  model = LoadOnnxModel(no_ml.Write("no_ml_opset.onnx"), {});
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(Message(model.status()), HasSubstr("ai.onnx.ml opset 0"));

  OnnxBuilderForTest default_domain;
  default_domain.Opsets(kOpset, kMlOpset);
  default_domain.Input("text", {-1}, kString);
  default_domain.Output("ids", kInt64);
  default_domain.Node("LabelEncoder", {"text"}, {"ids"});  // not in the default domain
  model = LoadOnnxModel(default_domain.Write("default_domain_label_encoder.onnx"), {});
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(Message(model.status()), HasSubstr("unsupported operators: LabelEncoder"));
}

}  // namespace
}  // namespace tessera::engine
