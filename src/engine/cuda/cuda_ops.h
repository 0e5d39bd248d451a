// CUDA op implementations: for each supported ONNX op, a host-side `plan` step (output shapes and
// dtypes from input shapes and host-known values, per-shape state such as the cuDNN algorithm and
// workspace size) and a device-side `launch` step that only enqueues work on the model's stream.
// Plan runs once per input shape (cuda_model.cc caches it); launch runs on every Run, possibly
// under CUDA graph capture, so it must not allocate, synchronise or read device memory back.
//
// Thread-safety: ops are stateless; NodeState is owned by one plan and used by one Run at a time.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/kernels.h"
#include "engine/graph.h"
#include "engine/value.h"
#include "tessera/common/status.h"

namespace tessera::engine::cuda {

// Handles shared by every launch of one model; one stream per model.
struct Device {
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  bool fp16 = false;  // floating-point tensors are stored as FP16 (Precision::kFp16)
  // No device behind the handles (CheckCudaSupport with input shapes): plan steps fill their
  // outputs' metas and skip what needs the device (cuDNN descriptors and algorithm choice: Conv,
  // ConvTranspose, the cuDNN pools). Never set on a model that runs.
  bool shapes_only = false;
  Elem elem() const { return fp16 ? Elem::kF16 : Elem::kF32; }
  // Bytes per element on the device of a tensor whose logical dtype is `dtype`.
  int StorageBytes(DataType dtype) const {
    return dtype == DataType::kFp32 && fp16 ? 2 : static_cast<int>(DataTypeByteSize(dtype));
  }
};

// What the host knows of a value while planning: logical dtype (kFp32 even when stored as FP16),
// shape, and its contents when they live on the host (constants, shape arithmetic).
struct ValueMeta {
  DataType dtype = DataType::kInvalid;
  Shape shape;
  const Value* host = nullptr;  // contents, or null when only the device has them
};

// Per node and input shape: whatever an op's plan step wants its launch step to see.
struct NodeState {
  std::vector<int64_t> ints;
  std::vector<float> floats;
  IndexMap map;
  uint64_t workspace_bytes = 0;   // scratch the launch needs (placed in the arena)
  std::shared_ptr<void> extra;    // op-specific (cuDNN descriptors), freed with the plan
};

struct PlanCtx {
  const Node& node;
  const Device& device;
  std::vector<const ValueMeta*> in;  // null for an omitted optional input
  std::vector<ValueMeta>* out;       // sized to the node's outputs; plan fills dtype and shape
  NodeState* state;
};

struct LaunchCtx {
  const Node& node;
  const Device& device;
  std::vector<const void*> in;       // device pointers, null for omitted inputs
  std::vector<const ValueMeta*> in_meta;
  std::vector<void*> out;
  std::vector<const ValueMeta*> out_meta;
  NodeState* state;
  void* workspace = nullptr;         // state->workspace_bytes of arena scratch
};

// What the load step knows of a device node from the graph alone (no device, and shapes only
// where import inferred them): for `check` steps, which refuse at load what `plan` would refuse
// at the first Run.
struct CheckCtx {
  const Node& node;
  const Graph& graph;
  const std::vector<bool>& on_device;  // per value id: the device computes it
  // Input `i` is present and computed on the device.
  bool InputOnDevice(size_t i) const {
    return i < node.inputs.size() && node.inputs[i] != kNoValue && on_device[node.inputs[i]];
  }
};

using PlanFn = Status (*)(PlanCtx& ctx);
using LaunchFn = Status (*)(LaunchCtx& ctx);
// Empty when nothing is known to be wrong, else why this node cannot run on the device.
using CheckFn = std::string (*)(const CheckCtx& ctx);

struct CudaOpDef {
  PlanFn plan = nullptr;
  LaunchFn launch = nullptr;  // null for ops whose output 0 aliases input 0 (Reshape & co.)
  CheckFn check = nullptr;    // null: every configuration the graph allows is supported
};

// Shared load checks (cuda_op_checks.cc). Each returns "" or the reason.
// Inputs `indices` are read by the plan step on the host (shapes, axes, bounds), so they must not
// be computed on the device.
std::string CheckHostInputs(const CheckCtx& ctx, std::initializer_list<size_t> indices);
// Every non-constant input whose dtype import knows is FP32 (the float kernels' only type).
std::string CheckFloatInputs(const CheckCtx& ctx);
// Add, Sub, Mul, Div: FP32 inputs, or INT32 or INT64 ones (shape and position-id arithmetic).
std::string CheckArithmeticInputs(const CheckCtx& ctx);
// Both: the float ops whose extra operands (bounds, axes) are read on the host.
std::string CheckFloatAndHostInputs(const CheckCtx& ctx, std::initializer_list<size_t> indices);
// Op-specific: forms the row kernels lack (another Softmax axis, LayerNorm's extra outputs,
// ReduceMean over leading axes), known when the rank and axes are.
std::string CheckSoftmax(const CheckCtx& ctx);
std::string CheckLayerNorm(const CheckCtx& ctx);
std::string CheckReduceMean(const CheckCtx& ctx);

// The CUDA op for an ONNX op type, or null when the backend lacks it.
const CudaOpDef* FindCudaOp(const std::string& op_type);

// Status from CUDA/cuDNN/cuBLAS return codes; `what` names the call.
Status CudaStatus(cudaError_t error, const char* what);
Status CudnnStatus(cudnnStatus_t status, const char* what);
Status CublasStatus(cublasStatus_t status, const char* what);

// Op groups, by defining file.
// cuda_ops.cc: elementwise, normalisation, data movement, aliases.
const CudaOpDef* FindBasicOp(const std::string& op_type);
// cuda_dnn_ops.cc: Conv, pools, Gemm, MatMul (cuDNN/cuBLAS).
const CudaOpDef* FindDnnOp(const std::string& op_type);
// cuda_index_ops.cc: integer arithmetic, comparisons and logic, CumSum, Split.
const CudaOpDef* FindIndexOp(const std::string& op_type);
// cuda_image_ops.cc: image-to-image ops (Pad, Resize, InstanceNormalization, ConvTranspose).
const CudaOpDef* FindImageOp(const std::string& op_type);
// cuda_conv_transpose.cc: the image group's ConvTranspose (cuDNN backward data).
const CudaOpDef& ConvTransposeOp();

}  // namespace tessera::engine::cuda
