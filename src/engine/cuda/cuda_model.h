// The CUDA backend's entry point: LoadOnnxModel (cpu_model.cc) imports, checks and folds the graph
// as for the CPU, then hands it here when ModelOptions::backend is kCuda. Free of CUDA headers so
// the dispatch compiles with the host compiler alone.
//
// Thread-safety: LoadCudaModel may be called from any thread; the Model it returns follows the
// Model contract (Run thread-compatible, PlanMemory safe against a concurrent Run).
#pragma once

#include <memory>

#include "engine/graph.h"
#include "tessera/common/status.h"
#include "tessera/engine/engine.h"

namespace tessera::engine {

// A Model running `graph` (already folded) on the current CUDA device. Errors:
//   FAILED_PRECONDITION  no CUDA device is visible (or no usable driver);
//   UNIMPLEMENTED        nodes the CUDA backend lacks, every one listed as `node "name" (Op)`;
//   INTERNAL             a CUDA/cuDNN/cuBLAS call failed while setting up (message names it).
StatusOr<std::unique_ptr<Model>> LoadCudaModel(Graph graph, const ModelOptions& options);

// Whether LoadCudaModel would accept `graph` (already folded): every node it would run on the
// device has a CUDA op whose load check passes. Needs no device, so a machine without a GPU can
// tell whether a model will load on one. UNIMPLEMENTED lists every node that cannot run. With
// `input_shapes` (one per graph input), also plans every node for them as the first Run would,
// still without a device (shapes only: no cuDNN algorithm choice), so shape-dependent refusals
// show too; `output_shapes` (may be null) then gets the graph outputs' shapes.
Status CheckCudaSupport(Graph graph, const std::vector<Shape>* input_shapes = nullptr,
                        std::vector<Shape>* output_shapes = nullptr);

// Number of CUDA devices the runtime sees; 0 when there is none or no usable driver.
int CudaDeviceCount();

// For tests: how many input shapes of `model` (a CUDA Model) have a captured CUDA graph now.
// FAILED_PRECONDITION with the reason when a capture failed (that shape then runs eagerly);
// INVALID_ARGUMENT for a model of another backend.
StatusOr<int> CudaGraphsCaptured(const Model& model);

// For tests: the device address of `model`'s weight buffer (equal for two models that share it);
// INVALID_ARGUMENT for a model of another backend.
StatusOr<const void*> CudaWeightsAddress(const Model& model);

}  // namespace tessera::engine
