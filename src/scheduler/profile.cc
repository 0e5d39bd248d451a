#include "tessera/scheduler/profile.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::scheduler {
namespace {

// Index i with xs[i] ≤ x ≤ xs[i+1] (clamped to the ends), and the weight of xs[i+1].
std::pair<size_t, double> Bracket(const std::vector<int>& xs, double x) {
  if (xs.size() == 1 || x <= xs.front()) return {0, 0.0};
  if (x >= xs.back()) return {xs.size() - 2, 1.0};
  const size_t hi = std::upper_bound(xs.begin(), xs.end(), x) - xs.begin();
  const size_t lo = hi - 1;
  return {lo, (x - xs[lo]) / static_cast<double>(xs[hi] - xs[lo])};
}

Status Invalid(const std::string& model, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("profile of model '", model, "': ", what));
}

Status CheckAscending(const std::string& model, const std::vector<int>& values,
                      const char* name, int min, int max) {
  if (values.empty()) return Invalid(model, absl::StrCat(name, " is empty"));
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < min || values[i] > max) {
      return Invalid(model, absl::StrCat(name, "[", i, "] = ", values[i], " is outside [", min,
                                         ", ", max, "]"));
    }
    if (i > 0 && values[i] <= values[i - 1]) {
      return Invalid(model, absl::StrCat(name, " must be strictly ascending, got ",
                                         absl::StrJoin(values, ", ")));
    }
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<ModelProfile> ModelProfile::Create(std::string model, std::string device, Table table,
                                            double memory_mb,
                                            std::vector<UtilisationPoint> utilisation,
                                            bool synthetic) {
  if (model.empty()) return absl::InvalidArgumentError("profile has an empty model name");
  TESSERA_RETURN_IF_ERROR(CheckAscending(model, table.partitions_pct, "partitions", 1, 100));
  TESSERA_RETURN_IF_ERROR(CheckAscending(model, table.batches, "batches", 1, 1024));
  if (table.partitions_pct.back() != 100) {
    return Invalid(model, "partitions must include 100 (the whole device)");
  }
  if (table.batches.front() != 1) return Invalid(model, "batches must include 1");
  if (table.latency_ms.size() != table.partitions_pct.size()) {
    return Invalid(model, absl::StrCat("latency table has ", table.latency_ms.size(),
                                       " rows for ", table.partitions_pct.size(), " partitions"));
  }
  for (size_t i = 0; i < table.latency_ms.size(); ++i) {
    const auto& row = table.latency_ms[i];
    if (row.size() != table.batches.size()) {
      return Invalid(model, absl::StrCat("latency row for partition ", table.partitions_pct[i],
                                         "% has ", row.size(), " values for ",
                                         table.batches.size(), " batches"));
    }
    for (size_t j = 0; j < row.size(); ++j) {
      if (!(row[j] > 0) || !std::isfinite(row[j])) {
        return Invalid(model, absl::StrCat("latency at partition ", table.partitions_pct[i],
                                           "%, batch ", table.batches[j], " must be > 0 ms, got ",
                                           row[j]));
      }
      // More compute must not make a batch much slower; 5 % allows for measurement noise.
      if (i > 0 && row[j] > table.latency_ms[i - 1][j] * 1.05) {
        return Invalid(model, absl::StrCat("latency at batch ", table.batches[j], " rises from ",
                                           table.latency_ms[i - 1][j], " ms at ",
                                           table.partitions_pct[i - 1], "% to ", row[j],
                                           " ms at ", table.partitions_pct[i], "%"));
      }
    }
  }
  if (!(memory_mb >= 0) || !std::isfinite(memory_mb)) {
    return Invalid(model, absl::StrCat("memory_mb must be ≥ 0, got ", memory_mb));
  }
  for (size_t i = 0; i < utilisation.size(); ++i) {
    const UtilisationPoint& u = utilisation[i];
    if (u.batch < 1 || (i > 0 && u.batch <= utilisation[i - 1].batch)) {
      return Invalid(model, "utilisation batches must be ≥ 1 and strictly ascending");
    }
    if (!(u.l2_util >= 0 && u.l2_util <= 1) || !(u.dram_util >= 0 && u.dram_util <= 1)) {
      return Invalid(model, absl::StrCat("utilisation at batch ", u.batch,
                                         " must be fractions in [0, 1]"));
    }
  }
  ModelProfile profile;
  profile.model_ = std::move(model);
  profile.device_ = std::move(device);
  profile.table_ = std::move(table);
  profile.memory_mb_ = memory_mb;
  profile.utilisation_ = std::move(utilisation);
  profile.synthetic_ = synthetic;
  return profile;
}

double ModelProfile::Interpolate(const std::vector<double>& values, int batch) const {
  const auto [j, w] = Bracket(table_.batches, batch);
  if (values.size() == 1) return values[0];
  return values[j] * (1 - w) + values[j + 1] * w;
}

double ModelProfile::LatencyMs(int batch, int partition_pct) const {
  const auto& parts = table_.partitions_pct;
  if (partition_pct < parts.front()) {
    return Interpolate(table_.latency_ms.front(), batch) * parts.front() /
           std::max(1, partition_pct);
  }
  const auto [i, w] = Bracket(parts, partition_pct);
  const double low = Interpolate(table_.latency_ms[i], batch);
  if (parts.size() == 1) return low;
  return low * (1 - w) + Interpolate(table_.latency_ms[i + 1], batch) * w;
}

namespace {

double InterpolateUtil(const std::vector<UtilisationPoint>& points, int batch,
                       double UtilisationPoint::*field) {
  if (points.empty()) return 0;
  if (batch <= points.front().batch) return points.front().*field;
  if (batch >= points.back().batch) return points.back().*field;
  size_t hi = 1;
  while (points[hi].batch < batch) ++hi;
  const UtilisationPoint& a = points[hi - 1];
  const UtilisationPoint& b = points[hi];
  const double w = (batch - a.batch) / static_cast<double>(b.batch - a.batch);
  return a.*field * (1 - w) + b.*field * w;
}

}  // namespace

double ModelProfile::L2Util(int batch, int partition_pct) const {
  return InterpolateUtil(utilisation_, batch, &UtilisationPoint::l2_util) * partition_pct / 100.0;
}

double ModelProfile::DramUtil(int batch, int partition_pct) const {
  return InterpolateUtil(utilisation_, batch, &UtilisationPoint::dram_util) * partition_pct /
         100.0;
}

Status ProfileSet::Add(ModelProfile profile) {
  if (!device_.name.empty() && profile.device() != device_.name) {
    return absl::InvalidArgumentError(absl::StrCat("profile of model '", profile.model(),
                                                   "' is for device '", profile.device(),
                                                   "', not '", device_.name, "'"));
  }
  const std::string name = profile.model();
  if (!profiles_.emplace(name, std::move(profile)).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("two profiles for model '", name, "' on device '", device_.name, "'"));
  }
  return absl::OkStatus();
}

const ModelProfile* ProfileSet::Find(std::string_view model) const {
  auto it = profiles_.find(model);
  return it == profiles_.end() ? nullptr : &it->second;
}

StatusOr<const ModelProfile*> ProfileSet::Get(std::string_view model) const {
  if (const ModelProfile* p = Find(model)) return p;
  return absl::NotFoundError(absl::StrCat("no profile for model '", std::string(model),
                                          "' on device '", device_.name, "'"));
}

std::vector<std::string> ProfileSet::models() const {
  std::vector<std::string> names;
  for (const auto& [name, profile] : profiles_) names.push_back(name);
  return names;
}

}  // namespace tessera::scheduler
