// Names the calling thread so that top -H, perf, gdb and bench/frontend_thread_cpu.py tell
// Tessera's threads apart (unnamed threads all show the process's name).
#pragma once

#include <string_view>

namespace tessera {

// Linux keeps 15 bytes of a thread's name: longer names are cut there. Failure is ignored (the
// name is only for people).
void SetCurrentThreadName(std::string_view name);

}  // namespace tessera
