// tessera-bench's reports: a JSON document, a CSV table (one row per run and model), a per-second
// timeline CSV, a per-request CSV (for latency CDFs), and the human-readable table on stdout.
// Field names and units are listed in docs/bench.md; every duration field says its unit in its
// name (_ms, _s), every rate is per second.
//
// Thread-safety: plain functions and values.
#pragma once

#include <string>
#include <vector>

#include "load_client.h"
#include "peak_search.h"
#include "stats.h"

namespace tessera::bench {

// One measured run: a load level and its summaries (per model, then "overall").
struct RunReport {
  std::string label;       // "rate x1.000", "concurrency 4", "peak probe x1.5 #2"
  double rate_factor = 0;  // open loop: multiplier of the scenario's rates
  int concurrency = 0;     // closed loop: requests in flight per model
  double wall_s = 0;
  std::vector<Summary> summaries;
  std::vector<ErrorExample> error_examples;
};

struct ReportHeader {
  std::string server;
  std::string mode;
  std::string scenario;    // file, or "flags"
  std::string started_at;  // ISO 8601 UTC
  std::string commit;      // may be empty
  double warmup_s = 0;
  double duration_s = 0;
  uint64_t seed = 0;
  std::vector<std::string> models;
  std::vector<std::string> arrivals;
  std::vector<int64_t> request_bytes;
};

std::string ReportJson(const ReportHeader& header, const std::vector<RunReport>& runs,
                       const PeakResult* peak);
std::string ReportCsv(const std::vector<RunReport>& runs);
std::string TimelineCsv(const std::vector<TimelinePoint>& points);
// model,scheduled_s,sent_s,latency_ms,status — every request of a run, in schedule order.
std::string OutcomesCsv(const std::vector<Outcome>& outcomes,
                        const std::vector<std::string>& models);
// The table printed after each run, with an ERRORS block when any request failed.
std::string ReportTable(const RunReport& run);

// JSON string literal of `text` (quotes included).
std::string JsonQuote(const std::string& text);

}  // namespace tessera::bench
