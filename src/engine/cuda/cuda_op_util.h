// Helpers of the CUDA ops' plan steps (cuda_op_util.cc): operand lookup with named errors,
// host-known operand contents, and index maps. Used by the op files, not by the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/cuda/cuda_ops.h"

namespace tessera::engine::cuda {

Status Invalid(const std::string& message);        // INVALID_ARGUMENT
Status Unimplemented(const std::string& message);  // UNIMPLEMENTED
// Input `index` of the node is present (not an omitted optional one).
inline bool Present(const PlanCtx& ctx, size_t index) {
  return index < ctx.in.size() && ctx.in[index] != nullptr;
}
// Input `index` of the node, or INVALID_ARGUMENT naming `what` when it is missing.
StatusOr<const ValueMeta*> Input(const PlanCtx& ctx, size_t index, const char* what);
// Input `index`, which must be FP32 (UNIMPLEMENTED otherwise).
StatusOr<const ValueMeta*> FloatInput(const PlanCtx& ctx, size_t index, const char* what);
// UNIMPLEMENTED unless `meta` is FP32 (the float kernels' only type).
Status RequireFloat(const ValueMeta& meta, const char* what);
// Integer contents of a host-known INT64 input (shape, axes, starts...), or an error naming it.
StatusOr<std::vector<int64_t>> HostInts(const PlanCtx& ctx, size_t index, const char* what);
// The value of a host-known FP32 scalar input (Clip's bounds).
StatusOr<float> HostScalar(const PlanCtx& ctx, size_t index, const char* what);

Shape Strides(const Shape& shape);  // row-major, in elements
int64_t Product(const Shape& shape, size_t begin, size_t end);
// Copies `width` bytes from each of `rows` rows (pitches in bytes) on `stream`: one plain copy for
// one row. Concat and Split move their parts with it. `what` names the copy in the error.
Status CopyRows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                size_t rows, cudaStream_t stream, const char* what);

// Map from `out` indices into each operand broadcast to it (numpy rules, right-aligned).
StatusOr<IndexMap> BroadcastMap(const Shape& out, const std::vector<const Shape*>& operands);

}  // namespace tessera::engine::cuda
