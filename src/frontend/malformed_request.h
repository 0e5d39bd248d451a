// Requests whose bytes are not the protobuf message the method takes. grpc++'s callback API answers
// them with a bare UNIMPLEMENTED (no message) for a unary call and ends a stream's reading as if
// the client had closed it, dropping what follows. Tessera serves every method raw and parses here
// instead: INVALID_ARGUMENT naming the message type, and a stream goes on.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "google/protobuf/message.h"
#include "inflate_budget.h"
#include "tessera/common/status.h"

namespace tessera::frontend {

// How a raw method's compressed request may be inflated: to at most `max_bytes`, within `budget`
// (shared with the other requests being inflated; null = no budget).
struct RequestInflation {
  int64_t max_bytes = 0;
  InflateBudget* budget = nullptr;
};

// Parses `bytes` (a raw method's request) into `message`, inflating it first when it arrived
// compressed (grpc-encoding gzip or deflate). INVALID_ARGUMENT naming the message type and the
// size when the bytes are not a valid encoding of it; Inflate's errors for compressed data that is
// broken, inflates past max_bytes, or finds the budget full.
//
// gRPC's own inflation is off on the server (GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION): gRPC
// 1.51 inflates a message whole before it compares its size with the receive limit, so a few
// megabytes of gzip'd zeros took gigabytes. With it off, grpc++'s generated (typed) methods would
// take compressed bytes for the message itself, which is why none is served typed.
Status ParseRequestBytes(const grpc::ByteBuffer& bytes, google::protobuf::Message* message,
                         const RequestInflation& inflation);

// Encodes `message` as a raw method's response or stream message.
Status SerializeToByteBuffer(const google::protobuf::Message& message, grpc::ByteBuffer* bytes);

// Answers a call to a method inference.GRPCInferenceService does not have with UNIMPLEMENTED
// naming it, where grpc++ sends a bare UNIMPLEMENTED. The service's own methods get no interceptor.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeUnknownMethodInterceptorFactory();

}  // namespace tessera::frontend
