#include "client_shm.h"

#include <climits>
#include <limits>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace tessera::frontend {
namespace {

constexpr char kRegionParam[] = "shared_memory_region";
constexpr char kByteSizeParam[] = "shared_memory_byte_size";
constexpr char kOffsetParam[] = "shared_memory_offset";

constexpr char kDisabled[] =
    "client shared memory is disabled on this server; start it with --allow-client-shm "
    "(server.yaml: grpc.allow_client_shm: true)";

using Parameters = google::protobuf::Map<std::string, inference::InferParameter>;

// tritonclient sends sizes as int64_param, other clients as uint64_param; both are accepted.
StatusOr<std::optional<uint64_t>> UnsignedParam(const std::string& what, const Parameters& params,
                                                const char* key) {
  auto it = params.find(key);
  if (it == params.end()) return std::optional<uint64_t>();
  const inference::InferParameter& p = it->second;
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kInt64Param:
      if (p.int64_param() < 0) break;
      return std::optional<uint64_t>(static_cast<uint64_t>(p.int64_param()));
    case inference::InferParameter::kUint64Param:
      return std::optional<uint64_t>(p.uint64_param());
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": parameter '", key, "' must be a non-negative integer"));
}

}  // namespace

bool NamesShmRegion(const Parameters& parameters) {
  return parameters.contains(kRegionParam);
}

Status ClientShmRegistry::Register(const std::string& name, const std::string& key,
                                   uint64_t offset, uint64_t byte_size) {
  if (!enabled_) return absl::PermissionDeniedError(kDisabled);
  if (name.empty()) return absl::InvalidArgumentError("shared memory region: the name is empty");
  if (key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory region '", name, "': the key is empty"));
  }
  // A POSIX shared-memory name: one leading '/' (optional here), no other, at most NAME_MAX.
  const std::string_view object = key[0] == '/' ? std::string_view(key).substr(1) : key;
  if (object.empty() || object.size() > NAME_MAX || object.find('/') != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory region '", name, "': key '", key, "' is not a POSIX shared-memory name ('/",
        "name' with 1 to ", NAME_MAX, " characters and no other '/')"));
  }
  if (byte_size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory region '", name, "': byte_size must be > 0"));
  }
  if (offset > std::numeric_limits<size_t>::max() - byte_size) {
    return absl::InvalidArgumentError(absl::StrCat("shared memory region '", name, "': offset ",
                                                   offset, " + byte_size ", byte_size,
                                                   " overflows"));
  }
  {
    std::lock_guard lock(mu_);
    if (regions_.contains(name)) {
      return absl::AlreadyExistsError(absl::StrCat("shared memory region '", name,
                                                   "' is already registered"));
    }
  }
  // Opened outside the lock: mapping may fault in page tables, and other requests must not wait.
  auto mapping = ipc::SharedMemoryRegion::Open(key, static_cast<size_t>(offset + byte_size));
  if (!mapping.ok()) {
    const Status& s = mapping.status();
    return Status(s.code(), absl::StrCat("shared memory region '", name, "' (key '", key,
                                         "', offset ", offset, ", byte_size ", byte_size,
                                         "): ", s.message()));
  }
  auto region = std::make_shared<ClientShmRegion>();
  region->name = name;
  region->key = key;
  region->offset = offset;
  region->byte_size = byte_size;
  region->mapping = std::shared_ptr<ipc::SharedMemoryRegion>(std::move(mapping).value());
  std::lock_guard lock(mu_);
  if (!regions_.emplace(name, std::move(region)).second) {
    return absl::AlreadyExistsError(absl::StrCat("shared memory region '", name,
                                                 "' is already registered"));
  }
  return absl::OkStatus();
}

Status ClientShmRegistry::Unregister(const std::string& name) {
  if (!enabled_) return absl::PermissionDeniedError(kDisabled);
  std::lock_guard lock(mu_);
  if (name.empty()) {
    regions_.clear();
  } else {
    regions_.erase(name);
  }
  return absl::OkStatus();
}

StatusOr<std::vector<std::shared_ptr<const ClientShmRegion>>> ClientShmRegistry::Regions(
    const std::string& name) const {
  if (!enabled_) return absl::PermissionDeniedError(kDisabled);
  std::vector<std::shared_ptr<const ClientShmRegion>> out;
  if (!name.empty()) {
    TESSERA_ASSIGN_OR_RETURN(auto region, Find(name));
    out.push_back(std::move(region));
    return out;
  }
  std::lock_guard lock(mu_);
  for (const auto& [unused, region] : regions_) out.push_back(region);
  return out;
}

StatusOr<std::shared_ptr<const ClientShmRegion>> ClientShmRegistry::Find(
    const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = regions_.find(name);
  if (it == regions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("shared memory region '", name, "' is not registered"));
  }
  return it->second;
}

StatusOr<std::optional<ClientShmSlice>> ClientShmRegistry::SliceFor(
    const std::string& what, const Parameters& parameters) const {
  auto region_param = parameters.find(kRegionParam);
  if (region_param == parameters.end()) return std::optional<ClientShmSlice>();
  if (region_param->second.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": parameter '", kRegionParam, "' must be a string"));
  }
  if (!enabled_) return absl::PermissionDeniedError(absl::StrCat(what, ": ", kDisabled));
  const std::string& name = region_param->second.string_param();
  TESSERA_ASSIGN_OR_RETURN(std::optional<uint64_t> byte_size,
                           UnsignedParam(what, parameters, kByteSizeParam));
  if (!byte_size) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", kRegionParam, "' is given without '",
                                                   kByteSizeParam, "'"));
  }
  TESSERA_ASSIGN_OR_RETURN(std::optional<uint64_t> offset,
                           UnsignedParam(what, parameters, kOffsetParam));
  auto region = Find(name);
  if (!region.ok()) {
    return Status(region.status().code(), absl::StrCat(what, ": ", region.status().message()));
  }
  const uint64_t start = offset.value_or(0);
  if (start > (*region)->byte_size || *byte_size > (*region)->byte_size - start) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": bytes [", start, ", ", start + *byte_size, ") lie outside shared memory region '",
        name, "' of ", (*region)->byte_size, " bytes"));
  }
  ClientShmSlice slice;
  slice.data = (*region)->data() + start;
  slice.byte_size = static_cast<size_t>(*byte_size);
  slice.region = std::move(region).value();
  return std::optional<ClientShmSlice>(std::move(slice));
}

}  // namespace tessera::frontend
