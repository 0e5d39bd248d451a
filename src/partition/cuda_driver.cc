#include "partition/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

namespace tessera::partition {
namespace {

template <typename Fn>
void Bind(void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

std::string CudaDriver::Error(const char* call, int result) const {
  const char* text = nullptr;
  if (cuGetErrorString == nullptr || cuGetErrorString(result, &text) != 0 || text == nullptr) {
    text = "unknown error";
  }
  return absl::StrCat(call, " failed: CUDA error ", result, " (", text, ")");
}

StatusOr<std::shared_ptr<const CudaDriver>> LoadCudaDriver(const char* library) {
  // RTLD_NODELETE: handles into the driver may outlive every CudaDriver; never unload it.
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* error = dlerror();
    return absl::UnavailableError(
        absl::StrCat("no CUDA driver: cannot load ", library, ": ", error ? error : "unknown"));
  }
  auto driver = std::make_shared<CudaDriver>();
  driver->handle = handle;
  Bind(handle, "cuInit", &driver->cuInit);
  Bind(handle, "cuDriverGetVersion", &driver->cuDriverGetVersion);
  Bind(handle, "cuDeviceGetCount", &driver->cuDeviceGetCount);
  Bind(handle, "cuDeviceGet", &driver->cuDeviceGet);
  Bind(handle, "cuDeviceGetAttribute", &driver->cuDeviceGetAttribute);
  Bind(handle, "cuGetErrorString", &driver->cuGetErrorString);
  Bind(handle, "cuDeviceGetDevResource", &driver->cuDeviceGetDevResource);
  Bind(handle, "cuDevSmResourceSplitByCount", &driver->cuDevSmResourceSplitByCount);
  Bind(handle, "cuDevResourceGenerateDesc", &driver->cuDevResourceGenerateDesc);
  Bind(handle, "cuGreenCtxCreate", &driver->cuGreenCtxCreate);
  Bind(handle, "cuCtxFromGreenCtx", &driver->cuCtxFromGreenCtx);
  Bind(handle, "cuCtxSetCurrent", &driver->cuCtxSetCurrent);
  if (!driver->cuInit || !driver->cuDriverGetVersion || !driver->cuDeviceGetCount ||
      !driver->cuDeviceGet || !driver->cuDeviceGetAttribute) {
    return absl::UnavailableError(
        absl::StrCat(library, " lacks the basic driver API (cuInit, cuDeviceGetCount, ...)"));
  }
  int result = driver->cuInit(0);
  if (result != 0) return absl::UnavailableError(driver->Error("cuInit", result));
  return std::shared_ptr<const CudaDriver>(std::move(driver));
}

}  // namespace tessera::partition
