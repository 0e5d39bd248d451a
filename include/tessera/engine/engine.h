// The engine interface: a loaded model that runs batches. The executor is its only caller.
//
// A Model is created once per (model version, executor) and then run many times. Run() is
// thread-compatible: one caller at a time per Model (an executor instance runs one batch at a time);
// weights are immutable after Load. CPU Models loaded in one process from the same unchanged file
// share one prepared graph and its weights (the instances of a model in an executor hold them
// once, oneDNN's reordered Conv weights too; a file replaced on disk is read again).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/common/data_type.h"
#include "tessera/common/status.h"
#include "tessera/common/tensor.h"
#include "tessera/common/unique_fd.h"

namespace tessera::engine {

// Which kernels run the model. kCuda exists in builds with TESSERA_CUDA (src/engine/cuda/) and
// needs a visible CUDA device at load; elsewhere loading with it fails with a clear Status.
enum class Backend { kCpu, kCuda };

// Storage and math precision of weights and activations (kCuda only; the CPU backend is FP32).
// Graph inputs and outputs stay FP32/INT64 at the interface either way: kFp16 converts on the
// device. kFp16 GEMMs and convolutions accumulate in FP32 on tensor cores.
enum class Precision { kFp32, kFp16 };

// Weights another process exported (Model::ExportWeights), to be mapped instead of uploaded.
struct WeightImport {
  int fd = -1;         // borrowed for the duration of LoadOnnxModel
  uint64_t bytes = 0;  // as exported
  std::string layout;  // as exported; the load maps the buffer only if its own layout is equal
};

struct ModelOptions {
  Backend backend = Backend::kCpu;
  // CPU threads for intra-op parallelism; set from the partition the executor runs in.
  int num_threads = 1;
  // Reuse activation memory by liveness (one arena per input shape, planned at the first Run with
  // that shape). Off = every activation is a fresh allocation on every Run (the reference path).
  bool plan_memory = true;
  // Run Conv and pools through oneDNN on channels-last activations where this build has oneDNN;
  // false = the engine's own kernels only (the reference the oneDNN path is tested against).
  bool onednn = true;
  // kCpu with num_threads > 1: the first Runs with each input shape time every node both across
  // the threads and on the calling thread alone, and the node keeps the faster (a small node pays
  // more to wake a sleeping thread than the thread saves). Off = every node uses every thread.
  bool tune_node_parallelism = true;
  // kCuda only: see Precision.
  Precision precision = Precision::kFp32;
  // kCuda only: after the first Run with an input shape, capture that shape's kernels once as a
  // CUDA graph and replay it on later Runs with the same shape. Off = launch kernel by kernel.
  bool cuda_graphs = true;
  // kCuda only: the device ordinal to load on and run on; -1 = the loading thread's current device
  // (e.g. a green context made current by the executor). A model always runs on the device it was
  // loaded on: Run() switches the calling thread to it when that thread's current device differs.
  int cuda_device = -1;
  // kCuda only: map these weights (another executor's, on the same GPU) instead of uploading a
  // copy; GSLICE §4.4's shadow instance sharing its active's parameters. When the layout differs
  // or the driver refuses, the model uploads its own copy and Model::weight_import() says why.
  std::optional<WeightImport> import_weights;
  // Graph inputs that also have an initializer of the same name (ONNX's overridable initializers)
  // named here stay inputs: a Run may give them, and one that leaves them out runs with the
  // initializer's value (TensorInfo::has_default). Unnamed ones are weights, folded at load.
  // Other names are ignored, so a caller may pass every input name it knows.
  std::vector<std::string> overridable_initializers;
};

// A model's weight buffer, exported for other processes on the same device.
struct ExportedWeights {
  UniqueFd fd;         // a handle of the device buffer: a CUDA VMM POSIX file descriptor
  uint64_t bytes = 0;  // the buffer's size
  // What an importer must match exactly: device, precision, and each constant's place, type and
  // content hash. Two loads of the same model file with the same options give the same layout.
  std::string layout;
};

// How ModelOptions::import_weights went.
struct WeightImportOutcome {
  bool requested = false;
  bool imported = false;
  std::string why_not;  // when requested but not imported
};

// The activation memory plan for one batch size (see Model::PlanMemory).
struct MemoryPlanInfo {
  int64_t batch = 0;
  uint64_t arena_bytes = 0;  // bytes of the one arena the planned activations share
  uint64_t naive_bytes = 0;  // sum of the same activations allocated separately (64-byte aligned)
  int num_values = 0;        // activations placed in the arena (aliases such as Reshape excluded)
};

// Wall time of one node of one Run (see Model::RunTimed).
struct LayerTiming {
  std::string node;  // node name from the model file (may be empty)
  std::string op;    // ONNX op type
  uint64_t ns = 0;   // wall-clock nanoseconds of the kernel call
};

// A graph input or output as the model file declares it. Dynamic dims are -1.
struct TensorInfo {
  std::string name;
  DataType dtype = DataType::kInvalid;
  Shape shape;
  // An input a Run may leave out (ModelOptions::overridable_initializers).
  bool has_default = false;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const std::vector<TensorInfo>& inputs() const = 0;
  virtual const std::vector<TensorInfo>& outputs() const = 0;

  // Bytes of weights (initializers) held by this model.
  virtual uint64_t weight_bytes() const = 0;

  // Runs the graph once. `inputs` are matched to graph inputs by name and must all be present
  // (but those with TensorInfo::has_default), with the declared dtype and a shape that agrees with
  // the declared one (dynamic dims free). `outputs` is cleared and filled with every graph output,
  // in declaration order. Errors (missing input, wrong dtype/shape, a kernel failure) come back as
  // a Status naming the tensor or node; the Model stays usable afterwards.
  virtual Status Run(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs) = 0;

  // Run() that also appends one LayerTiming per executed node, in execution order, to `timings`
  // (cleared first; required). Same results and errors as Run(); Run() itself does not time.
  // Implementations without the hook return UNIMPLEMENTED.
  virtual Status RunTimed(const std::vector<TensorView>& /*inputs*/,
                          std::vector<Tensor>* /*outputs*/,
                          std::vector<LayerTiming>* /*timings*/) {
    return absl::UnimplementedError("per-layer timing is not supported by this model");
  }

  // The activation plan for inputs whose dynamic dims are all `batch` (the batch dim is the only
  // dynamic one in supported models). Planning needs each activation's shape: when Run() has not
  // yet seen this shape, the model is run once on zeros (single-threaded) to learn them, and the
  // plan is cached for later Runs. Thread-safe against a concurrent Run(). UNIMPLEMENTED where the
  // model has no planner; INVALID_ARGUMENT for batch < 1 or an input of unknown rank.
  virtual StatusOr<MemoryPlanInfo> PlanMemory(int64_t /*batch*/) const {
    return absl::UnimplementedError("memory planning is not supported by this model");
  }

  // A new handle of the weight buffer, for another process on the same device to load the same
  // model without its own copy (ModelOptions::import_weights). The buffer stays valid while any
  // process holds a handle or a mapping of it, so the exporter may exit first. UNIMPLEMENTED on
  // backends or devices that cannot share device memory across processes, saying why.
  virtual StatusOr<ExportedWeights> ExportWeights() const {
    return absl::UnimplementedError("this backend does not share weights across processes");
  }

  // Whether the load mapped ModelOptions::import_weights.
  virtual WeightImportOutcome weight_import() const { return {}; }
};

// Parses and prepares an ONNX model file. Every problem is reported here, never at first Run:
// unreadable or truncated file, unsupported opset, and each unsupported operator (op type and node
// name listed together).
StatusOr<std::unique_ptr<Model>> LoadOnnxModel(const std::string& path, const ModelOptions& options);

// What LoadOnnxModel(path, {backend}) would report about the model's operators, without loading it
// on a device: the same import and checks, then for Backend::kCuda each node the GPU would run is
// checked against the CUDA kernels. Needs no GPU. UNIMPLEMENTED lists every unsupported node (or
// says that this build has no CUDA backend); file and format errors as LoadOnnxModel.
// For Backend::kCuda with `input_shapes` (one per model input, in order), every node is also
// planned for those shapes as the first Run would plan it (shapes only, still no GPU), so
// refusals that depend on shapes show too, and `output_shapes` (may be null) gets the outputs'
// shapes. The CPU backend checks shapes as it runs, so there `input_shapes` is not used.
Status CheckBackendSupport(const std::string& path, Backend backend,
                           const std::vector<Shape>* input_shapes = nullptr,
                           std::vector<Shape>* output_shapes = nullptr);

// The oneDNN kernels thread with OpenMP, whose workers spin after every parallel region by
// default. Next to the engine's own thread pool and on a shared machine that spinning made
// ResNet-18 up to 5x slower (docs/engine.md). OpenMP reads its wait policy once, at process start,
// so binaries that run the engine call this first in main(): when OMP_WAIT_POLICY is unset it
// sets PASSIVE and re-executes the program with the same arguments (same pid and CPU affinity).
// A no-op without oneDNN, when the variable is set, or if the re-exec fails.
void EnsurePassiveOpenMpWait(char** argv);

}  // namespace tessera::engine
