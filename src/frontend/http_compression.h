// HTTP Content-Encoding for the KServe v2 HTTP endpoint: request bodies sent as gzip or deflate
// (tritonclient.http's request_compression_algorithm) are inflated, and answers are compressed
// for clients whose Accept-Encoding asks (response_compression_algorithm). zlib does the work.
// The gRPC endpoint inflates its compressed inference requests with the same Inflate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "inflate_budget.h"
#include "tessera/common/status.h"

namespace tessera::frontend {

enum class HttpEncoding { kIdentity, kGzip, kDeflate };  // deflate = the zlib format (RFC 9110)

// The Content-Encoding header's value (null: none). UNIMPLEMENTED naming any other encoding.
StatusOr<HttpEncoding> ParseContentEncoding(const char* header);

// The encoding to answer in for an Accept-Encoding header (null: none): the first of gzip and
// deflate it lists with a non-zero weight, identity otherwise.
HttpEncoding ChooseResponseEncoding(const char* accept_encoding);

// Inflates `body`. INVALID_ARGUMENT for bytes that are not valid `encoding` data;
// RESOURCE_EXHAUSTED once the inflated bytes pass `max_bytes`; UNAVAILABLE when `hold` (which then
// holds the output's memory until the caller drops it) finds its budget full. Errors call the
// data `subject` and name `header` as where the encoding came from.
StatusOr<std::string> Inflate(std::string_view body, HttpEncoding encoding, int64_t max_bytes,
                              InflateHold* hold = nullptr,
                              std::string_view subject = "request body",
                              std::string_view header = "Content-Encoding");

std::string Deflate(std::string_view body, HttpEncoding encoding);

const char* EncodingName(HttpEncoding encoding);

}  // namespace tessera::frontend
