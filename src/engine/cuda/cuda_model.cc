// CudaModel: the Model of Backend::kCuda (see cuda_model.h, docs/engine-cuda.md).
//
// Load: nodes are placed once (cuda_support.h). A node runs on the HOST (with the CPU kernel, at
// planning time) when it is Shape or all its inputs are host-known (constants or other host
// values): the small INT64 shape arithmetic of PyTorch exports, which decides shapes and must be
// known before any device kernel is enqueued. Every other node runs on the device and needs a
// CUDA op (cuda_ops.h) whose load check passes; every node that fails is listed in one
// UNIMPLEMENTED error. Constants read by device nodes are uploaded once (FP16 when
// Precision::kFp16) into one device buffer.
//
// Plan (first Run, or PlanMemory, per tuple of input shapes; nothing is launched): host nodes run,
// each device op's plan step gives output shapes and per-shape state (cuDNN algorithm, workspace),
// host values that device nodes read are uploaded to a per-plan buffer, and every device buffer
// (activations, input/output FP32 staging in FP16 mode, workspaces) is placed in one arena by the
// liveness planner (memory_planner.h). Steps: 0 = input upload, node n = n + 1, N + 1 = output.
//
// Run: inputs are copied into pinned host memory and then to their fixed arena places (or, when
// already on the device, TensorView::device_data, copied there on the device), the device
// part runs (kernel by kernel on the first Run of a shape; from the second Run on, replayed from a
// CUDA graph captured once per shape when ModelOptions::cuda_graphs), outputs come back to pinned
// memory, and one cudaStreamSynchronize ends the Run. Growing the arena moves it, which drops the
// captured graphs (they hold its addresses); they are captured again on the next Runs.
#include "engine/cuda/cuda_model.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cpu/ops.h"
#include "engine/cuda/cuda_model_impl.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/memory_planner.h"

namespace tessera::engine::cuda {

StatusOr<std::unique_ptr<CudaModel>> CudaModel::Create(Graph graph, const ModelOptions& options) {
  std::unique_ptr<CudaModel> model(new CudaModel(std::move(graph), options));
  TESSERA_RETURN_IF_ERROR(model->Init());
  return model;
}

Status CudaModel::Init() {
  const size_t values = graph_.value_names.size();
  TESSERA_ASSIGN_OR_RETURN(nodes_, PlaceNodes(graph_));
  last_use_.assign(values, -1);
  is_output_.assign(values, false);
  const_ptr_.assign(values, nullptr);
  for (int id : graph_.output_ids) is_output_[id] = true;
  std::vector<bool> device_reads(values, false);  // constants and host values to upload
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    if (nodes_.host_node[n]) continue;
    for (int id : graph_.nodes[n].inputs) {
      if (id == kNoValue) continue;
      last_use_[id] = static_cast<int>(n);
      device_reads[id] = true;
    }
  }
  weight_bytes_ = graph_.ConstantBytes();
  TESSERA_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&device_ordinal_), "cudaGetDevice"));

  TESSERA_RETURN_IF_ERROR(CudaStatus(
      cudaStreamCreateWithFlags(&device_.stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  TESSERA_RETURN_IF_ERROR(CudnnStatus(cudnnCreate(&device_.cudnn), "cudnnCreate"));
  TESSERA_RETURN_IF_ERROR(
      CudnnStatus(cudnnSetStream(device_.cudnn, device_.stream), "cudnnSetStream"));
  TESSERA_RETURN_IF_ERROR(CublasStatus(cublasCreate(&device_.cublas), "cublasCreate"));
  TESSERA_RETURN_IF_ERROR(
      CublasStatus(cublasSetStream(device_.cublas, device_.stream), "cublasSetStream"));
  TESSERA_RETURN_IF_ERROR(
      CudaStatus(cudaMalloc(&cublas_workspace_, kCublasWorkspace), "cudaMalloc(cuBLAS workspace)"));
  TESSERA_RETURN_IF_ERROR(CublasStatus(
      cublasSetWorkspace(device_.cublas, cublas_workspace_, kCublasWorkspace),
      "cublasSetWorkspace"));

  // Constants read by device nodes, in one buffer; FP32 ones as FP16 in FP16 mode.
  std::vector<uint64_t> offsets(values, 0);
  std::vector<bool> uploaded(values, false);
  uint64_t total = 0;
  for (size_t v = 0; v < values; ++v) {
    if (nodes_.place[v] != Place::kConstant || !device_reads[v]) continue;
    uploaded[v] = true;
    offsets[v] = total;
    const Value& c = *graph_.constants[v];
    total += AlignUp(static_cast<uint64_t>(c.num_elements()) * device_.StorageBytes(c.dtype()));
  }
  if (total == 0) {
    if (import_.has_value()) weight_import_ = {true, false, "the model has no device weights"};
    return absl::OkStatus();
  }
  std::vector<std::byte> staging(total);
  for (size_t v = 0; v < values; ++v) {
    if (!uploaded[v]) continue;
    const Value& c = *graph_.constants[v];
    std::byte* dst = staging.data() + offsets[v];
    if (device_.fp16 && c.dtype() == DataType::kFp32) {
      auto* half = reinterpret_cast<__half*>(dst);
      for (int64_t i = 0; i < c.num_elements(); ++i) half[i] = __float2half(c.data<float>()[i]);
    } else {
      std::memcpy(dst, c.raw(), c.byte_size());
    }
  }
  TESSERA_RETURN_IF_ERROR(DescribeWeights(offsets, uploaded, staging));
  TESSERA_RETURN_IF_ERROR(PlaceWeights(staging));
  for (size_t v = 0; v < values; ++v) {
    if (uploaded[v]) const_ptr_[v] = static_cast<char*>(constants_) + offsets[v];
  }
  return absl::OkStatus();
}

CudaModel::~CudaModel() {
  if (device_.stream != nullptr) cudaStreamSynchronize(device_.stream);
  plans_.clear();  // graphs and upload buffers first
  if (arena_ != nullptr) cudaFree(arena_);
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
  weights_.reset();  // freed with the last model of the process that uses them
  if (device_.cublas != nullptr) cublasDestroy(device_.cublas);
  if (cublas_workspace_ != nullptr) cudaFree(cublas_workspace_);
  if (device_.cudnn != nullptr) cudnnDestroy(device_.cudnn);
  if (device_.stream != nullptr) cudaStreamDestroy(device_.stream);
}

Status CudaModel::ValidateInputs(const std::vector<TensorView>& views,
                                 std::vector<const TensorView*>* ordered) const {
  ordered->assign(graph_.inputs.size(), nullptr);
  for (const TensorView& view : views) {
    size_t index = 0;
    while (index < graph_.inputs.size() && graph_.inputs[index].name != view.name) ++index;
    if (index == graph_.inputs.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected input \"", view.name, "\": the model has no such input"));
    }
    if ((*ordered)[index] != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", view.name, "\" given twice"));
    }
    const TensorInfo& info = graph_.inputs[index];
    if (view.dtype != info.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", view.name, "\" has data type ",
                                                     TypeName(view.dtype), ", expected ",
                                                     TypeName(info.dtype)));
    }
    bool shape_ok = !graph_.input_rank_known[index] || view.shape.size() == info.shape.size();
    for (size_t d = 0; d < view.shape.size(); ++d) {
      if (view.shape[d] < 0) shape_ok = false;
      if (shape_ok && graph_.input_rank_known[index] && info.shape[d] >= 0 &&
          info.shape[d] != view.shape[d]) {
        shape_ok = false;
      }
    }
    if (!shape_ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input \"", view.name, "\" has shape ", ShapeToString(view.shape), ", expected ",
          ShapeToString(info.shape), " (-1 = any size)"));
    }
    const size_t expected =
        static_cast<size_t>(ElementCount(view.shape)) * DataTypeByteSize(view.dtype);
    if (view.byte_size != expected || (expected > 0 && view.data == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat("input \"", view.name, "\" has ",
                                                     view.byte_size, " bytes, expected ", expected,
                                                     " for shape ", ShapeToString(view.shape)));
    }
    (*ordered)[index] = &view;
  }
  for (size_t i = 0; i < ordered->size(); ++i) {
    if ((*ordered)[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing input \"", graph_.inputs[i].name, "\"", kNoDefaultNote));
    }
  }
  return absl::OkStatus();
}


Status CudaModel::EnsureArena(uint64_t bytes) {
  if (bytes <= arena_bytes_) return absl::OkStatus();
  TESSERA_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(device_.stream), "arena resize"));
  for (auto& [key, plan] : plans_) {  // their graphs point into the old arena
    if (plan->exec != nullptr) cudaGraphExecDestroy(plan->exec);
    plan->exec = nullptr;
  }
  if (arena_ != nullptr) cudaFree(arena_);
  arena_ = nullptr;
  arena_bytes_ = 0;
  TESSERA_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&arena_, bytes), "cudaMalloc(arena)"));
  arena_bytes_ = bytes;
  return absl::OkStatus();
}

// Large inputs (a batch of images is 150 MB at batch 256) are staged in groups of chunks: the
// copies into pinned memory run on several threads, and each group's transfer to the device is
// enqueued as soon as it is staged, so it overlaps the staging of the next group. Measured on an
// H100 with ResNet-50 at batch 256: one memcpy followed by one transfer was a quarter of the Run.
// Only the calling thread enqueues (the model's device and context are current there).
Status CudaModel::UploadInput(const void* src, char* pinned, void* dst, size_t bytes) {
  constexpr size_t kChunk = size_t{4} << 20;
  if (bytes < 2 * kChunk) {
    std::memcpy(pinned, src, bytes);
    return CudaStatus(cudaMemcpyAsync(dst, pinned, bytes, cudaMemcpyHostToDevice, device_.stream),
                      "input upload");
  }
  if (staging_pool_ == nullptr) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    staging_pool_ = std::make_unique<ThreadPool>(std::clamp(cores / 2, 1, 4));
  }
  const size_t group = kChunk * static_cast<size_t>(staging_pool_->num_threads());
  const auto* from = static_cast<const char*>(src);
  for (size_t begin = 0; begin < bytes; begin += group) {
    const size_t length = std::min(group, bytes - begin);
    const int64_t chunks = static_cast<int64_t>((length + kChunk - 1) / kChunk);
    staging_pool_->ParallelFor(chunks, [&](int64_t c) {
      const size_t at = begin + static_cast<size_t>(c) * kChunk;
      std::memcpy(pinned + at, from + at, std::min(kChunk, begin + length - at));
    });
    TESSERA_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(static_cast<char*>(dst) + begin, pinned + begin, length,
                                   cudaMemcpyHostToDevice, device_.stream),
                   "input upload"));
  }
  return absl::OkStatus();
}

Status CudaModel::EnsurePinned(size_t bytes) {
  if (bytes <= pinned_bytes_) return absl::OkStatus();
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
  pinned_ = nullptr;
  pinned_bytes_ = 0;
  TESSERA_RETURN_IF_ERROR(CudaStatus(cudaMallocHost(&pinned_, bytes), "cudaMallocHost"));
  pinned_bytes_ = bytes;
  return absl::OkStatus();
}

Status CudaModel::LaunchAll(Plan* plan, std::vector<LayerTiming>* timings) {
  const cudaStream_t stream = device_.stream;
  for (size_t i = 0; i < graph_.input_ids.size(); ++i) {
    if (plan->in_stage[i] < 0) continue;
    const int id = graph_.input_ids[i];
    TESSERA_RETURN_IF_ERROR(CudaStatus(
        LaunchF32ToF16(reinterpret_cast<const float*>(static_cast<char*>(arena_) +
                                                            plan->in_stage[i]),
                             Ptr(*plan, id), ElementCount(plan->meta[id].shape), stream),
        "input conversion"));
  }
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    if (nodes_.host_node[n] || nodes_.ops[n]->launch == nullptr) continue;
    const Node& node = graph_.nodes[n];
    LaunchCtx ctx{node, device_, {}, {}, {}, {}, &plan->states[n]};
    for (int id : node.inputs) {
      ctx.in.push_back(id == kNoValue ? nullptr : Ptr(*plan, id));
      ctx.in_meta.push_back(id == kNoValue ? nullptr : &plan->meta[id]);
    }
    for (int id : node.outputs) {
      ctx.out.push_back(Ptr(*plan, id));
      ctx.out_meta.push_back(&plan->meta[id]);
    }
    if (plan->workspace[n] >= 0) ctx.workspace = static_cast<char*>(arena_) + plan->workspace[n];
    std::chrono::steady_clock::time_point start;
    if (timings != nullptr) start = std::chrono::steady_clock::now();
    Status status = nodes_.ops[n]->launch(ctx);
    if (!status.ok()) return Prefixed(status, node.Describe(graph_.value_names));
    if (timings != nullptr) {
      // Timing mode only: wait for the node so its wall time is its own.
      TESSERA_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream), "timed node"));
      timings->push_back(LayerTiming{
          node.name, node.op_type,
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now() - start)
                                    .count())});
    }
  }
  for (size_t i = 0; i < graph_.output_ids.size(); ++i) {
    if (plan->out_stage[i] < 0) continue;
    const int id = graph_.output_ids[i];
    TESSERA_RETURN_IF_ERROR(CudaStatus(
        LaunchF16ToF32(Ptr(*plan, id),
                             reinterpret_cast<float*>(static_cast<char*>(arena_) +
                                                      plan->out_stage[i]),
                             ElementCount(plan->meta[id].shape), stream),
        "output conversion"));
  }
  return absl::OkStatus();
}

Status CudaModel::Capture(Plan* plan) {
  TESSERA_RETURN_IF_ERROR(CudaStatus(
      cudaStreamBeginCapture(device_.stream, cudaStreamCaptureModeThreadLocal), "begin capture"));
  Status launched = LaunchAll(plan, nullptr);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(device_.stream, &graph);
  if (launched.ok()) launched = CudaStatus(ended, "end capture");
  if (launched.ok()) {
    launched = CudaStatus(cudaGraphInstantiate(&plan->exec, graph, 0), "cudaGraphInstantiate");
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (!launched.ok()) {
    cudaGetLastError();  // capture errors are not sticky; clear them for the next Run
    plan->exec = nullptr;
    return Prefixed(launched, "capturing the CUDA graph");
  }
  return absl::OkStatus();
}

Status CudaModel::RunLocked(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs,
                            std::vector<LayerTiming>* timings) {
  std::vector<const TensorView*> ordered;
  TESSERA_RETURN_IF_ERROR(ValidateInputs(inputs, &ordered));
  TESSERA_RETURN_IF_ERROR(UseDevice());
  std::vector<Shape> key;
  for (const TensorView* view : ordered) key.push_back(view->shape);
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Plan> plan, GetPlan(key));
  TESSERA_RETURN_IF_ERROR(EnsureArena(plan->arena_bytes));

  // Pinned staging: inputs first, then outputs (device ones), each 256-byte aligned.
  size_t pinned = 0;
  std::vector<size_t> in_at, out_at(graph_.output_ids.size(), 0);
  for (const TensorView* view : ordered) {
    in_at.push_back(pinned);
    pinned += AlignUp(view->byte_size);
  }
  for (size_t i = 0; i < graph_.output_ids.size(); ++i) {
    const ValueMeta& m = plan->meta[graph_.output_ids[i]];
    out_at[i] = pinned;
    pinned += AlignUp(static_cast<uint64_t>(ElementCount(m.shape)) * DataTypeByteSize(m.dtype));
  }
  TESSERA_RETURN_IF_ERROR(EnsurePinned(pinned));
  auto* host = static_cast<char*>(pinned_);
  for (size_t i = 0; i < ordered.size(); ++i) {
    const int id = graph_.input_ids[i];
    if (ordered[i]->byte_size == 0) continue;
    void* dst = plan->in_stage[i] >= 0 ? static_cast<char*>(arena_) + plan->in_stage[i]
                                       : Ptr(*plan, id);
    if (ordered[i]->device_data != nullptr) {
      // Already on the device (the executor's input mirror): wait for its copy, then move it
      // into the arena on the device. The arena place is fixed, so captured graphs stay valid.
      if (ordered[i]->device_ready != nullptr) {
        TESSERA_RETURN_IF_ERROR(
            CudaStatus(cudaStreamWaitEvent(device_.stream,
                                           static_cast<cudaEvent_t>(ordered[i]->device_ready), 0),
                       "wait for the mirrored input"));
      }
      TESSERA_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyAsync(dst, ordered[i]->device_data, ordered[i]->byte_size,
                                     cudaMemcpyDeviceToDevice, device_.stream),
                     "mirrored input copy"));
      continue;
    }
    TESSERA_RETURN_IF_ERROR(
        UploadInput(ordered[i]->data, host + in_at[i], dst, ordered[i]->byte_size));
  }

  if (timings == nullptr && cuda_graphs_ && plan->exec == nullptr && plan->ran &&
      !plan->capture_failed) {
    // A shape that cannot be captured still runs, eagerly; the reason is kept for
    // CudaGraphsCaptured (tests) and capture is not retried for it.
    Status captured = Capture(plan.get());
    if (!captured.ok()) {
      plan->capture_failed = true;
      capture_error_ = std::string(captured.message());
    }
  }
  if (timings == nullptr && plan->exec != nullptr) {
    TESSERA_RETURN_IF_ERROR(CudaStatus(cudaGraphLaunch(plan->exec, device_.stream), "graph launch"));
  } else {
    TESSERA_RETURN_IF_ERROR(LaunchAll(plan.get(), timings));
  }

  for (size_t i = 0; i < graph_.output_ids.size(); ++i) {
    const int id = graph_.output_ids[i];
    if (nodes_.place[id] != Place::kDevice) continue;
    const ValueMeta& m = plan->meta[id];
    const size_t bytes = static_cast<size_t>(ElementCount(m.shape)) * DataTypeByteSize(m.dtype);
    if (bytes == 0) continue;
    const void* src = plan->out_stage[i] >= 0 ? static_cast<char*>(arena_) + plan->out_stage[i]
                                              : Ptr(*plan, id);
    TESSERA_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(host + out_at[i], src, bytes, cudaMemcpyDeviceToHost, device_.stream),
        "output download"));
  }
  TESSERA_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(device_.stream), "run"));
  if (timings == nullptr) plan->ran = true;

  outputs->clear();
  for (size_t i = 0; i < graph_.output_ids.size(); ++i) {
    const int id = graph_.output_ids[i];
    const ValueMeta& m = plan->meta[id];
    Tensor tensor;
    tensor.name = graph_.outputs[i].name;
    tensor.dtype = m.dtype;
    tensor.shape = m.shape;
    const size_t bytes = static_cast<size_t>(ElementCount(m.shape)) * DataTypeByteSize(m.dtype);
    const std::byte* src = nodes_.place[id] == Place::kDevice
                               ? reinterpret_cast<const std::byte*>(host + out_at[i])
                               : m.host->data<std::byte>();
    tensor.bytes.assign(src, src + bytes);
    outputs->push_back(std::move(tensor));
  }
  return absl::OkStatus();
}


}  // namespace tessera::engine::cuda

namespace tessera::engine {

using cuda::CudaModel;
using cuda::CudaStatus;

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // e.g. cudaErrorNoDevice / InsufficientDriver: not sticky, clear it
    return 0;
  }
  return count;
}

StatusOr<std::unique_ptr<Model>> LoadCudaModel(Graph graph, const ModelOptions& options) {
  // Before touching the device: the answer does not depend on it.
  TESSERA_RETURN_IF_ERROR(cuda::RefuseStringTensors(graph));
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA device is visible to load a model with Backend::kCuda (cudaGetDeviceCount: ",
        error == cudaSuccess ? "0 devices" : cudaGetErrorString(error), ")"));
  }
  if (options.cuda_device >= count) {
    return absl::InvalidArgumentError(absl::StrCat("cuda_device ", options.cuda_device,
                                                   " does not exist (", count, " visible)"));
  }
  int current = 0;
  TESSERA_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&current), "cudaGetDevice"));
  // Only switch when asked for another device: switching would drop a green context made current
  // on this thread for the same device.
  if (options.cuda_device >= 0 && options.cuda_device != current) {
    TESSERA_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(options.cuda_device), "cudaSetDevice"));
  }
  cuda::PrepareCudaGraph(&graph);
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<CudaModel> model,
                           CudaModel::Create(std::move(graph), options));
  return std::unique_ptr<Model>(std::move(model));
}

StatusOr<int> CudaGraphsCaptured(const Model& model) {
  const auto* cuda = dynamic_cast<const CudaModel*>(&model);
  if (cuda == nullptr) return absl::InvalidArgumentError("not a CUDA model");
  return cuda->graphs_captured();  // FAILED_PRECONDITION with the reason when a capture failed
}

StatusOr<const void*> CudaWeightsAddress(const Model& model) {
  const auto* cuda = dynamic_cast<const CudaModel*>(&model);
  if (cuda == nullptr) return absl::InvalidArgumentError("not a CUDA model");
  return cuda->weights_address();
}

}  // namespace tessera::engine