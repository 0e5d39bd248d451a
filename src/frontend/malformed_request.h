// Requests whose bytes are not the protobuf message the method takes. grpc++'s callback API answers
// them with a bare UNIMPLEMENTED (no message) for a unary call and ends a stream's reading as if
// the client had closed it, dropping what follows; Tessera answers INVALID_ARGUMENT naming the
// method and the message type instead, and a stream goes on.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "google/protobuf/message.h"
#include "tessera/common/status.h"

namespace tessera::frontend {

// Parses `bytes` (a raw method's request) into `message`. INVALID_ARGUMENT naming the message
// type and the size when the bytes are not a valid encoding of it.
Status ParseRequestBytes(const grpc::ByteBuffer& bytes, google::protobuf::Message* message);

// Encodes `message` as a raw method's response or stream message.
Status SerializeToByteBuffer(const google::protobuf::Message& message, grpc::ByteBuffer* bytes);

// For the typed methods of inference.GRPCInferenceService: turns the bare UNIMPLEMENTED that
// grpc++ sends for a request it could not parse into INVALID_ARGUMENT naming the method and its
// request type; for a method the service does not have, UNIMPLEMENTED naming it. Methods served
// raw (parsed by ParseRequestBytes) get no interceptor, so the inference path pays nothing for it.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeMalformedRequestInterceptorFactory();

}  // namespace tessera::frontend
