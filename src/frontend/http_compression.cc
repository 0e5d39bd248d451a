#include "http_compression.h"

#include <zlib.h>

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tessera::frontend {
namespace {

// zlib's windowBits: 15 (32 KiB window) in the zlib format, +16 for a gzip header.
int WindowBits(HttpEncoding encoding) { return encoding == HttpEncoding::kGzip ? 15 + 16 : 15; }

}  // namespace

const char* EncodingName(HttpEncoding encoding) {
  switch (encoding) {
    case HttpEncoding::kGzip:
      return "gzip";
    case HttpEncoding::kDeflate:
      return "deflate";
    case HttpEncoding::kIdentity:
      break;
  }
  return "identity";
}

StatusOr<HttpEncoding> ParseContentEncoding(const char* header) {
  if (header == nullptr) return HttpEncoding::kIdentity;
  const std::string value = absl::AsciiStrToLower(absl::StripAsciiWhitespace(header));
  if (value.empty() || value == "identity") return HttpEncoding::kIdentity;
  if (value == "gzip") return HttpEncoding::kGzip;
  if (value == "deflate") return HttpEncoding::kDeflate;
  return absl::UnimplementedError(
      absl::StrCat("Content-Encoding '", header,
                   "' is not supported; send the body as gzip, deflate or "
                   "uncompressed"));
}

HttpEncoding ChooseResponseEncoding(const char* accept_encoding) {
  if (accept_encoding == nullptr) return HttpEncoding::kIdentity;
  for (absl::string_view entry : absl::StrSplit(accept_encoding, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(entry, ';');
    const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(parts[0]));
    const bool refused = parts.size() > 1 && absl::StripAsciiWhitespace(parts[1]) == "q=0";
    if (refused) continue;
    if (name == "gzip") return HttpEncoding::kGzip;
    if (name == "deflate") return HttpEncoding::kDeflate;
  }
  return HttpEncoding::kIdentity;
}

StatusOr<std::string> Inflate(std::string_view body, HttpEncoding encoding, int64_t max_bytes,
                              InflateHold* hold, std::string_view subject,
                              std::string_view header) {
  if (encoding == HttpEncoding::kIdentity) return std::string(body);
  z_stream stream{};
  if (inflateInit2(&stream, WindowBits(encoding)) != Z_OK) {
    return absl::InternalError("zlib: cannot start inflating");
  }
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  stream.avail_in = static_cast<uInt>(body.size());
  std::string out;
  int code = Z_OK;
  bool over_budget = false;
  while (code == Z_OK) {
    if (static_cast<int64_t>(out.size()) > max_bytes) break;
    const size_t used = out.size();
    // Doubling, but never past one byte over the limit: that byte tells a bomb from a body of
    // exactly max_bytes. The budget is asked before the memory is taken, for the old buffer and
    // the new one, which both live while it is copied.
    const size_t room =
        std::min<size_t>(std::max<size_t>(2 * used, 65536), static_cast<size_t>(max_bytes) + 1);
    if (hold != nullptr && !hold->GrowTo(static_cast<int64_t>(used + room))) {
      over_budget = true;
      break;
    }
    out.resize(room);
    stream.next_out = reinterpret_cast<Bytef*>(out.data() + used);
    stream.avail_out = static_cast<uInt>(out.size() - used);
    code = inflate(&stream, Z_NO_FLUSH);
    out.resize(out.size() - stream.avail_out);
    if (code == Z_BUF_ERROR && stream.avail_in > 0) code = Z_OK;  // more room needed
  }
  inflateEnd(&stream);
  const std::string what(subject.data(), subject.size());
  if (over_budget) {
    const InflateBudget* budget = hold->budget();
    return absl::UnavailableError(
        absl::StrCat("the server is inflating other compressed requests; with this ", what,
                     " they would take ", "more than its ", budget->limit(),
                     " bytes for them (grpc.max_inflating_bytes): retry, or "
                     "send it uncompressed"));
  }
  if (static_cast<int64_t>(out.size()) > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " inflates past the server's limit of ", max_bytes, " bytes"));
  }
  if (code != Z_STREAM_END) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is not valid ", EncodingName(encoding), " data (",
        std::string(header.data(), header.size()),
        "): ", stream.msg != nullptr ? stream.msg : "it ends before the compressed stream does"));
  }
  return out;
}

std::string Deflate(std::string_view body, HttpEncoding encoding) {
  if (encoding == HttpEncoding::kIdentity) return std::string(body);
  z_stream stream{};
  // Level 1: answers are compressed on the request's path; speed over the last few percent.
  deflateInit2(&stream, 1, Z_DEFLATED, WindowBits(encoding), 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&stream, body.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  stream.avail_in = static_cast<uInt>(body.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  deflate(&stream, Z_FINISH);  // deflateBound leaves room for all of it in one call
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

}  // namespace tessera::frontend
