// Helpers of the CPU fusion tests (cpu_fusion_test.cc, norm_fusion_test.cc): random inputs, a
// model's first output, and a file's graph after the shared passes.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/graph_passes.h"
#include "engine/onnx_import.h"
#include "gtest/gtest.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {

// Normal random FP32 values of `shape` for input "x", held with the view of them.
struct RandomX {
  RandomX(Shape shape, uint32_t seed, float stddev) : values(ElementCount(shape)) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, stddev);
    for (float& v : values) v = dist(rng);
    view = TensorView{"x", DataType::kFp32, std::move(shape), values.data(),
                      values.size() * sizeof(float)};
  }
  RandomX(const RandomX&) = delete;  // the view points into `values`
  RandomX& operator=(const RandomX&) = delete;
  std::vector<float> values;
  TensorView view;
};

// The model's first output for `x` (FP32, all of its elements), with or without oneDNN, and in
// `*kernels`, when given, the number of kernels the Run ran.
inline std::vector<float> FirstOutput(const std::string& path, bool onednn, const RandomX& x,
                                      size_t* kernels = nullptr, int num_threads = 1) {
  ModelOptions options;
  options.onednn = onednn;
  options.num_threads = num_threads;
  auto model = LoadOnnxModel(path, options);
  EXPECT_TRUE(model.ok()) << model.status();
  std::vector<Tensor> out;
  std::vector<LayerTiming> timings;
  if (!model.ok()) return {};
  const Status ran = (*model)->RunTimed({x.view}, &out, &timings);
  EXPECT_TRUE(ran.ok()) << ran;
  if (kernels != nullptr) *kernels = timings.size();
  if (out.empty()) return {};
  const auto* y = reinterpret_cast<const float*>(out[0].bytes.data());
  return std::vector<float>(y, y + out[0].bytes.size() / sizeof(float));
}

inline StatusOr<Graph> PreparedGraph(const std::string& path, GraphPassOptions options = {}) {
  TESSERA_ASSIGN_OR_RETURN(Graph graph, ImportOnnxModel(path, [](const std::string& op) {
                             return cpu::FindOp(op) != nullptr;
                           }));
  TESSERA_RETURN_IF_ERROR(RunGraphPasses(&graph, options).status());
  return graph;
}

}  // namespace tessera::engine
