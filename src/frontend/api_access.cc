#include "api_access.h"

#include <openssl/crypto.h>

#include "absl/strings/str_cat.h"

namespace tessera::frontend {

ApiAccess::ApiAccess(const std::vector<RestrictedApis>& groups, std::string_view header_prefix) {
  for (const RestrictedApis& group : groups) {
    for (ApiGroup api : group.apis) {
      rules_[static_cast<int>(api)] = Rule{
          absl::StrCat(absl::string_view(header_prefix.data(), header_prefix.size()), group.header),
          group.value};
    }
  }
}

const std::string* ApiAccess::HeaderOf(ApiGroup api) const {
  const std::optional<Rule>& rule = rules_[static_cast<int>(api)];
  return rule ? &rule->header : nullptr;
}

Status ApiAccess::Check(ApiGroup api, std::optional<std::string_view> sent) const {
  const std::optional<Rule>& rule = rules_[static_cast<int>(api)];
  if (!rule) return absl::OkStatus();
  // Compared in constant time, so that response times do not tell how much of a guess was right.
  if (sent && sent->size() == rule->value.size() &&
      CRYPTO_memcmp(sent->data(), rule->value.data(), sent->size()) == 0) {
    return absl::OkStatus();
  }
  const std::string_view name = ApiGroupName(api);
  return absl::PermissionDeniedError(
      absl::StrCat("This API (", absl::string_view(name.data(), name.size()),
                   ") is restricted, expecting header '", rule->header, "'",
                   sent ? " (it came with another value)" : ""));
}

}  // namespace tessera::frontend
