// Executor::Instance: one loaded model instance and its worker's queue. Shared by executor.cc
// (batches) and executor_loading.cc (loads, unloads, weight exports); not a public interface.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "executor/executor.h"

namespace tessera::executor {

struct Executor::Instance {
  std::string key;
  // Used only by the worker thread once it has started; reset by it when it exits.
  std::unique_ptr<engine::Model> model;
  absl::Mutex mu;
  std::deque<ipc::InferBatch> queue ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;  // no more batches will be queued
  // A batch is running, on the worker thread or inline on the receive thread; the worker takes
  // no batch while the receive thread runs one, so the model never runs twice at once.
  bool busy ABSL_GUARDED_BY(mu) = false;
  // Decaying maximum of recent run times: one slow batch keeps the instance off the receive
  // thread for a while. UINT64_MAX until a batch ran (the first runs on the worker).
  uint64_t recent_run_ns ABSL_GUARDED_BY(mu) = UINT64_MAX;
  std::atomic<bool> exited{false};
  std::thread thread;

  void Stop() {
    absl::MutexLock lock(&mu);
    stopping = true;
  }

  void NoteRunTime(uint64_t run_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    recent_run_ns =
        recent_run_ns == UINT64_MAX ? run_ns : std::max(run_ns, recent_run_ns - recent_run_ns / 8);
  }
};

}  // namespace tessera::executor
