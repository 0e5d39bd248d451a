// Request traces for replay, and the converter from the Azure Functions invocation trace.
//
// Tessera trace CSV (the replay format; docs/bench.md):
//   time_s,model            header line (required)
//   0.0125,mlp              one request: seconds from the trace start, model name
// Lines may be in any order; blank lines and lines starting with '#' are ignored. Replay sends each
// model's requests at exactly these offsets (divided by `speedup`), which makes it deterministic.
//
// Azure Functions 2019 trace (invocations_per_function_md.anon.dNN.csv, used by Clockwork and by
// seed 004 §5.3.2): header HashOwner,HashApp,HashFunction,Trigger,1,2,...,1440; each row one
// function's invocation count per minute of a day. The converter keeps the `functions` busiest
// functions over the chosen minutes, maps them onto models by weight (seed 004 uses 4:4:1), scales
// the counts to a target mean rate, and spreads each minute's invocations uniformly at random in
// that minute (seeded).
//
// Thread-safety: plain functions and values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/common/status.h"

namespace tessera::bench {

// Per model: send offsets in ns from the trace start, ascending.
using Trace = std::map<std::string, std::vector<int64_t>>;

// Parses a Tessera trace CSV (`source` names it in errors: "<source>:<line>: ...").
StatusOr<Trace> ParseTrace(const std::string& text, const std::string& source);
StatusOr<Trace> LoadTrace(const std::string& path);
// Writes `trace` as Tessera trace CSV, rows sorted by time (ties by model name).
std::string FormatTrace(const Trace& trace);

// Offsets of `model` in `trace` divided by `speedup` (> 0), keeping those < duration_s. An absent
// model yields an empty list.
std::vector<int64_t> ReplayOffsets(const Trace& trace, const std::string& model, double speedup,
                                   double duration_s);

struct AzureConvertOptions {
  int first_minute = 1;    // first minute column used (1-based, as in the CSV header)
  int minutes = 60;        // number of minute columns used
  int functions = 0;       // busiest functions kept; 0 = all with at least one invocation
  double target_rate = 0;  // mean requests/s over all models after scaling; 0 = keep counts
  uint64_t seed = 1;
  // Models and their weights: function i (busiest first) goes to the model whose share of
  // functions so far is furthest below its weight (a deterministic weighted round-robin).
  std::vector<std::pair<std::string, double>> models;
};

struct AzureConvertResult {
  Trace trace;
  int64_t source_invocations = 0;  // invocations of the kept functions in the chosen minutes
  double scale = 1;                // factor applied to the counts
  int functions_used = 0;
};

StatusOr<AzureConvertResult> ConvertAzureFunctionsTrace(const std::string& csv_text,
                                                        const std::string& source,
                                                        const AzureConvertOptions& options);

}  // namespace tessera::bench
