// Request tracing settings (Triton's trace extension): which requests get their timestamps
// recorded, and where the traces are written. Set in server.yaml (trace:) or on the command line,
// read and changed at run time with the TraceSetting RPC.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::frontend {

struct TraceSettings {
  // OFF, TIMESTAMPS, TENSORS, or both as "TIMESTAMPS,TENSORS" (Triton's level may be given more
  // than once: each names a kind of detail).
  std::string level = "OFF";
  int64_t rate = 1000;        // trace one request in `rate`
  int64_t count = -1;         // traces still to take; -1 = no limit, 0 = tracing has stopped
  // 0: every trace goes to `file` when the server stops; N > 0: each N traces go to
  // `file`.0, `file`.1, ... as they are taken (and the rest at stop).
  int64_t log_frequency = 0;
  std::string file;  // "" = no trace file, so the level must stay OFF
};

}  // namespace tessera::frontend
