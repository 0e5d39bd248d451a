#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report_internal.h"

namespace tessera::sim {
namespace {

ModelReport Summarise(ModelCounts c, double window_s) {
  ModelReport r;
  r.model = c.model;
  r.slo_ms = c.slo_ms;
  r.arrived = c.arrived;
  r.completed = c.completed;
  r.good = c.good;
  r.late = c.late;
  r.dropped = c.dropped;
  r.unserved = c.unserved;
  r.excluded = c.excluded;
  r.offered_rps = c.arrived / window_s;
  r.throughput_rps = c.completed / window_s;
  r.goodput_rps = c.good / window_s;
  std::sort(c.latencies_ms.begin(), c.latencies_ms.end());
  r.p50_ms = NearestRank(c.latencies_ms, 0.50);
  r.p99_ms = NearestRank(c.latencies_ms, 0.99);
  r.max_ms = c.latencies_ms.empty() ? 0 : c.latencies_ms.back();
  const int64_t counted = c.arrived - c.excluded;
  r.violation_pct = counted > 0 ? 100.0 * (c.late + c.dropped + c.unserved) / counted : 0;
  return r;
}

// JSON numbers with fixed precision: the report must be byte-identical for a seed.
std::string Num(double value) { return absl::StrFormat("%.4f", value); }

std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string ModelJson(const ModelReport& m) {
  return absl::StrCat(
      "{\"model\": ", Quote(m.model), ", \"slo_ms\": ", Num(m.slo_ms), ", \"arrived\": ", m.arrived,
      ", \"completed\": ", m.completed, ", \"good\": ", m.good, ", \"late\": ", m.late,
      ", \"dropped\": ", m.dropped, ", \"unserved\": ", m.unserved, ", \"excluded\": ", m.excluded,
      ", \"offered_rps\": ", Num(m.offered_rps), ", \"throughput_rps\": ", Num(m.throughput_rps),
      ", \"goodput_rps\": ", Num(m.goodput_rps), ", \"p50_ms\": ", Num(m.p50_ms),
      ", \"p99_ms\": ", Num(m.p99_ms), ", \"max_ms\": ", Num(m.max_ms),
      ", \"violation_pct\": ", Num(m.violation_pct), "}");
}

std::string ModelLine(const ModelReport& m, bool total) {
  const std::string slo = total ? "-" : absl::StrFormat("%.1f", m.slo_ms);
  return absl::StrFormat("%-16s %7s %9.1f %9.1f %9.1f %8.2f %8.2f %8.2f %7.3f %7d\n", m.model, slo,
                         m.offered_rps, m.throughput_rps, m.goodput_rps, m.p50_ms, m.p99_ms,
                         m.max_ms, m.violation_pct, m.dropped);
}

}  // namespace

double NearestRank(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(q * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

void FillModelReports(std::vector<ModelCounts> counts, SimReport& report) {
  ModelCounts total;
  total.model = "total";
  for (ModelCounts& c : counts) {
    total.arrived += c.arrived;
    total.completed += c.completed;
    total.good += c.good;
    total.late += c.late;
    total.dropped += c.dropped;
    total.unserved += c.unserved;
    total.excluded += c.excluded;
    total.latencies_ms.insert(total.latencies_ms.end(), c.latencies_ms.begin(),
                              c.latencies_ms.end());
    report.models.push_back(Summarise(std::move(c), report.window_s));
  }
  report.total = Summarise(std::move(total), report.window_s);
}

std::string ReportToText(const SimReport& report) {
  std::string out =
      absl::StrFormat("simulated %.1f s after warm-up, seed %d, %d batches, %d re-plans\n",
                      report.window_s, report.seed, report.batches, report.replans);
  absl::StrAppendFormat(&out, "%-16s %7s %9s %9s %9s %8s %8s %8s %7s %7s\n", "model", "slo_ms",
                        "offered", "thruput", "goodput", "p50_ms", "p99_ms", "max_ms", "viol%",
                        "dropped");
  for (const ModelReport& m : report.models) absl::StrAppend(&out, ModelLine(m, false));
  absl::StrAppend(&out, ModelLine(report.total, true));
  if (!report.epochs.empty()) {
    absl::StrAppendFormat(&out, "%9s %9s %5s %6s %9s %11s  %s\n", "epoch_s", "switch_s", "gpus",
                          "part%", "arrived", "violations", "action");
    for (const EpochRecord& e : report.epochs) {
      absl::StrAppendFormat(&out, "%9.1f %9.1f %5d %6d %9d %11d  %s%s\n", e.time_s, e.switch_s,
                            e.gpus_used, e.partition_sum, e.arrived, e.violations, e.action,
                            e.schedulable ? "" : " (unschedulable)");
    }
  }
  return out;
}

std::string ReportToJson(const SimReport& report) {
  std::string out = absl::StrCat("{\"window_s\": ", Num(report.window_s),
                                 ", \"seed\": ", report.seed, ", \"batches\": ", report.batches,
                                 ", \"replans\": ", report.replans, ", \"models\": [");
  for (size_t i = 0; i < report.models.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", ModelJson(report.models[i]));
  }
  absl::StrAppend(&out, "], \"total\": ", ModelJson(report.total), ", \"epochs\": [");
  for (size_t i = 0; i < report.epochs.size(); ++i) {
    const EpochRecord& e = report.epochs[i];
    absl::StrAppend(&out, i ? ", " : "", "{\"time_s\": ", Num(e.time_s),
                    ", \"action\": ", Quote(e.action), ", \"switch_s\": ", Num(e.switch_s),
                    ", \"gpus_used\": ", e.gpus_used, ", \"partition_sum\": ", e.partition_sum,
                    ", \"schedulable\": ", e.schedulable ? "true" : "false",
                    ", \"arrived\": ", e.arrived, ", \"violations\": ", e.violations, "}");
  }
  absl::StrAppend(&out, "]}\n");
  return out;
}

}  // namespace tessera::sim
