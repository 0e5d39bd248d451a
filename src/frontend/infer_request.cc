#include "infer_request.h"

#include <cstring>
#include <memory>
#include <optional>
#include <set>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "tessera/common/bytes_tensor.h"
#include "tessera/ipc/guarded_copy.h"

namespace tessera::frontend {
namespace {

using inference::InferTensorContents;
using inference::ModelInferRequest;

// Copies the typed field that matches `dtype` into bytes; `count` is the element count found.
template <typename Wire, typename Stored>
std::string PackRepeated(const google::protobuf::RepeatedField<Wire>& values, size_t* count) {
  std::string bytes(values.size() * sizeof(Stored), '\0');
  auto* out = reinterpret_cast<Stored*>(bytes.data());
  for (int i = 0; i < values.size(); ++i) out[i] = static_cast<Stored>(values.Get(i));
  *count = values.size();
  return bytes;
}

StatusOr<std::string> PackTypedContents(const std::string& input_name, DataType dtype,
                                        const InferTensorContents& contents, size_t* count) {
  switch (dtype) {
    case DataType::kBool: return PackRepeated<bool, uint8_t>(contents.bool_contents(), count);
    case DataType::kUint8: return PackRepeated<uint32_t, uint8_t>(contents.uint_contents(), count);
    case DataType::kUint16: return PackRepeated<uint32_t, uint16_t>(contents.uint_contents(), count);
    case DataType::kUint32: return PackRepeated<uint32_t, uint32_t>(contents.uint_contents(), count);
    case DataType::kUint64:
      return PackRepeated<uint64_t, uint64_t>(contents.uint64_contents(), count);
    case DataType::kInt8: return PackRepeated<int32_t, int8_t>(contents.int_contents(), count);
    case DataType::kInt16: return PackRepeated<int32_t, int16_t>(contents.int_contents(), count);
    case DataType::kInt32: return PackRepeated<int32_t, int32_t>(contents.int_contents(), count);
    case DataType::kInt64: return PackRepeated<int64_t, int64_t>(contents.int64_contents(), count);
    case DataType::kFp32: return PackRepeated<float, float>(contents.fp32_contents(), count);
    case DataType::kFp64: return PackRepeated<double, double>(contents.fp64_contents(), count);
    case DataType::kString: {  // into the serialized form every later stage reads
      std::string bytes;
      for (const std::string& element : contents.bytes_contents()) {
        AppendBytesElement(element, &bytes);
      }
      *count = contents.bytes_contents_size();
      return bytes;
    }
    default:
      // The protocol allows FP16/BF16 only as raw bytes (serving-systems.md §2.2).
      return absl::InvalidArgumentError(
          absl::StrCat("input '", input_name, "': datatype ", std::string(DataTypeToWireName(dtype)),
                       " can only be sent in raw_input_contents"));
  }
}

// The shape the model accepts for a tensor, batch dim included as -1 when the model batches.
Shape FullShape(const repository::TensorConfig& tensor, int max_batch_size) {
  Shape shape;
  if (max_batch_size > 0) shape.push_back(-1);
  shape.insert(shape.end(), tensor.dims.begin(), tensor.dims.end());
  return shape;
}

Status CheckShape(const repository::TensorConfig& tensor, const Shape& shape, int max_batch_size) {
  Shape expected = FullShape(tensor, max_batch_size);
  bool ok = shape.size() == expected.size();
  for (size_t i = 0; ok && i < shape.size(); ++i) {
    if (shape[i] < 0 || (expected[i] >= 0 && shape[i] != expected[i])) ok = false;
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("input '", tensor.name, "': shape ",
                                                   ShapeToString(shape),
                                                   " does not match the model's shape ",
                                                   ShapeToString(expected)));
  }
  if (max_batch_size > 0 && (shape[0] < 1 || shape[0] > max_batch_size)) {
    return absl::InvalidArgumentError(absl::StrCat("input '", tensor.name, "': batch size ",
                                                   shape[0], " is outside 1..max_batch_size (",
                                                   max_batch_size, ")"));
  }
  return absl::OkStatus();
}

// The request's own integer parameter `name` (Triton's `timeout`, in microseconds, and
// `priority`), 0 when absent.
StatusOr<uint64_t> UnsignedParameter(const ModelInferRequest& wire, const std::string& name,
                                     const char* unit) {
  auto it = wire.parameters().find(name);
  if (it == wire.parameters().end()) return 0;
  const inference::InferParameter& p = it->second;
  if (p.parameter_choice_case() == inference::InferParameter::kUint64Param) return p.uint64_param();
  if (p.parameter_choice_case() == inference::InferParameter::kInt64Param && p.int64_param() >= 0) {
    return static_cast<uint64_t>(p.int64_param());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("parameter '", name, "' must be a non-negative integer", unit));
}

}  // namespace

StatusOr<dispatch::SequenceFlags> ReadSequenceFlags(const ModelInferRequest& wire) {
  dispatch::SequenceFlags flags;
  const auto& parameters = wire.parameters();
  if (auto it = parameters.find("sequence_id"); it != parameters.end()) {
    const inference::InferParameter& p = it->second;
    switch (p.parameter_choice_case()) {
      case inference::InferParameter::kUint64Param:
        flags.id = p.uint64_param();
        break;
      case inference::InferParameter::kInt64Param:
        if (p.int64_param() < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("parameter 'sequence_id' must not be negative, got ", p.int64_param()));
        }
        flags.id = static_cast<uint64_t>(p.int64_param());
        break;
      case inference::InferParameter::kStringParam:
        flags.id_text = p.string_param();
        break;
      default:
        return absl::InvalidArgumentError(
            "parameter 'sequence_id' must be an unsigned integer or a string");
    }
  }
  for (const char* name : {"sequence_start", "sequence_end"}) {
    auto it = parameters.find(name);
    if (it == parameters.end()) continue;
    if (it->second.parameter_choice_case() != inference::InferParameter::kBoolParam) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", name, "' must be a bool"));
    }
    (std::string_view(name) == "sequence_start" ? flags.start : flags.end) =
        it->second.bool_param();
  }
  return flags;
}

StatusOr<std::unique_ptr<dispatch::Request>> BuildDispatchRequest(
    const ModelInferRequest& wire, const repository::ModelConfig& config,
    RequestStorage* storage, const ClientShmRegistry* shm) {
  static const ClientShmRegistry kNoRegions(/*enabled=*/false);
  if (shm == nullptr) shm = &kNoRegions;
  // raw_input_contents holds the inputs that are not in shared memory, in order (as tritonclient
  // sends them): raw_index[i] is wire input i's entry, -1 for one in shared memory.
  absl::InlinedVector<int, 8> raw_index(wire.inputs_size(), -1);  // no allocation per request
  int wire_inputs_not_in_shm = 0;
  for (int i = 0; i < wire.inputs_size(); ++i) {
    if (!NamesShmRegion(wire.inputs(i).parameters())) raw_index[i] = wire_inputs_not_in_shm++;
  }
  const bool raw = wire.raw_input_contents_size() > 0;
  if (raw && wire.raw_input_contents_size() != wire_inputs_not_in_shm) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request has ", wire_inputs_not_in_shm, " inputs outside shared memory but ",
        wire.raw_input_contents_size(),
        " raw_input_contents; raw contents must be given for every such input or for none"));
  }

  // Map wire inputs by name, rejecting duplicates and names the model does not have.
  absl::InlinedVector<int, 8> wire_index(config.inputs.size(), -1);
  for (int i = 0; i < wire.inputs_size(); ++i) {
    const std::string& name = wire.inputs(i).name();
    size_t k = 0;
    while (k < config.inputs.size() && config.inputs[k].name != name) ++k;
    if (k == config.inputs.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected input '", name, "': model '", config.name, "' has no such input"));
    }
    if (wire_index[k] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "' is given twice"));
    }
    wire_index[k] = i;
  }

  auto request = std::make_unique<dispatch::Request>();
  TESSERA_ASSIGN_OR_RETURN(const uint64_t timeout_us,
                           UnsignedParameter(wire, "timeout", " (microseconds)"));
  TESSERA_ASSIGN_OR_RETURN(const uint64_t priority, UnsignedParameter(wire, "priority", ""));
  request->priority = config.dynamic_batching.PriorityLevel(priority);
  const uint64_t queue_timeout_us =
      config.dynamic_batching.QueueTimeoutMicroseconds(timeout_us, request->priority);
  request->queue_timeout_ns = queue_timeout_us > UINT64_MAX / 1000 ? 0 : queue_timeout_us * 1000;
  int64_t batch_size = -1;
  // No reallocation below: the views point into these strings (small ones hold bytes inline).
  storage->converted.reserve(config.inputs.size());
  for (size_t k = 0; k < config.inputs.size(); ++k) {
    const repository::TensorConfig& tensor = config.inputs[k];
    if (wire_index[k] < 0) {
      if (tensor.optional) {
        request->inputs.push_back(dispatch::AbsentInput(tensor.name, tensor.data_type));
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat("missing input '", tensor.name,
                                                     "': model '", config.name, "' requires it"));
    }
    const auto& input = wire.inputs(wire_index[k]);
    std::optional<DataType> dtype = DataTypeFromWireName(input.datatype());
    if (!dtype) {
      return absl::InvalidArgumentError(absl::StrCat("input '", tensor.name,
                                                     "': unknown datatype '", input.datatype(), "'"));
    }
    if (*dtype != tensor.data_type) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", tensor.name, "': datatype ", input.datatype(), " does not match the model's ",
          std::string(DataTypeToWireName(tensor.data_type))));
    }
    Shape shape(input.shape().begin(), input.shape().end());
    TESSERA_RETURN_IF_ERROR(CheckShape(tensor, shape, config.max_batch_size));
    if (config.max_batch_size > 0) {
      if (batch_size >= 0 && shape[0] != batch_size) {
        return absl::InvalidArgumentError(absl::StrCat("input '", tensor.name, "': batch size ",
                                                       shape[0], " differs from other inputs' ",
                                                       batch_size));
      }
      batch_size = shape[0];
    }

    // A BYTES tensor's size follows from its elements' lengths; its element count is checked
    // once its bytes are known (CheckBytesElements below).
    const bool bytes_tensor = *dtype == DataType::kString;
    const std::optional<uint64_t> dense_bytes =
        DenseByteSize(shape, bytes_tensor ? 1 : DataTypeByteSize(*dtype));
    if (!dense_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("input '", tensor.name, "': shape ",
                                                     ShapeToString(shape), " of ",
                                                     input.datatype(), " has more than 2^64 bytes"));
    }
    const size_t expected_bytes = *dense_bytes;
    const void* data = nullptr;
    size_t byte_size = 0;
    const std::string what = absl::StrCat("input '", tensor.name, "'");
    TESSERA_ASSIGN_OR_RETURN(std::optional<ClientShmSlice> slice,
                             shm->SliceFor(what, input.parameters()));
    if (slice) {
      if (!bytes_tensor && slice->byte_size != expected_bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": shared_memory_byte_size is ", slice->byte_size, ", but shape ",
            ShapeToString(shape), " of ", input.datatype(), " needs ", expected_bytes));
      }
      // Copied once, guarded: the client may truncate its object at any moment, and a read of
      // the lost pages later (staging, batching, the cache key) would kill the server (SIGBUS).
      auto copy = std::make_unique_for_overwrite<std::byte[]>(slice->byte_size);
      TESSERA_RETURN_IF_ERROR(ipc::CopyGuardingSigbus(
          copy.get(), slice->data, slice->byte_size,
          absl::StrCat(what, ": shared-memory region '", slice->region->name, "'")));
      data = copy.get();
      byte_size = slice->byte_size;
      storage->shm_input_copies.push_back(std::move(copy));
      if (bytes_tensor) {
        TESSERA_RETURN_IF_ERROR(CheckBytesElements(
            absl::StrCat(what, " (shared-memory region '", slice->region->name, "')"), data,
            byte_size, ElementCount(shape)));
      }
    } else if (raw) {
      const std::string& bytes = wire.raw_input_contents(raw_index[wire_index[k]]);
      if (bytes_tensor) {
        TESSERA_RETURN_IF_ERROR(CheckBytesElements(absl::StrCat(what, ": raw_input_contents"),
                                                   bytes.data(), bytes.size(),
                                                   ElementCount(shape)));
      } else if (bytes.size() != expected_bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input '", tensor.name, "': raw_input_contents has ", bytes.size(),
            " bytes, but shape ", ShapeToString(shape), " of ", input.datatype(), " needs ",
            expected_bytes));
      }
      data = bytes.data();
      byte_size = bytes.size();
    } else {
      size_t count = 0;
      TESSERA_ASSIGN_OR_RETURN(std::string packed,
                               PackTypedContents(tensor.name, *dtype, input.contents(), &count));
      if (bytes_tensor ? static_cast<int64_t>(count) != ElementCount(shape)
                       : packed.size() != expected_bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input '", tensor.name, "': contents hold ", count, " elements, but shape ",
            ShapeToString(shape), " needs ", ElementCount(shape)));
      }
      storage->converted.push_back(std::move(packed));
      data = storage->converted.back().data();
      byte_size = storage->converted.back().size();
    }
    // The model file's shape where the config reshapes it (the same bytes).
    if (tensor.reshape) shape = repository::ToModelShape(tensor, shape, config.max_batch_size > 0);
    // The engine never writes inputs; the view type is shared with outputs, hence non-const.
    request->inputs.push_back(
        TensorView{tensor.name, *dtype, std::move(shape), const_cast<void*>(data), byte_size});
  }
  if (config.max_batch_size > 0 && batch_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request gives no input, so it has no batch size: model '", config.name,
                     "' needs at least one of its inputs"));
  }
  request->batch_size = batch_size > 0 ? batch_size : 1;
  for (const repository::TensorConfig& tensor : config.outputs) {
    if (tensor.reshape) storage->reshaped_outputs.push_back(tensor);
  }
  storage->batched = config.max_batch_size > 0;

  std::set<std::string> seen;
  for (const auto& output : wire.outputs()) {
    const repository::TensorConfig* known = nullptr;
    for (const auto& tensor : config.outputs) {
      if (tensor.name == output.name()) known = &tensor;
    }
    if (known == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("requested output '", output.name(),
                                                     "': model '", config.name,
                                                     "' has no such output"));
    }
    if (!seen.insert(output.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("output '", output.name(), "' is requested twice"));
    }
    TESSERA_ASSIGN_OR_RETURN(
        std::optional<ClientShmSlice> slice,
        shm->SliceFor(absl::StrCat("output '", output.name(), "'"), output.parameters()));
    TESSERA_ASSIGN_OR_RETURN(std::optional<ClassifiedOutput> classified,
                             ReadClassification(output, *known, config.max_batch_size > 0));
    if (classified && slice) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output '", output.name(), "': a classification cannot go to shared memory"));
    }
    if (classified) storage->classified.push_back(std::move(*classified));
    if (slice) storage->shm_outputs.push_back(ShmOutput{output.name(), std::move(*slice)});
    request->requested_outputs.push_back(output.name());
  }
  return request;
}

Status FillInferResponse(const std::string& model_name, int64_t version, const std::string& id,
                         dispatch::Response response, const RequestStorage& storage,
                         inference::ModelInferResponse* wire) {
  wire->set_model_name(model_name);
  wire->set_model_version(std::to_string(version));
  wire->set_id(id);
  for (dispatch::OutputTensor& output : response.outputs) {
    for (const repository::TensorConfig& reshaped : storage.reshaped_outputs) {
      if (reshaped.name != output.name) continue;
      // A shape that does not fit the reshape (a reload changed the config meanwhile) is sent
      // as the model gave it.
      std::optional<Shape> shape = repository::ToClientShape(reshaped, output.shape, storage.batched);
      if (shape) output.shape = std::move(*shape);
    }
    for (const ClassifiedOutput& classified : storage.classified) {
      if (classified.name == output.name) TESSERA_RETURN_IF_ERROR(Classify(classified, output));
    }
    auto* tensor = wire->add_outputs();
    tensor->set_name(output.name);
    tensor->set_datatype(std::string(DataTypeToWireName(output.dtype)));
    for (int64_t dim : output.shape) tensor->add_shape(dim);
    std::string* raw = wire->add_raw_output_contents();
    const ShmOutput* target = nullptr;
    for (const ShmOutput& candidate : storage.shm_outputs) {
      if (candidate.name == output.name) target = &candidate;
    }
    if (target == nullptr) {
      *raw = std::move(output.bytes);
      continue;
    }
    if (output.bytes.size() > target->slice.byte_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output '", output.name, "': shared_memory_byte_size is ", target->slice.byte_size,
          ", but the result ", ShapeToString(output.shape), " needs ", output.bytes.size(),
          " bytes"));
    }
    TESSERA_RETURN_IF_ERROR(
        ipc::CopyGuardingSigbus(target->slice.data, output.bytes.data(), output.bytes.size(),
                                absl::StrCat("output '", output.name, "': shared-memory region '",
                                             target->slice.region->name, "'")));
    // The client reads this many bytes from its region (the window may be larger).
    (*tensor->mutable_parameters())["shared_memory_region"].set_string_param(
        target->slice.region->name);
    (*tensor->mutable_parameters())["shared_memory_byte_size"].set_int64_param(
        static_cast<int64_t>(output.bytes.size()));
  }
  return absl::OkStatus();
}

}  // namespace tessera::frontend
