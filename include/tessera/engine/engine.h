// The engine interface: a loaded model that runs batches. The executor is its only caller.
//
// A Model is created once per (model version, executor) and then run many times. Run() is
// thread-compatible: one caller at a time per Model (an executor instance runs one batch at a time);
// weights are immutable after Load and may be shared by Models loaded from the same file in a
// later engine version.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/common/data_type.h"
#include "tessera/common/status.h"
#include "tessera/common/tensor.h"

namespace tessera::engine {

// Which kernels run the model. Only kCpu exists in the foundation; kCuda comes with the engine issue.
enum class Backend { kCpu, kCuda };

struct ModelOptions {
  Backend backend = Backend::kCpu;
  // CPU threads for intra-op parallelism; set from the partition the executor runs in.
  int num_threads = 1;
};

// A graph input or output as the model file declares it. Dynamic dims are -1.
struct TensorInfo {
  std::string name;
  DataType dtype = DataType::kInvalid;
  Shape shape;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const std::vector<TensorInfo>& inputs() const = 0;
  virtual const std::vector<TensorInfo>& outputs() const = 0;

  // Bytes of weights (initializers) held by this model.
  virtual uint64_t weight_bytes() const = 0;

  // Runs the graph once. `inputs` are matched to graph inputs by name and must all be present,
  // with the declared dtype and a shape that agrees with the declared one (dynamic dims free).
  // `outputs` is cleared and filled with every graph output, in declaration order.
  // Errors (missing input, wrong dtype/shape, a kernel failure) come back as a Status naming the
  // tensor or node; the Model stays usable afterwards.
  virtual Status Run(const std::vector<TensorView>& inputs, std::vector<Tensor>* outputs) = 0;
};

// Parses and prepares an ONNX model file. Every problem is reported here, never at first Run:
// unreadable or truncated file, unsupported opset, and each unsupported operator (op type and node
// name listed together).
StatusOr<std::unique_ptr<Model>> LoadOnnxModel(const std::string& path, const ModelOptions& options);

}  // namespace tessera::engine
