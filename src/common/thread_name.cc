#include "tessera/common/thread_name.h"

#include <pthread.h>

#include <string>

namespace tessera {

void SetCurrentThreadName(std::string_view name) {
  constexpr size_t kLinuxNameBytes = 15;  // TASK_COMM_LEN less the terminating zero
  const std::string cut(name.substr(0, kLinuxNameBytes));
  pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace tessera
