// Starts a libmicrohttpd daemon on "address:port" for the HTTP endpoints (KServe v2 HTTP, and the
// Prometheus /metrics): the address may be a name, IPv4 or IPv6; its messages go to spdlog (debug).
#pragma once

#include <microhttpd.h>

#include <string>
#include <vector>

#include "tessera/common/status.h"

namespace tessera::frontend {

struct MhdListener {
  MHD_Daemon* daemon = nullptr;  // the caller stops it (MHD_stop_daemon)
  int port = -1;                 // the bound port (`port` 0 picks a free one)
};

// `what` names the endpoint in errors; `options` are added to the address and the logger
// (without MHD_OPTION_END). UNAVAILABLE when the port cannot be bound, INVALID_ARGUMENT when the
// address does not resolve.
StatusOr<MhdListener> StartMhdListener(const std::string& what, const std::string& address,
                                       int port, unsigned flags, MHD_AccessHandlerCallback handler,
                                       void* handler_cls, std::vector<MHD_OptionItem> options);

}  // namespace tessera::frontend
