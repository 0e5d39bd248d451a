// Helpers shared by the CUDA engine tests: skipping without a GPU, comparing outputs, loading.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/cuda_model.h"
#include "gtest/gtest.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {

// Every GPU test starts with this: CI machines have nvcc but no device.
#define TESSERA_REQUIRE_GPU()                                                  \
  do {                                                                         \
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device on this machine"; \
  } while (0)

// The source tree (models, reference data): $TESSERA_SOURCE_DIR when set — a build carried to
// another machine runs from another path — else the tree this binary was configured from.
inline std::string SourceDir() {
  const char* env = std::getenv("TESSERA_SOURCE_DIR");
  return env != nullptr && env[0] != '\0' ? std::string(env) : std::string(TESSERA_SOURCE_DIR);
}

inline const float* FloatsOf(const Tensor& t) {
  return reinterpret_cast<const float*>(t.bytes.data());
}

// |actual - expected| <= rtol * (|expected| + max|expected|) element-wise: relative, with an
// absolute floor scaled to the tensor (sums that cancel to ~0 keep the error of their terms).
inline void ExpectTensorsClose(const Tensor& actual, const Tensor& expected, float rtol,
                               const std::string& what) {
  ASSERT_EQ(actual.dtype, expected.dtype) << what;
  ASSERT_EQ(actual.shape, expected.shape) << what;
  ASSERT_EQ(actual.bytes.size(), expected.bytes.size()) << what;
  if (actual.dtype != DataType::kFp32) {
    EXPECT_TRUE(actual.bytes == expected.bytes) << what;
    return;
  }
  const int64_t count = ElementCount(expected.shape);
  const float* a = FloatsOf(actual);
  const float* e = FloatsOf(expected);
  float scale = 0;
  for (int64_t i = 0; i < count; ++i) scale = std::max(scale, std::fabs(e[i]));
  int bad = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (!(std::fabs(a[i] - e[i]) <= rtol * (std::fabs(e[i]) + scale))) {
      if (++bad <= 5) {
        ADD_FAILURE() << what << "[" << i << "] = " << a[i] << ", expected " << e[i];
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << count << " elements differ";
}

inline float Tolerance(Precision precision) {
  return precision == Precision::kFp16 ? 1e-2f : 1e-4f;
}

inline std::unique_ptr<Model> LoadOrFail(const std::string& path, const ModelOptions& options) {
  auto model = LoadOnnxModel(path, options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

inline ModelOptions CudaOptions(Precision precision, bool graphs) {
  ModelOptions options;
  options.backend = Backend::kCuda;
  options.precision = precision;
  options.cuda_graphs = graphs;
  return options;
}

// Deterministic values in [lo, hi).
inline std::vector<float> Pattern(int64_t count, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> out(static_cast<size_t>(count));
  uint32_t state = seed * 2654435761u + 1;
  for (float& v : out) {
    state = state * 1664525u + 1013904223u;
    v = lo + (hi - lo) * static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
  }
  return out;
}

inline Tensor FloatTensor(const std::string& name, Shape shape, const std::vector<float>& data) {
  Tensor t;
  t.name = name;
  t.dtype = DataType::kFp32;
  t.shape = std::move(shape);
  t.bytes.resize(data.size() * sizeof(float));
  std::memcpy(t.bytes.data(), data.data(), t.bytes.size());
  return t;
}

}  // namespace tessera::engine
