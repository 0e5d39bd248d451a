// Which APIs of an endpoint only clients that send a header may call: grpc.restricted and
// http.restricted (Triton's --grpc-restricted-protocol and --http-restricted-api). A request to a
// restricted API without the header, or with another value, is refused with PERMISSION_DENIED
// (HTTP 403) naming the header, before its body is read or parsed. Triton answers UNAVAILABLE
// here, which clients and proxies take as "retry"; a wrong credential is not worth retrying.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/common/server_config.h"
#include "tessera/common/status.h"

namespace tessera::frontend {

class ApiAccess {
 public:
  // `header_prefix` goes before each group's header: "triton-grpc-protocol-" on gRPC (Triton's
  // metadata key), "" on HTTP. `groups` are checked already (CheckRestrictedApis).
  ApiAccess(const std::vector<RestrictedApis>& groups, std::string_view header_prefix);

  // The header (lower case) a request to `api` must carry, or nullptr when `api` is open.
  const std::string* HeaderOf(ApiGroup api) const;

  // OK when `api` is open or `sent`, the request's value of HeaderOf(api) (nullopt: absent), is
  // the expected one. Else PERMISSION_DENIED naming the API and the header, never the value.
  Status Check(ApiGroup api, std::optional<std::string_view> sent) const;

 private:
  struct Rule {
    std::string header;
    std::string value;
  };
  std::array<std::optional<Rule>, kApiGroupCount> rules_;
};

}  // namespace tessera::frontend
