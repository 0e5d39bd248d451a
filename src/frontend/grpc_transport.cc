#include "grpc_transport.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "tls_files.h"

namespace tessera::frontend {

StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcCredentials(const TlsFiles& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  TESSERA_RETURN_IF_ERROR(ReadTlsFiles(tls, "grpc.tls").status());
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key, tls.cert, tls.client_ca, static_cast<unsigned>(tls.reload_secs));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (tls.client_ca.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

void ApplyGrpcTransportOptions(const FrontendOptions& options, grpc::ServerBuilder* builder) {
  // The default 4 MiB receive limit rejects ordinary image batches (serving-systems.md §2.4).
  const int max_bytes = static_cast<int>(std::min<int64_t>(options.max_message_bytes, INT32_MAX));
  builder->SetMaxReceiveMessageSize(max_bytes);
  builder->SetMaxSendMessageSize(max_bytes);
  // Every method inflates compressed requests itself, bounded (ParseRequestBytes); gRPC's own
  // inflation is unbounded.
  builder->AddChannelArgument(GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION, 0);
  // gRPC turns SO_REUSEPORT on by default; Triton (and so its users) expect a second server on
  // the port to fail.
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, options.grpc_reuse_port ? 1 : 0);
  const ServerConfig::GrpcKeepalive& keepalive = options.grpc_keepalive;
  for (const auto& [name, value] : {
           std::pair{GRPC_ARG_KEEPALIVE_TIME_MS, keepalive.time_ms},
           {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive.timeout_ms},
           {GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, keepalive.permit_without_calls},
           {GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, keepalive.http2_max_pings_without_data},
           {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
            keepalive.http2_min_recv_ping_interval_without_data_ms},
           {GRPC_ARG_HTTP2_MAX_PING_STRIKES, keepalive.http2_max_ping_strikes},
       }) {
    if (value >= 0) builder->AddChannelArgument(name, static_cast<int>(value));
  }
  const std::string& compression = options.grpc_response_compression;
  if (compression != "none") {
    builder->SetDefaultCompressionLevel(compression == "low"      ? GRPC_COMPRESS_LEVEL_LOW
                                        : compression == "medium" ? GRPC_COMPRESS_LEVEL_MED
                                                                  : GRPC_COMPRESS_LEVEL_HIGH);
  }
}

}  // namespace tessera::frontend
