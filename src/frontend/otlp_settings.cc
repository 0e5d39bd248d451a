// ResolveOtlpExport: the OpenTelemetry exporter's settings from the server's config and the
// OpenTelemetry SDK environment variables (opentelemetry.io/docs/specs/otel/configuration/
// sdk-environment-variables, and the OTLP exporter's), so a deployment that configures its
// collector through OTEL_* reaches it as it would with Triton's opentelemetry-cpp exporter.
#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tessera/frontend/trace_settings.h"

namespace tessera::frontend {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = absl::ascii_tolower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// %XX escapes decoded (W3C Baggage's value encoding, which these lists use).
std::optional<std::string> PercentDecode(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;  // a '%' needs two hex digits after it
    const int high = HexValue(text[i + 1]), low = HexValue(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

// "key1=value1,key2=value2" (OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS).
StatusOr<Pairs> ParseKeyValueList(const char* variable, absl::string_view text) {
  Pairs pairs;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    const size_t equals = item.find('=');
    std::optional<std::string> value;
    if (equals != absl::string_view::npos) {
      value = PercentDecode(absl::StripAsciiWhitespace(item.substr(equals + 1)));
    }
    const absl::string_view key =
        absl::StripAsciiWhitespace(item.substr(0, std::min(equals, item.size())));
    if (equals == absl::string_view::npos || key.empty() || !value) {
      return absl::InvalidArgumentError(
          absl::StrCat(variable, ": \"", item,
                       "\" is not <key>=<value> (values percent-encoded), in \"", text, "\""));
    }
    pairs.emplace_back(std::string(key), *std::move(value));
  }
  return pairs;
}

// `pair` set in `pairs`, replacing the value of a key already there.
void Put(Pairs& pairs, std::pair<std::string, std::string> pair) {
  for (auto& [key, value] : pairs) {
    if (key == pair.first) {
      value = std::move(pair.second);
      return;
    }
  }
  pairs.push_back(std::move(pair));
}

struct Source {
  const std::function<const char*(const char*)>& getenv;
  // The first of `names` that is set and not empty, with its name.
  std::optional<std::pair<const char*, std::string>> First(
      std::initializer_list<const char*> names) const {
    for (const char* name : names) {
      const char* value = getenv(name);
      if (value != nullptr && *value != '\0') return std::pair{name, std::string(value)};
    }
    return std::nullopt;
  }
};

// A positive integer from the config, else from the environment, else `*out` as it is.
Status PositiveSetting(const std::optional<int64_t>& configured, const Source& env,
                       std::initializer_list<const char*> variables, int64_t* out) {
  if (configured) {
    *out = *configured;
    return absl::OkStatus();
  }
  auto set = env.First(variables);
  if (!set) return absl::OkStatus();
  const std::string& text = set->second;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(set->first, ": expected a positive integer, got \"", text, "\""));
  }
  *out = value;
  return absl::OkStatus();
}

}  // namespace

StatusOr<OtlpExportSettings> ResolveOtlpExport(
    const ServerConfig::OtelTrace& otel, const std::function<const char*(const char*)>& getenv) {
  const Source env{getenv};
  OtlpExportSettings settings;

  std::string url_from = "trace opentelemetry url";
  if (otel.url) {
    settings.url = *otel.url;
  } else if (auto traces = env.First({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"})) {
    settings.url = traces->second;  // the signal's own endpoint is used as it is
    url_from = traces->first;
  } else if (auto base = env.First({"OTEL_EXPORTER_OTLP_ENDPOINT"})) {
    // The base endpoint gets the signal's path appended (the OTLP exporter specification).
    absl::string_view root = base->second;
    absl::ConsumeSuffix(&root, "/");
    settings.url = absl::StrCat(root, "/v1/traces");
    url_from = base->first;
  }
  if (!absl::StartsWith(settings.url, "http://") && !absl::StartsWith(settings.url, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat(url_from, " \"", settings.url,
                     "\": expected an http:// or https:// URL (OTLP/HTTP), such as "
                     "http://localhost:4318/v1/traces"));
  }

  // Resource: the default service name, then the environment's attributes, then the config's.
  settings.resource.emplace_back("service.name", "tessera");
  if (auto attributes = env.First({"OTEL_RESOURCE_ATTRIBUTES"})) {
    TESSERA_ASSIGN_OR_RETURN(Pairs pairs, ParseKeyValueList(attributes->first, attributes->second));
    for (auto& pair : pairs) Put(settings.resource, std::move(pair));
  }
  if (auto service = env.First({"OTEL_SERVICE_NAME"})) {
    Put(settings.resource, {"service.name", service->second});
  }
  for (const auto& pair : otel.resource) Put(settings.resource, pair);

  if (auto headers =
          env.First({"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"})) {
    TESSERA_ASSIGN_OR_RETURN(Pairs pairs, ParseKeyValueList(headers->first, headers->second));
    for (auto& pair : pairs) Put(settings.headers, std::move(pair));
  }
  for (const auto& pair : otel.headers) Put(settings.headers, pair);
  for (const auto& [name, value] : settings.headers) {
    const bool bad = name.find_first_of(":\r\n") != std::string::npos ||
                     value.find_first_of("\r\n") != std::string::npos;
    if (bad) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trace opentelemetry header \"", name,
          "\": a header name may not hold ':' and neither name nor value a line break"));
    }
  }

  TESSERA_RETURN_IF_ERROR(PositiveSetting(otel.bsp_max_queue_size, env, {"OTEL_BSP_MAX_QUEUE_SIZE"},
                                          &settings.max_queue_size));
  TESSERA_RETURN_IF_ERROR(PositiveSetting(
      otel.bsp_schedule_delay_ms, env, {"OTEL_BSP_SCHEDULE_DELAY"}, &settings.schedule_delay_ms));
  TESSERA_RETURN_IF_ERROR(PositiveSetting(otel.bsp_max_export_batch_size, env,
                                          {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE"},
                                          &settings.max_export_batch_size));
  TESSERA_RETURN_IF_ERROR(PositiveSetting(
      std::nullopt, env, {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"},
      &settings.timeout_ms));
  const bool batch_given =
      otel.bsp_max_export_batch_size || env.First({"OTEL_BSP_MAX_EXPORT_BATCH_SIZE"});
  if (!batch_given) {
    // Only a smaller queue was asked for: the default batch shrinks to fit it.
    settings.max_export_batch_size =
        std::min(settings.max_export_batch_size, settings.max_queue_size);
  }
  if (settings.max_export_batch_size > settings.max_queue_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trace opentelemetry bsp_max_export_batch_size (", settings.max_export_batch_size,
        ") must not be larger than bsp_max_queue_size (", settings.max_queue_size,
        "): a batch is taken from the queue"));
  }
  return settings;
}

}  // namespace tessera::frontend
