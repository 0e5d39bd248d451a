// Triton's classification extension: which requests ask for it, and the top-k strings it answers.
#include "classification.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::frontend {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

inference::ModelInferRequest::InferRequestedOutputTensor Requested(int64_t count) {
  inference::ModelInferRequest::InferRequestedOutputTensor requested;
  requested.set_name("probs");
  if (count != 0) (*requested.mutable_parameters())["classification"].set_int64_param(count);
  return requested;
}

repository::TensorConfig Probs(DataType type = DataType::kFp32) {
  repository::TensorConfig tensor;
  tensor.name = "probs";
  tensor.data_type = type;
  tensor.dims = {5};
  return tensor;
}

template <typename T>
dispatch::OutputTensor Output(DataType type, Shape shape, const std::vector<T>& values) {
  dispatch::OutputTensor out{"probs", type, std::move(shape),
                             std::string(values.size() * sizeof(T), '\0')};
  std::memcpy(out.bytes.data(), values.data(), out.bytes.size());
  return out;
}

// The BYTES elements of a classified output.
std::vector<std::string> Strings(const dispatch::OutputTensor& out) {
  std::vector<std::string> strings;
  for (size_t at = 0; at + 4 <= out.bytes.size();) {
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i)
      length |= static_cast<uint32_t>(static_cast<uint8_t>(out.bytes[at + i])) << (8 * i);
    strings.push_back(out.bytes.substr(at + 4, length));
    at += 4 + length;
  }
  return strings;
}

TEST(ClassificationTest, OnlyRequestsThatAskForIt) {
  auto none = ReadClassification(Requested(0), Probs(), true);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());

  auto three = ReadClassification(Requested(3), Probs(), true);
  ASSERT_TRUE(three.ok() && three->has_value());
  EXPECT_EQ((*three)->count, 3);
  EXPECT_TRUE((*three)->batched);

  for (int64_t bad : {-1, -5}) {
    auto error = ReadClassification(Requested(bad), Probs(), true);
    EXPECT_EQ(error.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(error.status().message(),
                HasSubstr("output 'probs': the classification parameter"));
  }
  auto text = Requested(0);
  (*text.mutable_parameters())["classification"].set_string_param("3");
  EXPECT_EQ(ReadClassification(text, Probs(), true).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto half = ReadClassification(Requested(2), Probs(DataType::kFp16), true);
  EXPECT_THAT(half.status().message(), HasSubstr("this one is FP16"));
}

TEST(ClassificationTest, TopClassesPerRowHighestFirstTiesToTheLowerIndex) {
  ClassifiedOutput classified{"probs", 3, true, nullptr};
  auto out = Output<float>(DataType::kFp32, {2, 5},
                           {0.1f, 0.5f, 0.2f, 0.5f, 0.0f,  //
                            1.0f, 2.0f, 3.0f, 4.0f, 5.0f});
  ASSERT_TRUE(Classify(classified, out).ok());
  EXPECT_EQ(out.dtype, DataType::kString);
  EXPECT_THAT(out.shape, ElementsAre(2, 3));
  EXPECT_THAT(Strings(out), ElementsAre("0.5:1", "0.5:3", "0.2:2", "5:4", "4:3", "3:2"));
}

TEST(ClassificationTest, LabelsAndUnbatchedOutputsAndMoreThanThereAre) {
  auto labels = std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"cat", "dog", "fish"});  // fewer labels than classes
  ClassifiedOutput classified{"probs", 10, false, labels};
  auto out = Output<int64_t>(DataType::kInt64, {1, 4}, {7, -2, 9, 8});
  ASSERT_TRUE(Classify(classified, out).ok());
  EXPECT_THAT(out.shape, ElementsAre(4));  // 10 asked, 4 classes
  EXPECT_THAT(Strings(out), ElementsAre("9:2:fish", "8:3", "7:0:cat", "-2:1:dog"));
}

}  // namespace
}  // namespace tessera::frontend
