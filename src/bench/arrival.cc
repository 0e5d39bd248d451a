#include "arrival.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace tessera::bench {

std::string_view ArrivalKindName(ArrivalKind kind) {
  switch (kind) {
    case ArrivalKind::kPoisson:
      return "poisson";
    case ArrivalKind::kUniform:
      return "uniform";
    case ArrivalKind::kConstant:
      return "constant";
    case ArrivalKind::kTrace:
      return "trace";
  }
  return "?";
}

StatusOr<ArrivalKind> ParseArrivalKind(std::string_view name) {
  for (ArrivalKind k : {ArrivalKind::kPoisson, ArrivalKind::kUniform, ArrivalKind::kConstant,
                        ArrivalKind::kTrace}) {
    if (name == ArrivalKindName(k)) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown arrival process \"", absl::string_view(name.data(), name.size()),
                   "\" (expected one of: poisson, uniform, constant, trace)"));
}

StatusOr<RateSchedule> RateSchedule::Create(std::vector<RateStep> steps) {
  if (steps.empty()) return absl::InvalidArgumentError("rate schedule has no steps");
  if (steps.front().start_s != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rate schedule must start at 0 s, first step starts at ", steps[0].start_s));
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!std::isfinite(steps[i].rate) || steps[i].rate < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("rate schedule step ", i, ": rate must be finite and >= 0"));
    }
    if (i > 0 && !(steps[i].start_s > steps[i - 1].start_s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rate schedule step ", i, ": start times must increase (", steps[i].start_s,
                       " after ", steps[i - 1].start_s, ")"));
    }
  }
  return RateSchedule(std::move(steps));
}

double RateSchedule::RateAt(double t_s) const {
  double rate = steps_.front().rate;
  for (const RateStep& s : steps_) {
    if (s.start_s <= t_s) rate = s.rate;
  }
  return rate;
}

double RateSchedule::ExpectedCount(double duration_s) const {
  double total = 0;
  for (size_t i = 0; i < steps_.size(); ++i) {
    double begin = steps_[i].start_s;
    double end = i + 1 < steps_.size() ? steps_[i + 1].start_s : duration_s;
    end = std::min(end, duration_s);
    if (end > begin) total += (end - begin) * steps_[i].rate;
  }
  return total;
}

RateSchedule RateSchedule::Scaled(double factor) const {
  std::vector<RateStep> steps = steps_;
  for (RateStep& s : steps) s.rate *= factor;
  return RateSchedule(std::move(steps));
}

std::vector<int64_t> GenerateArrivals(ArrivalKind kind, const RateSchedule& schedule,
                                      double duration_s, uint64_t seed) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(schedule.ExpectedCount(duration_s) * 1.1) + 16);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto& steps = schedule.steps();
  for (size_t i = 0; i < steps.size(); ++i) {
    const double begin = steps[i].start_s;
    const double end =
        std::min(i + 1 < steps.size() ? steps[i + 1].start_s : duration_s, duration_s);
    const double rate = steps[i].rate;
    if (!(end > begin) || rate <= 0) continue;
    const double mean_gap = 1.0 / rate;
    // Constant: the first request at the step start. Poisson/uniform: the first gap is drawn too,
    // so the count in [begin, end) has the right distribution.
    double t = begin;
    if (kind == ArrivalKind::kConstant) {
      for (int64_t k = 0;; ++k) {
        t = begin + static_cast<double>(k) * mean_gap;  // no accumulated rounding error
        if (t >= end) break;
        out.push_back(static_cast<int64_t>(std::llround(t * 1e9)));
      }
      continue;
    }
    while (true) {
      double gap;
      if (kind == ArrivalKind::kPoisson) {
        gap = -std::log1p(-unit(rng)) * mean_gap;  // 1 - U in (0, 1]: never log(0)
      } else {
        gap = unit(rng) * 2.0 * mean_gap;
      }
      t += gap;
      if (t >= end) break;
      out.push_back(static_cast<int64_t>(std::llround(t * 1e9)));
    }
  }
  return out;
}

GapStats ComputeGapStats(const std::vector<int64_t>& offsets_ns) {
  GapStats s;
  if (offsets_ns.size() < 2) return s;
  s.gaps = offsets_ns.size() - 1;
  double sum = 0;
  for (size_t i = 1; i < offsets_ns.size(); ++i) sum += (offsets_ns[i] - offsets_ns[i - 1]) * 1e-9;
  s.mean_s = sum / static_cast<double>(s.gaps);
  if (s.gaps < 2) return s;
  double sq = 0;
  for (size_t i = 1; i < offsets_ns.size(); ++i) {
    double d = (offsets_ns[i] - offsets_ns[i - 1]) * 1e-9 - s.mean_s;
    sq += d * d;
  }
  s.variance_s2 = sq / static_cast<double>(s.gaps - 1);
  return s;
}

}  // namespace tessera::bench
