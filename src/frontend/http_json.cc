#include "http_json.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "tessera/common/data_type.h"
#include "tessera/common/float16.h"

namespace tessera::frontend {
namespace {

using nlohmann::json;
using Parameters = google::protobuf::Map<std::string, inference::InferParameter>;

// Parameters the HTTP body carries for itself; they are not passed on to the request.
constexpr char kBinaryDataSize[] = "binary_data_size";
constexpr char kBinaryData[] = "binary_data";
constexpr char kBinaryDataOutput[] = "binary_data_output";

absl::string_view JsonTypeName(const json& value) {
  if (value.is_number_integer()) return "an integer";
  if (value.is_number()) return "a number";
  if (value.is_boolean()) return "a boolean";
  if (value.is_string()) return "a string";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return "null";
}

// A value for an error message: scalars as written, containers by kind (dumping one could recurse
// as deep as the client nested it).
std::string Describe(const json& value) {
  if (value.is_structured()) return std::string(JsonTypeName(value));
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

Status WrongType(absl::string_view what, absl::string_view expected, const json& value) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must be ", expected, ", not ", JsonTypeName(value)));
}

// `params` (a JSON object) into `out`, leaving out the HTTP-only `skip` keys.
Status ReadParameters(absl::string_view what, const json& params, Parameters* out,
                      std::initializer_list<std::string_view> skip) {
  if (!params.is_object()) return WrongType(absl::StrCat(what, " parameters"), "an object", params);
  for (const auto& [key, value] : params.items()) {
    if (std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
    inference::InferParameter& p = (*out)[key];
    if (value.is_boolean()) {
      p.set_bool_param(value.get<bool>());
    } else if (value.is_number_unsigned() &&
               value.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) {
      p.set_uint64_param(value.get<uint64_t>());
    } else if (value.is_number_integer()) {
      p.set_int64_param(value.get<int64_t>());
    } else if (value.is_number()) {
      p.set_double_param(value.get<double>());
    } else if (value.is_string()) {
      p.set_string_param(value.get<std::string>());
    } else {
      return WrongType(absl::StrCat(what, " parameter '", key, "'"),
                       "a boolean, a number or a string", value);
    }
  }
  return absl::OkStatus();
}

// Reads an optional boolean parameter of the HTTP protocol itself.
StatusOr<std::optional<bool>> BoolParameter(absl::string_view what, const json& object,
                                            const char* key) {
  auto params = object.find("parameters");
  if (params == object.end() || !params->is_object()) return std::optional<bool>();
  auto it = params->find(key);
  if (it == params->end()) return std::optional<bool>();
  if (!it->is_boolean())
    return WrongType(absl::StrCat(what, " parameter '", key, "'"), "a boolean", *it);
  return std::optional<bool>(it->get<bool>());
}

StatusOr<std::string> RequiredString(absl::string_view what, const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end())
    return absl::InvalidArgumentError(absl::StrCat(what, " has no '", key, "'"));
  if (!it->is_string()) return WrongType(absl::StrCat(what, " '", key, "'"), "a string", *it);
  return it->get<std::string>();
}

// Appends one JSON element of `type` to `out`; false when the element cannot be one.
template <typename T>
bool AppendInteger(const json& v, std::string* out) {
  T value;
  if (std::is_signed_v<T>) {
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))) {
      return false;
    }
    const int64_t x = v.get<int64_t>();
    if (x < int64_t(std::numeric_limits<T>::min()) || x > int64_t(std::numeric_limits<T>::max())) {
      return false;
    }
    value = static_cast<T>(x);
  } else {
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0)) return false;
    const uint64_t x = v.get<uint64_t>();
    if (x > uint64_t(std::numeric_limits<T>::max())) return false;
    value = static_cast<T>(x);
  }
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
  return true;
}

template <typename T>
void AppendRaw(T value, std::string* out) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

bool AppendElement(DataType type, const json& v, std::string* out) {
  switch (type) {
    case DataType::kBool:
      if (!v.is_boolean()) return false;
      out->push_back(v.get<bool>() ? 1 : 0);
      return true;
    case DataType::kUint8:
      return AppendInteger<uint8_t>(v, out);
    case DataType::kUint16:
      return AppendInteger<uint16_t>(v, out);
    case DataType::kUint32:
      return AppendInteger<uint32_t>(v, out);
    case DataType::kUint64:
      return AppendInteger<uint64_t>(v, out);
    case DataType::kInt8:
      return AppendInteger<int8_t>(v, out);
    case DataType::kInt16:
      return AppendInteger<int16_t>(v, out);
    case DataType::kInt32:
      return AppendInteger<int32_t>(v, out);
    case DataType::kInt64:
      return AppendInteger<int64_t>(v, out);
    case DataType::kFp16:
      if (!v.is_number()) return false;
      AppendRaw(static_cast<_Float16>(v.get<double>()), out);
      return true;
    case DataType::kBf16:
      if (!v.is_number()) return false;
      AppendRaw(FloatToBf16(static_cast<float>(v.get<double>())), out);
      return true;
    case DataType::kFp32:
      if (!v.is_number()) return false;
      AppendRaw(static_cast<float>(v.get<double>()), out);
      return true;
    case DataType::kFp64:
      if (!v.is_number()) return false;
      AppendRaw(v.get<double>(), out);
      return true;
    case DataType::kString: {  // as on the gRPC wire: a 4-byte little-endian length, then bytes
      if (!v.is_string()) return false;
      const std::string& s = v.get_ref<const std::string&>();
      AppendRaw(static_cast<uint32_t>(s.size()), out);
      out->append(s);
      return true;
    }
    case DataType::kInvalid:
      return false;
  }
  return false;
}

// Deeper nesting than any tensor's rank is refused before it can exhaust the handler's stack.
constexpr int kMaxDataDepth = 64;

// Flattens `data` (nested arrays, row-major) into raw bytes; counts the elements.
Status AppendData(absl::string_view what, DataType type, const json& data, std::string* out,
                  int64_t* count, int depth = 0) {
  if (data.is_array()) {
    if (depth == kMaxDataDepth) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": 'data' nests arrays deeper than ", kMaxDataDepth, " levels"));
    }
    for (const json& element : data) {
      TESSERA_RETURN_IF_ERROR(AppendData(what, type, element, out, count, depth + 1));
    }
    return absl::OkStatus();
  }
  if (!AppendElement(type, data, out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": element ", *count, " (", Describe(data), ") is not a valid ",
                     std::string(DataTypeToWireName(type)), " value"));
  }
  ++*count;
  return absl::OkStatus();
}

// An integer in [0, INT64_MAX], or nullopt.
std::optional<int64_t> NonNegative(const json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v <= uint64_t{std::numeric_limits<int64_t>::max()}) return static_cast<int64_t>(v);
  } else if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return value.get<int64_t>();
  }
  return std::nullopt;
}

StatusOr<int64_t> ReadShape(absl::string_view what, const json& input,
                            inference::ModelInferRequest::InferInputTensor* tensor) {
  auto shape = input.find("shape");
  if (shape == input.end())
    return absl::InvalidArgumentError(absl::StrCat(what, " has no 'shape'"));
  if (!shape->is_array()) return WrongType(absl::StrCat(what, " 'shape'"), "an array", *shape);
  int64_t elements = 1;
  for (const json& dim : *shape) {
    const std::optional<int64_t> d = NonNegative(dim);
    if (!d) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " 'shape' must hold non-negative integers, not ", Describe(dim)));
    }
    tensor->add_shape(*d);
    elements = (*d != 0 && elements > INT64_MAX / *d) ? INT64_MAX : elements * *d;
  }
  return elements;
}

Status ReadInput(const json& input, std::string_view binary, size_t* binary_used,
                 inference::ModelInferRequest* wire) {
  const std::string position = absl::StrCat("input ", wire->inputs_size());
  if (!input.is_object()) return WrongType(position, "an object", input);
  TESSERA_ASSIGN_OR_RETURN(std::string name, RequiredString(position, input, "name"));
  const std::string what = absl::StrCat("input '", name, "'");
  TESSERA_ASSIGN_OR_RETURN(std::string datatype, RequiredString(what, input, "datatype"));
  auto* tensor = wire->add_inputs();
  tensor->set_name(name);
  tensor->set_datatype(datatype);
  TESSERA_ASSIGN_OR_RETURN(const int64_t elements, ReadShape(what, input, tensor));
  std::optional<int64_t> binary_size;
  if (auto params = input.find("parameters"); params != input.end()) {
    TESSERA_RETURN_IF_ERROR(
        ReadParameters(what, *params, tensor->mutable_parameters(), {kBinaryDataSize}));
    if (auto size = params->find(kBinaryDataSize); size != params->end()) {
      binary_size = NonNegative(*size);
      if (!binary_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " '", kBinaryDataSize, "' must be a byte count, not ", Describe(*size)));
      }
    }
  }
  const bool in_shm = tensor->parameters().contains("shared_memory_region");
  auto data = input.find("data");
  const int given = (binary_size ? 1 : 0) + (data != input.end() ? 1 : 0) + (in_shm ? 1 : 0);
  if (given != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        what,
        given == 0 ? " has no data: give 'data', "
                   : " gives its data more than one way: give "
                     "only one of 'data', ",
        "parameters.binary_data_size (bytes after the JSON) or parameters.shared_memory_region"));
  }
  if (in_shm) return absl::OkStatus();
  std::string* bytes = wire->add_raw_input_contents();
  if (binary_size) {
    if (uint64_t(*binary_size) > binary.size() - *binary_used) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": binary_data_size is ", *binary_size, " but only ", binary.size() - *binary_used,
          " bytes of binary data are left after the JSON"));
    }
    bytes->assign(binary.substr(*binary_used, *binary_size));
    *binary_used += *binary_size;
    return absl::OkStatus();
  }
  const std::optional<DataType> type = DataTypeFromWireName(datatype);
  if (!type) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": unknown datatype '", datatype, "'"));
  }
  int64_t count = 0;
  TESSERA_RETURN_IF_ERROR(AppendData(what, *type, *data, bytes, &count));
  if (count != elements) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": 'data' has ", count, " elements but its shape [",
                     absl::StrJoin(tensor->shape(), ","), "] needs ", elements));
  }
  return absl::OkStatus();
}

Status ReadOutput(const json& output, inference::ModelInferRequest* wire,
                  HttpOutputFormat* format) {
  const std::string position = absl::StrCat("requested output ", wire->outputs_size());
  if (!output.is_object()) return WrongType(position, "an object", output);
  TESSERA_ASSIGN_OR_RETURN(std::string name, RequiredString(position, output, "name"));
  const std::string what = absl::StrCat("requested output '", name, "'");
  auto* tensor = wire->add_outputs();
  tensor->set_name(name);
  if (auto params = output.find("parameters"); params != output.end()) {
    TESSERA_RETURN_IF_ERROR(
        ReadParameters(what, *params, tensor->mutable_parameters(), {kBinaryData}));
  }
  TESSERA_ASSIGN_OR_RETURN(std::optional<bool> binary, BoolParameter(what, output, kBinaryData));
  if (binary) format->binary[name] = *binary;
  return absl::OkStatus();
}

// ---- answers
// -------------------------------------------------------------------------------------

json ParameterToJson(const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam:
      return p.bool_param();
    case inference::InferParameter::kInt64Param:
      return p.int64_param();
    case inference::InferParameter::kStringParam:
      return p.string_param();
    case inference::InferParameter::kDoubleParam:
      return p.double_param();
    case inference::InferParameter::kUint64Param:
      return p.uint64_param();
    case inference::InferParameter::PARAMETER_CHOICE_NOT_SET:
      break;
  }
  return nullptr;
}

template <typename T>
std::vector<T> ValuesFrom(std::string_view bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

template <typename T>
json NumbersFrom(std::string_view bytes) {
  json out = json::array();
  for (T v : ValuesFrom<T>(bytes)) out.push_back(v);
  return out;
}

}  // namespace

StatusOr<json> TensorDataToJson(const std::string& name, DataType type, std::string_view bytes) {
  switch (type) {
    case DataType::kBool: {
      json out = json::array();
      for (char c : bytes) out.push_back(c != 0);
      return out;
    }
    case DataType::kUint8:
      return NumbersFrom<uint8_t>(bytes);
    case DataType::kUint16:
      return NumbersFrom<uint16_t>(bytes);
    case DataType::kUint32:
      return NumbersFrom<uint32_t>(bytes);
    case DataType::kUint64:
      return NumbersFrom<uint64_t>(bytes);
    case DataType::kInt8:
      return NumbersFrom<int8_t>(bytes);
    case DataType::kInt16:
      return NumbersFrom<int16_t>(bytes);
    case DataType::kInt32:
      return NumbersFrom<int32_t>(bytes);
    case DataType::kInt64:
      return NumbersFrom<int64_t>(bytes);
    case DataType::kFp32:
      return NumbersFrom<float>(bytes);
    case DataType::kFp64:
      return NumbersFrom<double>(bytes);
    case DataType::kFp16: {
      json out = json::array();
      for (_Float16 v : ValuesFrom<_Float16>(bytes)) out.push_back(static_cast<float>(v));
      return out;
    }
    case DataType::kBf16: {
      json out = json::array();
      for (uint16_t v : ValuesFrom<uint16_t>(bytes)) out.push_back(Bf16ToFloat(v));
      return out;
    }
    case DataType::kString: {  // 4-byte little-endian lengths, each followed by its bytes
      json out = json::array();
      size_t at = 0;
      while (at < bytes.size()) {
        uint32_t length = 0;
        if (bytes.size() - at < sizeof(length)) break;
        std::memcpy(&length, bytes.data() + at, sizeof(length));
        at += sizeof(length);
        if (length > bytes.size() - at) break;
        out.push_back(std::string(bytes.substr(at, length)));
        at += length;
      }
      if (at != bytes.size()) {
        return absl::InternalError(absl::StrCat("output '", name, "' holds malformed BYTES data"));
      }
      return out;
    }
    case DataType::kInvalid:
      break;
  }
  return absl::InternalError(absl::StrCat("output '", name, "' has no known datatype"));
}

bool HttpOutputFormat::Binary(const std::string& output) const {
  auto it = binary.find(output);
  return it != binary.end() ? it->second : binary_by_default;
}

StatusOr<HttpInferRequest> ParseHttpInferRequest(std::string_view body,
                                                 std::optional<size_t> json_length) {
  if (json_length && *json_length > body.size()) {
    return absl::InvalidArgumentError(absl::StrCat("Inference-Header-Content-Length is ",
                                                   *json_length, " but the body has only ",
                                                   body.size(), " bytes"));
  }
  const std::string_view text = json_length ? body.substr(0, *json_length) : body;
  const std::string_view binary = json_length ? body.substr(*json_length) : std::string_view();
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {  // syntax errors, and numbers out of double's range
    return absl::InvalidArgumentError(absl::StrCat(
        "the request body is not valid JSON", json_length ? " (its first " : "",
        json_length ? absl::StrCat(*json_length, " bytes, per Inference-Header-Content-Length)")
                    : "",
        ": ", e.what()));
  }
  if (!root.is_object()) return WrongType("the request body", "a JSON object", root);

  HttpInferRequest out;
  inference::ModelInferRequest& wire = out.wire;
  if (auto id = root.find("id"); id != root.end()) {
    if (!id->is_string()) return WrongType("the request 'id'", "a string", *id);
    wire.set_id(id->get<std::string>());
  }
  if (auto params = root.find("parameters"); params != root.end()) {
    TESSERA_RETURN_IF_ERROR(
        ReadParameters("the request", *params, wire.mutable_parameters(), {kBinaryDataOutput}));
  }
  TESSERA_ASSIGN_OR_RETURN(std::optional<bool> binary_output,
                           BoolParameter("the request", root, kBinaryDataOutput));
  out.format.binary_by_default = binary_output.value_or(false);

  auto inputs = root.find("inputs");
  if (inputs == root.end()) return absl::InvalidArgumentError("the request has no 'inputs'");
  if (!inputs->is_array()) return WrongType("the request 'inputs'", "an array", *inputs);
  size_t binary_used = 0;
  for (const json& input : *inputs) {
    TESSERA_RETURN_IF_ERROR(ReadInput(input, binary, &binary_used, &wire));
  }
  if (binary_used != binary.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(binary.size(),
                     " bytes of binary data follow the JSON but the inputs' binary_data_size "
                     "add up to ",
                     binary_used));
  }
  if (auto outputs = root.find("outputs"); outputs != root.end()) {
    if (!outputs->is_array()) return WrongType("the request 'outputs'", "an array", *outputs);
    for (const json& output : *outputs) {
      TESSERA_RETURN_IF_ERROR(ReadOutput(output, &wire, &out.format));
    }
  }
  return out;
}

StatusOr<HttpBody> RenderHttpInferResponse(const inference::ModelInferResponse& wire,
                                           const HttpOutputFormat& format) {
  json root = {{"model_name", wire.model_name()}, {"model_version", wire.model_version()}};
  if (!wire.id().empty()) root["id"] = wire.id();
  if (!wire.parameters().empty()) {
    json& params = root["parameters"];
    for (const auto& [key, p] : wire.parameters()) params[key] = ParameterToJson(p);
  }
  std::string binary;
  json outputs = json::array();
  for (int i = 0; i < wire.outputs_size(); ++i) {
    const auto& tensor = wire.outputs(i);
    json out = {
        {"name", tensor.name()}, {"datatype", tensor.datatype()}, {"shape", tensor.shape()}};
    // Only binary outputs carry parameters: Triton's C++ client reads binary_data_size from
    // every output that has them. An output in client shared memory carries neither.
    const bool in_shm = tensor.parameters().contains("shared_memory_region");
    const std::string_view bytes =
        i < wire.raw_output_contents_size() ? wire.raw_output_contents(i) : std::string_view();
    if (!in_shm && format.Binary(tensor.name())) {
      out["parameters"] = {{kBinaryDataSize, bytes.size()}};
      binary.append(bytes);
    } else if (!in_shm) {
      const std::optional<DataType> type = DataTypeFromWireName(tensor.datatype());
      if (!type) {
        return absl::InternalError(
            absl::StrCat("output '", tensor.name(), "' has unknown datatype ", tensor.datatype()));
      }
      TESSERA_ASSIGN_OR_RETURN(out["data"], TensorDataToJson(tensor.name(), *type, bytes));
    }
    outputs.push_back(std::move(out));
  }
  root["outputs"] = std::move(outputs);
  HttpBody body;
  body.bytes = root.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!binary.empty() || format.binary_by_default ||
      std::any_of(format.binary.begin(), format.binary.end(), [](auto& b) { return b.second; })) {
    body.json_length = body.bytes.size();
    body.bytes.append(binary);
  }
  return body;
}

std::string ErrorJson(const std::string& message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

// ---- messages
// ------------------------------------------------------------------------------------

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

json FieldValue(const Message& m, const Reflection& r, const FieldDescriptor& f, int index) {
  const bool repeated = f.is_repeated();
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return repeated ? r.GetRepeatedInt32(m, &f, index) : r.GetInt32(m, &f);
    case FieldDescriptor::CPPTYPE_INT64:
      return repeated ? r.GetRepeatedInt64(m, &f, index) : r.GetInt64(m, &f);
    case FieldDescriptor::CPPTYPE_UINT32:
      return repeated ? r.GetRepeatedUInt32(m, &f, index) : r.GetUInt32(m, &f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return repeated ? r.GetRepeatedUInt64(m, &f, index) : r.GetUInt64(m, &f);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return repeated ? r.GetRepeatedDouble(m, &f, index) : r.GetDouble(m, &f);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return repeated ? r.GetRepeatedFloat(m, &f, index) : r.GetFloat(m, &f);
    case FieldDescriptor::CPPTYPE_BOOL:
      return repeated ? r.GetRepeatedBool(m, &f, index) : r.GetBool(m, &f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return (repeated ? r.GetRepeatedEnum(m, &f, index) : r.GetEnum(m, &f))->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return repeated ? r.GetRepeatedString(m, &f, index) : r.GetString(m, &f);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ProtoToJson(repeated ? r.GetRepeatedMessage(m, &f, index) : r.GetMessage(m, &f));
  }
  return nullptr;
}

}  // namespace

json ProtoToJson(const Message& message) {
  json out = json::object();
  const Reflection& r = *message.GetReflection();
  const google::protobuf::Descriptor& d = *message.GetDescriptor();
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor& f = *d.field(i);
    if (f.is_map()) {  // entries are messages {key, value}
      json map = json::object();
      for (int k = 0; k < r.FieldSize(message, &f); ++k) {
        const Message& entry = r.GetRepeatedMessage(message, &f, k);
        const json key = FieldValue(entry, *entry.GetReflection(), *f.message_type()->map_key(), 0);
        map[key.is_string() ? key.get<std::string>() : key.dump()] =
            FieldValue(entry, *entry.GetReflection(), *f.message_type()->map_value(), 0);
      }
      out[f.name()] = std::move(map);
    } else if (f.is_repeated()) {
      json list = json::array();
      for (int k = 0; k < r.FieldSize(message, &f); ++k)
        list.push_back(FieldValue(message, r, f, k));
      out[f.name()] = std::move(list);
    } else if (f.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE || f.containing_oneof()) {
      if (r.HasField(message, &f)) out[f.name()] = FieldValue(message, r, f, 0);
    } else {
      out[f.name()] = FieldValue(message, r, f, 0);
    }
  }
  return out;
}

}  // namespace tessera::frontend
