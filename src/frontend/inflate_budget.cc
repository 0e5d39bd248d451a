#include "inflate_budget.h"

namespace tessera::frontend {

bool InflateBudget::TryTake(int64_t bytes) {
  int64_t used = in_use_.load(std::memory_order_relaxed);
  do {
    if (used + bytes > limit_) return false;
  } while (!in_use_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

bool InflateHold::GrowTo(int64_t bytes) {
  if (budget_ == nullptr || bytes <= held_) return true;
  if (!budget_->TryTake(bytes - held_)) return false;
  held_ = bytes;
  return true;
}

}  // namespace tessera::frontend
