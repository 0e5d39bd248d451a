#include "input_pool.h"

#include <algorithm>

namespace tessera::server {
namespace {

// Sub-rings start on a cache line; inside one, slots are aligned to the element size only so that
// consecutive slots stay back to back.
constexpr uint64_t kSubRingAlignment = 64;
constexpr uint64_t kRegionAlignment = 256;

uint64_t AlignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace

PooledInputs::~PooledInputs() { pool_->Release(carve_id_, slots_); }

std::shared_ptr<InputPool> InputPool::Create(const InputPoolOptions& options) {
  std::shared_ptr<InputPool> pool(new InputPool(options));
  const int count = options.regions > 0 && options.bytes > 0 ? options.regions : 0;
  std::lock_guard lock(pool->mu_);
  pool->regions_.resize(static_cast<size_t>(count));
  return pool;
}

InputPool::Region* InputPool::FindLocked(const std::string& key) {
  for (Region& region : regions_) {
    if (region.carve_id != 0 && region.key == key) return &region;
  }
  return nullptr;
}

const InputPool::Region* InputPool::FindLocked(const std::string& key) const {
  for (const Region& region : regions_) {
    if (region.carve_id != 0 && region.key == key) return &region;
  }
  return nullptr;
}

bool InputPool::AddInstance(const std::string& key, const std::vector<PoolInputSpec>& inputs) {
  std::lock_guard lock(mu_);
  return AddInstanceLocked(key, inputs);
}

void InputPool::DeclareInstance(const std::string& key, const std::vector<PoolInputSpec>& inputs) {
  std::lock_guard lock(mu_);
  declared_[key] = inputs;
}

bool InputPool::AddInstanceLocked(const std::string& key,
                                  const std::vector<PoolInputSpec>& inputs) {
  if (inputs.empty() || key.empty()) return false;
  uint64_t total_row_bytes = 0;
  bool rows_known = true;
  for (const PoolInputSpec& input : inputs) {
    if (input.element_bytes == 0) return false;
    if (input.row_bytes == 0 ||
        __builtin_add_overflow(total_row_bytes, input.row_bytes, &total_row_bytes)) {
      rows_known = false;
    }
  }
  if (FindLocked(key) != nullptr) return false;
  const uint64_t region_bytes =
      regions_.empty() ? 0 : options_.bytes / regions_.size() / kRegionAlignment * kRegionAlignment;
  for (size_t j = 0; j < regions_.size(); ++j) {
    Region& region = regions_[j];
    if (region.carve_id != 0 || region.live != 0) continue;
    const uint64_t begin = options_.base + j * region_bytes;
    // Input k gets the share [cut(k), cut(k + 1)) of the region, by bytes per row when known.
    auto cut = [&](size_t k) -> uint64_t {
      if (k == inputs.size()) return region_bytes;
      if (!rows_known || total_row_bytes == 0) return region_bytes / inputs.size() * k;
      unsigned __int128 before = 0;
      for (size_t i = 0; i < k; ++i) before += inputs[i].row_bytes;
      return static_cast<uint64_t>(before * region_bytes / total_row_bytes);
    };
    std::vector<PoolRange> sub_rings;
    std::vector<uint64_t> spill_bytes;
    std::vector<ipc::RingAllocator> rings;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const uint64_t start = AlignUp(begin + cut(k), kSubRingAlignment);
      const uint64_t end = begin + cut(k + 1);
      const uint64_t elem = inputs[k].element_bytes;
      const uint64_t share = end > start ? (end - start) / elem * elem : 0;
      const double spill_share =
          std::clamp(options_.spill_share, 0.0, InputPoolOptions::kMaxSpillShare);
      const uint64_t spill =
          static_cast<uint64_t>(static_cast<double>(share) * spill_share) / elem * elem;
      const uint64_t size = share - spill;
      if (size == 0) return false;  // too many inputs for the region: not pooled
      sub_rings.push_back(PoolRange{start, size});
      spill_bytes.push_back(spill);
      rings.emplace_back(size, elem);
    }
    region.carve_id = next_carve_id_++;
    region.key = key;
    region.sub_rings = std::move(sub_rings);
    region.spill_bytes = std::move(spill_bytes);
    region.rings = std::move(rings);
    return true;
  }
  return false;
}

void InputPool::RemoveInstance(const std::string& key) {
  std::lock_guard lock(mu_);
  declared_.erase(key);
  Region* region = FindLocked(key);
  if (region == nullptr) return;
  region->key.clear();
  if (region->live == 0) *region = Region{};
  // Otherwise the region stays carved (keyless) until its last slot is released.
}

std::unique_ptr<PooledInputs> InputPool::Reserve(const std::string& key,
                                                 const std::vector<uint64_t>& bytes) {
  std::lock_guard lock(mu_);
  Region* region = FindLocked(key);
  if (region == nullptr) {
    // A declared instance takes its region at its first staged request (and retries later when
    // none was free then: an unloaded instance may have given one back).
    auto declared = declared_.find(key);
    if (declared != declared_.end() && AddInstanceLocked(key, declared->second)) {
      region = FindLocked(key);
    }
  }
  if (region == nullptr || bytes.size() != region->rings.size()) {
    ++not_staged_;
    return nullptr;
  }
  std::vector<PoolRange> slots;
  for (size_t k = 0; k < bytes.size(); ++k) {
    std::optional<uint64_t> offset = region->rings[k].Allocate(bytes[k]);
    if (!offset) {
      // Undo the inputs already taken: they are the newest ranges, so they retract at once.
      for (size_t i = 0; i < slots.size(); ++i) {
        region->rings[i].Release(slots[i].offset - region->sub_rings[i].offset);
      }
      ++not_staged_;
      return nullptr;
    }
    slots.push_back(PoolRange{region->sub_rings[k].offset + *offset, bytes[k]});
  }
  ++region->live;
  ++staged_;
  return std::unique_ptr<PooledInputs>(
      new PooledInputs(shared_from_this(), region->carve_id, region->next_seq++, std::move(slots)));
}

void InputPool::Release(uint64_t carve_id, const std::vector<PoolRange>& slots) {
  std::lock_guard lock(mu_);
  for (Region& region : regions_) {
    if (region.carve_id != carve_id) continue;
    for (size_t k = 0; k < slots.size() && k < region.rings.size(); ++k) {
      region.rings[k].Release(slots[k].offset - region.sub_rings[k].offset);
    }
    --region.live;
    if (region.live == 0 && region.key.empty()) region = Region{};
    return;
  }
}

std::optional<PooledRun> InputPool::ContiguousRun(
    const std::string& key, const std::vector<const PooledInputs*>& handles) const {
  if (handles.empty()) return std::nullopt;
  uint64_t carve_id = 0;
  {
    std::lock_guard lock(mu_);
    const Region* region = FindLocked(key);
    if (region == nullptr) return std::nullopt;
    carve_id = region->carve_id;
  }
  // A handle's slots never change, and the handles are alive: no lock needed below.
  const size_t inputs = handles.front() ? handles.front()->slots().size() : 0;
  for (const PooledInputs* handle : handles) {
    if (handle == nullptr || handle->pool() != this || handle->carve_id_ != carve_id ||
        handle->slots().size() != inputs) {
      return std::nullopt;
    }
  }
  PooledRun result;
  result.runs.resize(inputs);
  for (size_t k = 0; k < inputs; ++k) {
    PoolRange& run = result.runs[k];
    run = handles.front()->slots()[k];
    std::optional<SpillCopy> head;  // set at the wrap; then the slots extend the head
    uint64_t head_room = 0;         // bytes from the head's destination to the spill area's end
    for (size_t i = 1; i < handles.size(); ++i) {
      const PoolRange& slot = handles[i]->slots()[k];
      if (head.has_value()) {
        if (slot.offset != head->from + head->bytes) return std::nullopt;
        head->bytes += slot.bytes;
      } else if (slot.offset == run.offset + run.bytes) {
        run.bytes += slot.bytes;
      } else if (handles[i]->seq_ == handles[i - 1]->seq_ + 1) {
        // A break between consecutive reservations: the wrap, if this slot starts the sub-ring.
        // The allocator skipped the rest of the sub-ring, so those bytes are free until this
        // batch's tail is released. (The live handles keep the carve, so its layout stands.)
        std::optional<std::pair<PoolRange, uint64_t>> layout = SubRingAndSpill(carve_id, k);
        if (!layout || slot.offset != layout->first.offset) return std::nullopt;
        head = SpillCopy{slot.offset, run.offset + run.bytes, slot.bytes};
        head_room = layout->first.offset + layout->first.bytes + layout->second - head->to;
      } else {
        return std::nullopt;
      }
    }
    if (!head.has_value()) continue;
    if (head->bytes > head_room) return std::nullopt;
    run.bytes += head->bytes;
    result.spills.push_back(*head);
  }
  return result;
}

std::optional<std::pair<PoolRange, uint64_t>> InputPool::SubRingAndSpill(uint64_t carve_id,
                                                                         size_t k) const {
  std::lock_guard lock(mu_);
  for (const Region& region : regions_) {
    if (region.carve_id != carve_id) continue;
    if (k >= region.sub_rings.size()) return std::nullopt;
    return std::pair{region.sub_rings[k], region.spill_bytes[k]};
  }
  return std::nullopt;
}

InputPoolStats InputPool::stats() const {
  std::lock_guard lock(mu_);
  InputPoolStats stats;
  for (const Region& region : regions_) {
    if (region.carve_id != 0 && !region.key.empty()) ++stats.instances;
    stats.live_slots += region.live;
  }
  stats.requests_staged = staged_;
  stats.requests_not_staged = not_staged_;
  return stats;
}

std::optional<PoolRange> InputPool::SubRing(const std::string& key, size_t k) const {
  std::lock_guard lock(mu_);
  const Region* region = FindLocked(key);
  if (region == nullptr || k >= region->sub_rings.size()) return std::nullopt;
  return region->sub_rings[k];
}

}  // namespace tessera::server
