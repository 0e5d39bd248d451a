#include "malformed_request.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <string>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "http_compression.h"
#include "inference/grpc_service.pb.h"

// grpc++ names this class a friend of ByteBuffer (for its own tests) and defines it nowhere it
// ships. Defined here, it tells which compression a message arrived with: the C buffer under the
// ByteBuffer records it, and grpc++ has no public accessor for it.
namespace grpc::internal {
class GrpcByteBufferPeer {
 public:
  explicit GrpcByteBufferPeer(ByteBuffer* buffer) : buffer_(buffer) {}
  grpc_compression_algorithm compression() const {
    const grpc_byte_buffer* raw = buffer_->c_buffer();
    return raw != nullptr && raw->type == GRPC_BB_RAW ? raw->data.raw.compression
                                                      : GRPC_COMPRESS_NONE;
  }

 private:
  ByteBuffer* buffer_;
};
}  // namespace grpc::internal

namespace tessera::frontend {
namespace {

using grpc::experimental::InterceptionHookPoints;

// Answers a call to a method the service does not have with UNIMPLEMENTED naming it, where grpc++
// sends a bare UNIMPLEMENTED with no message.
class UnknownMethodInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit UnknownMethodInterceptor(std::string message) : message_(std::move(message)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED &&
          status.error_message().empty()) {
        methods->ModifySendStatus(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, message_));
      }
    }
    methods->Proceed();
  }

 private:
  const std::string message_;
};

class UnknownMethodInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  UnknownMethodInterceptorFactory() {
    const google::protobuf::ServiceDescriptor* service =
        inference::ModelInferRequest::descriptor()->file()->FindServiceByName(
            "GRPCInferenceService");
    service_name_ = service->full_name();
    for (int i = 0; i < service->method_count(); ++i) {
      known_paths_.insert(absl::StrCat("/", service_name_, "/", service->method(i)->name()));
    }
  }

  // Called on gRPC's threads, concurrently: reads the set only. The service's own methods get no
  // interceptor, so they pay nothing for it.
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (known_paths_.count(info->method()) != 0) return nullptr;
    return new UnknownMethodInterceptor(absl::StrCat("unknown method '", info->method(),
                                                     "': this server serves ", service_name_,
                                                     " (KServe v2)"));
  }

 private:
  std::string service_name_;
  std::unordered_set<std::string> known_paths_;
};

}  // namespace

Status ParseRequestBytes(const grpc::ByteBuffer& bytes, google::protobuf::Message* message,
                         const RequestInflation& inflation) {
  // The reader and the peer only read; grpc++ takes a non-const buffer for its other uses.
  auto& buffer = const_cast<grpc::ByteBuffer&>(bytes);
  const grpc_compression_algorithm compression =
      grpc::internal::GrpcByteBufferPeer(&buffer).compression();
  if (compression == GRPC_COMPRESS_NONE) {
    grpc::ProtoBufferReader reader(&buffer);
    if (reader.status().ok() && message->ParseFromZeroCopyStream(&reader) && reader.status().ok()) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat("malformed request: the ", bytes.Length(),
                                                   " bytes received are not a valid encoding of ",
                                                   message->GetDescriptor()->full_name()));
  }
  if (compression != GRPC_COMPRESS_GZIP && compression != GRPC_COMPRESS_DEFLATE) {
    return absl::UnimplementedError(absl::StrCat("request compressed with gRPC algorithm ",
                                                 static_cast<int>(compression),
                                                 "; this server inflates gzip and deflate"));
  }
  grpc::Slice compressed;
  if (!buffer.DumpToSingleSlice(&compressed).ok()) {
    return absl::InternalError("cannot read the compressed request's bytes");
  }
  InflateHold hold(inflation.budget);
  TESSERA_ASSIGN_OR_RETURN(
      const std::string inflated,
      Inflate(
          std::string_view(reinterpret_cast<const char*>(compressed.begin()), compressed.size()),
          compression == GRPC_COMPRESS_GZIP ? HttpEncoding::kGzip : HttpEncoding::kDeflate,
          inflation.max_bytes, &hold, "request message", "grpc-encoding"));
  if (message->ParseFromString(inflated)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "malformed request: the ", inflated.size(), " bytes inflated from the ", compressed.size(),
      " received are not a valid encoding of ", message->GetDescriptor()->full_name()));
}

Status SerializeToByteBuffer(const google::protobuf::Message& message, grpc::ByteBuffer* bytes) {
  bool own_buffer = false;
  grpc::Status status = grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(
      message, bytes, &own_buffer);
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cannot encode the ",
                                          message.GetDescriptor()->full_name(),
                                          " answer: ", status.error_message()));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeUnknownMethodInterceptorFactory() {
  return std::make_unique<UnknownMethodInterceptorFactory>();
}

}  // namespace tessera::frontend
