#include "response_cache.h"

#include <string_view>

#include "absl/hash/hash.h"

namespace tessera::frontend {
namespace {

// Folds everything that decides a response into `state`; `salt` makes the second digest
// independent of the first.
uint64_t Digest(uint64_t salt, const std::string& model, uint64_t load_id,
                const dispatch::Request& request) {
  uint64_t h = absl::HashOf(salt, model, load_id, request.inputs.size());
  for (const TensorView& input : request.inputs) {
    h = absl::HashOf(h, input.name, static_cast<int>(input.dtype), dispatch::IsAbsent(input),
                     input.shape,
                     std::string_view(static_cast<const char*>(input.data), input.byte_size));
  }
  return absl::HashOf(h, request.requested_outputs);
}

uint64_t SizeOf(const dispatch::Response& response) {
  uint64_t bytes = sizeof(dispatch::Response);
  for (const dispatch::OutputTensor& output : response.outputs) {
    bytes += sizeof(output) + output.name.size() + output.bytes.size() +
             output.shape.size() * sizeof(int64_t);
  }
  return bytes;
}

}  // namespace

ResponseCacheKey ResponseCache::KeyOf(const std::string& model, uint64_t load_id,
                                      const dispatch::Request& request) {
  return ResponseCacheKey{Digest(0x5e55e4a, model, load_id, request),
                          Digest(0xcac4e, model, load_id, request)};
}

std::optional<dispatch::Response> ResponseCache::Lookup(const ResponseCacheKey& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key.index);
  if (it == index_.end() || it->second->key.check != key.check) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  dispatch::Response copy;
  copy.outputs = it->second->response.outputs;
  return copy;
}

void ResponseCache::Insert(const ResponseCacheKey& key, const dispatch::Response& response) {
  const uint64_t bytes = SizeOf(response);
  if (bytes > capacity_) return;
  Entry entry{key, dispatch::Response{}, bytes};
  entry.response.outputs = response.outputs;  // copied outside the lock
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key.index); it != index_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  while (bytes_ + bytes > capacity_ && !lru_.empty()) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().key.index);
    lru_.pop_back();
    ++evictions_;
  }
  lru_.push_front(std::move(entry));
  index_[key.index] = lru_.begin();
  bytes_ += bytes;
}

ResponseCache::Usage ResponseCache::usage() const {
  std::lock_guard lock(mu_);
  return Usage{lru_.size(), bytes_, evictions_};
}

}  // namespace tessera::frontend
