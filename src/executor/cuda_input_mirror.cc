// The input mirror on a CUDA device (input_mirror.h). Built only with TESSERA_CUDA.
#include <cuda_runtime_api.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "executor/input_mirror.h"

namespace tessera::executor {
namespace {

Status CudaCall(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")"));
}

// Enough events that one is re-recorded only long after its batch waited on it; re-recording an
// event a stream already waits on is harmless anyway (the wait took the earlier record).
constexpr size_t kEvents = 1024;

class CudaInputMirror final : public InputMirror {
 public:
  ~CudaInputMirror() override {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (device_ != nullptr) cudaFree(device_);
    if (registered_) cudaHostUnregister(ring_);
  }

  Status Init(void* ring, uint64_t ring_bytes) {
    ring_ = static_cast<char*>(ring);
    bytes_ = ring_bytes;
    TESSERA_RETURN_IF_ERROR(CudaCall(cudaGetDevice(&ordinal_), "cudaGetDevice"));
    // Page-locks the shared-memory ring in this process: copies from it are DMA, asynchronous.
    TESSERA_RETURN_IF_ERROR(CudaCall(cudaHostRegister(ring_, bytes_, cudaHostRegisterDefault),
                                     "cudaHostRegister(input ring)"));
    registered_ = true;
    TESSERA_RETURN_IF_ERROR(CudaCall(cudaMalloc(reinterpret_cast<void**>(&device_), bytes_),
                                     "cudaMalloc(input mirror)"));
    TESSERA_RETURN_IF_ERROR(
        CudaCall(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
    events_.resize(kEvents, nullptr);
    for (cudaEvent_t& event : events_) {
      TESSERA_RETURN_IF_ERROR(
          CudaCall(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate"));
    }
    return absl::OkStatus();
  }

  std::string Describe() const override {
    return absl::StrCat("input mirror of ", bytes_, " bytes on GPU ", ordinal_);
  }

  Status Stage(uint64_t offset, uint64_t bytes) override {
    if (offset > bytes_ || bytes > bytes_ - offset) {
      return absl::OutOfRangeError(absl::StrCat("staged range [", offset, ", +", bytes,
                                                ") is outside the ", bytes_, "-byte input ring"));
    }
    staged_.Drop(offset, bytes);
    TESSERA_RETURN_IF_ERROR(CudaCall(
        cudaMemcpyAsync(device_ + offset, ring_ + offset, bytes, cudaMemcpyHostToDevice, stream_),
        "input mirror copy"));
    ++seq_;
    TESSERA_RETURN_IF_ERROR(
        CudaCall(cudaEventRecord(events_[seq_ % kEvents], stream_), "cudaEventRecord"));
    staged_.Add(offset, bytes, seq_);
    return absl::OkStatus();
  }

  std::optional<MirroredInput> View(uint64_t offset, uint64_t bytes) override {
    std::optional<uint64_t> latest = staged_.LatestCovering(offset, bytes);
    if (!latest.has_value()) return std::nullopt;
    // Copies complete in staging order, and the event of the latest one was recorded after it.
    // If kEvents newer stagings re-recorded that event since, waiting on it covers them too.
    return MirroredInput{device_ + offset, events_[*latest % kEvents], true};
  }

 private:
  char* ring_ = nullptr;
  uint64_t bytes_ = 0;
  int ordinal_ = 0;
  bool registered_ = false;
  char* device_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
  StagedRanges staged_;
  uint64_t seq_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<InputMirror>> MakeCudaInputMirror(void* ring, uint64_t ring_bytes,
                                                           int ordinal) {
  if (ordinal >= 0) {
    Status selected = CudaCall(cudaSetDevice(ordinal), "cudaSetDevice");
    if (!selected.ok()) return absl::UnavailableError(selected.message());
  }
  auto mirror = std::make_unique<CudaInputMirror>();
  Status status = mirror->Init(ring, ring_bytes);
  if (!status.ok()) return absl::UnavailableError(status.message());
  return std::unique_ptr<InputMirror>(std::move(mirror));
}

}  // namespace tessera::executor
