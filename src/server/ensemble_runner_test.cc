// EnsembleRunner over real ModelQueues whose runners are fakes computing on floats: the data flow
// (fan-out, fan-in), composing-model reshapes, failures while other steps still run, and the
// load-time checks.
#include "ensemble_runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <thread>

namespace tessera::server {
namespace {

using dispatch::Request;
using dispatch::Response;
using repository::ModelConfig;
using repository::TensorConfig;

// A composing model's runner: output y = f(inputs) elementwise over FP32, after `delay`; or the
// error `fail` when it is set.
class ElementwiseRunnerForTest final : public dispatch::BatchRunner {
 public:
  using Fn = std::function<float(const std::vector<float>&)>;
  ElementwiseRunnerForTest(Fn fn, std::chrono::milliseconds delay, Status fail,
                           std::atomic<int>* finished)
      : fn_(std::move(fn)), delay_(delay), fail_(std::move(fail)), finished_(finished) {}

  StatusOr<std::vector<Response>> Run(const std::vector<const Request*>& batch) override {
    std::this_thread::sleep_for(delay_);
    if (!fail_.ok()) {
      ++*finished_;
      return fail_;
    }
    std::vector<Response> responses;
    for (const Request* request : batch) {
      const TensorView& first = request->inputs.at(0);
      shapes_seen_.push_back(first.shape);
      const size_t n = first.byte_size / sizeof(float);
      std::string bytes(first.byte_size, '\0');
      auto* out = reinterpret_cast<float*>(bytes.data());
      for (size_t i = 0; i < n; ++i) {
        std::vector<float> args;
        for (const TensorView& input : request->inputs) {
          args.push_back(static_cast<const float*>(input.data)[i]);
        }
        out[i] = fn_(args);
      }
      Response response;
      // y is [b, 4] whatever shape the input reached the model in.
      response.outputs.push_back({"y", DataType::kFp32, Shape{first.shape.at(0), 4},
                                  std::move(bytes)});
      responses.push_back(std::move(response));
    }
    ++*finished_;
    return responses;
  }
  std::string Describe() const override { return "elementwise fake"; }
  std::vector<Shape> shapes_seen_;  // read after the queue is idle

 private:
  Fn fn_;
  std::chrono::milliseconds delay_;
  Status fail_;
  std::atomic<int>* finished_;
};

TensorConfig Fp32(const std::string& name, Shape dims) {
  return TensorConfig{name, DataType::kFp32, std::move(dims)};
}

class EnsembleRunnerTest : public ::testing::Test {
 protected:
  // A composing model named `name` with inputs `inputs` (each [4]) and output y [4].
  void AddModel(const std::string& name, std::vector<std::string> inputs,
                ElementwiseRunnerForTest::Fn fn,
                std::chrono::milliseconds delay = std::chrono::milliseconds(0),
                Status fail = absl::OkStatus(), std::optional<Shape> input_reshape = {}) {
    auto config = std::make_shared<ModelConfig>();
    config->name = name;
    config->max_batch_size = 4;
    for (const std::string& input : inputs) {
      config->inputs.push_back(Fp32(input, {4}));
      config->inputs.back().reshape = input_reshape;
    }
    config->outputs.push_back(Fp32("y", {4}));
    std::vector<std::unique_ptr<dispatch::BatchRunner>> runners;
    auto runner = std::make_unique<ElementwiseRunnerForTest>(std::move(fn), delay, fail, &finished_);
    runners_[name] = runner.get();
    runners.push_back(std::move(runner));
    dispatch::ModelQueueOptions options;
    options.model_label = name + "/1";
    options.policy.max_batch_size = 4;
    auto stats = std::make_shared<dispatch::ModelStats>();
    models_[name] = frontend::ReadyModel{
        name, 1, {1}, config,
        std::make_shared<dispatch::ModelQueue>(options, std::move(runners), stats), stats};
  }

  ComposingModelLookup Lookup() {
    return [this](const std::string& name, int64_t) -> StatusOr<frontend::ReadyModel> {
      auto it = models_.find(name);
      if (it == models_.end()) {
        return absl::NotFoundError("model '" + name + "' is not ready");
      }
      return it->second;
    };
  }

  // Runs one request of `rows` x 4 floats through `ensemble`.
  StatusOr<Response> RunEnsemble(std::shared_ptr<ModelConfig> ensemble, std::vector<float> in) {
    EnsembleRunner runner(ensemble, 1, Lookup());
    Request request;
    request.inputs.push_back(TensorView{"IN", DataType::kFp32, {1, 4}, in.data(), 16});
    request.batch_size = 1;
    auto outcome = runner.Run({&request});
    if (!outcome.ok()) return outcome.status();
    return std::move(outcome->at(0));
  }

  std::map<std::string, frontend::ReadyModel> models_;
  std::map<std::string, ElementwiseRunnerForTest*> runners_;  // owned by the models' queues
  std::atomic<int> finished_{0};
};

std::vector<float> Floats(const Response& response, const std::string& name) {
  for (const auto& output : response.outputs) {
    if (output.name != name) continue;
    std::vector<float> values(output.bytes.size() / sizeof(float));
    std::memcpy(values.data(), output.bytes.data(), output.bytes.size());
    return values;
  }
  ADD_FAILURE() << "no output " << name;
  return {};
}

// IN -> add1 -> A, IN -> twice -> B, (A, B) -> sum -> OUT; A is an output too.
std::shared_ptr<ModelConfig> Diamond() {
  auto config = std::make_shared<ModelConfig>();
  config->name = "diamond";
  config->platform = "ensemble";
  config->max_batch_size = 4;
  config->inputs = {Fp32("IN", {4})};
  config->outputs = {Fp32("OUT", {4}), Fp32("A", {4})};
  config->ensemble_steps = {
      {"sum", -1, {{"a", "A"}, {"b", "B"}}, {{"y", "OUT"}}},
      {"add1", -1, {{"x", "IN"}}, {{"y", "A"}}},
      {"twice", -1, {{"x", "IN"}}, {{"y", "B"}}},
  };
  return config;
}

TEST_F(EnsembleRunnerTest, StepsRunAsTheirInputsExistAndOutputsComeBack) {
  AddModel("add1", {"x"}, [](const auto& v) { return v[0] + 1; });
  // Reshaped at its input: the runner sees the model's [b, 2, 2], the ensemble's [b, 4].
  AddModel("twice", {"x"}, [](const auto& v) { return v[0] * 2; }, std::chrono::milliseconds(0),
           absl::OkStatus(), Shape{2, 2});
  AddModel("sum", {"a", "b"}, [](const auto& v) { return v[0] + v[1]; });
  ASSERT_TRUE(CheckEnsembleSteps(*Diamond(), Lookup()).ok());
  StatusOr<Response> response = RunEnsemble(Diamond(), {1, 2, 3, 4});
  ASSERT_TRUE(response.ok()) << response.status();
  // (x + 1) + 2x
  EXPECT_EQ(Floats(*response, "OUT"), (std::vector<float>{4, 7, 10, 13}));
  EXPECT_EQ(Floats(*response, "A"), (std::vector<float>{2, 3, 4, 5}));
  ASSERT_EQ(response->outputs.size(), 2u);
  EXPECT_EQ(response->outputs[0].shape, (Shape{1, 4}));
  EXPECT_EQ(runners_["twice"]->shapes_seen_, (std::vector<Shape>{{1, 2, 2}}));
  EXPECT_EQ(runners_["sum"]->shapes_seen_, (std::vector<Shape>{{1, 4}}));
}

TEST_F(EnsembleRunnerTest, AFailedStepAnswersOnlyAfterTheStepsStillRunning) {
  // `add1` is slow and still reads the request's input when `twice` fails: the ensemble must not
  // answer (which frees that input) before it is done.
  AddModel("add1", {"x"}, [](const auto& v) { return v[0] + 1; }, std::chrono::milliseconds(100));
  AddModel("twice", {"x"}, [](const auto& v) { return v[0] * 2; }, std::chrono::milliseconds(0),
           absl::InternalError("kernel exploded"));
  AddModel("sum", {"a", "b"}, [](const auto& v) { return v[0] + v[1]; });
  StatusOr<Response> response = RunEnsemble(Diamond(), {1, 2, 3, 4});
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(response.status().message(),
            "ensemble 'diamond' step[2] (model 'twice'): kernel exploded");
  EXPECT_EQ(finished_.load(), 2);  // add1 had finished; sum never ran
}

TEST_F(EnsembleRunnerTest, AMissingComposingModelIsUnavailableNamingTheStep) {
  AddModel("add1", {"x"}, [](const auto& v) { return v[0] + 1; });
  AddModel("sum", {"a", "b"}, [](const auto& v) { return v[0] + v[1]; });
  Status checked = CheckEnsembleSteps(*Diamond(), Lookup());
  EXPECT_EQ(checked.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(checked.message(),
            "ensemble 'diamond' step[2] (model 'twice'): model 'twice' is not ready");
  StatusOr<Response> response = RunEnsemble(Diamond(), {1, 2, 3, 4});
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(response.status().message(),
            "ensemble 'diamond' step[2] (model 'twice'): model 'twice' is not ready");
}

TEST_F(EnsembleRunnerTest, LoadChecksNameTheStepAndTheTensor) {
  AddModel("add1", {"x"}, [](const auto& v) { return v[0] + 1; });
  AddModel("twice", {"x"}, [](const auto& v) { return v[0] * 2; });
  AddModel("sum", {"a", "c"}, [](const auto& v) { return v[0] + v[1]; });
  EXPECT_EQ(CheckEnsembleSteps(*Diamond(), Lookup()).message(),
            "ensemble 'diamond' step[0] (model 'sum'): input_map gives the model's input 'c' no "
            "ensemble tensor");

  AddModel("sum", {"a", "b"}, [](const auto& v) { return v[0] + v[1]; });
  auto wrong_type = Diamond();
  wrong_type->inputs[0].data_type = DataType::kInt32;
  EXPECT_EQ(CheckEnsembleSteps(*wrong_type, Lookup()).message(),
            "ensemble 'diamond' step[1] (model 'add1'): tensor 'IN' is TYPE_INT32, the model's "
            "input 'x' takes TYPE_FP32");
  auto too_big = Diamond();
  too_big->max_batch_size = 8;
  EXPECT_EQ(CheckEnsembleSteps(*too_big, Lookup()).message(),
            "ensemble 'diamond' step[0] (model 'sum'): the ensemble's max_batch_size is 8, the "
            "model's only 4");

  auto wrong_dims = Diamond();
  wrong_dims->inputs[0].dims = {5};
  EXPECT_EQ(CheckEnsembleSteps(*wrong_dims, Lookup()).message(),
            "ensemble 'diamond' step[1] (model 'add1'): tensor 'IN' has dims [5], the model's "
            "input 'x' takes [4]");
  auto wrong_output = Diamond();
  wrong_output->outputs[1].dims = {2, 2};
  EXPECT_EQ(CheckEnsembleSteps(*wrong_output, Lookup()).message(),
            "ensemble 'diamond': output 'A' has dims [2, 2] in its config, but the step that "
            "makes it gives [4]");
  auto variable = Diamond();
  variable->inputs[0].dims = {-1};  // a variable dim fits any
  EXPECT_TRUE(CheckEnsembleSteps(*variable, Lookup()).ok());
  auto unbatched = Diamond();  // spells its batch dim: not compared with the models' dims
  unbatched->max_batch_size = 0;
  unbatched->inputs[0].dims = {1, 4};
  EXPECT_TRUE(CheckEnsembleSteps(*unbatched, Lookup()).ok());
}

TEST_F(EnsembleRunnerTest, AnEnsembleRunsAnotherEnsembleAndLoopsAreRefused) {
  AddModel("add1", {"x"}, [](const auto& v) { return v[0] + 1; });
  AddModel("twice", {"x"}, [](const auto& v) { return v[0] * 2; });
  AddModel("sum", {"a", "b"}, [](const auto& v) { return v[0] + v[1]; });
  // "diamond" served as a model of its own, its queue running an EnsembleRunner.
  auto serve_ensemble = [&](std::shared_ptr<ModelConfig> config) {
    ASSERT_TRUE(CheckEnsembleSteps(*config, Lookup()).ok());
    std::vector<std::unique_ptr<dispatch::BatchRunner>> runners;
    runners.push_back(std::make_unique<EnsembleRunner>(config, 1, Lookup()));
    dispatch::ModelQueueOptions options;
    options.model_label = config->name + "/1";
    options.policy.batching = false;
    options.policy.max_batch_size = 4;
    auto stats = std::make_shared<dispatch::ModelStats>();
    models_[config->name] = frontend::ReadyModel{
        config->name,
        1,
        {1},
        config,
        std::make_shared<dispatch::ModelQueue>(options, std::move(runners), stats),
        stats};
  };
  serve_ensemble(Diamond());
  // outer: IN -> diamond -> (OUT, A) -> add1(OUT) -> OUT2.
  auto outer = std::make_shared<ModelConfig>();
  outer->name = "outer";
  outer->platform = "ensemble";
  outer->max_batch_size = 4;
  outer->inputs = {Fp32("IN", {4})};
  outer->outputs = {Fp32("OUT2", {4})};
  outer->ensemble_steps = {
      {"diamond", -1, {{"IN", "IN"}}, {{"OUT", "D"}}},
      {"add1", -1, {{"x", "D"}}, {{"y", "OUT2"}}},
  };
  ASSERT_TRUE(CheckEnsembleSteps(*outer, Lookup()).ok());
  StatusOr<Response> response = RunEnsemble(outer, {1, 2, 3, 4});
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(Floats(*response, "OUT2"), (std::vector<float>{5, 8, 11, 14}));  // 3x + 1, + 1

  // "diamond" reloaded to run "outer", which runs "diamond": refused, naming the loop.
  serve_ensemble(outer);
  auto looping = Diamond();
  looping->outputs = {Fp32("OUT", {4})};
  looping->ensemble_steps = {{"outer", -1, {{"IN", "IN"}}, {{"OUT2", "OUT"}}}};
  EXPECT_EQ(CheckEnsembleSteps(*looping, Lookup()).message(),
            "ensemble 'diamond' step[0] (model 'outer'): runs 'diamond' again (diamond -> outer "
            "-> diamond): ensembles may not loop");
  auto itself = Diamond();
  itself->ensemble_steps[1].model_name = "diamond";
  EXPECT_EQ(CheckEnsembleSteps(*itself, Lookup()).message(),
            "ensemble 'diamond' step[1] (model 'diamond'): runs the ensemble itself");
}

}  // namespace
}  // namespace tessera::server
