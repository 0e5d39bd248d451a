// The helpers every oneDNN kernel file shares (dnnl_util.h).
#include "engine/cpu/dnnl_util.h"

#include <omp.h>

#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace tessera::engine::cpu {

dnnl::engine& CpuEngine() {
  static auto* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(CpuEngine());
  return stream;
}

dnnl::primitive_attr WithUserScratchpad(dnnl::primitive_attr attr) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

namespace {

// A 64-byte aligned buffer (oneDNN's own allocation alignment) that only grows.
class GrowingBuffer {
 public:
  std::byte* Get(size_t need) {
    if (need > size_) {
      constexpr size_t kAlignment = 64;
      const size_t rounded = (need + kAlignment - 1) / kAlignment * kAlignment;
      data_.reset(static_cast<std::byte*>(std::aligned_alloc(kAlignment, rounded)));
      if (data_ == nullptr) throw std::bad_alloc();
      size_ = rounded;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<std::byte, decltype(&std::free)> data_{nullptr, &std::free};
  size_t size_ = 0;
};

}  // namespace

memory ThreadScratchpad(const memory::desc& desc) {
  thread_local GrowingBuffer buffer;
  return memory(desc, CpuEngine(), buffer.Get(desc.get_size()));
}

float* ThreadPartBuffer(int64_t floats) {
  thread_local GrowingBuffer buffer;
  return reinterpret_cast<float*>(buffer.Get(static_cast<size_t>(floats) * sizeof(float)));
}

std::string RunParts(const OpContext& ctx, size_t parts, int threads,
                     const std::function<void(size_t)>& part) {
  std::mutex error_mu;
  std::string error;
  auto run = [&](int64_t i) {
    try {
      omp_set_num_threads(parts > 1 ? 1 : threads);
      part(static_cast<size_t>(i));
    } catch (const std::exception& e) {  // oneDNN's errors, or a scratchpad's bad_alloc
      std::lock_guard<std::mutex> lock(error_mu);
      error = e.what();
    }
  };
  if (parts > 1 && ctx.pool != nullptr) {
    ctx.pool->ParallelFor(static_cast<int64_t>(parts), run);
  } else {
    // One thread may have several parts too: a residual Conv's (SliceResidualPointwiseConv).
    for (size_t i = 0; i < parts; ++i) run(static_cast<int64_t>(i));
  }
  return error;
}

int SetThreads(const OpContext& ctx) {
  const int threads = ctx.pool != nullptr ? ctx.pool->usable_threads() : 1;
  omp_set_num_threads(threads);
  return threads;
}

memory::dims Dims(std::initializer_list<int64_t> dims) {
  return memory::dims(dims.begin(), dims.end());
}

namespace {

Inputs RowMajorInputs(const Inputs& inputs, std::vector<Value>* storage) {
  storage->clear();
  storage->reserve(inputs.size());
  Inputs out = inputs;
  for (const Value*& v : out) {
    if (v == nullptr || !v->channels_last()) continue;
    storage->push_back(ToRowMajor(*v));
    v = &storage->back();
  }
  return out;
}

}  // namespace

memory ReorderedWeights::Get(const memory::desc& desc, memory user) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [d, m] : made_) {
    if (d == desc) return m;
  }
  memory out(desc, CpuEngine());
  dnnl::reorder(user, out).execute(ThreadStream(), user, out);
  ThreadStream().wait();
  made_.emplace_back(desc, out);
  return out;
}

const Value& ShiftedWeights::Of(const Value& uint8_weights) {
  std::call_once(once_, [&] {
    shifted_ = Value::Allocate(DataType::kInt8, uint8_weights.shape());
    const uint8_t* from = uint8_weights.data<uint8_t>();
    int8_t* to = shifted_.mutable_data<int8_t>();
    for (int64_t i = 0; i < shifted_.num_elements(); ++i) {
      to[i] = static_cast<int8_t>(static_cast<int32_t>(from[i]) - 128);
    }
  });
  return shifted_;
}

bool PrimitiveWeights(const Value& w, const Value* w_zero) {
  const bool unsigned_w = w.dtype() == DataType::kUint8;
  if (w.dtype() != DataType::kInt8 && !unsigned_w) return false;
  if (w_zero == nullptr) return true;
  if (w_zero->dtype() != w.dtype() || w_zero->num_elements() == 0) return false;
  const int32_t expected = unsigned_w ? EightBitElement(*w_zero, 0) : 0;
  for (int64_t i = 0; i < w_zero->num_elements(); ++i) {
    if (EightBitElement(*w_zero, i) != expected) return false;
  }
  return true;
}

// In kLanes partial sums so that the loop vectorises; compiled for AVX-512 and AVX2 as well as
// the baseline.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
int32_t
EightBitRowSum(const uint8_t* row, int64_t count, bool is_signed) {
  constexpr int64_t kLanes = 64;
  // Each lane adds count / kLanes bytes of at most 255: no overflow below 2^24 lanes' worth.
  uint32_t lanes[kLanes] = {};
  const uint8_t flip = is_signed ? 0x80 : 0;  // INT8 v as UINT8 v + 128
  const int64_t whole = count - count % kLanes;
  for (int64_t i = 0; i < whole; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += static_cast<uint8_t>(row[i + l] ^ flip);
  }
  uint32_t sum = 0;
  for (int64_t l = 0; l < kLanes; ++l) sum += lanes[l];
  for (int64_t i = whole; i < count; ++i) sum += static_cast<uint8_t>(row[i] ^ flip);
  return static_cast<int32_t>(sum) - (is_signed ? 128 * static_cast<int32_t>(count) : 0);
}

Status RunReference(KernelFn kernel, const OpContext& ctx, const Node& node, const Inputs& inputs,
                    std::vector<Value>* outputs) {
  std::vector<Value> storage;
  return kernel(ctx, node, RowMajorInputs(inputs, &storage), outputs);
}

}  // namespace tessera::engine::cpu
