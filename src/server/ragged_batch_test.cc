// Ragged batching's batch-time steps: each kind of batch input from its source shapes (the values
// model_config.proto documents), and a scattered output split back per request.
#include "ragged_batch.h"

#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Kind = repository::BatchInputConfig::Kind;

template <typename T>
std::vector<T> Values(const MadeTensor& made) {
  std::vector<T> values(made.bytes.size() / sizeof(T));
  std::memcpy(values.data(), made.bytes.data(), made.bytes.size());
  return values;
}

MadeTensor Make(Kind kind, DataType dtype, const std::vector<Shape>& shapes) {
  repository::BatchInputConfig config;
  config.kind = kind;
  config.data_type = dtype;
  return MakeBatchInput(config, shapes);
}

// Three requests of a [batch, n] input holding 3, 4 and 5 elements (the counts of Triton's
// ragged_batching.md example); the second is two rows of 2.
const std::vector<Shape> kShapes = {{1, 3}, {2, 2}, {1, 5}};

TEST(RaggedBatchTest, ElementCounts) {
  MadeTensor counts = Make(Kind::kElementCount, DataType::kInt32, kShapes);
  EXPECT_THAT(counts.shape, ElementsAre(3));
  EXPECT_THAT(Values<int32_t>(counts), ElementsAre(3, 4, 5));
  MadeTensor ends = Make(Kind::kAccumulatedElementCount, DataType::kFp32, kShapes);
  EXPECT_THAT(ends.shape, ElementsAre(3));
  EXPECT_THAT(Values<float>(ends), ElementsAre(3.0f, 7.0f, 12.0f));
  MadeTensor offsets = Make(Kind::kAccumulatedElementCountWithZero, DataType::kInt64, kShapes);
  EXPECT_THAT(offsets.shape, ElementsAre(4));
  EXPECT_THAT(Values<int64_t>(offsets), ElementsAre(0, 3, 7, 12));
}

TEST(RaggedBatchTest, MaxElementCountIsAShape) {
  MadeTensor longest = Make(Kind::kMaxElementCountAsShape, DataType::kInt32, kShapes);
  EXPECT_THAT(longest.shape, ElementsAre(5));
  EXPECT_EQ(longest.bytes.size(), 5 * sizeof(int32_t));
}

TEST(RaggedBatchTest, ItemShapesAreOnePerRow) {
  // model_config.proto's example: a batch-2 input of shape [3, 1] and a batch-1 of [2, 2].
  const std::vector<Shape> shapes = {{2, 3, 1}, {1, 2, 2}};
  MadeTensor items = Make(Kind::kItemShape, DataType::kInt32, shapes);
  EXPECT_THAT(items.shape, ElementsAre(3, 2));
  EXPECT_THAT(Values<int32_t>(items), ElementsAre(3, 1, 3, 1, 2, 2));
  MadeTensor flat = Make(Kind::kItemShapeFlatten, DataType::kFp32, shapes);
  EXPECT_THAT(flat.shape, ElementsAre(6));
  EXPECT_THAT(Values<float>(flat), ElementsAre(3, 1, 3, 1, 2, 2));
}

TEST(RaggedBatchTest, ScatterShapeFillsVariableDimsFromTheSource) {
  EXPECT_THAT(ScatterShape({-1, -1, 768}, {1, 7}), ElementsAre(1, 7, 768));
  EXPECT_THAT(ScatterShape({-1, -1}, {2, 3}), ElementsAre(2, 3));
  EXPECT_THAT(ScatterShape({-1, 4}, {3, 9}), ElementsAre(3, 4));
}

TEST(RaggedBatchTest, AScatteredOutputIsSplitByItsSourceShapes) {
  RaggedBatching::Scatter scatter{"OUT", 0, {-1, -1, 2}};
  std::vector<dispatch::Request> requests(2);
  requests[0].inputs.push_back(TensorView{"IN", DataType::kFp32, {1, 2}, nullptr, 8});
  requests[1].inputs.push_back(TensorView{"IN", DataType::kFp32, {1, 3}, nullptr, 12});
  const std::vector<const dispatch::Request*> batch = {&requests[0], &requests[1]};
  std::vector<float> flat(10);
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(i);
  std::vector<dispatch::Response> responses(2);
  ASSERT_TRUE(ScatterOutput(scatter, "m", DataType::kFp32,
                            reinterpret_cast<const char*>(flat.data()), 40, batch, responses)
                  .ok());
  ASSERT_EQ(responses[1].outputs.size(), 1u);
  EXPECT_THAT(responses[0].outputs[0].shape, ElementsAre(1, 2, 2));
  EXPECT_THAT(responses[1].outputs[0].shape, ElementsAre(1, 3, 2));
  float second[6];
  std::memcpy(second, responses[1].outputs[0].bytes.data(), sizeof(second));
  EXPECT_THAT(second, ElementsAre(4, 5, 6, 7, 8, 9));

  std::vector<dispatch::Response> short_of(2);
  Status wrong = ScatterOutput(scatter, "m", DataType::kFp32,
                               reinterpret_cast<const char*>(flat.data()), 36, batch, short_of);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(wrong.message()),
              HasSubstr("model 'm' gave batch output 'OUT' as 36 bytes, but its requests' parts "
                        "(by the shapes of input 'IN') add up to 40 bytes"));
}

TEST(RaggedBatchTest, AConfigWithoutRaggedBatchingNeedsNoSteps) {
  repository::ModelConfig config;
  config.max_batch_size = 4;
  config.inputs.push_back({.name = "A", .data_type = DataType::kFp32, .dims = {3}});
  EXPECT_EQ(MakeRaggedBatching(config), nullptr);
  config.inputs.push_back(
      {.name = "B", .data_type = DataType::kFp32, .dims = {-1}, .allow_ragged_batch = true});
  config.outputs.push_back({.name = "Y", .data_type = DataType::kFp32, .dims = {-1}});
  config.batch_outputs.push_back({{"Y"}, "B"});
  std::shared_ptr<const RaggedBatching> ragged = MakeRaggedBatching(config);
  ASSERT_NE(ragged, nullptr);
  EXPECT_THAT(ragged->flat_inputs, ElementsAre(false, true));
  ASSERT_NE(ragged->FindScatter("Y"), nullptr);
  EXPECT_EQ(ragged->FindScatter("Y")->source, 1u);
  EXPECT_THAT(ragged->FindScatter("Y")->dims, ElementsAre(-1, -1));
  EXPECT_EQ(ragged->FindScatter("A"), nullptr);
}

}  // namespace
}  // namespace tessera::server
