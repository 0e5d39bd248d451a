// Executor side of the `green` partition mechanism: make the calling thread's current CUDA context
// a green context limited to a group of SMs (driver API via dlopen, see cuda_driver.h).
//
// Thread-safety: call once from the executor's main thread, before the engine creates streams.
#pragma once

#include "tessera/common/status.h"

namespace tessera::partition {

// Creates a green context of at least `sm_count` SMs of GPU `device` (cuDeviceGetDevResource ->
// cuDevSmResourceSplitByCount -> cuDevResourceGenerateDesc -> cuGreenCtxCreate ->
// cuCtxFromGreenCtx -> cuCtxSetCurrent) and returns the SM count the driver granted (the split
// rounds up to the device's granularity). UNAVAILABLE without a driver or GPU; FAILED_PRECONDITION
// when the driver has no green contexts; INVALID_ARGUMENT for a count the device cannot give.
// `library` is for tests.
StatusOr<int> EnterGreenContext(int device, int sm_count, const char* library = "libcuda.so.1");

}  // namespace tessera::partition
