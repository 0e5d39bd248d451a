// CudaModel's weight buffer: uploaded into memory other processes can map, exported, or mapped
// from another process's export instead of uploaded (docs/engine-cuda.md, "Weights shared across
// processes"; GSLICE §4.4: a shadow instance shares its active's parameters).
#include <cuda_runtime_api.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/cuda/cuda_model_impl.h"
#include "spdlog/spdlog.h"

namespace tessera::engine::cuda {
namespace {

// 64-bit FNV-1a over 8-byte words (then the tail bytes): it only has to tell two weight buffers
// apart, and a word at a time keeps hashing hundreds of MiB well under the load's other costs.
uint64_t HashBytes(const void* data, size_t size, uint64_t hash) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  const auto* bytes = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    hash = (hash ^ word) * kPrime;
    hash ^= hash >> 29;
  }
  for (; i < size; ++i) hash = (hash ^ bytes[i]) * kPrime;
  return hash;
}

template <typename T>
uint64_t HashValue(T value, uint64_t hash) {
  return HashBytes(&value, sizeof(value), hash);
}

}  // namespace

Status CudaModel::DescribeWeights(const std::vector<uint64_t>& offsets,
                                  const std::vector<bool>& uploaded,
                                  const std::vector<std::byte>& staging) {
  cudaDeviceProp prop;
  TESSERA_RETURN_IF_ERROR(
      CudaStatus(cudaGetDeviceProperties(&prop, device_ordinal_), "cudaGetDeviceProperties"));
  std::string uuid;
  for (unsigned char byte : prop.uuid.bytes) absl::StrAppendFormat(&uuid, "%02x", byte);
  uint64_t hash = 0xcbf29ce484222325ull;
  int count = 0;
  for (size_t v = 0; v < offsets.size(); ++v) {
    if (!uploaded[v]) continue;
    const Value& c = *graph_.constants[v];
    hash = HashValue(static_cast<uint64_t>(v), hash);
    hash = HashValue(offsets[v], hash);
    hash = HashValue(static_cast<int>(c.dtype()), hash);
    hash = HashValue(static_cast<int64_t>(c.num_elements()), hash);
    ++count;
  }
  hash = HashBytes(staging.data(), staging.size(), hash);
  weights_layout_ = absl::StrFormat("cuda gpu=%s %s bytes=%d constants=%d hash=%016x", uuid,
                                    device_.fp16 ? "fp16" : "fp32", staging.size(), count, hash);
  return absl::OkStatus();
}

Status CudaModel::PlaceWeights(const std::vector<std::byte>& staging) {
  const uint64_t total = staging.size();
  if (import_.has_value()) {
    weight_import_.requested = true;
    if (import_->layout != weights_layout_) {
      weight_import_.why_not =
          absl::StrCat("the exported weights are laid out as \"", import_->layout,
                       "\", this load as \"", weights_layout_, "\"");
    } else if (import_->bytes != total) {
      weight_import_.why_not =
          absl::StrCat("the export holds ", import_->bytes, " bytes, this load ", total);
    } else {
      auto mapped = ShareableDeviceBuffer::Import(device_ordinal_, import_->fd, total);
      if (mapped.ok()) {
        shared_constants_ = *std::move(mapped);
        constants_ = shared_constants_->data();
        weight_import_.imported = true;
        import_.reset();
        return absl::OkStatus();
      }
      weight_import_.why_not = std::string(mapped.status().message());
    }
    import_.reset();
  }
  auto own = ShareableDeviceBuffer::Allocate(device_ordinal_, total);
  if (own.ok()) {
    shared_constants_ = *std::move(own);
    constants_ = shared_constants_->data();
  } else if (absl::IsResourceExhausted(own.status())) {
    return own.status();
  } else {
    not_shareable_ = std::string(own.status().message());
    spdlog::debug("weights in cudaMalloc memory, not shareable: {}", not_shareable_);
    TESSERA_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&constants_, total), "cudaMalloc(weights)"));
  }
  TESSERA_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(constants_, staging.data(), total, cudaMemcpyHostToDevice, device_.stream),
      "upload weights"));
  return CudaStatus(cudaStreamSynchronize(device_.stream), "upload weights");
}

StatusOr<ExportedWeights> CudaModel::ExportWeights() const {
  if (constants_ == nullptr) {
    return absl::FailedPreconditionError("the model has no device weights to share");
  }
  if (shared_constants_ == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("the weights are not in shareable memory: ", not_shareable_));
  }
  ExportedWeights exported;
  TESSERA_ASSIGN_OR_RETURN(exported.fd, shared_constants_->Export());
  exported.bytes = shared_constants_->bytes();
  exported.layout = weights_layout_;
  return exported;
}

}  // namespace tessera::engine::cuda
