// One executor's input pool (E²bird, seed 002 §1.2), the bookkeeping half: which bytes of the
// executor's shared-memory input ring hold which request's inputs. A request's inputs are copied
// into the pool as soon as it is routed to the executor (ExecutorProcess::Stage), so that a batch
// of requests staged one after the other is already one contiguous tensor per input and goes to the
// executor without the gather copy at batch time.
//
// Layout. The pool is the ring range [base, base + bytes), split into `regions` equal
// regions (a fixed per-instance byte budget). Each instance added gets the first free region
// and splits it into one sub-ring per model input, in proportion to the input's bytes per row (an
// equal split when a dim is dynamic), so consecutive requests of one instance are back to back in
// every input. A declared instance (ExecutorProcess declares every load) is added at its first
// staged request, so only instances that stage hold a region. Instances beyond `regions` are not
// pooled: Reserve gives nullptr and their batches gather. A removed instance's region is reused
// only once its last slot is released.
//
// Slots. Reserve takes one slot per input in all sub-rings at once, so every input has the same
// request order. A slot is exactly the input's bytes (sub-rings are aligned to the element size,
// never padded), so slot i + 1 starts where slot i ends -- except when it does not fit at the end
// of its sub-ring and starts over at the sub-ring's start (wrap-around). ContiguousRun says whether
// a batch's slots form one run per input. Destroying a PooledInputs handle releases its slots, in
// any order; space comes back in ring order (RingAllocator).
//
// Spill areas. Each sub-ring is followed by a spill area (`spill_share` of the input's part of the
// region) that the ring allocator never hands out. A batch that straddles the wrap -- slots up to
// the sub-ring's end, then the next allocated slots from its start -- still makes one run: its
// wrapped head is copied to where its tail ends (into the skipped bytes at the end and on into the
// spill area), which ContiguousRun returns as a SpillCopy. That copy is the head's bytes only, not
// the whole batch's as a gather. The destination is this batch's alone: nothing is allocated in the
// skipped bytes until the batch's tail slots are released, and only a batch straddling this wrap
// writes the spill area, one such batch per pass round the sub-ring.
//
// Only offsets are managed here; ExecutorProcess writes the bytes. Handles share the pool's state
// (shared_ptr), so a handle that outlives its ExecutorProcess (crash and restart) releases safely.
//
// Thread-safety: all public methods are thread-safe; a handle may be destroyed on any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "tessera/dispatch/request.h"
#include "tessera/ipc/ring_allocator.h"

namespace tessera::server {

class InputPool;

// A byte range of the input ring (absolute offset).
struct PoolRange {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// What the pool needs to know about one model input to carve its sub-ring.
struct PoolInputSpec {
  uint64_t element_bytes = 0;  // 0: not a fixed-size type; the instance is not pooled
  uint64_t row_bytes = 0;      // bytes per batch row; 0 when a dim is dynamic
};

// A wrapped head to copy within the ring before the batch reads its run (absolute offsets).
struct SpillCopy {
  uint64_t from = 0;
  uint64_t to = 0;
  uint64_t bytes = 0;
};

// A batch's inputs as one range each; `spills` are the copies that make the ranges whole.
struct PooledRun {
  std::vector<PoolRange> runs;  // per input
  std::vector<SpillCopy> spills;
};

// One request's slots, one per model input in declared order. Destroying it releases them.
class PooledInputs final : public dispatch::StagedInputs {
 public:
  ~PooledInputs() override;
  PooledInputs(const PooledInputs&) = delete;
  PooledInputs& operator=(const PooledInputs&) = delete;

  const InputPool* pool() const { return pool_.get(); }
  const std::vector<PoolRange>& slots() const { return slots_; }

 private:
  friend class InputPool;
  PooledInputs(std::shared_ptr<InputPool> pool, uint64_t carve_id, uint64_t seq,
               std::vector<PoolRange> slots)
      : pool_(std::move(pool)), carve_id_(carve_id), seq_(seq), slots_(std::move(slots)) {}

  std::shared_ptr<InputPool> pool_;
  uint64_t carve_id_;  // which AddInstance the slots belong to
  uint64_t seq_;       // the Reserve's number in its carve: consecutive = nothing between
  std::vector<PoolRange> slots_;
};

struct InputPoolOptions {
  uint64_t base = 0;   // first byte of the pool in the input ring
  uint64_t bytes = 0;  // 0 = no pool (every Reserve gives nullptr)
  int regions = 4;     // instances that can be pooled at once; each gets bytes / regions
  static constexpr double kDefaultSpillShare = 0.2;
  static constexpr double kMaxSpillShare = 0.9;  // larger values are taken as this
  // Of each input's part of a region, the share kept after its sub-ring for wrapped batch heads.
  double spill_share = kDefaultSpillShare;
};

struct InputPoolStats {
  int instances = 0;        // instances with a region
  uint64_t live_slots = 0;  // requests staged and not yet released
  uint64_t requests_staged = 0;
  uint64_t requests_not_staged = 0;  // Reserve gave nullptr: full, unknown instance or no region
};

class InputPool : public std::enable_shared_from_this<InputPool> {
 public:
  static std::shared_ptr<InputPool> Create(const InputPoolOptions& options);

  // Gives `key` a region; false (and nothing changes) when none is free, an input is not of a
  // fixed-size type, there are no inputs, or `key` already has one.
  bool AddInstance(const std::string& key, const std::vector<PoolInputSpec>& inputs);
  // Remembers `key`'s inputs; the instance takes a region (as AddInstance) at its first Reserve,
  // so instances whose requests are never staged (plain instances, the workers that read their
  // first worker's region) hold none.
  void DeclareInstance(const std::string& key, const std::vector<PoolInputSpec>& inputs);
  // Takes the region away from `key` (and forgets a declaration); its space is reused once its
  // live slots are released.
  void RemoveInstance(const std::string& key);

  // One slot per input of `key` with `bytes[k]` bytes each, or nullptr when the instance has no
  // region (and, declared, finds none free), the number of inputs differs, or a sub-ring has no
  // room right now.
  std::unique_ptr<PooledInputs> Reserve(const std::string& key, const std::vector<uint64_t>& bytes);

  // Per input, the one range the handles' slots make back to back in the given order, or nullopt
  // when a handle is null, from another pool or carve of `key`, or a slot does not start where the
  // previous one ended (a request staged by another thread in between, ...). One break per input
  // is allowed: the wrap, when the slot after it starts the sub-ring, was reserved right after the
  // one before it, and the head from there on fits where the tail ends plus the spill area; the
  // caller must then make the SpillCopy before anything reads the run.
  std::optional<PooledRun> ContiguousRun(const std::string& key,
                                         const std::vector<const PooledInputs*>& handles) const;

  InputPoolStats stats() const;

  // The sub-ring of input `k` of `key` (for tests and logs), or nullopt.
  std::optional<PoolRange> SubRing(const std::string& key, size_t k) const;

 private:
  struct Region {
    uint64_t carve_id = 0;  // 0 = free
    std::string key;        // empty once removed
    std::vector<PoolRange> sub_rings;
    std::vector<uint64_t> spill_bytes;      // per input, the spill area after its sub-ring
    std::vector<ipc::RingAllocator> rings;  // offsets relative to the sub-ring start
    uint64_t live = 0;
    uint64_t next_seq = 0;
  };

  explicit InputPool(const InputPoolOptions& options) : options_(options) {}
  friend class PooledInputs;
  void Release(uint64_t carve_id, const std::vector<PoolRange>& slots);
  bool AddInstanceLocked(const std::string& key, const std::vector<PoolInputSpec>& inputs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Region* FindLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Region* FindLocked(const std::string& key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Input k's sub-ring and spill-area bytes in the carve `carve_id`, read only at a wrap.
  std::optional<std::pair<PoolRange, uint64_t>> SubRingAndSpill(uint64_t carve_id, size_t k) const;

  const InputPoolOptions options_;
  mutable std::mutex mu_;
  std::vector<Region> regions_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<PoolInputSpec>> declared_ ABSL_GUARDED_BY(mu_);
  uint64_t next_carve_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t staged_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t not_staged_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::server
