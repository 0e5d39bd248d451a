// How the gRPC server's transport is set up from the frontend options: its credentials
// (plaintext, or TLS from grpc.tls) and the ServerBuilder's limits, keepalive, port reuse and
// response compression. The endpoint itself (grpc_endpoint.cc) registers the service.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

#include "tessera/common/server_config.h"
#include "tessera/common/status.h"
#include "tessera/frontend/frontend.h"

namespace tessera::frontend {

// Plaintext, or TLS from grpc.tls. gRPC's file watcher reads the files again every reload_secs, so
// a renewed certificate (cert-manager, a mounted Secret) is served without a restart; a renewal
// caught half-written keeps the previous pair until the next read finds both files consistent.
// INVALID_ARGUMENT names the grpc.tls key and file that do not check out (ReadTlsFiles).
StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcCredentials(const TlsFiles& tls);

// Message size limits, gRPC's own inflation off, SO_REUSEPORT, keepalive and HTTP/2 ping settings,
// and the default response compression, from `options`.
void ApplyGrpcTransportOptions(const FrontendOptions& options, grpc::ServerBuilder* builder);

}  // namespace tessera::frontend
