#include "executor/input_mirror.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tessera::executor {

void StagedRanges::Drop(uint64_t offset, uint64_t bytes) {
  const uint64_t end = offset + bytes;
  auto it = ranges_.lower_bound(offset);
  if (it != ranges_.begin()) {
    auto before = std::prev(it);
    if (before->second.end > offset) it = before;
  }
  while (it != ranges_.end() && it->first < end) it = ranges_.erase(it);
}

void StagedRanges::Add(uint64_t offset, uint64_t bytes, uint64_t seq) {
  Drop(offset, bytes);
  if (bytes > 0) ranges_[offset] = Range{offset + bytes, seq};
}

std::optional<uint64_t> StagedRanges::LatestCovering(uint64_t offset, uint64_t bytes) const {
  if (bytes == 0) return std::nullopt;
  const uint64_t end = offset + bytes;
  auto it = ranges_.find(offset);
  uint64_t latest = 0;
  uint64_t at = offset;
  while (it != ranges_.end() && it->first == at && at < end) {
    latest = std::max(latest, it->second.seq);
    at = it->second.end;
    ++it;
  }
  // Exactly tiled: a range running past `end` belongs to a request outside this batch.
  if (at != end) return std::nullopt;
  return latest;
}

namespace {

class HostInputMirror final : public InputMirror {
 public:
  HostInputMirror(const void* ring, uint64_t ring_bytes)
      : ring_(static_cast<const char*>(ring)), copy_(ring_bytes) {}

  std::string Describe() const override {
    return absl::StrCat("host input mirror of ", copy_.size(), " bytes");
  }

  Status Stage(uint64_t offset, uint64_t bytes) override {
    if (offset > copy_.size() || bytes > copy_.size() - offset) {
      return absl::OutOfRangeError(absl::StrCat("staged range [", offset, ", +", bytes,
                                                ") is outside the ", copy_.size(),
                                                "-byte input ring"));
    }
    staged_.Drop(offset, bytes);
    std::memcpy(copy_.data() + offset, ring_ + offset, bytes);
    staged_.Add(offset, bytes, ++seq_);
    return absl::OkStatus();
  }

  std::optional<MirroredInput> View(uint64_t offset, uint64_t bytes) override {
    if (!staged_.LatestCovering(offset, bytes).has_value()) return std::nullopt;
    return MirroredInput{copy_.data() + offset, nullptr, false};
  }

 private:
  const char* ring_;
  std::vector<char> copy_;
  StagedRanges staged_;
  uint64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<InputMirror> MakeHostInputMirror(const void* ring, uint64_t ring_bytes) {
  return std::make_unique<HostInputMirror>(ring, ring_bytes);
}

#if !defined(TESSERA_HAVE_CUDA)
StatusOr<std::unique_ptr<InputMirror>> MakeCudaInputMirror(void*, uint64_t, int) {
  return absl::UnavailableError("this build has no CUDA (TESSERA_CUDA=OFF)");
}
#endif

}  // namespace tessera::executor
