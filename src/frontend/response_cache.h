// Triton's response cache: the answers of models whose config enables `response_cache`, kept by a
// digest of the request, so a repeated request is answered without running the model. The digest
// covers the model and its load (so a version, and a reload of it), every input as the model
// receives it (name, data type, shape, bytes) and the outputs asked for; it is two independent
// 64-bit hashes, so a wrong answer would need both to collide. Least recently used entries go first
// when the cache is over its byte budget. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "tessera/dispatch/request.h"

namespace tessera::frontend {

struct ResponseCacheKey {
  uint64_t index = 0;  // the map key
  uint64_t check = 0;  // a second digest, compared on a hit
};

class ResponseCache {
 public:
  explicit ResponseCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  // `load_id` is ReadyModel::load_id: unique per load, so a reloaded model file never gets the
  // answers of the one before it.
  static ResponseCacheKey KeyOf(const std::string& model, uint64_t load_id,
                                const dispatch::Request& request);

  // A copy of the cached response (its timing and batch size zeroed: nothing ran), or nullopt.
  std::optional<dispatch::Response> Lookup(const ResponseCacheKey& key);
  // Keeps a copy of `response`, evicting the least recently used entries to stay within the
  // capacity; a response larger than the whole cache is not kept.
  void Insert(const ResponseCacheKey& key, const dispatch::Response& response);

  struct Usage {
    uint64_t entries = 0;
    uint64_t bytes = 0;
    uint64_t evictions = 0;
  };
  Usage usage() const;

 private:
  struct Entry {
    ResponseCacheKey key;
    dispatch::Response response;
    uint64_t bytes = 0;
  };

  const uint64_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // most recently used first
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::frontend
