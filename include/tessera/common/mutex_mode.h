// Process-wide absl::Mutex settings.
#pragma once

namespace tessera {

// Turns off absl::Mutex deadlock detection for this process. Debian's abseil is built in debug
// mode, where every Mutex lock (ours and gRPC's) also updates a global lock graph: about a tenth of
// the server's CPU at high request rates. Call first thing in main, before any thread starts.
void DisableMutexDeadlockDetection();

}  // namespace tessera
