#include "engine/onnx_import.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/string_tensor.h"
#include "onnx/onnx_pb.h"
#include "tessera/common/float16.h"

namespace tessera::engine {
namespace {

// Opsets the importer accepts (PyTorch 1.13 exports 7..17; the ONNX 1.12 test data goes up to 17).
// Below 7 only ops whose semantics never changed are run; the model check rejects the others.
constexpr int64_t kMinOpset = 1;
constexpr int64_t kMaxOpset = 18;
// The ai.onnx.ml opsets (ONNX 1.16 defines 1..5); each kernel reads the node's opset itself.
constexpr int64_t kMaxMlOpset = 5;
constexpr char kMlDomain[] = "ai.onnx.ml";

// A STRING tensor's string_data (ONNX keeps strings there, never in raw_data).
StatusOr<Value> StringValueFromTensorProto(const onnx::TensorProto& proto, const std::string& what,
                                           Shape shape) {
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::UnimplementedError(absl::StrCat(what, ": STRING tensors in external data"));
  }
  const std::optional<uint64_t> count = DenseByteSize(shape, 1);
  if (!count || *count != static_cast<uint64_t>(proto.string_data_size())) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", proto.string_data_size(),
                                                   " strings for shape ", ShapeToString(shape)));
  }
  return MakeStringValue(std::move(shape), std::vector<std::string>(proto.string_data().begin(),
                                                                    proto.string_data().end()));
}

StatusOr<DataType> FromOnnxType(int32_t elem_type, const std::string& what) {
  const std::optional<DataType> type = DataTypeFromOnnxElementType(elem_type);
  if (type == DataType::kFp32 || type == DataType::kInt64 || type == DataType::kInt32 ||
      type == DataType::kBool || type == DataType::kUint8 || type == DataType::kString ||
      type == DataType::kFp16 || type == DataType::kBf16 || type == DataType::kInt8) {
    return *type;
  }
  return absl::UnimplementedError(absl::StrCat(
      what, " has element type ",
      onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(elem_type)),
      "; only FLOAT, FLOAT16, BFLOAT16, INT64, INT32, INT8, UINT8, BOOL and STRING are supported"));
}

bool IsFloat16(DataType type) { return type == DataType::kFp16 || type == DataType::kBf16; }

// A 16-bit float value widened to FP32, exactly: graph.h Graph::input_float16 says why.
Value WidenFloat16(const Value& narrow) {
  Value wide = Value::Allocate(DataType::kFp32, narrow.shape());
  const auto* in = narrow.data<uint16_t>();
  const auto count = static_cast<size_t>(narrow.num_elements());
  if (narrow.dtype() == DataType::kFp16) {
    Fp16ToFloat(in, wide.mutable_data<float>(), count);
  } else {
    Bf16ToFloat(in, wide.mutable_data<float>(), count);
  }
  return wide;
}

// ONNX external data (onnx.proto's external_data: location, offset, length): the tensor's bytes
// are in a file beside the model, as exporters write models over protobuf's 2 GiB limit. Read
// straight into a new value of `dtype` and `shape` (`bytes` long), allocated only once the file
// is known to hold them. The location must stay inside the model's folder.
StatusOr<Value> ReadExternalData(const onnx::TensorProto& proto, const std::string& what,
                                 const std::string& model_dir, DataType dtype, Shape shape,
                                 uint64_t bytes) {
  if (model_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " uses external data, which is read only for a model loaded from its file"));
  }
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const onnx::StringStringEntryProto& entry : proto.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      int64_t number = 0;
      if (!absl::SimpleAtoi(entry.value(), &number) || number < 0) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": external data ", entry.key(), " \"",
                                                       entry.value(), "\" is not a size"));
      }
      (entry.key() == "offset" ? offset : length) = number;
    }
  }
  const std::filesystem::path relative(location);
  bool escapes = location.empty() || relative.is_absolute();
  for (const auto& part : relative) escapes = escapes || part == "..";
  if (escapes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": external data location \"", location,
                     "\" must be a relative path inside the model's folder"));
  }
  const std::string path = (std::filesystem::path(model_dir) / relative).string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat(what, ": cannot open its external data file ", path,
                                            ": ", std::strerror(errno)));
  }
  struct stat file_stat {};
  const bool sized = ::fstat(fd, &file_stat) == 0;
  const int64_t file_bytes = sized ? static_cast<int64_t>(file_stat.st_size) : 0;
  if (length < 0) length = file_bytes - offset;
  Status status;
  if (!sized || offset > file_bytes || length > file_bytes - offset) {
    status = absl::InvalidArgumentError(absl::StrCat(what, ": ", path, " holds ", file_bytes,
                                                     " bytes, less than offset ", offset,
                                                     " + length ", length));
  } else if (static_cast<uint64_t>(length) != bytes) {
    status = absl::InvalidArgumentError(absl::StrCat(what, " has ", length,
                                                     " bytes of external data for shape ",
                                                     ShapeToString(shape), " (", bytes, " bytes)"));
  }
  Value value;
  if (status.ok()) value = Value::Allocate(dtype, std::move(shape));
  auto* out = status.ok() ? value.mutable_data<std::byte>() : nullptr;
  for (int64_t done = 0; status.ok() && done < length;) {
    const ssize_t n = ::pread(fd, out + done, static_cast<size_t>(length - done), offset + done);
    if (n <= 0) {
      status = absl::DataLossError(absl::StrCat(what, ": error reading ", path, ": ",
                                                n < 0 ? std::strerror(errno) : "unexpected end"));
    }
    done += n;
  }
  ::close(fd);
  if (!status.ok()) return status;
  return value;
}

// The tensor in its file's dtype. `uint16` also takes UINT16 tensors, which no model computes on
// but test data holds (see ReadTensorProtoFile).
StatusOr<Value> ReadTensorProto(const onnx::TensorProto& proto, const std::string& model_dir,
                                bool uint16 = false) {
  const std::string what = absl::StrCat("tensor \"", proto.name(), "\"");
  const bool is_uint16 = uint16 && proto.data_type() == onnx::TensorProto::UINT16;
  TESSERA_ASSIGN_OR_RETURN(DataType dtype,
                           is_uint16 ? DataType::kUint16 : FromOnnxType(proto.data_type(), what));
  Shape shape(proto.dims().begin(), proto.dims().end());
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat(what, " has a negative dim"));
  }
  if (dtype == DataType::kString) return StringValueFromTensorProto(proto, what, std::move(shape));
  // Every size is checked against the data the file holds before anything is allocated: corrupt
  // dims could ask for terabytes.
  const size_t element_bytes = DataTypeByteSize(dtype);
  const std::optional<uint64_t> bytes = DenseByteSize(shape, element_bytes);
  if (!bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has shape ", ShapeToString(shape), ": more than 2^64 bytes"));
  }
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    return ReadExternalData(proto, what, model_dir, dtype, std::move(shape), *bytes);
  }
  const size_t count = *bytes / element_bytes;
  // Not raw: INT32, BOOL, UINT8 and the 16-bit types (floats as bit patterns) are one value per
  // int32_data entry.
  const size_t given = !proto.raw_data().empty() ? proto.raw_data().size()
                       : dtype == DataType::kFp32 ? proto.float_data_size()
                       : dtype == DataType::kInt64 ? proto.int64_data_size()
                                                   : proto.int32_data_size();
  if (!proto.raw_data().empty() ? given != *bytes : given != count) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has ", given, proto.raw_data().empty() ? " values" : " bytes of data",
        " for shape ", ShapeToString(shape)));
  }
  Value value = Value::Allocate(dtype, shape);
  if (!proto.raw_data().empty()) {
    // ONNX raw data is little-endian, as is every host we build for.
    std::memcpy(value.mutable_data<std::byte>(), proto.raw_data().data(), value.byte_size());
  } else if (dtype == DataType::kFp32) {
    std::copy(proto.float_data().begin(), proto.float_data().end(), value.mutable_data<float>());
  } else if (dtype == DataType::kInt32 || dtype == DataType::kBool || dtype == DataType::kUint8 ||
             dtype == DataType::kInt8 || DataTypeByteSize(dtype) == 2) {
    for (size_t i = 0; i < count; ++i) {
      if (DataTypeByteSize(dtype) == 2) {
        value.mutable_data<uint16_t>()[i] =
            static_cast<uint16_t>(proto.int32_data(static_cast<int>(i)));
      } else if (dtype == DataType::kInt32) {
        value.mutable_data<int32_t>()[i] = proto.int32_data(static_cast<int>(i));
      } else if (dtype == DataType::kUint8) {
        value.mutable_data<uint8_t>()[i] =
            static_cast<uint8_t>(proto.int32_data(static_cast<int>(i)));
      } else if (dtype == DataType::kInt8) {
        value.mutable_data<int8_t>()[i] =
            static_cast<int8_t>(proto.int32_data(static_cast<int>(i)));
      } else {
        value.mutable_data<uint8_t>()[i] = proto.int32_data(static_cast<int>(i)) != 0 ? 1 : 0;
      }
    }
  } else {
    std::copy(proto.int64_data().begin(), proto.int64_data().end(),
              value.mutable_data<int64_t>());
  }
  return value;
}

// A weight or constant as the engine computes with it: 16-bit floats widened to FP32.
StatusOr<Value> ValueFromTensorProto(const onnx::TensorProto& proto, const std::string& model_dir) {
  TESSERA_ASSIGN_OR_RETURN(Value value, ReadTensorProto(proto, model_dir));
  if (IsFloat16(value.dtype())) return WidenFloat16(value);
  return value;
}

// The tensor as the graph computes it (a 16-bit float as FP32); `file_dtype` gets its declared
// type.
StatusOr<TensorInfo> InfoFromValueInfo(const onnx::ValueInfoProto& info, bool* rank_known,
                                       DataType* file_dtype) {
  const std::string what = absl::StrCat("graph tensor \"", info.name(), "\"");
  if (!info.type().has_tensor_type()) {
    return absl::UnimplementedError(absl::StrCat(what, " is not a tensor"));
  }
  const auto& tensor_type = info.type().tensor_type();
  TensorInfo out;
  out.name = info.name();
  TESSERA_ASSIGN_OR_RETURN(out.dtype, FromOnnxType(tensor_type.elem_type(), what));
  *file_dtype = out.dtype;
  if (IsFloat16(out.dtype)) out.dtype = DataType::kFp32;
  *rank_known = tensor_type.has_shape();
  for (const auto& dim : tensor_type.shape().dim()) {
    out.shape.push_back(dim.has_dim_value() && dim.dim_value() >= 0 ? dim.dim_value() : -1);
  }
  return out;
}

// Converts the attributes this engine understands; others (graphs, sparse tensors) are left out
// because no supported op uses them.
Status ConvertAttributes(const onnx::NodeProto& proto, const std::string& model_dir,
                         Attributes* attributes) {
  for (const auto& a : proto.attribute()) {
    Attribute out;
    switch (a.type()) {
      case onnx::AttributeProto::INT:
        out.kind = Attribute::Kind::kInt;
        out.i = a.i();
        break;
      case onnx::AttributeProto::FLOAT:
        out.kind = Attribute::Kind::kFloat;
        out.f = a.f();
        break;
      case onnx::AttributeProto::INTS:
        out.kind = Attribute::Kind::kInts;
        out.ints.assign(a.ints().begin(), a.ints().end());
        break;
      case onnx::AttributeProto::FLOATS:
        out.kind = Attribute::Kind::kFloats;
        out.floats.assign(a.floats().begin(), a.floats().end());
        break;
      case onnx::AttributeProto::STRING:
        out.kind = Attribute::Kind::kString;
        out.s = a.s();
        break;
      case onnx::AttributeProto::STRINGS:
        out.kind = Attribute::Kind::kStrings;
        out.strings.assign(a.strings().begin(), a.strings().end());
        break;
      case onnx::AttributeProto::TENSOR: {
        out.kind = Attribute::Kind::kTensor;
        TESSERA_ASSIGN_OR_RETURN(out.tensor, ValueFromTensorProto(a.t(), model_dir));
        break;
      }
      default:
        continue;
    }
    attributes->Set(a.name(), std::move(out));
  }
  return absl::OkStatus();
}

// A Cast or EyeLike to a 16-bit float gives FP32, the type the engine computes those in.
void ComputeFloat16AsFloat(Node* node) {
  const char* type_attribute = node->op_type == "Cast"      ? "to"
                               : node->op_type == "EyeLike" ? "dtype"
                                                            : nullptr;
  if (type_attribute == nullptr || !node->attributes.Has(type_attribute)) return;
  const int64_t onnx_type = node->attributes.GetInt(type_attribute, 0);
  if (onnx_type != onnx::TensorProto::FLOAT16 && onnx_type != onnx::TensorProto::BFLOAT16) return;
  Attribute to_float;
  to_float.kind = Attribute::Kind::kInt;
  to_float.i = onnx::TensorProto::FLOAT;
  node->attributes.Set(type_attribute, std::move(to_float));
}

std::string NodeLabel(const onnx::NodeProto& node, int index) {
  if (!node.name().empty()) return absl::StrCat("node \"", node.name(), "\"");
  return absl::StrCat("unnamed node #", index,
                      node.output_size() > 0 ? absl::StrCat(" producing \"", node.output(0), "\"")
                                             : "");
}

// `model_dir`: the folder of the model's file, where its external data lives; empty for bytes.
StatusOr<Graph> ConvertModel(const onnx::ModelProto& model, const OpSupportFn& is_supported,
                             const std::string& model_dir) {
  Graph graph;
  for (const auto& opset : model.opset_import()) {
    if (opset.domain().empty() || opset.domain() == "ai.onnx") graph.opset = opset.version();
    if (opset.domain() == kMlDomain) graph.ml_opset = static_cast<int>(opset.version());
  }
  if (graph.opset == 0) return absl::InvalidArgumentError("the model imports no ONNX opset");
  if (graph.opset < kMinOpset || graph.opset > kMaxOpset) {
    return absl::UnimplementedError(absl::StrCat("opset ", graph.opset, " is not supported (",
                                                 kMinOpset, "..", kMaxOpset, ")"));
  }
  const onnx::GraphProto& g = model.graph();
  std::unordered_map<std::string, int> ids;
  auto define = [&](const std::string& name) -> StatusOr<int> {
    if (ids.count(name) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\" is defined twice"));
    }
    int id = graph.AddValue(name);
    ids[name] = id;
    return id;
  };

  for (const auto& init : g.initializer()) {
    TESSERA_ASSIGN_OR_RETURN(int id, define(init.name()));
    TESSERA_ASSIGN_OR_RETURN(graph.constants[id], ValueFromTensorProto(init, model_dir));
  }
  for (const auto& input : g.input()) {
    bool rank_known = false;
    if (auto it = ids.find(input.name()); it != ids.end()) {
      // An overridable initializer (IR < 4 lists every weight so): a weight unless the caller
      // keeps it as an input. One whose declared type is unusable can only be a weight.
      DataType file_dtype = DataType::kInvalid;
      StatusOr<TensorInfo> info = InfoFromValueInfo(input, &rank_known, &file_dtype);
      if (info.ok()) {
        graph.initializer_inputs.push_back({it->second, *std::move(info), rank_known, file_dtype});
      }
      continue;
    }
    DataType file_dtype = DataType::kInvalid;
    TESSERA_ASSIGN_OR_RETURN(TensorInfo info, InfoFromValueInfo(input, &rank_known, &file_dtype));
    if (IsFloat16(file_dtype)) graph.input_float16[info.name] = file_dtype;
    TESSERA_ASSIGN_OR_RETURN(int id, define(input.name()));
    graph.input_ids.push_back(id);
    graph.inputs.push_back(std::move(info));
    graph.input_rank_known.push_back(rank_known);
  }

  std::vector<std::string> unsupported;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& proto = g.node(i);
    const bool default_domain = proto.domain().empty() || proto.domain() == "ai.onnx";
    const bool ml_domain = proto.domain() == kMlDomain;
    // graph.h Node::op_type: ai.onnx.ml ops carry their domain, so one table holds every kernel.
    const std::string op =
        default_domain ? proto.op_type() : absl::StrCat(proto.domain(), ".", proto.op_type());
    if ((!default_domain && !ml_domain) || !is_supported(op)) {
      unsupported.push_back(absl::StrCat(op, " (", NodeLabel(proto, i), ")"));
    } else if (ml_domain && (graph.ml_opset < 1 || graph.ml_opset > kMaxMlOpset)) {
      return absl::UnimplementedError(absl::StrCat(
          NodeLabel(proto, i), " (", op, "): the model imports ai.onnx.ml opset ", graph.ml_opset,
          graph.ml_opset == 0 ? " (none)" : "", "; supported: 1..", kMaxMlOpset));
    }
    Node node;
    node.name = proto.name();
    node.op_type = op;
    node.opset = ml_domain ? graph.ml_opset : static_cast<int>(graph.opset);
    Status status = ConvertAttributes(proto, model_dir, &node.attributes);
    if (!status.ok()) {
      return Status(status.code(), absl::StrCat(NodeLabel(proto, i), " (", proto.op_type(),
                                                "): ", status.message()));
    }
    ComputeFloat16AsFloat(&node);
    for (const std::string& name : proto.input()) {
      if (name.empty()) {
        node.inputs.push_back(kNoValue);
        continue;
      }
      auto it = ids.find(name);
      if (it == ids.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            NodeLabel(proto, i), " (", proto.op_type(), ") reads \"", name,
            "\", which no earlier node, initializer or graph input defines"));
      }
      node.inputs.push_back(it->second);
    }
    for (const std::string& name : proto.output()) {
      if (name.empty()) {
        node.outputs.push_back(graph.AddValue(""));
        continue;
      }
      TESSERA_ASSIGN_OR_RETURN(int id, define(name));
      node.outputs.push_back(id);
    }
    graph.nodes.push_back(std::move(node));
  }
  if (!unsupported.empty()) {
    return absl::UnimplementedError(
        absl::StrCat("unsupported operators: ", absl::StrJoin(unsupported, ", ")));
  }

  if (g.output_size() == 0) return absl::InvalidArgumentError("the graph has no outputs");
  for (const auto& output : g.output()) {
    auto it = ids.find(output.name());
    if (it == ids.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output \"", output.name(), "\" is never produced"));
    }
    bool rank_known = false;
    DataType file_dtype = DataType::kInvalid;
    TESSERA_ASSIGN_OR_RETURN(TensorInfo info, InfoFromValueInfo(output, &rank_known, &file_dtype));
    if (IsFloat16(file_dtype)) graph.output_float16[info.name] = file_dtype;
    graph.output_ids.push_back(it->second);
    graph.outputs.push_back(std::move(info));
  }
  return graph;
}

Status WithSource(const Status& status, const std::string& source) {
  return Status(status.code(), absl::StrCat(source, ": ", status.message()));
}

StatusOr<Graph> ImportBytes(const std::string& bytes, const std::string& source,
                            const OpSupportFn& is_supported, const std::string& model_dir) {
  onnx::ModelProto model;
  bool parsed = false;
  try {
    parsed = model.ParseFromString(bytes);
  } catch (const std::exception&) {
    parsed = false;
  }
  if (!parsed || !model.has_graph()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, " is not a valid ONNX model (protobuf parsing failed; truncated or "
                             "corrupt file?)"));
  }
  try {
    StatusOr<Graph> graph = ConvertModel(model, is_supported, model_dir);
    if (!graph.ok()) return WithSource(graph.status(), source);
    return graph;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(source, ": out of memory loading weights"));
  }
}

}  // namespace

StatusOr<Graph> ImportOnnxModelBytes(const std::string& bytes, const std::string& source,
                                     const OpSupportFn& is_supported) {
  return ImportBytes(bytes, source, is_supported, /*model_dir=*/"");
}

StatusOr<Graph> ImportOnnxModel(const std::string& path, const OpSupportFn& is_supported) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("model file ", path, " not found or unreadable"));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  std::string model_dir = std::filesystem::path(path).parent_path().string();
  return ImportBytes(bytes.str(), path, is_supported, model_dir.empty() ? "." : model_dir);
}

Status KeepInitializerInputs(const std::vector<std::string>& names, Graph* graph) {
  for (const Graph::InitializerInput& kept : graph->initializer_inputs) {
    const std::string& name = graph->value_names[kept.id];
    if (std::find(names.begin(), names.end(), name) == names.end()) continue;
    if (!graph->constants[kept.id]) continue;  // kept already
    Value value = *graph->constants[kept.id];
    const std::string what = absl::StrCat("input \"", name, "\" (an overridable initializer)");
    if (value.dtype() == DataType::kString) {
      return absl::UnimplementedError(
          absl::StrCat(what, ": a STRING initializer cannot be an input's default"));
    }
    if (value.dtype() != kept.info.dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": declared ", std::string(DataTypeToWireName(kept.info.dtype)),
                       " but its initializer is ", std::string(DataTypeToWireName(value.dtype()))));
    }
    TensorInfo info = kept.info;
    if (!kept.rank_known) info.shape = value.shape();  // the one size the file vouches for
    bool fits = info.shape.size() == value.shape().size();
    for (size_t d = 0; fits && d < info.shape.size(); ++d) {
      fits = info.shape[d] < 0 || info.shape[d] == value.shape()[d];
    }
    if (!fits) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": declared shape ", ShapeToString(info.shape),
                       " but its initializer is ", ShapeToString(value.shape())));
    }
    info.has_default = true;
    graph->constants[kept.id].reset();
    graph->input_defaults.emplace(name, std::move(value));
    if (IsFloat16(kept.file_dtype)) graph->input_float16[name] = kept.file_dtype;
    graph->input_ids.push_back(kept.id);
    graph->inputs.push_back(std::move(info));
    graph->input_rank_known.push_back(true);
  }
  return absl::OkStatus();
}

StatusOr<Tensor> ReadTensorProtoFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("tensor file ", path, " not found"));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes.str())) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a TensorProto"));
  }
  StatusOr<Value> value = ReadTensorProto(proto, /*model_dir=*/"", /*uint16=*/true);
  if (!value.ok()) return WithSource(value.status(), path);
  Tensor tensor;
  tensor.name = proto.name();
  tensor.dtype = value->dtype();
  tensor.shape = value->shape();
  if (value->dtype() == DataType::kString) {
    SerializeStrings(*value, &tensor.bytes);  // the engine interface's BYTES form
    return tensor;
  }
  const auto* data = value->data<std::byte>();
  tensor.bytes.assign(data, data + value->byte_size());
  return tensor;
}

}  // namespace tessera::engine
