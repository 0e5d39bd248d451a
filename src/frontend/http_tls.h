// HTTPS for the KServe v2 HTTP endpoint with what libmicrohttpd's own options lack: a renewed
// certificate served without a restart (the files are read again every http.tls.reload_secs), and
// client certificates (http.tls.client_ca: a client must present one that CA signed, or the TLS
// handshake fails). libmicrohttpd reads its certificate once; here each new connection is handed
// the GnuTLS credentials current when it is accepted, from libmicrohttpd's connection notification.
#pragma once

#include <microhttpd.h>

#include <memory>
#include <vector>

#include "tessera/common/server_config.h"
#include "tessera/common/status.h"

namespace tessera::frontend {

class HttpTls {
 public:
  // Reads and checks the files (ReadTlsFiles; INVALID_ARGUMENT naming the http.tls key and the
  // file), then starts reading them again every reload_secs. A renewal that does not check out is
  // logged and the previous credentials stay.
  static StatusOr<std::unique_ptr<HttpTls>> Start(const TlsFiles& files);
  virtual ~HttpTls() = default;

  // The options of a libmicrohttpd daemon with MHD_USE_TLS: the key and certificate read at start
  // (libmicrohttpd will not start without them) and the connection notification. The daemon must
  // stop before this object is destroyed.
  virtual std::vector<MHD_OptionItem> MhdOptions() = 0;

  // True when `connection` was handed its credentials (and, with client_ca, the demand for a
  // client certificate) before its handshake. The endpoint refuses requests on one that was not,
  // so that a connection libmicrohttpd never notified cannot get past client_ca.
  virtual bool Prepared(MHD_Connection* connection) const = 0;
};

}  // namespace tessera::frontend
