// What the oneDNN kernels (dnnl_ops.cc, dnnl_pool_ops.cc) share: the engine, per-thread streams
// and scratchpads, the fallback to the own kernels, and running a node's work in parts across
// the engine's pool. Only built with oneDNN.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {

using dnnl::memory;
using Tag = dnnl::memory::format_tag;

dnnl::engine& CpuEngine();
// The calling thread's stream.
dnnl::stream& ThreadStream();

// Primitives here use a user-managed scratchpad. With the library's (oneDNN built without
// DNNL_ENABLE_CONCURRENT_EXEC, as Debian's is) a primitive's scratchpad is the thread-local buffer
// of the thread that created it, so a cached Conv primitive built by a model's warm-up and run on
// a worker's thread would share that buffer with every other primitive built there: concurrent
// instances corrupted each other's results. Each executing thread passes its own buffer instead.
dnnl::primitive_attr WithUserScratchpad(dnnl::primitive_attr attr);
// The calling thread's scratchpad for a primitive whose scratchpad is `desc`, grown as needed.
memory ThreadScratchpad(const memory::desc& desc);
// The calling thread's buffer of at least `floats` floats, 64-byte aligned, for a part's dense
// output before it is copied into place (a Conv's channel parts); grown as needed.
float* ThreadPartBuffer(int64_t floats);

// Runs part(i) for each of `parts` parts of a node's work: across the pool (one after the other
// without one), each part on one OpenMP thread, when there are several (conv_slices.h says why),
// else on the calling thread with an OpenMP team of `threads`. Returns the message of an exception
// a part threw, empty if none.
std::string RunParts(const OpContext& ctx, size_t parts, int threads,
                     const std::function<void(size_t)>& part);
// Sizes the calling thread's OpenMP team for the node; returns the size.
int SetThreads(const OpContext& ctx);

memory::dims Dims(std::initializer_list<int64_t> dims);

// A node's primitives, one per input-shape key, built on first use. Past kMaxEntries shapes
// (images whose size varies per request, say) new shapes are built per call and not kept, so
// memory stays bounded; oneDNN's own primitive cache still makes that rebuild cheap.
template <typename Entry>
class PrimitiveCache final : public KernelState {
 public:
  static constexpr size_t kMaxEntries = 64;

  template <typename BuildFn>
  StatusOr<std::shared_ptr<const Entry>> Get(const std::vector<int64_t>& key, BuildFn build) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = entries_.find(key);
      if (it != entries_.end()) return it->second;
    }
    // Built outside the lock: two racing first Runs both build, one result is kept.
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> entry, build());
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= kMaxEntries) return entry;
    return entries_.emplace(key, std::move(entry)).first->second;
  }

 private:
  std::mutex mu_;
  std::map<std::vector<int64_t>, std::shared_ptr<const Entry>> entries_ ABSL_GUARDED_BY(mu_);
};

// A node's constant weights reordered to the layouts its primitives ask for (with oneDNN's
// compensation for 8-bit activations when a layout asks for it), each made on first request and
// shared by every shape.
class ReorderedWeights {
 public:
  memory Get(const memory::desc& desc, memory user);

 private:
  std::mutex mu_;
  std::vector<std::pair<memory::desc, memory>> made_ ABSL_GUARDED_BY(mu_);
};

// UINT8 weights as the INT8 weights oneDNN takes, w - 128, made on the first call (thread-safe)
// and kept: a node's kernel state holds one for its constant weights.
class ShiftedWeights {
 public:
  const Value& Of(const Value& uint8_weights);

 private:
  std::once_flag once_;
  Value shifted_;
};

// Whether 8-bit weights `w` with zero point `w_zero` (may be null) are a form the integer
// primitives take: INT8 with zero point 0, or UINT8 with a zero point of one value (run as
// ShiftedWeights, the difference added back per row or pixel).
bool PrimitiveWeights(const Value& w, const Value* w_zero);

// Sum of `count` 8-bit values (INT8 ones when `is_signed`), vectorised.
int32_t EightBitRowSum(const uint8_t* row, int64_t count, bool is_signed);

// The own kernel on row-major inputs (for what the oneDNN path does not cover).
Status RunReference(KernelFn kernel, const OpContext& ctx, const Node& node, const Inputs& inputs,
                    std::vector<Value>* outputs);

}  // namespace tessera::engine::cpu
