// The parameters of Triton's model load and unload requests, from either endpoint: "config"
// (a ModelConfig as JSON) and "file:<path>" (a model folder's files) on a load,
// "unload_dependents" on an unload. Anything else, or a value of the wrong type, is
// INVALID_ARGUMENT naming the parameter, so a request is never half understood.
#pragma once

#include <string>

#include "inference/grpc_service.pb.h"
#include "nlohmann/json.hpp"
#include "tessera/common/status.h"
#include "tessera/frontend/server_core.h"

namespace tessera::frontend {

using RepositoryParameters =
    google::protobuf::Map<std::string, inference::ModelRepositoryParameter>;

// gRPC: "config" a string_param, each "file:<path>" a bytes_param.
StatusOr<LoadOverrides> LoadOverridesFromGrpc(const RepositoryParameters& parameters);
// HTTP: the body's "parameters" object; "config" a string, each "file:<path>" its bytes in base64.
StatusOr<LoadOverrides> LoadOverridesFromJson(const nlohmann::json& parameters);

// "unload_dependents": a bool_param / JSON boolean; false when absent.
StatusOr<bool> UnloadDependentsFromGrpc(const RepositoryParameters& parameters);
StatusOr<bool> UnloadDependentsFromJson(const nlohmann::json& parameters);

}  // namespace tessera::frontend
