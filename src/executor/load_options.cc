#include "executor/load_options.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera::executor {

StatusOr<engine::ModelOptions> LoadOptionsFor(const ipc::LoadModel& request,
                                              const engine::ModelOptions& base,
                                              const engine::WeightImport* shared_weights) {
  engine::ModelOptions options = base;
  const std::string& precision = request.precision();
  const bool cuda = options.backend == engine::Backend::kCuda;
  if (precision.empty() || precision == "fp32") {
    options.precision = engine::Precision::kFp32;
  } else if (precision != "fp16" && precision != "bf16") {
    return absl::InvalidArgumentError(
        absl::StrCat("precision '", precision, "' is not one of fp32, fp16, bf16"));
  } else if (!cuda) {
    spdlog::info("{}: precision {} runs in FP32 on the CPU (the CPU engine has no 16-bit kernels)",
                 request.instance_key(), precision);
    options.precision = engine::Precision::kFp32;
  } else if (precision == "fp16") {
    options.precision = engine::Precision::kFp16;
  } else {
    return absl::InvalidArgumentError(
        "precision bf16: the CUDA backend runs fp32 or fp16 (set precision: fp16)");
  }
  if (shared_weights != nullptr) options.import_weights = *shared_weights;
  for (const ipc::TensorSpec& input : request.inputs()) {
    options.overridable_initializers.push_back(input.name());
  }
  return options;
}

}  // namespace tessera::executor
