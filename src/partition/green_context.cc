#include "partition/green_context.h"

#include <cstring>

#include "partition/cuda_driver.h"
#include "tessera/partition/partition.h"

namespace tessera::partition {

StatusOr<int> EnterGreenContext(int device, int sm_count, const char* library) {
  if (sm_count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--green-sms must be >= 1, got ", sm_count));
  }
  TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const CudaDriver> cu, LoadCudaDriver(library));
  int version = 0;
  cu->cuDriverGetVersion(&version);
  if (!cu->has_green_contexts()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "green contexts need CUDA driver >= ", DriverVersionString(kGreenContextMinDriverVersion),
        "; this driver is ", DriverVersionString(version)));
  }
  int count = 0;
  if (int r = cu->cuDeviceGetCount(&count); r != 0) {
    return absl::UnavailableError(cu->Error("cuDeviceGetCount", r));
  }
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPU ", device, " does not exist (", count, " GPU(s))"));
  }
  int dev = 0;
  if (int r = cu->cuDeviceGet(&dev, device); r != 0) {
    return absl::UnavailableError(cu->Error("cuDeviceGet", r));
  }

  CuDevResource all;
  std::memset(&all, 0, sizeof(all));
  if (int r = cu->cuDeviceGetDevResource(dev, &all, kCuDevResourceTypeSm); r != 0) {
    return absl::UnavailableError(cu->Error("cuDeviceGetDevResource", r));
  }
  if (static_cast<unsigned>(sm_count) > all.sm_count) {
    return absl::InvalidArgumentError(absl::StrCat("--green-sms ", sm_count, " exceeds GPU ",
                                                   device, "'s ", all.sm_count, " SMs"));
  }
  // One group of at least sm_count SMs; the rest goes to `remaining`, unused by this process.
  CuDevResource group;
  CuDevResource remaining;
  std::memset(&group, 0, sizeof(group));
  std::memset(&remaining, 0, sizeof(remaining));
  unsigned groups = 1;
  if (int r = cu->cuDevSmResourceSplitByCount(&group, &groups, &all, &remaining, 0,
                                              static_cast<unsigned>(sm_count));
      r != 0 || groups != 1) {
    return absl::InvalidArgumentError(
        r != 0 ? cu->Error("cuDevSmResourceSplitByCount", r)
               : absl::StrCat("GPU ", device, " cannot give a group of ", sm_count, " SMs"));
  }
  void* desc = nullptr;
  if (int r = cu->cuDevResourceGenerateDesc(&desc, &group, 1); r != 0) {
    return absl::UnavailableError(cu->Error("cuDevResourceGenerateDesc", r));
  }
  void* green = nullptr;
  if (int r = cu->cuGreenCtxCreate(&green, desc, dev, kCuGreenCtxDefaultStream); r != 0) {
    return absl::UnavailableError(cu->Error("cuGreenCtxCreate", r));
  }
  void* context = nullptr;
  if (int r = cu->cuCtxFromGreenCtx(&context, green); r != 0) {
    return absl::UnavailableError(cu->Error("cuCtxFromGreenCtx", r));
  }
  if (int r = cu->cuCtxSetCurrent(context); r != 0) {
    return absl::UnavailableError(cu->Error("cuCtxSetCurrent", r));
  }
  // The green context lives as long as the process: it is the executor's partition.
  return static_cast<int>(group.sm_count);
}

}  // namespace tessera::partition
