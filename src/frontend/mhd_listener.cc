#include "mhd_listener.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera::frontend {
namespace {

void LogFromMhd(void*, const char* format, va_list args) {
  char line[512];
  std::vsnprintf(line, sizeof line, format, args);
  std::string text(line);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  spdlog::debug("http: {}", text);
}

}  // namespace

StatusOr<MhdListener> StartMhdListener(const std::string& what, const std::string& address,
                                       int port, unsigned flags, MHD_AccessHandlerCallback handler,
                                       void* handler_cls, std::vector<MHD_OptionItem> options) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  if (int error = getaddrinfo(address.c_str(), service.c_str(), &hints, &found)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": address '", address, "' does not resolve: ", gai_strerror(error)));
  }
  sockaddr_storage bind_to{};
  std::memcpy(&bind_to, found->ai_addr, found->ai_addrlen);
  if (found->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
  freeaddrinfo(found);

  options.push_back({MHD_OPTION_SOCK_ADDR, 0, &bind_to});
  options.push_back({MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(&LogFromMhd), nullptr});
  options.push_back({MHD_OPTION_END, 0, nullptr});
  MhdListener listener;
  listener.daemon =
      MHD_start_daemon(flags | MHD_USE_ERROR_LOG, static_cast<uint16_t>(port), nullptr, nullptr,
                       handler, handler_cls, MHD_OPTION_ARRAY, options.data(), MHD_OPTION_END);
  if (listener.daemon == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen for ", what, " on ", address, ":",
                                               port, " (address in use or not available)"));
  }
  if (const MHD_DaemonInfo* info =
          MHD_get_daemon_info(listener.daemon, MHD_DAEMON_INFO_BIND_PORT)) {
    listener.port = info->port;
  }
  return listener;
}

}  // namespace tessera::frontend
