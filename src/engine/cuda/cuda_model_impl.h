// Internals of the CUDA Model shared by cuda_model.cc (load, Run, CUDA graphs) and cuda_plan.cc
// (per-shape planning). See cuda_model.cc for the design; not part of any public interface.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/cuda_support.h"
#include "engine/cuda/shareable_buffer.h"
#include "engine/graph.h"
#include "engine/thread_pool.h"
#include "tessera/engine/engine.h"

namespace tessera::engine::cuda {

inline constexpr uint64_t kAlign = 256;                     // device buffer alignment (any vector load)
inline constexpr size_t kCublasWorkspace = size_t{32} << 20;  // fixed, so cuBLAS never allocates in capture
inline constexpr size_t kMaxCachedPlans = 64;

inline uint64_t AlignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

inline Status Prefixed(const Status& status, const std::string& prefix) {
  return Status(status.code(), absl::StrCat(prefix, ": ", status.message()));
}

// A model's device weights: VMM memory other processes can map, or plain cudaMalloc memory.
// Immutable once uploaded; shared by every model of the process with the same layout.
struct WeightBuffer {
  void* data = nullptr;
  uint64_t bytes = 0;
  std::unique_ptr<ShareableDeviceBuffer> shareable;  // null: `data` came from cudaMalloc
  std::string not_shareable;                         // why, when it is null
  ~WeightBuffer() {
    if (shareable == nullptr && data != nullptr) cudaFree(data);
  }
};

// Everything one tuple of input shapes needs; built by BuildPlan, then read by every Run.
struct Plan {
  std::vector<ValueMeta> meta;          // per value id (NodePlans)
  std::vector<Value> host_values;       // per value id: contents of host values
  std::vector<NodeState> states;        // per node
  std::vector<int64_t> arena_offset;    // per value id: offset in the arena, or -1
  std::vector<void*> fixed;             // per value id: a pointer outside the arena, or null
  std::vector<int64_t> workspace;       // per node: workspace offset, or -1
  std::vector<int64_t> in_stage;        // per graph input: FP32 staging offset (FP16 mode), or -1
  std::vector<int64_t> out_stage;       // per graph output: FP32 staging offset, or -1
  void* uploads = nullptr;              // host values read by device nodes (cudaMalloc)
  uint64_t arena_bytes = 0, naive_bytes = 0;
  int num_values = 0;
  bool ran = false;                     // an eager Run succeeded (capture may follow)
  bool capture_failed = false;          // capture was tried and failed: stay eager
  cudaGraphExec_t exec = nullptr;
  ~Plan() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (uploads != nullptr) cudaFree(uploads);
  }
};

class CudaModel final : public Model {
 public:
  static StatusOr<std::unique_ptr<CudaModel>> Create(Graph graph, const ModelOptions& options);
  ~CudaModel() override;

  const std::vector<TensorInfo>& inputs() const override { return graph_.inputs; }
  const std::vector<TensorInfo>& outputs() const override { return graph_.outputs; }
  uint64_t weight_bytes() const override { return weight_bytes_; }

  Status Run(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs) override {
    std::lock_guard<std::mutex> lock(mu_);
    return Finished(RunLocked(inputs, outputs, nullptr));
  }
  Status RunTimed(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs,
                  std::vector<LayerTiming>* timings) override {
    if (timings == nullptr) return absl::InvalidArgumentError("RunTimed needs a timings vector");
    timings->clear();
    std::lock_guard<std::mutex> lock(mu_);
    return Finished(RunLocked(inputs, outputs, timings));
  }
  StatusOr<MemoryPlanInfo> PlanMemory(int64_t batch) const override;
  StatusOr<ExportedWeights> ExportWeights() const override;
  WeightImportOutcome weight_import() const override { return weight_import_; }

  const void* weights_address() const { return constants_; }

  StatusOr<int> graphs_captured() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (!capture_error_.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("a CUDA graph capture failed (that shape "
                                                        "runs eagerly): ", capture_error_));
    }
    int count = 0;
    for (const auto& [key, plan] : plans_) count += plan->exec != nullptr ? 1 : 0;
    return count;
  }

 private:
  CudaModel(Graph graph, const ModelOptions& options) : graph_(std::move(graph)) {
    device_.fp16 = options.precision == Precision::kFp16;
    cuda_graphs_ = options.cuda_graphs;
    import_ = options.import_weights;
  }
  Status UploadInput(const void* src, char* pinned, void* dst, size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status Init();
  // Sets weights_layout_ (see ExportedWeights::layout) for the device constants (`uploaded`) at
  // `offsets` of the weight buffer whose contents are `staging` (cuda_weights.cc).
  Status DescribeWeights(const std::vector<uint64_t>& offsets, const std::vector<bool>& uploaded,
                         const std::vector<std::byte>& staging);
  // Points constants_ at the weights: another model's of this process with the same layout, else
  // mapped from import_ when its layout is weights_layout_, else `staging` uploaded into a new
  // buffer (shareable where the driver allows), which later loads in this process reuse.
  Status PlaceWeights(const std::vector<std::byte>& staging);
  // A failed Run may leave copies from the pinned staging in flight: wait for them so the next
  // Run can reuse it.
  Status Finished(Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!status.ok()) cudaStreamSynchronize(device_.stream);
    return status;
  }
  Status ValidateInputs(const std::vector<TensorView>& views,
                        std::vector<const TensorView*>* ordered) const;
  StatusOr<std::shared_ptr<Plan>> GetPlan(const std::vector<Shape>& key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  StatusOr<std::shared_ptr<Plan>> BuildPlan(const std::vector<Shape>& key) const;
  Status Upload(Plan* plan) const;
  Status RunLocked(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs,
                   std::vector<LayerTiming>* timings) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status LaunchAll(Plan* plan, std::vector<LayerTiming>* timings) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status Capture(Plan* plan) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status EnsureArena(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status EnsurePinned(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void* Ptr(const Plan& plan, int id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (plan.fixed[id] != nullptr) return plan.fixed[id];
    return static_cast<char*>(arena_) + plan.arena_offset[id];
  }

  // The calling thread's current device becomes the model's when it is another one (a Run from a
  // thread that never selected a device).
  Status UseDevice() const {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == device_ordinal_) {
      return absl::OkStatus();
    }
    return CudaStatus(cudaSetDevice(device_ordinal_), "cudaSetDevice");
  }

  const Graph graph_;
  Device device_;
  int device_ordinal_ = 0;  // the device the model was loaded on
  bool cuda_graphs_ = true;
  NodePlacement nodes_;             // where each value lives and each node runs
  std::vector<int> last_use_;       // per value id: last device node (index) reading it, or -1
  std::vector<bool> is_output_;     // per value id
  std::vector<void*> const_ptr_;    // per value id: uploaded constant, or null
  void* constants_ = nullptr;       // one buffer holding every uploaded constant: weights_->data
  std::shared_ptr<const WeightBuffer> weights_;  // shared with same-layout models of this process
  std::string weights_layout_;
  std::optional<WeightImport> import_;  // the fd is only valid during Create
  WeightImportOutcome weight_import_;
  void* cublas_workspace_ = nullptr;
  uint64_t weight_bytes_ = 0;

  mutable std::mutex mu_;  // one Run (or plan) at a time: the handles and arena are shared
  mutable std::map<std::vector<Shape>, std::shared_ptr<Plan>> plans_ ABSL_GUARDED_BY(mu_);
  void* arena_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t arena_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  void* pinned_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t pinned_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Copies large inputs into pinned memory (UploadInput); made when the first such input comes.
  std::unique_ptr<ThreadPool> staging_pool_ ABSL_GUARDED_BY(mu_);
  std::string capture_error_ ABSL_GUARDED_BY(mu_);  // the last failed capture, for tests
};


}  // namespace tessera::engine::cuda
