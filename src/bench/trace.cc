#include "trace.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string_view>
#include <tuple>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tessera::bench {
namespace {

std::string_view Strip(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

Status LineError(const std::string& source, int line, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(source, ":", line, ": ", absl::string_view(what.data(), what.size())));
}

bool ParseDouble(std::string_view text, double* out) {
  text = Strip(text);
  if (text.empty()) return false;
  // std::from_chars for double is in GCC 11+; fall back to strtod on a terminated copy for safety.
  std::string copy(text);
  char* end = nullptr;
  *out = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size() && std::isfinite(*out);
}

bool ParseInt(std::string_view text, int64_t* out) {
  text = Strip(text);
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

std::vector<std::string_view> SplitLines(const std::string& text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (end == text.size()) break;
    start = end + 1;
  }
  return lines;
}

std::vector<std::string_view> SplitCommas(std::string_view line) {
  std::vector<std::string_view> out;
  for (absl::string_view f : absl::StrSplit(absl::string_view(line.data(), line.size()), ',')) {
    out.emplace_back(f.data(), f.size());
  }
  return out;
}

}  // namespace

StatusOr<Trace> ParseTrace(const std::string& text, const std::string& source) {
  Trace trace;
  bool header_seen = false;
  int line_no = 0;
  for (std::string_view line : SplitLines(text)) {
    ++line_no;
    std::string_view stripped = Strip(line);
    if (stripped.empty() || stripped.front() == '#') continue;
    std::vector<std::string_view> fields = SplitCommas(stripped);
    if (!header_seen) {
      if (fields.size() != 2 || Strip(fields[0]) != "time_s" || Strip(fields[1]) != "model") {
        return LineError(source, line_no, "expected the header line \"time_s,model\"");
      }
      header_seen = true;
      continue;
    }
    if (fields.size() != 2) {
      return LineError(source, line_no, "expected 2 fields \"time_s,model\"");
    }
    double t;
    if (!ParseDouble(fields[0], &t) || t < 0) {
      return LineError(source, line_no,
                       absl::StrCat("time_s must be a number >= 0, got \"",
                                    absl::string_view(fields[0].data(), fields[0].size()), "\""));
    }
    std::string model(Strip(fields[1]));
    if (model.empty()) return LineError(source, line_no, "empty model name");
    trace[model].push_back(static_cast<int64_t>(std::llround(t * 1e9)));
  }
  if (!header_seen) return LineError(source, 1, "empty trace (no \"time_s,model\" header)");
  for (auto& [model, offsets] : trace) std::sort(offsets.begin(), offsets.end());
  return trace;
}

StatusOr<Trace> LoadTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open trace file ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseTrace(buffer.str(), path);
}

std::string FormatTrace(const Trace& trace) {
  std::vector<std::pair<int64_t, const std::string*>> rows;
  for (const auto& [model, offsets] : trace) {
    for (int64_t t : offsets) rows.emplace_back(t, &model);
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first, *a.second) < std::tie(b.first, *b.second);
  });
  std::string out = "time_s,model\n";
  for (const auto& [t, model] : rows) {
    // Nanosecond resolution, so a parse of this text gives back the same offsets.
    out += fmt::format("{}.{:09d},{}\n", t / 1000000000, t % 1000000000, *model);
  }
  return out;
}

std::vector<int64_t> ReplayOffsets(const Trace& trace, const std::string& model, double speedup,
                                   double duration_s) {
  std::vector<int64_t> out;
  auto it = trace.find(model);
  if (it == trace.end() || speedup <= 0) return out;
  const double limit_ns = duration_s * 1e9;
  for (int64_t t : it->second) {
    double scaled = speedup == 1.0 ? static_cast<double>(t) : t / speedup;
    if (scaled >= limit_ns) break;
    out.push_back(speedup == 1.0 ? t : static_cast<int64_t>(std::llround(scaled)));
  }
  return out;
}

StatusOr<AzureConvertResult> ConvertAzureFunctionsTrace(const std::string& csv_text,
                                                        const std::string& source,
                                                        const AzureConvertOptions& options) {
  if (options.models.empty()) return absl::InvalidArgumentError("no models to map functions onto");
  for (const auto& [name, weight] : options.models) {
    if (name.empty() || !(weight > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model weights must be > 0 with a name, got \"", name, "\":", weight));
    }
  }
  if (options.first_minute < 1 || options.minutes < 1 ||
      options.first_minute + options.minutes - 1 > 1440) {
    return absl::InvalidArgumentError(absl::StrCat("minutes ", options.first_minute, "..",
                                                   options.first_minute + options.minutes - 1,
                                                   " are outside the trace's 1..1440"));
  }
  std::vector<std::string_view> lines = SplitLines(csv_text);
  if (lines.empty() || lines[0].empty()) return LineError(source, 1, "empty Azure trace");
  std::vector<std::string_view> header = SplitCommas(lines[0]);
  // Minute m is the column whose header is "m"; find the first one.
  int first_col = -1;
  for (size_t c = 0; c < header.size(); ++c) {
    if (Strip(header[c]) == "1") {
      first_col = static_cast<int>(c);
      break;
    }
  }
  if (first_col < 1 || Strip(header[first_col - 1]) != "Trigger") {
    return LineError(source, 1,
                     "not an Azure Functions invocation trace: expected the header "
                     "HashOwner,HashApp,HashFunction,Trigger,1,2,...,1440");
  }
  const int col0 = first_col + options.first_minute - 1;
  const int col_end = col0 + options.minutes;
  if (static_cast<int>(header.size()) < col_end) {
    return LineError(
        source, 1,
        absl::StrCat("the trace has ", header.size() - first_col, " minute columns; minutes up to ",
                     options.first_minute + options.minutes - 1, " were asked for"));
  }
  struct Function {
    int64_t total = 0;
    std::vector<int64_t> counts;
    int line = 0;
  };
  std::vector<Function> functions;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    std::vector<std::string_view> fields = SplitCommas(lines[i]);
    if (fields.size() != header.size()) {
      return LineError(source, static_cast<int>(i + 1),
                       absl::StrCat("expected ", header.size(), " fields, got ", fields.size()));
    }
    Function f;
    f.line = static_cast<int>(i + 1);
    for (int c = col0; c < col_end; ++c) {
      int64_t n;
      if (!ParseInt(fields[c], &n) || n < 0) {
        return LineError(
            source, f.line,
            absl::StrCat("minute ", c - first_col + 1, ": expected a count >= 0, got \"",
                         absl::string_view(fields[c].data(), fields[c].size()), "\""));
      }
      f.counts.push_back(n);
      f.total += n;
    }
    if (f.total > 0) functions.push_back(std::move(f));
  }
  // Busiest first; ties by line so the choice is deterministic.
  std::sort(functions.begin(), functions.end(), [](const Function& a, const Function& b) {
    return a.total != b.total ? a.total > b.total : a.line < b.line;
  });
  if (options.functions > 0 && static_cast<int>(functions.size()) > options.functions) {
    functions.resize(options.functions);
  }
  if (functions.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no invocations in the chosen minutes"));
  }
  AzureConvertResult result;
  result.functions_used = static_cast<int>(functions.size());
  for (const Function& f : functions) result.source_invocations += f.total;
  if (options.target_rate > 0) {
    result.scale = options.target_rate * 60.0 * options.minutes /
                   static_cast<double>(result.source_invocations);
  }
  // Weighted round-robin of functions onto models.
  double weight_sum = 0;
  for (const auto& m : options.models) weight_sum += m.second;
  std::vector<int> assigned(options.models.size(), 0);
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (size_t fi = 0; fi < functions.size(); ++fi) {
    size_t best = 0;
    double best_deficit = -1e300;
    for (size_t m = 0; m < options.models.size(); ++m) {
      double deficit =
          options.models[m].second / weight_sum * static_cast<double>(fi + 1) - assigned[m];
      if (deficit > best_deficit + 1e-12) {
        best_deficit = deficit;
        best = m;
      }
    }
    ++assigned[best];
    std::vector<int64_t>& out = result.trace[options.models[best].first];
    for (size_t minute = 0; minute < functions[fi].counts.size(); ++minute) {
      double expected = static_cast<double>(functions[fi].counts[minute]) * result.scale;
      // Random rounding keeps the expected count exact when scaling down.
      int64_t n = static_cast<int64_t>(std::floor(expected));
      if (unit(rng) < expected - static_cast<double>(n)) ++n;
      for (int64_t k = 0; k < n; ++k) {
        double t = (static_cast<double>(minute) + unit(rng)) * 60.0;
        out.push_back(static_cast<int64_t>(std::llround(t * 1e9)));
      }
    }
  }
  for (auto& [model, offsets] : result.trace) std::sort(offsets.begin(), offsets.end());
  return result;
}

}  // namespace tessera::bench
