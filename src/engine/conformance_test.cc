// Runs the ONNX project's own per-operator tests (Debian's libonnx-testdata) for every operator the
// engine claims: a case counts when all of its model's ops are supported. Cases that need a dtype
// or attribute the engine reports as UNIMPLEMENTED at load are skipped and listed; every other case
// must load, run and match its expected outputs.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/cpu/ops.h"
#include "engine/onnx_node_test_case.h"
#include "gtest/gtest.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {
namespace {

TEST(OnnxConformanceTest, ClaimedOperatorsPassTheOnnxNodeTests) {
  const fs::path node_tests = NodeTestsDir();
  if (!fs::is_directory(node_tests)) GTEST_SKIP() << node_tests << " not found (libonnx-testdata)";
  const std::vector<std::string> supported_list = cpu::SupportedOps();
  const std::set<std::string> supported(supported_list.begin(), supported_list.end());
  const NodeTestRun run =
      RunClaimedNodeTests(supported, {}, {}, "conformance", KnownBadNodeTestData());
  // Every claimed op must have at least one passing upstream case, except those whose upstream
  // cases all use dtypes the engine does not support (covered by kernels_test instead).
  const std::map<std::string, std::string> kNoUsableCase = {
      {"ai.onnx.ml.LabelEncoder", "ONNX 1.12 has no LabelEncoder cases (string_ops_test)"},
      {"CumSum", "ONNX 1.12's CumSum cases are all DOUBLE"},
      {"com.microsoft.QLinearAdd",
       "onnxruntime's contrib op, made by the QDQ passes only (quantize_ops_test)"},
      {kMatMulIntegerToFloat,
       "onnxruntime's contrib op, made by the CPU model's fusion only (integer_ops_test)"},
      {kConvIntegerToFloat,
       "the engine's own op, made by the CPU model's fusion only "
       "(integer_ops_test)"},
      {"Einsum", "ONNX 1.12's Einsum cases are all DOUBLE (einsum_test covers it)"},
      {"ReduceLogSumExp", "ONNX 1.12's ReduceLogSumExp cases are all DOUBLE"}};
  for (const std::string& op : supported) {
    if (auto it = kNoUsableCase.find(op); it != kNoUsableCase.end()) {
      std::cout << "  not exercised: " << op << " (" << it->second << ")\n";
      continue;
    }
    EXPECT_TRUE(run.ops_exercised.count(op) != 0) << "no passing ONNX node test exercises " << op;
  }
  EXPECT_GT(run.passed, 100);
}

// Per-op-type kernel time of a case's test_data_set_0 (best of 3 runs, 2 threads), to check that
// no non-GEMM op dominates.
void PrintOpProfile(const fs::path& dir) {
  ModelOptions options;
  options.num_threads = 2;
  auto loaded = LoadOnnxModel((dir / "model.onnx").string(), options);
  if (!loaded.ok()) return;
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < (*loaded)->inputs().size(); ++i) {
    auto t = ReadTensorProtoFile(
        (dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb")).string());
    if (!t.ok()) return;
    t->name = (*loaded)->inputs()[i].name;
    inputs.push_back(*std::move(t));
  }
  std::vector<TensorView> views;
  for (Tensor& t : inputs) views.push_back(t.View());
  std::map<std::string, uint64_t> best;
  uint64_t best_total = ~uint64_t{0};
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<Tensor> outputs;
    std::vector<LayerTiming> timings;
    if (!(*loaded)->RunTimed(views, &outputs, &timings).ok()) return;
    std::map<std::string, uint64_t> per_op;
    uint64_t total = 0;
    for (const LayerTiming& t : timings) {
      per_op[t.op] += t.ns;
      total += t.ns;
    }
    if (total < best_total) {
      best_total = total;
      best = per_op;
    }
  }
  std::cout << "  profile " << dir.filename().string() << ": " << best_total / 1000 << " us";
  for (const auto& [op, ns] : best) std::cout << " " << op << "=" << ns / 1000;
  std::cout << "\n";
}

// Cases written by tools/export_op_cases.py (PyTorch exports with torch's outputs), in the same
// layout; run when TESSERA_EXPORTED_CASES names their directory. Every data set of every case must
// load, run and match.
TEST(OnnxConformanceTest, ExportedCasesMatchTorch) {
  const char* root = std::getenv("TESSERA_EXPORTED_CASES");
  if (root == nullptr || !fs::is_directory(root)) {
    GTEST_SKIP() << "set TESSERA_EXPORTED_CASES to the output of tools/export_op_cases.py";
  }
  int ran = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (!fs::exists(entry.path() / "model.onnx")) continue;
    for (const auto& data : fs::directory_iterator(entry.path())) {
      if (!data.is_directory()) continue;
      double max_error = 0;
      std::string result = RunCase(entry.path(), data.path().filename().string(), &max_error);
      EXPECT_EQ(result, "") << entry.path().filename() << "/" << data.path().filename();
      std::cout << "  " << entry.path().filename().string() << "/"
                << data.path().filename().string() << ": " << (result.empty() ? "ok" : result)
                << ", max error " << max_error << "\n";
      ++ran;
    }
    if (std::getenv("TESSERA_PROFILE_OPS") != nullptr) PrintOpProfile(entry.path());
  }
  EXPECT_GT(ran, 0);
}

}  // namespace
}  // namespace tessera::engine
