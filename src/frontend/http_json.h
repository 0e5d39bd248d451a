// KServe v2 HTTP/REST bodies ↔ the wire messages of the gRPC protocol, so the HTTP endpoint runs
// the same inference path (InferSubmitter) as the gRPC one.
//
// An inference request is a JSON object, optionally followed by the tensors' bytes (Triton's
// binary tensor data extension: the header Inference-Header-Content-Length gives the JSON's
// length, and each input sent that way says its byte count in parameters.binary_data_size).
// Tensor data given in JSON may be flat or nested arrays, in row-major order.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "google/protobuf/message.h"
#include "inference/grpc_service.pb.h"
#include "nlohmann/json.hpp"
#include "tessera/common/data_type.h"
#include "tessera/common/status.h"

namespace tessera::frontend {

// How the client wants each output: JSON numbers, or bytes after the JSON.
struct HttpOutputFormat {
  bool binary_by_default = false;      // request parameters.binary_data_output
  std::map<std::string, bool> binary;  // per requested output: parameters.binary_data
  bool Binary(const std::string& output) const;
};

struct HttpInferRequest {
  inference::ModelInferRequest wire;  // model name and version not set: they come from the URL
  HttpOutputFormat format;
};

// `json_length`: the Inference-Header-Content-Length header, when given. INVALID_ARGUMENT naming
// what is wrong (the JSON's syntax error and its byte offset, a missing or mistyped field, data
// that does not fill the shape, binary sizes that do not add up to the body).
StatusOr<HttpInferRequest> ParseHttpInferRequest(std::string_view body,
                                                 std::optional<size_t> json_length);

struct HttpBody {
  std::string bytes;
  std::optional<size_t> json_length;  // set when binary tensor data follows the JSON
};

// The answer to an inference: outputs in JSON, or as bytes after it where `format` says so.
// Outputs written into client shared memory carry no data (and no parameters), as in Triton.
StatusOr<HttpBody> RenderHttpInferResponse(const inference::ModelInferResponse& wire,
                                           const HttpOutputFormat& format);

// A message as JSON the way Triton's HTTP endpoint writes it: field names as in the .proto, every
// scalar field (defaults included, except unset oneof members), 64-bit integers as numbers and
// enums by name. Model metadata, configuration and statistics are written this way.
nlohmann::json ProtoToJson(const google::protobuf::Message& message);

// {"error": message}. Messages may quote bytes from model files that are not UTF-8.
std::string ErrorJson(const std::string& message);

// A tensor's elements as a JSON array (numbers; booleans; BYTES elements as strings), from its raw
// bytes (BYTES: the serialized form). INTERNAL naming `name` when the bytes are not whole elements.
StatusOr<nlohmann::json> TensorDataToJson(const std::string& name, DataType type,
                                          std::string_view bytes);

}  // namespace tessera::frontend
