#include "tessera/repository/model_completion.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/wire_format_lite.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "onnx/onnx_pb.h"
#include "tessera/common/utf8.h"

namespace tessera::repository {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// Field numbers of onnx.proto that lead to the graph's inputs and outputs.
constexpr int kModelGraph = 7;          // ModelProto.graph
constexpr int kGraphNode = 1;           // GraphProto.node
constexpr int kNodeOpType = 4;          // NodeProto.op_type
constexpr int kGraphInitializer = 5;    // GraphProto.initializer
constexpr int kGraphInput = 11;         // GraphProto.input
constexpr int kGraphOutput = 12;        // GraphProto.output
constexpr int kGraphSparseInit = 15;    // GraphProto.sparse_initializer
constexpr int kTensorName = 8;          // TensorProto.name
constexpr int kSparseTensorValues = 1;  // SparseTensorProto.values

bool IsLengthDelimited(uint32_t tag) {
  return WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
}

bool ReadBytes(CodedInputStream& in, std::string* out) {
  uint32_t length = 0;
  return in.ReadVarint32(&length) && in.ReadString(out, static_cast<int>(length));
}

// Runs `on_field(tag)` for each field of the length-delimited message that comes next; a field
// `on_field` does not take (returns nullopt) is skipped, which seeks over tensor data.
template <typename OnField>
bool ForEachField(CodedInputStream& in, OnField on_field) {
  uint32_t length = 0;
  if (!in.ReadVarint32(&length)) return false;
  CodedInputStream::Limit limit = in.PushLimit(static_cast<int>(length));
  while (uint32_t tag = in.ReadTag()) {
    std::optional<bool> taken = on_field(tag);
    if (taken.has_value() ? !*taken : !WireFormatLite::SkipField(&in, tag)) return false;
  }
  // A file that ends inside the message reads as a clean end (ReadTag returns 0 at EOF too), so
  // the message must also have been read up to its length.
  const bool whole = in.ConsumedEntireMessage() && in.BytesUntilLimit() == 0;
  in.PopLimit(limit);
  return whole;
}

// The name of the TensorProto that comes next, its data skipped.
bool ReadTensorName(CodedInputStream& in, std::string* name) {
  return ForEachField(in, [&](uint32_t tag) -> std::optional<bool> {
    if (WireFormatLite::GetTagFieldNumber(tag) != kTensorName || !IsLengthDelimited(tag)) {
      return std::nullopt;
    }
    return ReadBytes(in, name);
  });
}

StatusOr<DataType> FromOnnxElementType(int32_t type, const std::string& what) {
  if (std::optional<DataType> data_type = DataTypeFromOnnxElementType(type)) return *data_type;
  return absl::InvalidArgumentError(
      absl::StrCat(what, " has ONNX element type ",
                   onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(type)),
                   ", which no KServe data type matches; list it in the model's config"));
}

StatusOr<OnnxTensorSignature> FromValueInfo(const onnx::ValueInfoProto& info,
                                            const std::string& what) {
  if (!info.type().has_tensor_type()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not a tensor"));
  }
  const onnx::TypeProto::Tensor& tensor = info.type().tensor_type();
  OnnxTensorSignature out;
  if (!IsValidUtf8(info.name())) {
    return absl::InvalidArgumentError(absl::StrCat(
        CoerceToUtf8(what), " has a name that is not valid UTF-8 (shown with '?'): the file is "
        "corrupt, or its names need fixing before it can be served"));
  }
  out.name = info.name();
  TESSERA_ASSIGN_OR_RETURN(out.data_type, FromOnnxElementType(tensor.elem_type(), what));
  if (!tensor.has_shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what,
        " has no shape in the model file, so its dims cannot be completed; list it in the "
        "model's config"));
  }
  for (const onnx::TensorShapeProto::Dimension& dim : tensor.shape().dim()) {
    if (dim.has_dim_value() && dim.dim_value() == 0) {
      // The engine would hold the model to that 0, and configs take no 0 dims either.
      return absl::InvalidArgumentError(absl::StrCat(
          what, " has a dim of size 0 in the model file (dim ", out.dims.size(),
          "); tensors with no elements cannot be served"));
    }
    out.dims.push_back(dim.has_dim_value() && dim.dim_value() > 0 ? dim.dim_value() : -1);
  }
  return out;
}

bool DynamicFirstDim(const OnnxTensorSignature& t) { return !t.dims.empty() && t.dims[0] == -1; }

}  // namespace

StatusOr<OnnxSignature> ReadOnnxSignature(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot open model file ", path, ": ", std::strerror(errno)));
  }
  google::protobuf::io::FileInputStream file(fd);
  file.SetCloseOnDelete(true);
  CodedInputStream in(&file);
  const Status not_onnx = absl::InvalidArgumentError(
      absl::StrCat(path,
                   " is not a valid ONNX model (protobuf parsing failed; truncated or "
                   "corrupt file?)"));

  std::vector<onnx::ValueInfoProto> inputs;
  std::vector<onnx::ValueInfoProto> outputs;
  std::unordered_set<std::string> initializers;
  std::set<std::string> op_types;
  bool has_graph = false;
  while (uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) != kModelGraph || !IsLengthDelimited(tag)) {
      if (!WireFormatLite::SkipField(&in, tag)) return not_onnx;
      continue;
    }
    has_graph = true;
    bool ok = ForEachField(in, [&](uint32_t field_tag) -> std::optional<bool> {
      if (!IsLengthDelimited(field_tag)) return std::nullopt;
      switch (WireFormatLite::GetTagFieldNumber(field_tag)) {
        case kGraphInput:
        case kGraphOutput: {
          std::string bytes;
          onnx::ValueInfoProto info;
          if (!ReadBytes(in, &bytes) || !info.ParseFromString(bytes)) return false;
          (WireFormatLite::GetTagFieldNumber(field_tag) == kGraphInput ? inputs : outputs)
              .push_back(std::move(info));
          return true;
        }
        case kGraphNode:
          return ForEachField(in, [&](uint32_t node_tag) -> std::optional<bool> {
            if (WireFormatLite::GetTagFieldNumber(node_tag) != kNodeOpType ||
                !IsLengthDelimited(node_tag)) {
              return std::nullopt;
            }
            std::string op_type;
            if (!ReadBytes(in, &op_type)) return false;
            op_types.insert(std::move(op_type));
            return true;
          });
        case kGraphInitializer: {
          std::string name;
          if (!ReadTensorName(in, &name)) return false;
          initializers.insert(std::move(name));
          return true;
        }
        case kGraphSparseInit: {
          std::string name;
          bool read = ForEachField(in, [&](uint32_t sparse_tag) -> std::optional<bool> {
            if (WireFormatLite::GetTagFieldNumber(sparse_tag) != kSparseTensorValues ||
                !IsLengthDelimited(sparse_tag)) {
              return std::nullopt;
            }
            return ReadTensorName(in, &name);
          });
          if (!read) return false;
          initializers.insert(std::move(name));
          return true;
        }
        default:
          return std::nullopt;
      }
    });
    if (!ok) return not_onnx;
  }
  // Skipping seeks, and a seek past the end of a truncated file succeeds: compare with its size.
  struct stat file_stat {};
  if (!in.ConsumedEntireMessage() || !has_graph || ::fstat(fd, &file_stat) != 0 ||
      in.CurrentPosition() != file_stat.st_size) {
    return not_onnx;
  }

  OnnxSignature signature;
  signature.op_types = std::move(op_types);
  for (const onnx::ValueInfoProto& info : inputs) {
    // Before ONNX IR 4 every initializer was listed as a graph input too; those are weights.
    if (initializers.contains(info.name())) continue;
    TESSERA_ASSIGN_OR_RETURN(
        OnnxTensorSignature t,
        FromValueInfo(info, absl::StrCat(path, ": input '", info.name(), "'")));
    signature.inputs.push_back(std::move(t));
  }
  for (const onnx::ValueInfoProto& info : outputs) {
    TESSERA_ASSIGN_OR_RETURN(
        OnnxTensorSignature t,
        FromValueInfo(info, absl::StrCat(path, ": output '", info.name(), "'")));
    signature.outputs.push_back(std::move(t));
  }
  if (signature.inputs.empty() || signature.outputs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the graph has no ", signature.inputs.empty() ? "inputs" : "outputs"));
  }
  return signature;
}

bool QuantizesOverTheBatch(const OnnxSignature& signature) {
  return signature.op_types.count("DynamicQuantizeLinear") != 0;
}

bool NeedsCompletion(const ModelConfig& config) {
  return config.inputs.empty() || config.outputs.empty();
}

StatusOr<ModelConfig> CompleteFromSignature(const ModelConfig& config,
                                            const OnnxSignature& signature,
                                            const std::string& model_path) {
  ModelConfig out = config;
  out.notes.clear();  // the config file's own notes were logged when it was read
  auto fail = [&](const std::string& reason) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", config.name, "': cannot complete its config from ", model_path, ": ", reason));
  };
  auto note = [&](const std::string& what) { out.notes.push_back(what); };

  // A stateful model's control and state tensors are the server's, never a client's.
  auto clients = [&](const OnnxTensorSignature& t) {
    return !IsSequenceTensor(config.sequence_batching, t.name);
  };
  std::vector<const OnnxTensorSignature*> used;  // the model tensors the completion takes
  if (config.inputs.empty()) {
    for (const OnnxTensorSignature& t : signature.inputs) {
      if (clients(t)) used.push_back(&t);
    }
  }
  if (config.outputs.empty()) {
    for (const OnnxTensorSignature& t : signature.outputs) {
      if (clients(t)) used.push_back(&t);
    }
  }
  const bool batchable =
      std::all_of(signature.inputs.begin(), signature.inputs.end(), DynamicFirstDim) &&
      std::all_of(signature.outputs.begin(), signature.outputs.end(), DynamicFirstDim);
  if (out.max_batch_size == 0 && batchable) {
    out.max_batch_size = kCompletedMaxBatchSize;
    note(absl::StrCat("max_batch_size ", out.max_batch_size,
                      ": every input and output has a dynamic first dim"));
    if (!out.dynamic_batching.enabled && out.worker_batch_sizes.empty() &&
        !out.sequence_batching.enabled) {
      out.dynamic_batching.enabled = true;
      note("dynamic_batching with no queue delay");
    }
  }
  if (out.max_batch_size > 0) {
    for (const OnnxTensorSignature* t : used) {
      if (!DynamicFirstDim(*t)) {
        return fail(absl::StrCat("max_batch_size is ", out.max_batch_size, ", but '", t->name,
                                 "' has shape ", ShapeToString(t->dims),
                                 " with no dynamic first (batch) dim"));
      }
    }
  }
  if (out.dynamic_batching.enabled && out.max_batch_size == 0) {
    return fail(
        "dynamic_batching needs max_batch_size > 0, and the model's first dims are not "
        "all dynamic, so it cannot be completed; set max_batch_size");
  }
  for (int size : out.dynamic_batching.preferred_batch_sizes) {
    if (size > out.max_batch_size) {
      return fail(absl::StrCat("dynamic_batching.preferred_batch_size ", size,
                               " is above max_batch_size ", out.max_batch_size));
    }
  }

  auto complete = [&](const std::vector<OnnxTensorSignature>& from, std::vector<TensorConfig>& to,
                      const char* kind) {
    if (!to.empty()) return;
    std::vector<std::string> described;
    for (const OnnxTensorSignature& t : from) {
      if (!clients(t)) continue;
      TensorConfig tensor;
      tensor.name = t.name;
      tensor.data_type = t.data_type;
      tensor.dims = t.dims;
      if (out.max_batch_size > 0) tensor.dims.erase(tensor.dims.begin());
      described.push_back(absl::StrCat(t.name, " ", std::string(DataTypeToConfigName(t.data_type)),
                                       " ", ShapeToString(tensor.dims)));
      to.push_back(std::move(tensor));
    }
    note(absl::StrCat(kind, " ", absl::StrJoin(described, ", ")));
  };
  complete(signature.inputs, out.inputs, "input");
  complete(signature.outputs, out.outputs, "output");
  return out;
}

StatusOr<ModelConfig> CompleteFromModelFile(const ModelConfig& config,
                                            const std::string& model_path) {
  if (!NeedsCompletion(config)) return config;
  TESSERA_ASSIGN_OR_RETURN(OnnxSignature signature, ReadOnnxSignature(model_path));
  return CompleteFromSignature(config, signature, model_path);
}

}  // namespace tessera::repository
