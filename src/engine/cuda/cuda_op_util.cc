#include "engine/cuda/cuda_op_util.h"

#include "absl/strings/str_cat.h"

namespace tessera::engine::cuda {

Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }
Status Unimplemented(const std::string& message) { return absl::UnimplementedError(message); }

StatusOr<const ValueMeta*> Input(const PlanCtx& ctx, size_t index, const char* what) {
  if (index >= ctx.in.size() || ctx.in[index] == nullptr) {
    return Invalid(absl::StrCat("input ", what, " is missing"));
  }
  return ctx.in[index];
}

StatusOr<const ValueMeta*> FloatInput(const PlanCtx& ctx, size_t index, const char* what) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* meta, Input(ctx, index, what));
  if (meta->dtype != DataType::kFp32) {
    return absl::UnimplementedError(absl::StrCat("input ", what, " is ", TypeName(meta->dtype),
                                                 "; the CUDA kernel takes FP32 only"));
  }
  return meta;
}

Status RequireFloat(const ValueMeta& meta, const char* what) {
  if (meta.dtype != DataType::kFp32) {
    return absl::UnimplementedError(absl::StrCat(what, " has data type ", TypeName(meta.dtype),
                                                 "; the CUDA kernel takes FP32 only"));
  }
  return absl::OkStatus();
}

// Integer contents of a host-known input (shape, axes, starts...), or an error naming it.
StatusOr<std::vector<int64_t>> HostInts(const PlanCtx& ctx, size_t index, const char* what) {
  TESSERA_ASSIGN_OR_RETURN(const ValueMeta* meta, Input(ctx, index, what));
  if (meta->host == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        what,
        " must be known on the host (a constant or computed from shapes); it is computed "
        "on the device"));
  }
  if (meta->dtype != DataType::kInt64) return Invalid(absl::StrCat(what, " must be INT64"));
  const int64_t* data = meta->host->data<int64_t>();
  return std::vector<int64_t>(data, data + meta->host->num_elements());
}

StatusOr<float> HostScalar(const PlanCtx& ctx, size_t index, const char* what) {
  const ValueMeta* meta = ctx.in[index];
  if (meta->host == nullptr || meta->host->num_elements() != 1 || meta->dtype != DataType::kFp32) {
    return absl::UnimplementedError(
        absl::StrCat(what, " must be a host-known FP32 scalar (a constant)"));
  }
  return meta->host->data<float>()[0];
}

Shape Strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

int64_t Product(const Shape& shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end; ++d) p *= shape[d];
  return p;
}

Status CopyRows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                size_t rows, cudaStream_t stream, const char* what) {
  if (width == 0 || rows == 0) return absl::OkStatus();
  const cudaError_t e = rows == 1
                            ? cudaMemcpyAsync(dst, src, width, cudaMemcpyDeviceToDevice, stream)
                            : cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows,
                                                cudaMemcpyDeviceToDevice, stream);
  return CudaStatus(e, what);
}

// Map from `out` indices into each operand broadcast to it (numpy rules, right-aligned).
StatusOr<IndexMap> BroadcastMap(const Shape& out, const std::vector<const Shape*>& operands) {
  if (out.size() > static_cast<size_t>(kMaxRank)) {
    return absl::UnimplementedError(absl::StrCat("rank ", out.size(), " > ", kMaxRank));
  }
  IndexMap map;
  map.rank = static_cast<int>(out.size());
  for (size_t d = 0; d < out.size(); ++d) map.dims[d] = out[d];
  for (size_t k = 0; k < operands.size(); ++k) {
    const Shape& s = *operands[k];
    const Shape strides = Strides(s);
    const size_t lead = out.size() - s.size();
    for (size_t d = 0; d < s.size(); ++d) {
      map.stride[k][lead + d] = s[d] == 1 ? 0 : strides[d];
    }
  }
  return map;
}

}  // namespace tessera::engine::cuda
