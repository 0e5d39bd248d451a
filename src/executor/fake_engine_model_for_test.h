// A test double for engine::Model: no model file, deterministic arithmetic, injectable failures.
#pragma once

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/engine/engine.h"

namespace tessera::executor {

// Input "x" (FP32, [-1, width]); outputs "y" = x + addend and "z" = 2 * x, same shape as x.
// `on_run`, when set, runs first in every Run() and its error (if any) is returned: tests use it to
// block a batch or to inject an engine failure. Thread-compatible like any engine::Model.
class FakeEngineModelForTest : public engine::Model {
 public:
  struct Options {
    float addend = 1.0f;
    int64_t width = 4;
    uint64_t weight_bytes = 1234;
    std::function<Status()> on_run;
  };

  explicit FakeEngineModelForTest(Options options) : options_(std::move(options)) {
    inputs_ = {{"x", DataType::kFp32, {-1, options_.width}}};
    outputs_ = {{"y", DataType::kFp32, {-1, options_.width}},
                {"z", DataType::kFp32, {-1, options_.width}}};
  }

  const std::vector<engine::TensorInfo>& inputs() const override { return inputs_; }
  const std::vector<engine::TensorInfo>& outputs() const override { return outputs_; }
  uint64_t weight_bytes() const override { return options_.weight_bytes; }

  Status Run(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs) override {
    ++runs_;
    if (options_.on_run) TESSERA_RETURN_IF_ERROR(options_.on_run());
    if (inputs.size() != 1 || inputs[0].name != "x" || inputs[0].dtype != DataType::kFp32) {
      return absl::InvalidArgumentError("FakeEngineModelForTest wants one FP32 input 'x'");
    }
    const TensorView& x = inputs[0];
    const size_t n = x.byte_size / sizeof(float);
    std::vector<float> in(n);
    std::memcpy(in.data(), x.data, n * sizeof(float));
    outputs->clear();
    for (const char* name : {"y", "z"}) {
      Tensor t{name, DataType::kFp32, x.shape, std::vector<std::byte>(n * sizeof(float))};
      auto* out = reinterpret_cast<float*>(t.bytes.data());
      for (size_t i = 0; i < n; ++i) {
        out[i] = name[0] == 'y' ? in[i] + options_.addend : 2.0f * in[i];
      }
      outputs->push_back(std::move(t));
    }
    return absl::OkStatus();
  }

  int runs() const { return runs_.load(); }

 private:
  Options options_;
  std::vector<engine::TensorInfo> inputs_;
  std::vector<engine::TensorInfo> outputs_;
  std::atomic<int> runs_{0};
};

}  // namespace tessera::executor
