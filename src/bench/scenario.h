// A tessera-bench scenario: which models get which load, for how long, judged by which SLOs.
// Read from YAML (docs/bench.md has the format) or built from command-line flags.
//
// Errors are INVALID_ARGUMENT "<file>:<line>: <key path>: <reason>" (common/yaml_util), so a broken
// scenario names the line to fix. Relative paths in a scenario (traces, input files) are relative
// to the scenario file's folder. Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "arrival.h"
#include "tessera/common/status.h"

namespace tessera::bench {

enum class LoadMode { kOpen, kClosed };
enum class InputFill { kRandom, kZeros, kFiles };

// An input tensor named in the scenario (the whole request shape, batch dimension included). When a
// model lists its inputs, tessera-bench does not ask the server for the model's metadata: that is
// how requests to a model the server lacks can be sent (and counted as errors).
struct TensorSpec {
  std::string name;
  std::string datatype;  // KServe v2 name: FP32, INT64, ...
  std::vector<int64_t> shape;
};

struct ModelLoad {
  std::string name;
  std::string version;  // "" = the server's latest
  double slo_ms = 0;    // 0 = no SLO: every success is good
  int64_t batch_size = 1;
  // Open loop.
  ArrivalKind arrival = ArrivalKind::kPoisson;
  RateSchedule rate = RateSchedule::Constant(0);  // requests/s over time
  std::string trace_path;                         // arrival == kTrace: Tessera trace CSV
  double trace_speedup = 1;                       // replay time = trace time / speedup
  // Closed loop: requests kept in flight for this model.
  int concurrency = 1;
  // Request contents.
  InputFill fill = InputFill::kRandom;
  std::map<std::string, std::string> input_files;  // input name -> raw bytes file (kFiles)
  std::vector<TensorSpec> inputs;                  // empty = from the server's metadata
};

// TLS to the server (perf_analyzer's --ssl-grpc-* flags): PEM files; an empty root file trusts the
// system's CAs, a key and chain answer a server that asks for client certificates.
struct ClientTls {
  bool enabled = false;
  std::string root_certs;
  std::string private_key;
  std::string cert_chain;
};

struct Scenario {
  std::string server = "localhost:8001";
  ClientTls tls;
  LoadMode mode = LoadMode::kOpen;
  uint64_t seed = 1;
  double warmup_s = 2;            // sent but not measured
  double duration_s = 10;         // measurement window after the warm-up
  double drain_s = 10;            // after the last send, longest wait for answers
  double request_timeout_s = 10;  // gRPC deadline per request (answers later: DEADLINE_EXCEEDED)
  int max_in_flight = 10000;      // open loop: above this a due request is dropped and counted
  int channels = 1;               // gRPC channels (TCP connections), requests spread round-robin
  std::vector<ModelLoad> models;
};

std::string_view LoadModeName(LoadMode mode);
std::string_view InputFillName(InputFill fill);

// Parses scenario YAML; `source` names the file in errors and `base_dir` resolves relative paths.
StatusOr<Scenario> ParseScenario(const std::string& text, const std::string& source,
                                 const std::string& base_dir);
StatusOr<Scenario> LoadScenario(const std::string& path);

// Checks what the YAML reader cannot see per key (also for scenarios built from flags): at least
// one model, a rate or trace per open-loop model, unique names.
Status ValidateScenario(const Scenario& scenario);

}  // namespace tessera::bench
