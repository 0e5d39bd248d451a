#include "executor/model_signature.h"

#include "executor/fake_engine_model_for_test.h"
#include "gtest/gtest.h"

namespace tessera::executor {
namespace {

ipc::LoadModel Config(int max_batch_size, std::vector<int64_t> x_dims,
                      DataType x_type = DataType::kFp32) {
  ipc::LoadModel load;
  load.set_instance_key("fake/1");
  load.set_max_batch_size(max_batch_size);
  ipc::TensorSpec* x = load.add_inputs();
  x->set_name("x");
  x->set_data_type(static_cast<int>(x_type));
  for (int64_t d : x_dims) x->add_dims(d);
  return load;
}

const FakeEngineModelForTest& Model() {
  static const auto* model = new FakeEngineModelForTest({});  // x: FP32 [-1, 4]
  return *model;
}

TEST(ModelSignatureTest, MatchingBatchedConfigPasses) {
  EXPECT_TRUE(CheckModelSignature(Config(8, {4}), Model()).ok());
}

TEST(ModelSignatureTest, ConfigDimOfAnySizeWhereTheModelHasOneSizeIsRefused) {
  // The frontend would accept [n, 5]; the engine refuses every such batch.
  Status status = CheckModelSignature(Config(8, {-1}), Model());
  ASSERT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_NE(status.message().find("dim 1 takes any size in the config, but only 4 in the model: "
                                  "give it as 4"),
            std::string::npos)
      << status;
}

TEST(ModelSignatureTest, UnbatchedConfigComparesEveryDim) {
  EXPECT_TRUE(CheckModelSignature(Config(0, {2, 4}), Model()).ok());
  EXPECT_TRUE(CheckModelSignature(Config(0, {-1, 4}), Model()).ok());
  EXPECT_FALSE(CheckModelSignature(Config(0, {4}), Model()).ok());
}

TEST(ModelSignatureTest, DimMismatchNamesTensorAndShapes) {
  Status status = CheckModelSignature(Config(8, {5}), Model());
  ASSERT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_NE(status.message().find("'x'"), std::string::npos) << status;
  EXPECT_NE(status.message().find("[5]"), std::string::npos) << status;
  EXPECT_NE(status.message().find("[-1, 4]"), std::string::npos) << status;
}

TEST(ModelSignatureTest, RankMismatch) {
  EXPECT_FALSE(CheckModelSignature(Config(8, {4, 1}), Model()).ok());
}

TEST(ModelSignatureTest, DataTypeMismatchNamesBothTypes) {
  Status status = CheckModelSignature(Config(8, {4}, DataType::kInt64), Model());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("INT64"), std::string::npos) << status;
  EXPECT_NE(status.message().find("FP32"), std::string::npos) << status;
}

TEST(ModelSignatureTest, UnknownTensorsAreErrors) {
  ipc::LoadModel load = Config(8, {4});
  load.mutable_inputs(0)->set_name("nope");
  Status status = CheckModelSignature(load, Model());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("'nope'"), std::string::npos) << status;

  load = Config(8, {4});
  ipc::TensorSpec* out = load.add_outputs();
  out->set_name("w");
  out->set_data_type(static_cast<int>(DataType::kFp32));
  EXPECT_FALSE(CheckModelSignature(load, Model()).ok());
}

TEST(ModelSignatureTest, OutputsMayBeASubset) {
  ipc::LoadModel load = Config(8, {4});
  ipc::TensorSpec* out = load.add_outputs();
  out->set_name("z");
  out->set_data_type(static_cast<int>(DataType::kFp32));
  out->add_dims(4);
  EXPECT_TRUE(CheckModelSignature(load, Model()).ok());
  out->set_dims(0, 3);
  EXPECT_FALSE(CheckModelSignature(load, Model()).ok());
}

TEST(ModelSignatureTest, ModelInputMissingFromConfig) {
  ipc::LoadModel load = Config(8, {4});
  load.clear_inputs();
  // No inputs listed at all: nothing to compare against.
  EXPECT_TRUE(CheckModelSignature(load, Model()).ok());
  ipc::TensorSpec* other = load.add_inputs();
  other->set_name("x2");
  EXPECT_FALSE(CheckModelSignature(load, Model()).ok());
}

TEST(ModelSignatureTest, FixedModelBatchDimBelowMaxBatchSize) {
  class FixedBatch : public FakeEngineModelForTest {
   public:
    FixedBatch() : FakeEngineModelForTest({}) { fixed_ = {{"x", DataType::kFp32, {1, 4}}}; }
    const std::vector<engine::TensorInfo>& inputs() const override { return fixed_; }

   private:
    std::vector<engine::TensorInfo> fixed_;
  };
  FixedBatch model;
  EXPECT_TRUE(CheckModelSignature(Config(1, {4}), model).ok());
  Status status = CheckModelSignature(Config(8, {4}), model);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("batch dim is fixed at 1"), std::string::npos) << status;
}

TEST(ModelSignatureTest, FlatTensorsHaveNoBatchDim) {
  class Ragged : public FakeEngineModelForTest {
   public:
    // x flat ([elements]), n a batch input ([requests]); y flat as well.
    Ragged() : FakeEngineModelForTest({}) {
      inputs_ = {{"x", DataType::kFp32, {-1}}, {"n", DataType::kInt32, {-1}}};
    }
    const std::vector<engine::TensorInfo>& inputs() const override { return inputs_; }

   private:
    std::vector<engine::TensorInfo> inputs_;
  };
  Ragged model;
  ipc::LoadModel load = Config(8, {-1});
  load.mutable_inputs(0)->set_flat(true);
  // Without n: the model takes an input the server never sends.
  Status missing = CheckModelSignature(load, model);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("model input 'n'"), std::string::npos) << missing;
  ipc::TensorSpec* n = load.add_batch_inputs();
  n->set_name("n");
  n->set_data_type(static_cast<int>(DataType::kInt32));
  n->add_dims(-1);
  n->set_flat(true);
  EXPECT_TRUE(CheckModelSignature(load, model).ok());
  // Not flat, x would need a batch dim the model does not have.
  load.mutable_inputs(0)->set_flat(false);
  EXPECT_FALSE(CheckModelSignature(load, model).ok());
  load.mutable_inputs(0)->set_flat(true);
  n->set_name("counts");
  Status unknown = CheckModelSignature(load, model);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("batch_input target 'counts' is not an input of the model"),
            std::string::npos)
      << unknown;
}

}  // namespace
}  // namespace tessera::executor
