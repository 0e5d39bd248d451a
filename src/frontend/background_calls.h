// RPCs answered from a thread of their own (model loads and unloads take seconds; a gRPC callback
// thread must never block on them), and a way to wait for the ones still running at shutdown.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <functional>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace tessera::frontend {

class BackgroundCalls {
 public:
  // Runs `work` on a detached thread and finishes the call with its status.
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context,
                                std::function<grpc::Status()> work);
  // Returns once every call Run started has finished.
  void Wait();

 private:
  std::mutex mu_;
  std::condition_variable idle_cv_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::frontend
