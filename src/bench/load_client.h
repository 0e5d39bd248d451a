// The load engine of tessera-bench: sends ModelInfer requests over grpc++'s callback API, so one
// sender thread keeps thousands of requests in flight while gRPC's own threads take the answers.
//
// Open loop: every request has a scheduled send time fixed before the run (arrival.h, trace.h);
// the sender sleeps until it and sends, whatever the server has answered. A request sent more than
// 1 ms late is counted as a late send (client lag), and one due while `max_in_flight` requests are
// outstanding is not sent but counted as CLIENT_DROPPED: the report never passes client limits off
// as server behaviour.
// Closed loop: `concurrency` requests per model are kept in flight; each answer sends the next.
//
// Every request ends in exactly one Outcome (stats.h). Requests still outstanding `drain_s` after
// the last send are cancelled and reported UNFINISHED.
//
// Thread-safety: a LoadClient runs one run at a time (Run* are not re-entrant); the progress
// counters are atomics read by the progress display.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "inference/grpc_service.grpc.pb.h"
#include "scenario.h"
#include "stats.h"
#include "tessera/common/status.h"

namespace tessera::bench {

// Live counters of the current run (for the one-line progress display).
struct Progress {
  std::atomic<int64_t> intended{0};
  std::atomic<int64_t> sent{0};
  std::atomic<int64_t> ok{0};
  std::atomic<int64_t> errors{0};
  std::atomic<int64_t> dropped{0};
  std::atomic<int64_t> late{0};
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> run_start_ns{0};  // MonotonicNs() of the run start
  double total_s = 0;                    // planned length (warm-up + measurement)
  void Reset(double total);
};

// The first error message the server gave per (model, status), so a report shows what went wrong.
struct ErrorExample {
  std::string model;
  std::string status;
  std::string message;
};

struct RunResult {
  std::vector<Outcome> outcomes;
  std::vector<ErrorExample> error_examples;
  int64_t measure_begin_ns = 0;  // from the run start
  int64_t measure_end_ns = 0;
  double wall_s = 0;
};

class LoadClient {
 public:
  // Connects to `scenario.server` (waiting up to `connect_timeout_s`) and builds one request per
  // model: from the scenario's `inputs`, or from the server's ModelMetadata/ModelConfig. Errors
  // name the server and the model: UNAVAILABLE (unreachable), NOT_FOUND (unknown model),
  // INVALID_ARGUMENT (shapes the bench cannot fill, input files of the wrong size).
  static StatusOr<std::unique_ptr<LoadClient>> Create(const Scenario& scenario,
                                                      double connect_timeout_s = 5);
  ~LoadClient();

  // Open loop: `offsets[i]` are model i's send times (ns from the run start, ascending); the window
  // [measure_begin_ns, measure_end_ns) is measured.
  StatusOr<RunResult> RunOpen(const std::vector<std::vector<int64_t>>& offsets,
                              int64_t measure_begin_ns, int64_t measure_end_ns);
  // Closed loop: `concurrency[i]` requests of model i in flight for warmup_s + duration_s.
  StatusOr<RunResult> RunClosed(const std::vector<int>& concurrency);

  Progress& progress() { return progress_; }
  const Scenario& scenario() const { return scenario_; }
  // Bytes of one request's input tensors, per model (for the report).
  const std::vector<int64_t>& request_bytes() const { return request_bytes_; }

 private:
  struct Call;
  explicit LoadClient(Scenario scenario);
  Status Connect(double timeout_s);
  Status Prepare();
  // Sends the request of `out->model` now; its callback fills `*out` (which must outlive the call)
  // and then runs `*done` when given. `t0`: MonotonicNs() of the run start.
  void StartCall(Outcome* out, int64_t t0, const std::function<void(Outcome*)>* done);
  // Waits up to `drain_s` for outstanding calls, then cancels the rest and waits for them.
  void DrainOrCancel(double drain_s);
  void CollectErrors(RunResult* result);

  Scenario scenario_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs_;
  std::vector<inference::ModelInferRequest> requests_;  // one per model, shared by its calls
  std::vector<int64_t> request_bytes_;
  std::atomic<size_t> next_channel_{0};
  Progress progress_;
  struct LiveCalls;
  std::unique_ptr<LiveCalls> live_;
};

}  // namespace tessera::bench
