// The PEM files of an endpoint's TLS (grpc.tls, http.tls), read and checked before a listener
// takes them, so that a wrong file is named at start instead of failing every handshake later.
#pragma once

#include <string>
#include <string_view>

#include "tessera/common/server_config.h"
#include "tessera/common/status.h"

namespace tessera::frontend {

struct TlsPem {
  std::string cert_chain;
  std::string key;
  std::string client_ca;  // empty when no client certificates are asked for
};

// Reads `files` and checks that the certificate file holds a certificate, the key file an
// unencrypted private key of its first certificate, and client_ca (when set) a certificate.
// INVALID_ARGUMENT names the config key (`what` + ".cert", ...) and the file. A certificate
// outside its validity period is only logged: refusing to start would turn a late renewal into
// an outage of every endpoint.
StatusOr<TlsPem> ReadTlsFiles(const TlsFiles& files, std::string_view what);

// The files' bytes as they are now, unchecked: a reload compares two snapshots to tell a renewal
// (and reads and checks the files with ReadTlsFiles only then, so an expired certificate is not
// warned about again at every read).
std::string TlsFilesSnapshot(const TlsFiles& files);

}  // namespace tessera::frontend
