#include "report.h"

#include <cmath>

#include "spdlog/fmt/fmt.h"

namespace tessera::bench {
namespace {

std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt::format("{:.6g}", v);
}

std::string NumList(const std::vector<double>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + Num(values[i]);
  return out + "]";
}

std::string SummaryJson(const Summary& s, const std::string& indent) {
  std::string errors = "{";
  bool first = true;
  for (const auto& [name, count] : s.errors) {
    errors += fmt::format("{}{}: {}", first ? "" : ", ", JsonQuote(name), count);
    first = false;
  }
  errors += "}";
  const LatencySummary& l = s.latency;
  std::string out;
  out += indent + "{\n";
  auto field = [&](const std::string& key, const std::string& value, bool last = false) {
    out += fmt::format("{}  {}: {}{}\n", indent, JsonQuote(key), value, last ? "" : ",");
  };
  field("model", JsonQuote(s.model));
  field("slo_ms", Num(s.slo_ms));
  field("window_s", Num(s.window_s));
  field("intended", std::to_string(s.intended));
  field("sent", std::to_string(s.sent));
  field("ok", std::to_string(s.ok));
  field("within_slo", std::to_string(s.within_slo));
  field("error_count", std::to_string(s.error_count));
  field("errors", errors);
  field("client_dropped", std::to_string(s.not_sent));
  field("unfinished", std::to_string(s.unfinished));
  field("late_sends", std::to_string(s.late_sends));
  field("intended_rate", Num(s.intended_rate));
  field("send_rate", Num(s.send_rate));
  field("throughput", Num(s.throughput));
  field("goodput", Num(s.goodput));
  field("slo_violation_pct", Num(s.violation_pct));
  field("latency_ms",
        fmt::format("{{\"count\": {}, \"mean\": {}, \"min\": {}, \"p50\": {}, \"p90\": {}, "
                    "\"p95\": {}, \"p99\": {}, \"p99.9\": {}, \"max\": {}}}",
                    l.count, Num(l.mean_ms), Num(l.min_ms), Num(l.p50_ms), Num(l.p90_ms),
                    Num(l.p95_ms), Num(l.p99_ms), Num(l.p999_ms), Num(l.max_ms)));
  field("send_lag_ms", fmt::format("{{\"p99\": {}, \"max\": {}}}", Num(s.send_lag_p99_ms),
                                   Num(s.send_lag_max_ms)));
  field("stability",
        fmt::format("{{\"subwindow_throughput\": {}, \"subwindow_p99_ms\": {}, \"stable\": {}}}",
                    NumList(s.subwindow_throughput), NumList(s.subwindow_p99_ms),
                    s.stable ? "true" : "false"),
        true);
  out += indent + "}";
  return out;
}

std::string ErrorsText(const std::map<std::string, int64_t>& errors) {
  std::string out;
  for (const auto& [name, count] : errors) {
    out += fmt::format("{}{} {}", out.empty() ? "" : ",", name, count);
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string JsonQuote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string ReportJson(const ReportHeader& h, const std::vector<RunReport>& runs,
                       const PeakResult* peak) {
  std::string out = "{\n";
  out += "  \"tool\": \"tessera-bench\",\n";
  out += fmt::format("  \"server\": {},\n", JsonQuote(h.server));
  out += fmt::format("  \"mode\": {},\n", JsonQuote(h.mode));
  out += fmt::format("  \"scenario\": {},\n", JsonQuote(h.scenario));
  out += fmt::format("  \"started_at\": {},\n", JsonQuote(h.started_at));
  out += fmt::format("  \"commit\": {},\n", JsonQuote(h.commit));
  out += fmt::format("  \"warmup_s\": {},\n  \"duration_s\": {},\n  \"seed\": {},\n",
                     Num(h.warmup_s), Num(h.duration_s), h.seed);
  out += "  \"models\": [";
  for (size_t i = 0; i < h.models.size(); ++i) {
    out +=
        fmt::format("{}{{\"name\": {}, \"arrival\": {}, \"request_bytes\": {}}}", i ? ", " : "",
                    JsonQuote(h.models[i]), JsonQuote(i < h.arrivals.size() ? h.arrivals[i] : ""),
                    i < h.request_bytes.size() ? h.request_bytes[i] : 0);
  }
  out += "],\n  \"runs\": [\n";
  for (size_t r = 0; r < runs.size(); ++r) {
    const RunReport& run = runs[r];
    out += "    {\n";
    out += fmt::format("      \"label\": {},\n", JsonQuote(run.label));
    out += fmt::format("      \"rate_factor\": {},\n", Num(run.rate_factor));
    out += fmt::format("      \"concurrency\": {},\n", run.concurrency);
    out += fmt::format("      \"wall_s\": {},\n", Num(run.wall_s));
    out += "      \"error_examples\": [";
    for (size_t i = 0; i < run.error_examples.size(); ++i) {
      const ErrorExample& e = run.error_examples[i];
      out += fmt::format("{}{{\"model\": {}, \"status\": {}, \"message\": {}}}", i ? ", " : "",
                         JsonQuote(e.model), JsonQuote(e.status), JsonQuote(e.message));
    }
    out += "],\n      \"models\": [\n";
    const size_t n = run.summaries.empty() ? 0 : run.summaries.size() - 1;
    for (size_t i = 0; i < n; ++i) {
      out += SummaryJson(run.summaries[i], "        ") + (i + 1 < n ? ",\n" : "\n");
    }
    out += "      ],\n      \"overall\":\n";
    out += (n < run.summaries.size() ? SummaryJson(run.summaries[n], "        ") : "        null");
    out += fmt::format("\n    }}{}\n", r + 1 < runs.size() ? "," : "");
  }
  out += "  ]";
  if (peak) {
    out += ",\n  \"peak_search\": {\n";
    out += fmt::format("    \"peak_factor\": {},\n    \"failing_factor\": {},\n",
                       Num(peak->peak_factor), Num(peak->failing_factor));
    out += "    \"probes\": [";
    for (size_t i = 0; i < peak->probes.size(); ++i) {
      const PeakProbe& p = peak->probes[i];
      out += fmt::format(
          "{}\n      {{\"factor\": {}, \"violation_pct\": {}, \"median_pct\": {}, "
          "\"pass\": {}}}",
          i ? "," : "", Num(p.factor), NumList(p.violation_pct), Num(p.median_pct),
          p.pass ? "true" : "false");
    }
    out += "\n    ]\n  }";
  }
  out += "\n}\n";
  return out;
}

std::string ReportCsv(const std::vector<RunReport>& runs) {
  std::string out =
      "run,rate_factor,concurrency,model,slo_ms,window_s,intended,sent,ok,within_slo,error_count,"
      "errors,client_dropped,unfinished,late_sends,intended_rate,send_rate,throughput,goodput,"
      "slo_violation_pct,p50_ms,p90_ms,p95_ms,p99_ms,p99.9_ms,max_ms,mean_ms,stable\n";
  for (const RunReport& run : runs) {
    for (const Summary& s : run.summaries) {
      const LatencySummary& l = s.latency;
      out += fmt::format(
          "\"{}\",{},{},{},{},{},{},{},{},{},{},\"{}\",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}"
          ","
          "{}\n",
          run.label, Num(run.rate_factor), run.concurrency, s.model, Num(s.slo_ms), Num(s.window_s),
          s.intended, s.sent, s.ok, s.within_slo, s.error_count, ErrorsText(s.errors), s.not_sent,
          s.unfinished, s.late_sends, Num(s.intended_rate), Num(s.send_rate), Num(s.throughput),
          Num(s.goodput), Num(s.violation_pct), Num(l.p50_ms), Num(l.p90_ms), Num(l.p95_ms),
          Num(l.p99_ms), Num(l.p999_ms), Num(l.max_ms), Num(l.mean_ms), s.stable ? 1 : 0);
    }
  }
  return out;
}

std::string TimelineCsv(const std::vector<TimelinePoint>& points) {
  std::string out = "second,model,sent,ok,within_slo,errors,p99_ms\n";
  for (const TimelinePoint& p : points) {
    out += fmt::format("{},{},{},{},{},{},{}\n", p.second, p.model, p.sent, p.ok, p.within_slo,
                       p.errors, Num(p.p99_ms));
  }
  return out;
}

std::string OutcomesCsv(const std::vector<Outcome>& outcomes,
                        const std::vector<std::string>& models) {
  std::string out = "model,scheduled_s,sent_s,latency_ms,status\n";
  for (const Outcome& o : outcomes) {
    const bool answered = o.sent_ns >= 0 && o.done_ns >= 0;
    out += fmt::format("{},{:.6f},{},{},{}\n", models.at(o.model), o.scheduled_ns * 1e-9,
                       o.sent_ns >= 0 ? fmt::format("{:.6f}", o.sent_ns * 1e-9) : "",
                       answered ? fmt::format("{:.3f}", o.latency_ns() * 1e-6) : "",
                       OutcomeCodeName(o.code));
  }
  return out;
}

std::string ReportTable(const RunReport& run) {
  std::string out = fmt::format("== {} ({:.1f} s wall)\n", run.label, run.wall_s);
  out += fmt::format(
      "{:<14} {:>7} {:>9} {:>9} {:>9} {:>9} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} "
      "{:>6} {}\n",
      "model", "slo_ms", "target/s", "sent/s", "thru/s", "good/s", "viol%", "p50ms", "p90ms",
      "p99ms", "p99.9ms", "maxms", "late", "errors");
  for (const Summary& s : run.summaries) {
    const LatencySummary& l = s.latency;
    std::string errors = ErrorsText(s.errors);
    if (s.not_sent) errors += fmt::format(" CLIENT_DROPPED {}", s.not_sent);
    if (s.unfinished) errors += fmt::format(" UNFINISHED {}", s.unfinished);
    out += fmt::format(
        "{:<14} {:>7} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>7.2f} {:>8.3f} "
        "{:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f} {:>6} {}\n",
        s.model, s.slo_ms > 0 ? fmt::format("{:g}", s.slo_ms) : "-", s.intended_rate, s.send_rate,
        s.throughput, s.goodput, s.violation_pct, l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms,
        s.late_sends, errors);
  }
  if (!run.error_examples.empty()) {
    out += "ERRORS (first message per model and status):\n";
    for (const ErrorExample& e : run.error_examples) {
      out += fmt::format("  {} {}: {}\n", e.model, e.status, e.message);
    }
  }
  return out;
}

}  // namespace tessera::bench
