// Copies that survive the memory under them going away.
//
// A mapping of a POSIX shared-memory object raises SIGBUS on access once another process has
// truncated the object, or when a tmpfs page cannot be allocated (a full /dev/shm). A client's
// registered shared-memory region can do that to the server at any moment; without a guard the
// whole server, with every other client's requests, dies of it. CopyGuardingSigbus turns such a
// fault during its copy into an error for the one request that read or wrote the region.
//
// The first call installs a process-wide SIGBUS handler. A SIGBUS outside a guarded copy goes to
// the handler that was installed before, or, if there was none, is raised again with the default
// action (the process dies, as it would without the guard). Thread-safe.
#pragma once

#include <cstddef>
#include <string>

#include "tessera/common/status.h"

namespace tessera::ipc {

// memcpy(dst, src, bytes); INVALID_ARGUMENT "<what>: the shared memory under it is gone ..." when
// either side faults with SIGBUS during the copy (dst may then hold part of the bytes).
Status CopyGuardingSigbus(void* dst, const void* src, size_t bytes, const std::string& what);

}  // namespace tessera::ipc
