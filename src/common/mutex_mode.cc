#include "tessera/common/mutex_mode.h"

#include "absl/synchronization/mutex.h"

namespace tessera {

void DisableMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace tessera
