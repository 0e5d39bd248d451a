#include "background_calls.h"

#include <thread>

namespace tessera::frontend {

grpc::ServerUnaryReactor* BackgroundCalls::Run(grpc::CallbackServerContext* context,
                                               std::function<grpc::Status()> work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  {
    std::lock_guard lock(mu_);
    ++running_;
  }
  std::thread([this, reactor, work = std::move(work)] {
    reactor->Finish(work());
    std::lock_guard lock(mu_);
    if (--running_ == 0) idle_cv_.notify_all();
  }).detach();
  return reactor;
}

void BackgroundCalls::Wait() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [this] { return running_ == 0; });
}

}  // namespace tessera::frontend
