// A test double for engine::Model: no model file, deterministic arithmetic, injectable failures.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

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
// Weight sharing is real at the descriptor level: ExportWeights puts `weights` in a memory file
// (memfd), and a fake made with a WeightImport reads that file back and counts as imported when
// the layout and the bytes are its own `weights`.
class FakeEngineModelForTest : public engine::Model {
 public:
  struct Options {
    float addend = 1.0f;
    int64_t width = 4;
    uint64_t weight_bytes = 1234;
    std::function<Status()> on_run;
    std::string weights = "fake weights";
  };

  explicit FakeEngineModelForTest(Options options, const engine::WeightImport* import = nullptr)
      : options_(std::move(options)) {
    inputs_ = {{"x", DataType::kFp32, {-1, options_.width}}};
    outputs_ = {{"y", DataType::kFp32, {-1, options_.width}},
                {"z", DataType::kFp32, {-1, options_.width}}};
    if (import != nullptr) Import(*import);
  }

  StatusOr<engine::ExportedWeights> ExportWeights() const override {
    int fd = memfd_create("fake-weights", MFD_CLOEXEC);
    if (fd < 0) return absl::InternalError("memfd_create failed");
    engine::ExportedWeights exported{UniqueFd(fd), options_.weights.size(), Layout()};
    if (write(fd, options_.weights.data(), options_.weights.size()) !=
        static_cast<ssize_t>(options_.weights.size())) {
      return absl::InternalError("writing the fake weights failed");
    }
    return exported;
  }
  engine::WeightImportOutcome weight_import() const override { return import_; }

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
  std::string Layout() const { return "fake " + std::to_string(options_.weights.size()); }

  void Import(const engine::WeightImport& import) {
    import_.requested = true;
    if (import.layout != Layout()) {
      import_.why_not = "the exported weights are laid out as \"" + import.layout + "\"";
      return;
    }
    std::string bytes(import.bytes, '\0');
    if (pread(import.fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()) ||
        bytes != options_.weights) {
      import_.why_not = "the exported bytes are not this model's weights";
      return;
    }
    import_.imported = true;
  }

  engine::WeightImportOutcome import_;
  Options options_;
  std::vector<engine::TensorInfo> inputs_;
  std::vector<engine::TensorInfo> outputs_;
  std::atomic<int> runs_{0};
};

}  // namespace tessera::executor
