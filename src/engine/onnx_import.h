// ONNX (protobuf) → Graph. Knows the file format, not the kernels: which op types exist is asked
// of the caller through `is_supported`, so every unsupported node can be listed in one error.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "tessera/common/status.h"
#include "tessera/common/tensor.h"

namespace tessera::engine {

// Asked with graph.h Node::op_type: "Conv", or "ai.onnx.ml.LabelEncoder" for the ai.onnx.ml
// domain. Nodes of any other domain are unsupported without asking.
using OpSupportFn = std::function<bool(const std::string& op_type)>;

// Reads and converts the model at `path`. Errors name the path:
//   NOT_FOUND         the file does not exist or cannot be opened;
//   INVALID_ARGUMENT  not a parseable ONNX model, or an inconsistent graph (undefined values);
//   UNIMPLEMENTED     unsupported opset, dtypes, or operators — the message lists every
//                     unsupported op as `Op (node "name")`.
// Tensors with external data are read from their files in the model's folder (a location outside
// it is INVALID_ARGUMENT, a missing file NOT_FOUND, both naming the tensor and the file).
StatusOr<Graph> ImportOnnxModel(const std::string& path, const OpSupportFn& is_supported);

// Same, from the bytes of a model file; `source` names it in errors. External data cannot be read
// (there is no folder to read it from): INVALID_ARGUMENT naming the tensor.
StatusOr<Graph> ImportOnnxModelBytes(const std::string& bytes, const std::string& source,
                                     const OpSupportFn& is_supported);

// Makes the graph's initializer inputs (Graph::initializer_inputs) named in `names` inputs, their
// initializers their defaults (Graph::input_defaults); other names are ignored. Before the graph
// passes, which would fold the constants. INVALID_ARGUMENT when an initializer disagrees with its
// input's declared type or shape; UNIMPLEMENTED for a STRING one.
Status KeepInitializerInputs(const std::vector<std::string>& names, Graph* graph);

// Reads one serialized onnx.TensorProto (the libonnx-testdata `input_0.pb` format), of the
// dtypes the importer takes, in the file's dtype (FLOAT16 and BFLOAT16 stay 16-bit), and UINT16
// (ONNX 1.12's test data stores BFLOAT16 tensors so, as numpy has no bfloat16); a STRING tensor's
// bytes are in the BYTES serialized form (tessera/common/bytes_tensor.h). The tensor's own name
// becomes the Tensor's name.
StatusOr<Tensor> ReadTensorProtoFile(const std::string& path);

}  // namespace tessera::engine
