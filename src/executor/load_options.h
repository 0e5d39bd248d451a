// The engine options one LoadModel asks for.
#pragma once

#include "tessera/common/status.h"
#include "tessera/engine/engine.h"
#include "tessera/executor.pb.h"

namespace tessera::executor {

// `base` (the executor's backend, threads and device) with what the request adds:
// - the config's precision (LoadModel.precision): fp16 runs the CUDA backend at
//   engine::Precision::kFp16; the CPU engine computes in FP32 whatever the config says (logged);
//   bf16 on the CUDA backend, which has no BF16 mode, is INVALID_ARGUMENT naming it (a config
//   to mend, not a model for the server to move to the CPU, as it moves UNIMPLEMENTED ones);
// - the config's inputs as overridable initializers (a config input overrides an initializer of
//   its name, as in ONNX Runtime);
// - `shared_weights` (may be null) to map instead of uploading.
StatusOr<engine::ModelOptions> LoadOptionsFor(const ipc::LoadModel& request,
                                              const engine::ModelOptions& base,
                                              const engine::WeightImport* shared_weights);

}  // namespace tessera::executor
