#include "malformed_request.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "inference/grpc_service.pb.h"

namespace tessera::frontend {
namespace {

using grpc::experimental::InterceptionHookPoints;

// Methods served raw: they parse with ParseRequestBytes, and the inference path gets no
// interceptor.
constexpr const char* kRawMethods[] = {"ModelInfer", "ModelStreamInfer"};

// Gives gRPC's bare UNIMPLEMENTED (every UNIMPLEMENTED of Tessera's own says why) a code and a
// message that say what happened.
class BareUnimplementedInterceptor final : public grpc::experimental::Interceptor {
 public:
  BareUnimplementedInterceptor(grpc::StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED &&
          status.error_message().empty()) {
        methods->ModifySendStatus(grpc::Status(code_, message_));
      }
    }
    methods->Proceed();
  }

 private:
  const grpc::StatusCode code_;
  const std::string message_;
};

class MalformedRequestInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  MalformedRequestInterceptorFactory() {
    const google::protobuf::ServiceDescriptor* service =
        inference::ModelInferRequest::descriptor()->file()->FindServiceByName(
            "GRPCInferenceService");
    service_name_ = service->full_name();
    for (int i = 0; i < service->method_count(); ++i) {
      const google::protobuf::MethodDescriptor* method = service->method(i);
      const std::string path = absl::StrCat("/", service_name_, "/", method->name());
      if (std::find(std::begin(kRawMethods), std::end(kRawMethods), method->name()) !=
          std::end(kRawMethods)) {
        raw_paths_.insert(path);
        continue;
      }
      messages_.emplace(path, absl::StrCat("malformed ", method->name(),
                                           " request: the bytes received are not a valid "
                                           "encoding of ",
                                           method->input_type()->full_name()));
    }
  }

  // Called on gRPC's threads, concurrently: reads the maps only.
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    auto found = messages_.find(info->method());
    if (found != messages_.end()) {
      return new BareUnimplementedInterceptor(grpc::StatusCode::INVALID_ARGUMENT, found->second);
    }
    if (raw_paths_.count(info->method()) != 0) return nullptr;
    return new BareUnimplementedInterceptor(
        grpc::StatusCode::UNIMPLEMENTED,
        absl::StrCat("unknown method '", info->method(), "': this server serves ", service_name_,
                     " (KServe v2)"));
  }

 private:
  std::string service_name_;
  std::unordered_map<std::string, std::string> messages_;  // method path -> error message
  std::unordered_set<std::string> raw_paths_;
};

}  // namespace

Status ParseRequestBytes(const grpc::ByteBuffer& bytes, google::protobuf::Message* message) {
  // The reader only reads; grpc++ takes a non-const buffer for its other uses.
  grpc::ProtoBufferReader reader(const_cast<grpc::ByteBuffer*>(&bytes));
  if (reader.status().ok() && message->ParseFromZeroCopyStream(&reader) && reader.status().ok()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("malformed request: the ", bytes.Length(),
                                                 " bytes received are not a valid encoding of ",
                                                 message->GetDescriptor()->full_name()));
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
MakeMalformedRequestInterceptorFactory() {
  return std::make_unique<MalformedRequestInterceptorFactory>();
}

}  // namespace tessera::frontend
