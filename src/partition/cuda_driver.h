// The few CUDA driver API entry points the partition layer uses, loaded at run time with
// dlopen("libcuda.so.1") so nothing links against CUDA: a machine without a driver gets a clear
// Status instead of a loader error. Types are the driver's, spelled as plain C types (CUresult and
// CUdevice are int, handles are pointers); signatures follow cuda.h (CUDA 12.4+).
//
// Thread-safety: a loaded CudaDriver is immutable; the driver functions are thread-safe.
#pragma once

#include <memory>
#include <string>

#include "tessera/common/status.h"

namespace tessera::partition {

// CU_DEVICE_ATTRIBUTE_* values used here.
inline constexpr int kCuAttrMultiprocessorCount = 16;
inline constexpr int kCuAttrComputeCapabilityMajor = 75;
inline constexpr int kCuAttrComputeCapabilityMinor = 76;
inline constexpr int kCuDevResourceTypeSm = 1;           // CU_DEV_RESOURCE_TYPE_SM
inline constexpr unsigned kCuGreenCtxDefaultStream = 1;  // CU_GREEN_CTX_DEFAULT_STREAM

// CUdevResource: 144 bytes in CUDA 12.4-12.x (type, 92 bytes padding, 48-byte union) and 13.x
// (type, 92 bytes padding, 40-byte union, next pointer). smCount is the union's first field at
// byte 96 in both; everything else is opaque to us.
struct alignas(8) CuDevResource {
  int type;
  unsigned char internal_padding[92];
  unsigned int sm_count;
  unsigned char rest[44];
};
static_assert(sizeof(CuDevResource) == 144, "CUdevResource ABI size");

struct CudaDriver {
  using InitFn = int (*)(unsigned);
  using IntOutFn = int (*)(int*);
  using DeviceGetFn = int (*)(int*, int);
  using DeviceGetAttributeFn = int (*)(int*, int, int);
  using GetErrorStringFn = int (*)(int, const char**);
  using DeviceGetDevResourceFn = int (*)(int, CuDevResource*, int);
  using SmResourceSplitByCountFn = int (*)(CuDevResource*, unsigned*, const CuDevResource*,
                                           CuDevResource*, unsigned, unsigned);
  using DevResourceGenerateDescFn = int (*)(void**, CuDevResource*, unsigned);
  using GreenCtxCreateFn = int (*)(void**, void*, int, unsigned);
  using CtxFromGreenCtxFn = int (*)(void**, void*);
  using CtxSetCurrentFn = int (*)(void*);

  void* handle = nullptr;
  InitFn cuInit = nullptr;
  IntOutFn cuDriverGetVersion = nullptr;
  IntOutFn cuDeviceGetCount = nullptr;
  DeviceGetFn cuDeviceGet = nullptr;
  DeviceGetAttributeFn cuDeviceGetAttribute = nullptr;
  GetErrorStringFn cuGetErrorString = nullptr;
  // Green contexts; null when the driver predates them (< 12.4).
  DeviceGetDevResourceFn cuDeviceGetDevResource = nullptr;
  SmResourceSplitByCountFn cuDevSmResourceSplitByCount = nullptr;
  DevResourceGenerateDescFn cuDevResourceGenerateDesc = nullptr;
  GreenCtxCreateFn cuGreenCtxCreate = nullptr;
  CtxFromGreenCtxFn cuCtxFromGreenCtx = nullptr;
  CtxSetCurrentFn cuCtxSetCurrent = nullptr;

  bool has_green_contexts() const {
    return cuDeviceGetDevResource && cuDevSmResourceSplitByCount && cuDevResourceGenerateDesc &&
           cuGreenCtxCreate && cuCtxFromGreenCtx && cuCtxSetCurrent;
  }
  // "cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"-style text for `result`.
  std::string Error(const char* call, int result) const;
};

// Loads libcuda.so.1 (`library` for tests) and calls cuInit(0). UNAVAILABLE when the library is
// missing or cuInit fails, naming which. The library stays loaded for the life of the process.
StatusOr<std::shared_ptr<const CudaDriver>> LoadCudaDriver(const char* library = "libcuda.so.1");

}  // namespace tessera::partition
