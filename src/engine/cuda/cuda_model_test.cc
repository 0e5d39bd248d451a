// The CUDA backend on whole models: the bundled ones (configs/models/) against the CPU engine and
// torch's reference outputs, in FP32 and FP16, with and without CUDA graphs, across batch sizes;
// plus the no-GPU error path, which is the only test here that runs on CI machines.
#include <string>
#include <vector>

#include "engine/cuda/cuda_test_util.h"
#include "engine/onnx_import.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {
namespace {

using ::testing::HasSubstr;

std::string ModelPath(const std::string& name) {
  return SourceDir() + "/configs/models/" + name + "/1/model.onnx";
}

Tensor Reference(const std::string& name, const std::string& file) {
  auto tensor = ReadTensorProtoFile(SourceDir() + "/tests/data/reference/" +
                                    name + "/" + file);
  EXPECT_TRUE(tensor.ok()) << tensor.status();
  return tensor.ok() ? *std::move(tensor) : Tensor{};
}

// `batch` rows taken cyclically from the reference input's rows.
Tensor Rows(const Tensor& input, int64_t batch) {
  Tensor out = input;
  const size_t row = input.bytes.size() / static_cast<size_t>(input.shape[0]);
  out.shape[0] = batch;
  out.bytes.resize(row * static_cast<size_t>(batch));
  for (int64_t r = 0; r < batch; ++r) {
    const size_t from = static_cast<size_t>(r % input.shape[0]) * row;
    std::copy(input.bytes.begin() + from, input.bytes.begin() + from + row,
              out.bytes.begin() + r * row);
  }
  return out;
}

TEST(CudaNoDeviceTest, LoadWithoutDeviceIsFailedPrecondition) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present; this tests its absence";
  ModelOptions options;
  options.backend = Backend::kCuda;
  auto model = LoadOnnxModel(ModelPath("mlp"), options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition) << model.status();
  EXPECT_THAT(model.status().message(), HasSubstr("no CUDA device"));
  // The CPU backend in the same process is unaffected.
  options.backend = Backend::kCpu;
  EXPECT_TRUE(LoadOnnxModel(ModelPath("mlp"), options).ok());
}

TEST(CudaNoDeviceTest, BadFileStillReportsTheFileFirst) {
  ModelOptions options;
  options.backend = Backend::kCuda;
  auto model = LoadOnnxModel("/nonexistent/model.onnx", options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound) << model.status();
}

using Param = std::tuple<std::string, Precision, bool>;

class CudaBundledModelTest : public ::testing::TestWithParam<Param> {};

TEST_P(CudaBundledModelTest, MatchesReferenceAndCpuAcrossBatchSizes) {
  TESSERA_REQUIRE_GPU();
  const auto& [name, precision, graphs] = GetParam();
  auto cpu = LoadOrFail(ModelPath(name), ModelOptions{});
  auto gpu = LoadOrFail(ModelPath(name), CudaOptions(precision, graphs));
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->inputs()[0].name, cpu->inputs()[0].name);
  EXPECT_EQ(gpu->weight_bytes(), cpu->weight_bytes());
  const float rtol = Tolerance(precision);

  Tensor input = Reference(name, "input_0.pb");
  Tensor expected = Reference(name, "output_0.pb");
  std::vector<Tensor> out;
  ASSERT_TRUE(gpu->Run({input.View()}, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, gpu->outputs()[0].name);
  ExpectTensorsClose(out[0], expected, rtol, name + " vs torch reference");

  // Alternating batch sizes: each shape is planned once, then (with graphs) captured and replayed.
  for (int64_t batch : {1, 4, 8, 1, 8, 4, 1, 8}) {
    Tensor in = Rows(input, batch);
    std::vector<Tensor> want, got;
    ASSERT_TRUE(cpu->Run({in.View()}, &want).ok());
    Status status = gpu->Run({in.View()}, &got);
    ASSERT_TRUE(status.ok()) << status;
    ExpectTensorsClose(got[0], want[0], rtol, name + " batch " + std::to_string(batch));
  }
  auto captured = CudaGraphsCaptured(*gpu);
  ASSERT_TRUE(captured.ok()) << captured.status();
  EXPECT_EQ(*captured, graphs ? 3 : 0) << "one graph per batch size (1, 4, 8)";
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaBundledModelTest,
    ::testing::Combine(::testing::Values("mlp", "small_cnn"),
                       ::testing::Values(Precision::kFp32, Precision::kFp16),
                       ::testing::Bool()),
    [](const auto& info) {
      return std::get<0>(info.param) +
             (std::get<1>(info.param) == Precision::kFp16 ? "_fp16" : "_fp32") +
             (std::get<2>(info.param) ? "_graphs" : "_eager");
    });

TEST(CudaModelTest, GraphReplayEqualsEagerBitForBit) {
  TESSERA_REQUIRE_GPU();
  for (Precision precision : {Precision::kFp32, Precision::kFp16}) {
    auto eager = LoadOrFail(ModelPath("small_cnn"), CudaOptions(precision, false));
    auto graphs = LoadOrFail(ModelPath("small_cnn"), CudaOptions(precision, true));
    ASSERT_NE(eager, nullptr);
    ASSERT_NE(graphs, nullptr);
    Tensor input = Reference("small_cnn", "input_0.pb");
    for (int64_t batch : {4, 1, 4, 8, 4}) {
      Tensor in = Rows(input, batch);
      std::vector<Tensor> a, b;
      ASSERT_TRUE(eager->Run({in.View()}, &a).ok());
      ASSERT_TRUE(graphs->Run({in.View()}, &b).ok());
      ASSERT_EQ(a[0].shape, b[0].shape);
      EXPECT_TRUE(a[0].bytes == b[0].bytes) << "batch " << batch;
    }
    auto captured = CudaGraphsCaptured(*graphs);
    ASSERT_TRUE(captured.ok()) << captured.status();
    EXPECT_EQ(*captured, 1);  // only batch 4 ran more than once
  }
}

TEST(CudaModelTest, ReplayReadsNewInputs) {
  TESSERA_REQUIRE_GPU();
  auto gpu = LoadOrFail(ModelPath("mlp"), CudaOptions(Precision::kFp32, true));
  auto cpu = LoadOrFail(ModelPath("mlp"), ModelOptions{});
  ASSERT_NE(gpu, nullptr);
  Tensor input = Reference("mlp", "input_0.pb");
  for (int round = 0; round < 4; ++round) {
    Tensor in = input;
    auto values = Pattern(ElementCount(in.shape), 7 + round);
    std::memcpy(in.bytes.data(), values.data(), in.bytes.size());
    std::vector<Tensor> want, got;
    ASSERT_TRUE(cpu->Run({in.View()}, &want).ok());
    ASSERT_TRUE(gpu->Run({in.View()}, &got).ok());
    ExpectTensorsClose(got[0], want[0], 1e-4f, "round " + std::to_string(round));
  }
}

TEST(CudaModelTest, PlanMemoryTimingAndErrors) {
  TESSERA_REQUIRE_GPU();
  auto gpu = LoadOrFail(ModelPath("small_cnn"), CudaOptions(Precision::kFp32, true));
  ASSERT_NE(gpu, nullptr);
  auto plan1 = gpu->PlanMemory(1);
  auto plan8 = gpu->PlanMemory(8);
  ASSERT_TRUE(plan1.ok()) << plan1.status();
  ASSERT_TRUE(plan8.ok()) << plan8.status();
  EXPECT_GT(plan1->arena_bytes, 0u);
  EXPECT_LE(plan1->arena_bytes, plan1->naive_bytes);
  EXPECT_GT(plan8->arena_bytes, plan1->arena_bytes);
  EXPECT_GT(plan8->num_values, 0);
  EXPECT_FALSE(gpu->PlanMemory(0).ok());

  Tensor input = Reference("small_cnn", "input_0.pb");
  std::vector<Tensor> out;
  std::vector<LayerTiming> timings;
  ASSERT_TRUE(gpu->RunTimed({input.View()}, &out, &timings).ok());
  EXPECT_FALSE(timings.empty());
  for (const LayerTiming& t : timings) EXPECT_FALSE(t.op.empty());

  // Bad inputs are rejected by name and the model keeps working.
  Tensor wrong = input;
  wrong.name = "nope";
  Status status = gpu->Run({wrong.View()}, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("nope"));
  EXPECT_TRUE(gpu->Run({input.View()}, &out).ok());
}

// Another process's load (the shadow) maps exported weights instead of uploading its own copy,
// gives the same outputs, and keeps them with the exporter gone: the exporter is destroyed here
// before the import even starts, as an active executor may exit during its shadow's load. (In
// one process a second load would reuse the first one's buffer directly, so the exporter must go
// first for the import path to run; tessera-server imports across executor processes.)
TEST(CudaModelTest, ExportedWeightsAreMappedAndOutliveTheExporter) {
  TESSERA_REQUIRE_GPU();
  Tensor input = Reference("small_cnn", "input_0.pb");
  std::vector<Tensor> want, got;
  StatusOr<ExportedWeights> exported = absl::UnknownError("not exported");
  {
    auto active = LoadOrFail(ModelPath("small_cnn"), CudaOptions(Precision::kFp16, true));
    ASSERT_NE(active, nullptr);
    EXPECT_FALSE(active->weight_import().requested);
    ASSERT_TRUE(active->Run({input.View()}, &want).ok());
    exported = active->ExportWeights();
    ASSERT_TRUE(exported.ok()) << exported.status();
    EXPECT_TRUE(exported->fd.valid());
    EXPECT_GT(exported->bytes, 0u);
    EXPECT_THAT(exported->layout, HasSubstr("fp16"));
  }
  ModelOptions options = CudaOptions(Precision::kFp16, true);
  options.import_weights = WeightImport{exported->fd.get(), exported->bytes, exported->layout};
  auto shadow = LoadOrFail(ModelPath("small_cnn"), options);
  ASSERT_NE(shadow, nullptr);
  EXPECT_TRUE(shadow->weight_import().requested);
  EXPECT_TRUE(shadow->weight_import().imported) << shadow->weight_import().why_not;
  exported->fd.Reset();                      // the mapping holds the memory now
  for (int round = 0; round < 3; ++round) {  // eager, then captured and replayed
    ASSERT_TRUE(shadow->Run({input.View()}, &got).ok());
    EXPECT_TRUE(want[0].bytes == got[0].bytes) << "round " << round;
  }
  // The importer exports in turn (it is the next swap's active), and that export maps too, with
  // the importer gone as well.
  auto again = shadow->ExportWeights();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->layout, exported->layout);
  shadow.reset();
  options.import_weights = WeightImport{again->fd.get(), again->bytes, again->layout};
  auto next = LoadOrFail(ModelPath("small_cnn"), options);
  ASSERT_NE(next, nullptr);
  EXPECT_TRUE(next->weight_import().imported) << next->weight_import().why_not;
  ASSERT_TRUE(next->Run({input.View()}, &got).ok());
  EXPECT_TRUE(want[0].bytes == got[0].bytes);
}

// Two loads of one model in one process (instances, multi-granularity workers) share one copy of
// the weights on the device; another precision does not.
TEST(CudaModelTest, LoadsOfOneModelInAProcessShareTheirWeights) {
  TESSERA_REQUIRE_GPU();
  auto first = LoadOrFail(ModelPath("small_cnn"), CudaOptions(Precision::kFp32, true));
  auto second = LoadOrFail(ModelPath("small_cnn"), CudaOptions(Precision::kFp32, false));
  auto half = LoadOrFail(ModelPath("small_cnn"), CudaOptions(Precision::kFp16, true));
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  ASSERT_NE(half, nullptr);
  auto a = CudaWeightsAddress(*first), b = CudaWeightsAddress(*second),
       c = CudaWeightsAddress(*half);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  Tensor input = Reference("small_cnn", "input_0.pb");
  std::vector<Tensor> x, y;
  ASSERT_TRUE(first->Run({input.View()}, &x).ok());
  first.reset();  // the buffer stays while `second` uses it
  ASSERT_TRUE(second->Run({input.View()}, &y).ok());
  EXPECT_TRUE(x[0].bytes == y[0].bytes);
}

TEST(CudaModelTest, MismatchedWeightExportIsNotMappedAndTheLoadUploadsItsOwn) {
  TESSERA_REQUIRE_GPU();
  auto fp32 = LoadOrFail(ModelPath("mlp"), CudaOptions(Precision::kFp32, false));
  ASSERT_NE(fp32, nullptr);
  auto exported = fp32->ExportWeights();
  ASSERT_TRUE(exported.ok()) << exported.status();

  ModelOptions options = CudaOptions(Precision::kFp16, false);
  options.import_weights = WeightImport{exported->fd.get(), exported->bytes, exported->layout};
  auto fp16 = LoadOrFail(ModelPath("mlp"), options);
  ASSERT_NE(fp16, nullptr);
  EXPECT_TRUE(fp16->weight_import().requested);
  EXPECT_FALSE(fp16->weight_import().imported);
  EXPECT_THAT(fp16->weight_import().why_not, HasSubstr("laid out as"));
  Tensor input = Reference("mlp", "input_0.pb");
  Tensor expected = Reference("mlp", "output_0.pb");
  std::vector<Tensor> got;
  ASSERT_TRUE(fp16->Run({input.View()}, &got).ok());
  ExpectTensorsClose(got[0], expected, Tolerance(Precision::kFp16), "fp16 with its own weights");
}

TEST(CudaModelTest, UnknownDeviceOrdinalIsInvalidArgument) {
  TESSERA_REQUIRE_GPU();
  ModelOptions options = CudaOptions(Precision::kFp32, true);
  options.cuda_device = CudaDeviceCount();
  auto model = LoadOnnxModel(ModelPath("mlp"), options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << model.status();
  options.cuda_device = 0;
  EXPECT_TRUE(LoadOnnxModel(ModelPath("mlp"), options).ok());
}

}  // namespace
}  // namespace tessera::engine
