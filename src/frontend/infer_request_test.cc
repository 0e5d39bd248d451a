#include "infer_request.h"

#include <gtest/gtest.h>

#include "tessera/common/bytes_tensor.h"

namespace tessera::frontend {
namespace {

repository::ModelConfig MlpConfig() {
  repository::ModelConfig config;
  config.name = "mlp";
  config.max_batch_size = 8;
  config.inputs = {{"input", DataType::kFp32, {4}}};
  config.outputs = {{"output", DataType::kFp32, {2}}};
  return config;
}

inference::ModelInferRequest RawRequest(const std::string& dtype, std::vector<int64_t> shape,
                                        size_t bytes) {
  inference::ModelInferRequest wire;
  wire.set_model_name("mlp");
  auto* input = wire.add_inputs();
  input->set_name("input");
  input->set_datatype(dtype);
  for (int64_t d : shape) input->add_shape(d);
  wire.add_raw_input_contents(std::string(bytes, '\1'));
  return wire;
}

Status Build(const inference::ModelInferRequest& wire, const repository::ModelConfig& config) {
  RequestStorage storage;
  return BuildDispatchRequest(wire, config, &storage).status();
}

void ExpectInvalid(const Status& status, const std::string& fragment) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(fragment), std::string::npos)
      << "'" << status.message() << "' lacks '" << fragment << "'";
}

TEST(InferRequestTest, ValidRawRequestBuildsViewsIntoTheMessage) {
  auto wire = RawRequest("FP32", {3, 4}, 48);
  RequestStorage storage;
  auto request = BuildDispatchRequest(wire, MlpConfig(), &storage);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ((*request)->batch_size, 3);
  ASSERT_EQ((*request)->inputs.size(), 1u);
  EXPECT_EQ((*request)->inputs[0].data, wire.raw_input_contents(0).data());
  EXPECT_EQ((*request)->inputs[0].shape, (Shape{3, 4}));
  EXPECT_TRUE(storage.converted.empty());
}

TEST(InferRequestTest, TypedContentsAreConverted) {
  inference::ModelInferRequest wire;
  auto* input = wire.add_inputs();
  input->set_name("input");
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(4);
  for (float v : {1.f, 2.f, 3.f, 4.f}) input->mutable_contents()->add_fp32_contents(v);
  RequestStorage storage;
  auto request = BuildDispatchRequest(wire, MlpConfig(), &storage);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_EQ(storage.converted.size(), 1u);
  const float* data = static_cast<const float*>((*request)->inputs[0].data);
  EXPECT_EQ(data[3], 4.f);

  input->mutable_contents()->add_fp32_contents(5.f);
  ExpectInvalid(Build(wire, MlpConfig()), "contents hold 5 elements");
}

TEST(InferRequestTest, RejectsWrongDtypeShapeBytesAndBatch) {
  ExpectInvalid(Build(RawRequest("FP64", {1, 4}, 32), MlpConfig()),
                "datatype FP64 does not match the model's FP32");
  ExpectInvalid(Build(RawRequest("FLOAT", {1, 4}, 16), MlpConfig()), "unknown datatype 'FLOAT'");
  ExpectInvalid(Build(RawRequest("FP32", {1, 3}, 12), MlpConfig()), "shape [1, 3]");
  ExpectInvalid(Build(RawRequest("FP32", {4}, 16), MlpConfig()), "shape [4]");
  ExpectInvalid(Build(RawRequest("FP32", {1, 4}, 15), MlpConfig()), "has 15 bytes");
  ExpectInvalid(Build(RawRequest("FP32", {9, 4}, 144), MlpConfig()), "batch size 9");
  ExpectInvalid(Build(RawRequest("FP32", {0, 4}, 0), MlpConfig()), "batch size 0");
}

repository::ModelConfig TextConfig() {
  repository::ModelConfig config;
  config.name = "text";
  config.max_batch_size = 4;
  config.inputs = {{"input", DataType::kString, {2}}};
  config.outputs = {{"output", DataType::kString, {2}}};
  return config;
}

std::string Strings(const std::vector<std::string>& elements) {
  std::string bytes;
  for (const std::string& e : elements) AppendBytesElement(e, &bytes);
  return bytes;
}

TEST(InferRequestTest, BytesInputsKeepTheirSerializedFormAndElementCountIsChecked) {
  auto wire = RawRequest("BYTES", {2, 2}, 0);
  *wire.mutable_raw_input_contents(0) = Strings({"", "a", "bcd", std::string("\0", 1)});
  RequestStorage storage;
  auto request = BuildDispatchRequest(wire, TextConfig(), &storage);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ((*request)->batch_size, 2);
  EXPECT_EQ((*request)->inputs[0].data, wire.raw_input_contents(0).data());
  EXPECT_EQ((*request)->inputs[0].byte_size, 4u * 4 + 0 + 1 + 3 + 1);

  *wire.mutable_raw_input_contents(0) = Strings({"a", "b", "c"});
  ExpectInvalid(Build(wire, TextConfig()),
                "input 'input': raw_input_contents: 15 bytes of BYTES data hold 3 elements, the "
                "shape needs 4");
  wire.mutable_raw_input_contents(0)->append("\x09\0\0\0abc", 7);
  ExpectInvalid(Build(wire, TextConfig()), "BYTES element 3 says it has 9 bytes but only 3 follow");
  ExpectInvalid(Build(RawRequest("FP32", {1, 2}, 8), TextConfig()),
                "datatype FP32 does not match the model's BYTES");
}

TEST(InferRequestTest, TypedBytesContentsAreSerialized) {
  inference::ModelInferRequest wire;
  auto* input = wire.add_inputs();
  input->set_name("input");
  input->set_datatype("BYTES");
  input->add_shape(1);
  input->add_shape(2);
  input->mutable_contents()->add_bytes_contents("xy");
  input->mutable_contents()->add_bytes_contents("");
  RequestStorage storage;
  auto request = BuildDispatchRequest(wire, TextConfig(), &storage);
  ASSERT_TRUE(request.ok()) << request.status();
  const TensorView& view = (*request)->inputs[0];
  EXPECT_EQ(std::string(static_cast<const char*>(view.data), view.byte_size), Strings({"xy", ""}));

  input->mutable_contents()->add_bytes_contents("z");
  ExpectInvalid(Build(wire, TextConfig()), "contents hold 3 elements, but shape [1, 2] needs 2");
}

TEST(InferRequestTest, AnOptionalInputMayBeLeftOut) {
  repository::ModelConfig config = MlpConfig();
  config.inputs.push_back({"scale", DataType::kFp32, {4}});
  ExpectInvalid(Build(RawRequest("FP32", {2, 4}, 32), config), "missing input 'scale'");
  config.inputs.back().optional = true;
  RequestStorage storage;
  auto request = BuildDispatchRequest(RawRequest("FP32", {2, 4}, 32), config, &storage);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_EQ((*request)->inputs.size(), 2u);  // one per config input, in the config's order
  EXPECT_FALSE(dispatch::IsAbsent((*request)->inputs[0]));
  EXPECT_TRUE(dispatch::IsAbsent((*request)->inputs[1]));
  EXPECT_EQ((*request)->inputs[1].name, "scale");
  EXPECT_EQ((*request)->batch_size, 2);

  // Every input left out: a batched model has no batch size to go by.
  config.inputs.front().optional = true;
  ExpectInvalid(Build(inference::ModelInferRequest(), config), "the request gives no input");
  config.max_batch_size = 0;
  config.inputs.front().dims = {2, 4};
  EXPECT_TRUE(Build(inference::ModelInferRequest(), config).ok());
}

TEST(InferRequestTest, RejectsMissingUnknownAndDuplicateTensors) {
  inference::ModelInferRequest empty;
  ExpectInvalid(Build(empty, MlpConfig()), "missing input 'input'");

  auto wire = RawRequest("FP32", {1, 4}, 16);
  wire.mutable_inputs(0)->set_name("x");
  ExpectInvalid(Build(wire, MlpConfig()), "unexpected input 'x'");

  wire = RawRequest("FP32", {1, 4}, 16);
  *wire.add_inputs() = wire.inputs(0);
  wire.add_raw_input_contents(wire.raw_input_contents(0));
  ExpectInvalid(Build(wire, MlpConfig()), "given twice");

  wire = RawRequest("FP32", {1, 4}, 16);
  wire.add_raw_input_contents("extra");
  ExpectInvalid(Build(wire, MlpConfig()), "raw_input_contents");

  wire = RawRequest("FP32", {1, 4}, 16);
  wire.add_outputs()->set_name("nope");
  ExpectInvalid(Build(wire, MlpConfig()), "requested output 'nope'");
}

TEST(InferRequestTest, UnbatchedModelTakesExactShape) {
  auto config = MlpConfig();
  config.max_batch_size = 0;
  config.inputs[0].dims = {2, -1};
  EXPECT_TRUE(Build(RawRequest("FP32", {2, 5}, 40), config).ok());
  ExpectInvalid(Build(RawRequest("FP32", {1, 2, 5}, 40), config), "does not match");
}

TEST(InferRequestTest, ShapeWhoseByteSizeOverflowsIsRefusedNotWrapped) {
  // [1, 2^62] FP32 is 2^64 bytes: a wrapped product would ask for 0 bytes and let an empty
  // input through.
  auto config = MlpConfig();
  config.inputs[0].dims = {-1};
  ExpectInvalid(Build(RawRequest("FP32", {1, int64_t{1} << 62}, 0), config),
                "has more than 2^64 bytes");
  ExpectInvalid(Build(RawRequest("FP32", {1, (int64_t{1} << 61) + 1}, 4), config),
                "needs 9223372036854775812");
}

TEST(InferRequestTest, ResponseCarriesRawOutputs) {
  dispatch::Response response;
  response.outputs.push_back({"output", DataType::kFp32, {1, 2}, std::string(8, 'a')});
  inference::ModelInferResponse wire;
  ASSERT_TRUE(FillInferResponse("mlp", 3, "req-7", std::move(response), RequestStorage{}, &wire).ok());
  EXPECT_EQ(wire.model_version(), "3");
  EXPECT_EQ(wire.id(), "req-7");
  ASSERT_EQ(wire.outputs_size(), 1);
  EXPECT_EQ(wire.outputs(0).datatype(), "FP32");
  ASSERT_EQ(wire.raw_output_contents_size(), 1);
  EXPECT_EQ(wire.raw_output_contents(0).size(), 8u);
}

TEST(InferRequestTest, TheTimeoutParameterSetsTheQueueTimeoutWhereTheConfigAllowsIt) {
  repository::ModelConfig config = MlpConfig();
  config.dynamic_batching.enabled = true;
  config.dynamic_batching.default_queue_policy.default_timeout_microseconds = 5000;
  auto wire = RawRequest("FP32", {1, 4}, 16);
  RequestStorage storage;
  EXPECT_EQ((*BuildDispatchRequest(wire, config, &storage))->queue_timeout_ns, 5'000'000u);
  (*wire.mutable_parameters())["timeout"].set_int64_param(2000);
  EXPECT_EQ((*BuildDispatchRequest(wire, config, &storage))->queue_timeout_ns, 5'000'000u);
  config.dynamic_batching.default_queue_policy.allow_timeout_override = true;
  EXPECT_EQ((*BuildDispatchRequest(wire, config, &storage))->queue_timeout_ns, 2'000'000u);
  (*wire.mutable_parameters())["timeout"].set_string_param("soon");
  ExpectInvalid(Build(wire, config), "parameter 'timeout' must be a non-negative integer");
  (*wire.mutable_parameters())["timeout"].set_int64_param(-1);
  ExpectInvalid(Build(wire, config), "parameter 'timeout' must be a non-negative integer");
}

TEST(InferRequestTest, ThePriorityParameterPicksTheLevel) {
  repository::ModelConfig config = MlpConfig();
  config.dynamic_batching.enabled = true;
  config.dynamic_batching.priority_levels = 4;
  config.dynamic_batching.default_priority_level = 3;
  auto wire = RawRequest("FP32", {1, 4}, 16);
  RequestStorage storage;
  EXPECT_EQ((*BuildDispatchRequest(wire, config, &storage))->priority, 3u);
  (*wire.mutable_parameters())["priority"].set_uint64_param(1);
  EXPECT_EQ((*BuildDispatchRequest(wire, config, &storage))->priority, 1u);
  (*wire.mutable_parameters())["priority"].set_bool_param(true);
  ExpectInvalid(Build(wire, config), "parameter 'priority' must be a non-negative integer");
}

TEST(InferRequestTest, ReshapedTensorsReachTheModelInItsShapeAndComeBackInTheConfigs) {
  repository::ModelConfig config = MlpConfig();
  config.inputs[0].dims = {4, -1};
  config.inputs[0].reshape = Shape{2, 2, -1};
  config.outputs[0].reshape = Shape{1, 2};
  auto wire = RawRequest("FP32", {3, 4, 5}, 3 * 4 * 5 * 4);
  RequestStorage storage;
  auto request = BuildDispatchRequest(wire, config, &storage);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ((*request)->inputs[0].shape, (Shape{3, 2, 2, 5}));
  // The config's dims are what a request is checked against, not the model's.
  ExpectInvalid(Build(RawRequest("FP32", {3, 2, 2, 5}, 240), config), "[-1, 4, -1]");

  dispatch::Response response;
  response.outputs.push_back({"output", DataType::kFp32, {3, 1, 2}, std::string(24, 'a')});
  inference::ModelInferResponse answer;
  ASSERT_TRUE(FillInferResponse("mlp", 1, "", std::move(response), storage, &answer).ok());
  ASSERT_EQ(answer.outputs_size(), 1);
  EXPECT_EQ(std::vector<int64_t>(answer.outputs(0).shape().begin(), answer.outputs(0).shape().end()),
            (std::vector<int64_t>{3, 2}));
}

}  // namespace
}  // namespace tessera::frontend
