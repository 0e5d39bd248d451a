#include "tessera/ipc/guarded_copy.h"

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace tessera::ipc {
namespace {

struct Guard {
  sigjmp_buf resume;
};

// initial-exec: the handler reads it, and a TLS access must not allocate inside a signal handler.
__attribute__((tls_model("initial-exec"))) thread_local Guard* active_guard = nullptr;
struct sigaction previous_action {};

void OnSigbus(int signo, siginfo_t* info, void* context) {
  if (Guard* guard = active_guard; guard != nullptr) {
    active_guard = nullptr;
    siglongjmp(guard->resume, 1);
  }
  // Not a guarded copy's fault: whoever handled SIGBUS before.
  if ((previous_action.sa_flags & SA_SIGINFO) != 0 && previous_action.sa_sigaction != nullptr) {
    previous_action.sa_sigaction(signo, info, context);
    return;
  }
  if ((previous_action.sa_flags & SA_SIGINFO) == 0 && previous_action.sa_handler != SIG_DFL &&
      previous_action.sa_handler != SIG_IGN) {
    previous_action.sa_handler(signo);
    return;
  }
  // The default action: returning re-executes the faulting access, which faults again and, with
  // the default disposition back, ends the process as an unguarded SIGBUS always did.
  signal(SIGBUS, SIG_DFL);
}

void InstallHandler() {
  struct sigaction action {};
  action.sa_sigaction = OnSigbus;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO;
  sigaction(SIGBUS, &action, &previous_action);
}

}  // namespace

Status CopyGuardingSigbus(void* dst, const void* src, size_t bytes, const std::string& what) {
  static std::once_flag installed;
  std::call_once(installed, InstallHandler);
  Guard guard;
  // sigsetjmp saves the signal mask, so the jump back unblocks SIGBUS again.
  if (sigsetjmp(guard.resume, 1) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     ": the shared memory under it is gone (its object was truncated, or "
                     "/dev/shm is full)"));
  }
  active_guard = &guard;
  // The handler must see the guard before the copy touches memory, and its removal after.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(dst, src, bytes);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  active_guard = nullptr;
  return absl::OkStatus();
}

}  // namespace tessera::ipc
