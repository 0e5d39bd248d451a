// EnsurePassiveOpenMpWait: see engine.h.
#include <cstdlib>

#include <unistd.h>

#include "tessera/engine/engine.h"

namespace tessera::engine {

void EnsurePassiveOpenMpWait(char** argv) {
#ifdef TESSERA_HAVE_ONEDNN
  if (argv == nullptr || argv[0] == nullptr || std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Still here: the exec failed; run on with OpenMP's default policy.
#else
  (void)argv;
#endif
}

}  // namespace tessera::engine
