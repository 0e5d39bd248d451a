#include "engine/cuda/shareable_buffer.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tessera::engine::cuda {
namespace {

// The driver functions used here, found once per process.
struct VmmDriver {
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemAddressReserve) address_reserve = nullptr;
  decltype(&::cuMemAddressFree) address_free = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;
  decltype(&::cuMemExportToShareableHandle) export_handle = nullptr;
  decltype(&::cuMemImportFromShareableHandle) import_handle = nullptr;
  Status loaded;

  Status Check(CUresult result, const char* call) const {
    if (result == CUDA_SUCCESS) return absl::OkStatus();
    const char* name = "unknown error";
    if (get_error_name != nullptr) get_error_name(result, &name);
    std::string text = absl::StrCat(call, ": ", name);
    if (result == CUDA_ERROR_OUT_OF_MEMORY) return absl::ResourceExhaustedError(text);
    return absl::InternalError(text);
  }
};

// The VMM calls appeared in CUDA 10.2; asking for that ABI keeps the entry points' signatures the
// ones cuda.h declares today.
constexpr unsigned kDriverAbi = 10020;

template <typename Fn>
Status Find(const char* symbol, Fn* fn) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  cudaError_t error =
      cudaGetDriverEntryPointByVersion(symbol, &address, kDriverAbi, cudaEnableDefault, &found);
  if (error != cudaSuccess || found != cudaDriverEntryPointSuccess || address == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("the CUDA driver has no ", symbol, " (",
                     error != cudaSuccess ? cudaGetErrorName(error) : "symbol not found", ")"));
  }
  *fn = reinterpret_cast<Fn>(address);
  return absl::OkStatus();
}

const VmmDriver& Driver() {
  static const VmmDriver* driver = [] {
    auto* d = new VmmDriver;
    for (Status s :
         {Find("cuDeviceGet", &d->device_get),
          Find("cuDeviceGetAttribute", &d->device_get_attribute),
          Find("cuGetErrorName", &d->get_error_name),
          Find("cuMemGetAllocationGranularity", &d->granularity), Find("cuMemCreate", &d->create),
          Find("cuMemRelease", &d->release), Find("cuMemAddressReserve", &d->address_reserve),
          Find("cuMemAddressFree", &d->address_free), Find("cuMemMap", &d->map),
          Find("cuMemUnmap", &d->unmap), Find("cuMemSetAccess", &d->set_access),
          Find("cuMemExportToShareableHandle", &d->export_handle),
          Find("cuMemImportFromShareableHandle", &d->import_handle)}) {
      if (d->loaded.ok()) d->loaded = s;
    }
    return d;
  }();
  return *driver;
}

CUmemAllocationProp DeviceProp(CUdevice device) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

// The device of runtime ordinal `ordinal`, checked for VMM with POSIX handles.
StatusOr<CUdevice> SharingDevice(const VmmDriver& d, int ordinal) {
  TESSERA_RETURN_IF_ERROR(d.loaded);
  CUdevice device = 0;
  TESSERA_RETURN_IF_ERROR(d.Check(d.device_get(&device, ordinal), "cuDeviceGet"));
  int vmm = 0, posix = 0;
  TESSERA_RETURN_IF_ERROR(d.Check(
      d.device_get_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device),
      "cuDeviceGetAttribute"));
  TESSERA_RETURN_IF_ERROR(
      d.Check(d.device_get_attribute(
                  &posix, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device),
              "cuDeviceGetAttribute"));
  if (vmm == 0 || posix == 0) {
    return absl::UnavailableError(absl::StrCat(
        "GPU ", ordinal, " does not support ",
        vmm == 0 ? "virtual memory management" : "POSIX file-descriptor memory handles"));
  }
  return device;
}

StatusOr<uint64_t> Rounded(const VmmDriver& d, CUdevice device, uint64_t bytes) {
  const CUmemAllocationProp prop = DeviceProp(device);
  size_t granularity = 0;
  TESSERA_RETURN_IF_ERROR(
      d.Check(d.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
              "cuMemGetAllocationGranularity"));
  if (granularity == 0) granularity = 1;
  return (std::max<uint64_t>(bytes, 1) + granularity - 1) / granularity * granularity;
}

}  // namespace

StatusOr<std::unique_ptr<ShareableDeviceBuffer>> ShareableDeviceBuffer::Allocate(int ordinal,
                                                                                 uint64_t bytes) {
  const VmmDriver& d = Driver();
  TESSERA_ASSIGN_OR_RETURN(CUdevice device, SharingDevice(d, ordinal));
  std::unique_ptr<ShareableDeviceBuffer> buffer(new ShareableDeviceBuffer);
  buffer->bytes_ = bytes;
  TESSERA_ASSIGN_OR_RETURN(buffer->mapped_bytes_, Rounded(d, device, bytes));
  const CUmemAllocationProp prop = DeviceProp(device);
  CUmemGenericAllocationHandle handle = 0;
  TESSERA_RETURN_IF_ERROR(
      d.Check(d.create(&handle, buffer->mapped_bytes_, &prop, 0), "cuMemCreate"));
  buffer->handle_ = handle;
  TESSERA_RETURN_IF_ERROR(buffer->Map(device));
  return buffer;
}

StatusOr<std::unique_ptr<ShareableDeviceBuffer>> ShareableDeviceBuffer::Import(int ordinal, int fd,
                                                                               uint64_t bytes) {
  if (fd < 0) return absl::InvalidArgumentError("no descriptor to import weights from");
  const VmmDriver& d = Driver();
  TESSERA_ASSIGN_OR_RETURN(CUdevice device, SharingDevice(d, ordinal));
  std::unique_ptr<ShareableDeviceBuffer> buffer(new ShareableDeviceBuffer);
  buffer->bytes_ = bytes;
  TESSERA_ASSIGN_OR_RETURN(buffer->mapped_bytes_, Rounded(d, device, bytes));
  CUmemGenericAllocationHandle handle = 0;
  // The driver reads the descriptor from the pointer argument itself.
  TESSERA_RETURN_IF_ERROR(
      d.Check(d.import_handle(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              "cuMemImportFromShareableHandle"));
  buffer->handle_ = handle;
  TESSERA_RETURN_IF_ERROR(buffer->Map(device));
  buffer->imported_from_.Reset(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!buffer->imported_from_.valid()) {
    return absl::InternalError(
        absl::StrCat("duplicating the imported weights' descriptor: ", std::strerror(errno)));
  }
  return buffer;
}

Status ShareableDeviceBuffer::Map(int device) {
  const VmmDriver& d = Driver();
  CUdeviceptr address = 0;
  TESSERA_RETURN_IF_ERROR(
      d.Check(d.address_reserve(&address, mapped_bytes_, 0, 0, 0), "cuMemAddressReserve"));
  Status mapped = d.Check(d.map(address, mapped_bytes_, 0, handle_, 0), "cuMemMap");
  if (!mapped.ok()) {
    d.address_free(address, mapped_bytes_);
    return mapped;
  }
  address_ = address;  // from here on the destructor unmaps
  CUmemAccessDesc access;
  std::memset(&access, 0, sizeof(access));
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return d.Check(d.set_access(address, mapped_bytes_, &access, 1), "cuMemSetAccess");
}

ShareableDeviceBuffer::~ShareableDeviceBuffer() {
  const VmmDriver& d = Driver();
  if (address_ != 0) {
    d.unmap(address_, mapped_bytes_);
    d.address_free(address_, mapped_bytes_);
  }
  if (handle_ != 0) d.release(handle_);
}

StatusOr<UniqueFd> ShareableDeviceBuffer::Export() const {
  if (imported_from_.valid()) {
    UniqueFd copy(::fcntl(imported_from_.get(), F_DUPFD_CLOEXEC, 0));
    if (!copy.valid()) {
      return absl::InternalError(
          absl::StrCat("duplicating the weights' descriptor: ", std::strerror(errno)));
    }
    return copy;
  }
  const VmmDriver& d = Driver();
  int fd = -1;
  TESSERA_RETURN_IF_ERROR(
      d.Check(d.export_handle(&fd, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
              "cuMemExportToShareableHandle"));
  return UniqueFd(fd);
}

}  // namespace tessera::engine::cuda
