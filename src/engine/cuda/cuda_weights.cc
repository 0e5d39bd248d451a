// CudaModel's weight buffer: shared by the process's loads of the same model, uploaded into memory
// other processes can map, exported, or mapped from another process's export instead of uploaded
// (docs/engine-cuda.md, "Weights shared within and across processes"; GSLICE §4.4: a shadow
// instance shares its active's parameters; E²bird: workers of one model share its weights).
#include <cuda_runtime_api.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>

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

namespace {

// The weight buffers of this process's models by layout: a second load of the same model file
// with the same precision on the same GPU (another instance, a multi-granularity worker) maps the
// first one's weights instead of uploading them again.
std::mutex registry_mu;
std::map<std::string, std::weak_ptr<const WeightBuffer>>& Registry() {
  static auto* registry = new std::map<std::string, std::weak_ptr<const WeightBuffer>>;
  return *registry;
}

}  // namespace

Status CudaModel::PlaceWeights(const std::vector<std::byte>& staging) {
  const uint64_t total = staging.size();
  std::lock_guard lock(registry_mu);  // so that two loads of one model upload it once
  auto& registry = Registry();
  for (auto it = registry.begin(); it != registry.end();) {
    it = it->second.expired() ? registry.erase(it) : std::next(it);
  }
  if (auto it = registry.find(weights_layout_); it != registry.end()) {
    weights_ = it->second.lock();
    constants_ = weights_->data;
    if (import_.has_value()) {
      weight_import_ = {true, false, "this process holds the same weights already"};
      import_.reset();
    }
    return absl::OkStatus();
  }

  auto buffer = std::make_shared<WeightBuffer>();
  buffer->bytes = total;
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
        buffer->shareable = *std::move(mapped);
        weight_import_.imported = true;
      } else {
        weight_import_.why_not = std::string(mapped.status().message());
      }
    }
    import_.reset();
  }
  if (buffer->shareable == nullptr) {
    auto own = ShareableDeviceBuffer::Allocate(device_ordinal_, total);
    if (own.ok()) {
      buffer->shareable = *std::move(own);
    } else if (absl::IsResourceExhausted(own.status())) {
      return own.status();
    } else {
      buffer->not_shareable = std::string(own.status().message());
      spdlog::debug("weights in cudaMalloc memory, not shareable: {}", buffer->not_shareable);
      TESSERA_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&buffer->data, total), "cudaMalloc(weights)"));
    }
  }
  if (buffer->shareable != nullptr) buffer->data = buffer->shareable->data();
  if (!weight_import_.imported) {
    TESSERA_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(buffer->data, staging.data(), total,
                                                       cudaMemcpyHostToDevice, device_.stream),
                                       "upload weights"));
    TESSERA_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(device_.stream), "upload weights"));
  }
  weights_ = buffer;
  constants_ = buffer->data;
  registry[weights_layout_] = weights_;
  return absl::OkStatus();
}

StatusOr<ExportedWeights> CudaModel::ExportWeights() const {
  if (weights_ == nullptr) {
    return absl::FailedPreconditionError("the model has no device weights to share");
  }
  if (weights_->shareable == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("the weights are not in shareable memory: ", weights_->not_shareable));
  }
  ExportedWeights exported;
  TESSERA_ASSIGN_OR_RETURN(exported.fd, weights_->shareable->Export());
  exported.bytes = weights_->bytes;
  exported.layout = weights_layout_;
  return exported;
}

}  // namespace tessera::engine::cuda
