// The GPU-resident input mirror with the CUDA engine (needs a GPU; skipped elsewhere): a batch
// read from the mirror (TensorView::device_data, after the copy's event) gives the same outputs as
// the same batch uploaded from the ring, whatever order its requests were staged in, and keeps
// the bytes of staging time when the ring changes later.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/cuda/cuda_test_util.h"
#include "executor/input_mirror.h"
#include "gtest/gtest.h"

namespace tessera::executor {
namespace {

using engine::CudaDeviceCount;
using engine::CudaOptions;
using engine::LoadOrFail;
using engine::Precision;

TEST(CudaInputMirrorTest, BatchesFromTheMirrorMatchBatchesFromTheRing) {
  TESSERA_REQUIRE_GPU();
  constexpr size_t kRingBytes = size_t{1} << 20;
  constexpr int64_t kWidth = 64, kRows = 4;
  constexpr size_t kRowBytes = kWidth * sizeof(float);
  // Page-aligned, as a shared-memory mapping is (cudaHostRegister wants pages).
  char* ring = static_cast<char*>(std::aligned_alloc(4096, kRingBytes));
  ASSERT_NE(ring, nullptr);
  {
    auto mirror = MakeCudaInputMirror(ring, kRingBytes, 0);
    ASSERT_TRUE(mirror.ok()) << mirror.status();
    auto model = LoadOrFail(engine::SourceDir() + "/configs/models/mlp/1/model.onnx",
                            CudaOptions(Precision::kFp32, true));
    ASSERT_NE(model, nullptr);
    for (int round = 0; round < 4; ++round) {  // eager, then captured and replayed
      const uint64_t base = 8192 + static_cast<uint64_t>(round) * 4096;
      auto* rows = reinterpret_cast<float*>(ring + base);
      for (int64_t i = 0; i < kRows * kWidth; ++i) rows[i] = 0.01f * ((i * 7 + round) % 97) - 0.5f;
      for (int r : {2, 0, 3, 1})
        ASSERT_TRUE((*mirror)->Stage(base + r * kRowBytes, kRowBytes).ok());
      auto view = (*mirror)->View(base, kRows * kRowBytes);
      ASSERT_TRUE(view.has_value());
      EXPECT_TRUE(view->on_device);
      EXPECT_NE(view->ready, nullptr);

      TensorView from_ring{
          "input", DataType::kFp32, {kRows, kWidth}, ring + base, kRows * kRowBytes};
      std::vector<Tensor> want, got, later;
      ASSERT_TRUE(model->Run({from_ring}, &want).ok());
      TensorView from_mirror = from_ring;
      from_mirror.device_data = view->data;
      from_mirror.device_ready = view->ready;
      ASSERT_TRUE(model->Run({from_mirror}, &got).ok());
      EXPECT_TRUE(want[0].bytes == got[0].bytes) << "round " << round;

      // The ring changes without being staged again: the mirror still holds the staged bytes.
      std::memset(ring + base, 0, kRows * kRowBytes);
      ASSERT_TRUE(model->Run({from_mirror}, &later).ok());
      EXPECT_TRUE(want[0].bytes == later[0].bytes) << "round " << round;
    }
    // Part of a batch never staged: no view, the executor reads the ring.
    EXPECT_FALSE((*mirror)->View(0, kRowBytes).has_value());
  }
  std::free(ring);
}

}  // namespace
}  // namespace tessera::executor
