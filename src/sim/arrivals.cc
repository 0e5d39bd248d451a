#include "arrivals.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tessera::sim {
namespace {

Status Invalid(const std::string& model, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("arrivals of model '", model, "': ", what));
}

bool ValidRate(double rate) { return std::isfinite(rate) && rate >= 0; }

}  // namespace

Status ValidateArrivals(const Arrivals& arrivals, double default_rate_rps,
                        const std::string& model) {
  if (arrivals.kind == ArrivalKind::kTrace) {
    for (size_t i = 0; i < arrivals.trace_s.size(); ++i) {
      const double t = arrivals.trace_s[i];
      if (!std::isfinite(t) || t < 0) {
        return Invalid(model, absl::StrCat("trace time [", i, "] = ", t, " must be ≥ 0 s"));
      }
      if (i > 0 && t < arrivals.trace_s[i - 1]) {
        return Invalid(model, absl::StrCat("trace times must be ascending, [", i, "] = ", t,
                                           " s comes after ", arrivals.trace_s[i - 1], " s"));
      }
    }
    return absl::OkStatus();
  }
  if (arrivals.schedule.empty()) {
    if (!ValidRate(default_rate_rps)) {
      return Invalid(model, absl::StrCat("rate ", default_rate_rps, " rps must be ≥ 0"));
    }
    return absl::OkStatus();
  }
  for (size_t i = 0; i < arrivals.schedule.size(); ++i) {
    const RateSegment& s = arrivals.schedule[i];
    if (!std::isfinite(s.start_s) || s.start_s < 0) {
      return Invalid(model,
                     absl::StrCat("schedule[", i, "] starts at ", s.start_s, " s; must be ≥ 0"));
    }
    if (i > 0 && s.start_s <= arrivals.schedule[i - 1].start_s) {
      return Invalid(model, absl::StrCat("schedule start times must be strictly ascending, [", i,
                                         "] = ", s.start_s, " s"));
    }
    if (!ValidRate(s.rate_rps)) {
      return Invalid(model,
                     absl::StrCat("schedule[", i, "] rate ", s.rate_rps, " rps must be ≥ 0"));
    }
  }
  return absl::OkStatus();
}

ArrivalStream::ArrivalStream(const Arrivals& arrivals, double default_rate_rps, Rng rng,
                             double end_ms)
    : kind_(arrivals.kind), rng_(rng), end_ms_(end_ms) {
  if (kind_ == ArrivalKind::kTrace) {
    trace_s_ = arrivals.trace_s;
  } else if (arrivals.schedule.empty()) {
    segments_.push_back({0, default_rate_rps});
  } else {
    segments_ = arrivals.schedule;
  }
}

std::optional<double> ArrivalStream::Next() {
  if (kind_ == ArrivalKind::kTrace) {
    if (index_ >= trace_s_.size()) return std::nullopt;
    const double t = trace_s_[index_++] * 1000.0;
    if (t >= end_ms_) {
      index_ = trace_s_.size();
      return std::nullopt;
    }
    return t;
  }
  while (index_ < segments_.size()) {
    const RateSegment& segment = segments_[index_];
    const double segment_end_ms = index_ + 1 < segments_.size()
                                      ? segments_[index_ + 1].start_s * 1000.0
                                      : std::numeric_limits<double>::infinity();
    if (!entered_) {
      segment_start_ms_ = segment.start_s * 1000.0;
      time_ms_ = segment_start_ms_;
      constant_count_ = 0;
      entered_ = true;
    }
    if (segment_start_ms_ >= end_ms_) break;
    double candidate = segment_end_ms;
    if (segment.rate_rps > 0) {
      const double mean_gap_ms = 1000.0 / segment.rate_rps;
      if (kind_ == ArrivalKind::kPoisson) {
        candidate = time_ms_ + rng_.Exponential(mean_gap_ms);
      } else {
        // k·gap from the segment start rather than a running sum, so spacing has no drift.
        candidate = segment_start_ms_ + static_cast<double>(constant_count_ + 1) * mean_gap_ms;
      }
    }
    if (candidate >= segment_end_ms) {
      // The rate changes before the next arrival: restart at the boundary. For Poisson this is
      // exact (memoryless); a constant stream starts a fresh phase.
      ++index_;
      entered_ = false;
      continue;
    }
    if (candidate >= end_ms_) break;
    time_ms_ = candidate;
    ++constant_count_;
    return candidate;
  }
  index_ = segments_.size();
  return std::nullopt;
}

}  // namespace tessera::sim
