// tessera-bench: open- and closed-loop load generator for KServe v2 / Triton gRPC servers.
// Usage and formats: docs/bench.md. Exit codes: 0 done, 1 bad input or setup error (message on
// stderr), 3 with --fail-on-error when any request failed; CLI11 parse errors use its own codes.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "arrival.h"
#include "load_client.h"
#include "peak_search.h"
#include "report.h"
#include "scenario.h"
#include "tessera/common/clock.h"
#include "tessera/common/yaml_util.h"
#include "trace.h"
#include "tessera/common/mutex_mode.h"

namespace tessera::bench {
namespace {

struct Flags {
  std::string scenario_path;
  std::string server;
  tessera::bench::ClientTls tls;
  std::vector<std::string> models;
  double rate = -1;
  std::string arrival = "poisson";
  double slo_ms = 0;
  int64_t batch_size = 1;
  std::string input = "random";
  std::string trace;
  std::string concurrency_range;
  double warmup_s = -1, duration_s = -1, drain_s = -1, request_timeout_s = -1;
  int64_t seed = -1;
  int channels = 0, max_in_flight = 0;
  std::string json_path, csv_path, timeline_path, outcomes_path, commit;
  std::string progress = "auto";
  bool fail_on_error = false;
  // Peak search.
  bool peak = false;
  int peak_repeats = 3;
  double peak_tolerance = 0.05, peak_limit_pct = 1, peak_start = 1;
  // Azure trace conversion.
  std::string azure_in, trace_out, azure_models = "";
  int azure_first_minute = 1, azure_minutes = 60, azure_functions = 0;
  double azure_rate = 0;
};

int Fail(const Status& status) {
  std::cerr << "tessera-bench: error: " << status.message() << "\n";
  return 1;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  out << text;
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

std::string NowIso() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

StatusOr<std::vector<std::pair<std::string, double>>> ParseWeights(const std::string& text) {
  std::vector<std::pair<std::string, double>> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(part, ':');
    double w = 1;
    if (kv.size() > 2 || (kv.size() == 2 && !absl::SimpleAtod(kv[1], &w))) {
      return absl::InvalidArgumentError(
          absl::StrCat("--azure-models: expected name[:weight],..., got \"", part, "\""));
    }
    out.emplace_back(kv[0], w);
  }
  if (out.empty()) return absl::InvalidArgumentError("--azure-models: no models given");
  return out;
}

int ConvertAzure(const Flags& f) {
  if (f.trace_out.empty()) return Fail(absl::InvalidArgumentError("--trace-out is required"));
  StatusOr<std::string> text = yaml::ReadFileToString(f.azure_in);
  if (!text.ok()) return Fail(text.status());
  AzureConvertOptions options;
  options.first_minute = f.azure_first_minute;
  options.minutes = f.azure_minutes;
  options.functions = f.azure_functions;
  options.target_rate = f.azure_rate;
  options.seed = f.seed >= 0 ? static_cast<uint64_t>(f.seed) : 1;
  StatusOr<std::vector<std::pair<std::string, double>>> weights = ParseWeights(f.azure_models);
  if (!weights.ok()) return Fail(weights.status());
  options.models = *weights;
  StatusOr<AzureConvertResult> result = ConvertAzureFunctionsTrace(*text, f.azure_in, options);
  if (!result.ok()) return Fail(result.status());
  if (Status s = WriteFile(f.trace_out, FormatTrace(result->trace)); !s.ok()) return Fail(s);
  int64_t total = 0;
  for (const auto& [model, offsets] : result->trace) total += offsets.size();
  std::cerr << fmt::format(
      "tessera-bench: {} functions, {} invocations scaled by {:.4g} -> {} "
      "requests over {} min ({:.1f}/s) written to {}\n",
      result->functions_used, result->source_invocations, result->scale, total, options.minutes,
      total / (60.0 * options.minutes), f.trace_out);
  return 0;
}

StatusOr<Scenario> BuildScenario(const Flags& f) {
  Scenario s;
  if (!f.scenario_path.empty()) {
    if (!f.models.empty()) {
      return absl::InvalidArgumentError("give either --scenario or --model, not both");
    }
    TESSERA_ASSIGN_OR_RETURN(s, LoadScenario(f.scenario_path));
  } else {
    if (f.models.empty()) {
      return absl::InvalidArgumentError("no load given: use --scenario FILE or --model NAME");
    }
    TESSERA_ASSIGN_OR_RETURN(ArrivalKind kind, ParseArrivalKind(f.arrival));
    if (f.concurrency_range.empty() && kind != ArrivalKind::kTrace && f.rate < 0) {
      return absl::InvalidArgumentError(
          "--model needs --rate (open loop), --trace, or --concurrency-range (closed loop)");
    }
    for (const std::string& name : f.models) {
      ModelLoad m;
      m.name = name;
      m.arrival = kind;
      m.rate = RateSchedule::Constant(std::max(0.0, f.rate));
      m.slo_ms = f.slo_ms;
      m.batch_size = f.batch_size;
      m.trace_path = f.trace;
      m.fill = f.input == "zeros" ? InputFill::kZeros : InputFill::kRandom;
      s.models.push_back(std::move(m));
    }
  }
  if (!f.server.empty()) s.server = f.server;
  s.tls = f.tls;
  s.tls.enabled = f.tls.enabled || !f.tls.root_certs.empty() || !f.tls.private_key.empty();
  if (f.warmup_s >= 0) s.warmup_s = f.warmup_s;
  if (f.duration_s > 0) s.duration_s = f.duration_s;
  if (f.drain_s >= 0) s.drain_s = f.drain_s;
  if (f.request_timeout_s > 0) s.request_timeout_s = f.request_timeout_s;
  if (f.seed >= 0) s.seed = static_cast<uint64_t>(f.seed);
  if (f.channels > 0) s.channels = f.channels;
  if (f.max_in_flight > 0) s.max_in_flight = f.max_in_flight;
  if (!f.concurrency_range.empty()) s.mode = LoadMode::kClosed;
  TESSERA_RETURN_IF_ERROR(ValidateScenario(s));
  return s;
}

StatusOr<std::vector<int>> ParseRange(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  int v[3] = {0, 0, 1};
  if (parts.empty() || parts.size() > 3) {
    return absl::InvalidArgumentError("--concurrency-range: expected start[:end[:step]]");
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!absl::SimpleAtoi(parts[i], &v[i]) || v[i] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--concurrency-range: \"", text, "\": every part must be an integer >= 1"));
    }
  }
  if (parts.size() == 1) v[1] = v[0];
  if (v[1] < v[0]) return absl::InvalidArgumentError("--concurrency-range: end < start");
  std::vector<int> levels;
  for (int c = v[0]; c <= v[1]; c += v[2]) levels.push_back(c);
  return levels;
}

// Prints one status line every 0.5 s while a run is going (stderr, rewritten in place on a tty).
class ProgressDisplay {
 public:
  ProgressDisplay(Progress& p, bool enabled) : p_(p), enabled_(enabled) {}
  void Start(const std::string& label) {
    if (!enabled_) return;
    label_ = label;
    stop_ = false;
    thread_ = std::thread([this] { Loop(); });
  }
  void Stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    thread_.join();
    std::cerr << "\r\033[K";
  }
  ~ProgressDisplay() { Stop(); }

 private:
  void Loop() {
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      int64_t start = p_.run_start_ns.load();
      double t = start ? (static_cast<int64_t>(MonotonicNs()) - start) * 1e-9 : 0;
      std::cerr << fmt::format(
                       "\r\033[K[{}] {:.1f}/{:.1f} s  sent {} ({:.0f}/s)  ok {}  err {}  "
                       "dropped {}  late {}  in-flight {}",
                       label_, std::max(0.0, t), p_.total_s, p_.sent.load(),
                       t > 0 ? p_.sent.load() / t : 0.0, p_.ok.load(), p_.errors.load(),
                       p_.dropped.load(), p_.late.load(), p_.in_flight.load())
                << std::flush;
    }
  }
  Progress& p_;
  bool enabled_;
  std::string label_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

int Main(int argc, char** argv) {
  Flags f;
  CLI::App app{
      "tessera-bench: open/closed-loop load generator for KServe v2 gRPC servers "
      "(docs/bench.md)"};
  app.add_option("-s,--scenario", f.scenario_path, "Scenario YAML file")->check(CLI::ExistingFile);
  app.add_option("-u,--server", f.server, "Server address host:port (overrides the scenario)");
  app.add_flag("--ssl-grpc-use-ssl", f.tls.enabled, "Connect over TLS (as perf_analyzer)");
  app.add_option("--ssl-grpc-root-certifications-file", f.tls.root_certs,
                 "PEM CAs the server's certificate must chain to (default: the system's)")
      ->check(CLI::ExistingFile);
  app.add_option("--ssl-grpc-private-key-file", f.tls.private_key,
                 "PEM client key, for servers that ask for client certificates")
      ->check(CLI::ExistingFile);
  app.add_option("--ssl-grpc-certificate-chain-file", f.tls.cert_chain,
                 "PEM client certificate chain (with --ssl-grpc-private-key-file)")
      ->check(CLI::ExistingFile);
  app.add_option("-m,--model", f.models, "Model to load (instead of --scenario; repeatable)");
  app.add_option("--rate", f.rate, "Open loop: requests/s per model");
  app.add_option("--arrival", f.arrival, "poisson | uniform | constant | trace")
      ->check(CLI::IsMember({"poisson", "uniform", "constant", "trace"}));
  app.add_option("--trace", f.trace, "Tessera trace CSV for --arrival trace");
  app.add_option("--slo-ms", f.slo_ms, "SLO per request in ms (0 = none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batch-size", f.batch_size, "Rows per request")->check(CLI::PositiveNumber);
  app.add_option("--input", f.input, "random | zeros")->check(CLI::IsMember({"random", "zeros"}));
  app.add_option("--concurrency-range", f.concurrency_range,
                 "Closed loop: start[:end[:step]] requests in flight per model");
  app.add_option("--warmup-s", f.warmup_s, "Warm-up seconds (not measured)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--duration-s", f.duration_s, "Measurement seconds")->check(CLI::PositiveNumber);
  app.add_option("--drain-s", f.drain_s, "Longest wait for answers after the last send")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--request-timeout-s", f.request_timeout_s, "gRPC deadline per request")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", f.seed, "Random seed (arrivals, inputs)")->check(CLI::NonNegativeNumber);
  app.add_option("--channels", f.channels, "gRPC channels (connections)")->check(CLI::Range(1, 64));
  app.add_option("--max-in-flight", f.max_in_flight,
                 "Open loop: drop (and count) sends beyond this")
      ->check(CLI::PositiveNumber);
  app.add_option("--json", f.json_path, "Write the JSON report here");
  app.add_option("--csv", f.csv_path, "Write the CSV summary here");
  app.add_option("--timeline-csv", f.timeline_path, "Write the per-second timeline here");
  app.add_option("--requests-csv", f.outcomes_path, "Write every request's outcome here");
  app.add_option("--commit", f.commit, "Commit id recorded in the report");
  app.add_option("--progress", f.progress, "auto (on a tty) | on | off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_flag("--fail-on-error", f.fail_on_error, "Exit 3 when any request failed");
  app.add_flag("--peak-search", f.peak,
               "Open loop: find the highest rate factor with <= --peak-limit-pct SLO violations");
  app.add_option("--peak-repeats", f.peak_repeats, "Runs per probe (median)")
      ->check(CLI::PositiveNumber);
  app.add_option("--peak-tolerance", f.peak_tolerance, "Relative width where the search stops")
      ->check(CLI::PositiveNumber);
  app.add_option("--peak-limit-pct", f.peak_limit_pct, "Allowed SLO violation %")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--peak-start-factor", f.peak_start, "First rate factor tried")
      ->check(CLI::PositiveNumber);
  app.add_option("--convert-azure-trace", f.azure_in,
                 "Convert an Azure Functions invocation CSV to a Tessera trace, then exit")
      ->check(CLI::ExistingFile);
  app.add_option("--trace-out", f.trace_out, "Output of --convert-azure-trace");
  app.add_option("--azure-models", f.azure_models, "name[:weight],... functions map onto");
  app.add_option("--azure-first-minute", f.azure_first_minute, "First minute column (1..1440)");
  app.add_option("--azure-minutes", f.azure_minutes, "Minutes converted");
  app.add_option("--azure-functions", f.azure_functions, "Busiest functions kept (0 = all)");
  app.add_option("--azure-rate", f.azure_rate, "Scale to this mean requests/s (0 = as is)");
  CLI11_PARSE(app, argc, argv);

  if (!f.azure_in.empty()) return ConvertAzure(f);
  StatusOr<Scenario> scenario = BuildScenario(f);
  if (!scenario.ok()) return Fail(scenario.status());
  if (f.peak && scenario->mode != LoadMode::kOpen) {
    return Fail(absl::InvalidArgumentError("--peak-search needs open-loop load (not closed loop)"));
  }
  std::vector<int> levels;
  if (scenario->mode == LoadMode::kClosed) {
    if (f.concurrency_range.empty()) {
      levels = {0};  // 0: each model's own concurrency from the scenario
    } else {
      StatusOr<std::vector<int>> parsed = ParseRange(f.concurrency_range);
      if (!parsed.ok()) return Fail(parsed.status());
      levels = *parsed;
    }
  }
  // Traces are read before connecting so that a bad file fails fast.
  std::vector<Trace> traces(scenario->models.size());
  for (size_t i = 0; i < scenario->models.size(); ++i) {
    const ModelLoad& m = scenario->models[i];
    if (m.arrival != ArrivalKind::kTrace) continue;
    StatusOr<Trace> t = LoadTrace(m.trace_path);
    if (!t.ok()) return Fail(t.status());
    if (!t->count(m.name)) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("trace ", m.trace_path, " has no requests for model \"", m.name, "\"")));
    }
    traces[i] = *std::move(t);
  }
  StatusOr<std::unique_ptr<LoadClient>> client = LoadClient::Create(*scenario);
  if (!client.ok()) return Fail(client.status());
  const Scenario& sc = (*client)->scenario();
  const bool progress_on = f.progress == "on" || (f.progress == "auto" && isatty(STDERR_FILENO));
  ProgressDisplay display((*client)->progress(), progress_on);

  std::vector<std::string> names;
  std::vector<double> slos;
  ReportHeader header;
  for (const ModelLoad& m : sc.models) {
    names.push_back(m.name);
    slos.push_back(m.slo_ms);
    header.arrivals.emplace_back(sc.mode == LoadMode::kClosed ? "closed"
                                                              : ArrivalKindName(m.arrival));
  }
  header.server = sc.server;
  header.mode = std::string(LoadModeName(sc.mode));
  header.scenario = f.scenario_path.empty() ? "flags" : f.scenario_path;
  header.started_at = NowIso();
  header.commit = f.commit;
  header.warmup_s = sc.warmup_s;
  header.duration_s = sc.duration_s;
  header.seed = sc.seed;
  header.models = names;
  header.request_bytes = (*client)->request_bytes();

  std::vector<RunReport> runs;
  std::vector<Outcome> last_outcomes;
  int64_t any_errors = 0;
  SummaryOptions sopt;
  auto finish = [&](RunReport run, RunResult result) {
    sopt.measure_begin_ns = result.measure_begin_ns;
    sopt.measure_end_ns = result.measure_end_ns;
    run.wall_s = result.wall_s;
    run.summaries = Summarize(result.outcomes, names, slos, sopt);
    run.error_examples = result.error_examples;
    any_errors += run.summaries.back().error_count;
    std::cout << ReportTable(run) << std::flush;
    last_outcomes = std::move(result.outcomes);
    runs.push_back(std::move(run));
    return runs.back().summaries.back().violation_pct;
  };
  const double total_s = sc.warmup_s + sc.duration_s;
  const int64_t begin_ns = static_cast<int64_t>(sc.warmup_s * 1e9);
  const int64_t end_ns = static_cast<int64_t>(total_s * 1e9);
  int probe_count = 0;
  auto run_open = [&](double factor) -> StatusOr<double> {
    std::vector<std::vector<int64_t>> offsets;
    for (size_t i = 0; i < sc.models.size(); ++i) {
      const ModelLoad& m = sc.models[i];
      const uint64_t seed = sc.seed * 1000003ULL + i * 7919ULL + probe_count * 104729ULL;
      offsets.push_back(m.arrival == ArrivalKind::kTrace
                            ? ReplayOffsets(traces[i], m.name, m.trace_speedup * factor, total_s)
                            : GenerateArrivals(m.arrival, m.rate.Scaled(factor), total_s, seed));
    }
    ++probe_count;
    RunReport run;
    run.label = f.peak ? fmt::format("peak probe x{:.4g} #{}", factor, probe_count)
                       : fmt::format("rate x{:.4g}", factor);
    run.rate_factor = factor;
    display.Start(run.label);
    StatusOr<RunResult> result = (*client)->RunOpen(offsets, begin_ns, end_ns);
    display.Stop();
    if (!result.ok()) return result.status();
    return finish(std::move(run), *std::move(result));
  };

  std::optional<PeakResult> peak;
  if (sc.mode == LoadMode::kClosed) {
    for (int level : levels) {
      std::vector<int> concurrency;
      for (const ModelLoad& m : sc.models) concurrency.push_back(level > 0 ? level : m.concurrency);
      RunReport run;
      run.label = level > 0 ? fmt::format("concurrency {}", level) : "concurrency (scenario)";
      run.concurrency = level;
      display.Start(run.label);
      StatusOr<RunResult> result = (*client)->RunClosed(concurrency);
      display.Stop();
      if (!result.ok()) return Fail(result.status());
      finish(std::move(run), *std::move(result));
    }
  } else if (f.peak) {
    PeakSearchOptions options;
    options.start_factor = f.peak_start;
    options.repeats = f.peak_repeats;
    options.tolerance = f.peak_tolerance;
    options.violation_limit_pct = f.peak_limit_pct;
    StatusOr<PeakResult> result = PeakSearch(options, run_open);
    if (!result.ok()) return Fail(result.status());
    peak = *result;
    std::cout << fmt::format("peak: rate factor {:.4g} passes (<= {}% violations), {:.4g} fails\n",
                             peak->peak_factor, f.peak_limit_pct, peak->failing_factor);
    for (size_t i = 0; i < sc.models.size(); ++i) {
      std::cout << fmt::format(
          "  {}: peak mean rate {:.1f}/s\n", names[i],
          sc.models[i].rate.ExpectedCount(total_s) / total_s * peak->peak_factor);
    }
  } else {
    StatusOr<double> v = run_open(1.0);
    if (!v.ok()) return Fail(v.status());
  }

  if (!f.json_path.empty()) {
    if (Status s = WriteFile(f.json_path, ReportJson(header, runs, peak ? &*peak : nullptr));
        !s.ok()) {
      return Fail(s);
    }
  }
  if (!f.csv_path.empty()) {
    if (Status s = WriteFile(f.csv_path, ReportCsv(runs)); !s.ok()) return Fail(s);
  }
  if (!f.timeline_path.empty()) {
    Status s = WriteFile(f.timeline_path, TimelineCsv(Timeline(last_outcomes, names, slos)));
    if (!s.ok()) return Fail(s);
  }
  if (!f.outcomes_path.empty()) {
    if (Status s = WriteFile(f.outcomes_path, OutcomesCsv(last_outcomes, names)); !s.ok()) {
      return Fail(s);
    }
  }
  if (any_errors > 0) {
    std::cerr << fmt::format(
        "tessera-bench: {} request(s) failed at the server (see ERRORS above)\n", any_errors);
    if (f.fail_on_error) return 3;
  }
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  tessera::DisableMutexDeadlockDetection();  // the client shares the machine with the server
  return tessera::bench::Main(argc, argv);
}
