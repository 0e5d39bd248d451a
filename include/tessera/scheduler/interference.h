// Interference between gpulets that share one GPU (seed 001 §3.4, §4.4).
//
// Co-located gpulets split the SMs but share L2 and DRAM bandwidth, so each slows the other. The
// model is the paper's linear regression over the standalone utilisations of both co-runners:
//   factor = c1·L2_self + c2·L2_other + c3·DRAM_self + c4·DRAM_other + c5
// a multiplicative slowdown of `self`'s latency, clamped to ≥ 1. Coefficients are fitted by least
// squares from pairwise co-location samples (tessera-fit-interference) and stored as
// profiles/<device>/interference.yaml (docs/profile-format.md). With no fit, a documented
// conservative default applies: every co-located pair is slowed by 18 %, the 90th percentile of
// the overheads seed 001 measured (Fig. 7).
//
// Thread-safety: immutable; share freely.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/common/status.h"
#include "tessera/scheduler/profile.h"

namespace tessera::scheduler {

struct InterferenceCoefficients {
  double l2_self = 0;     // c1
  double l2_other = 0;    // c2
  double dram_self = 0;   // c3
  double dram_other = 0;  // c4
  double constant = 1;    // c5
};

// One pairwise co-location measurement: both sides' standalone utilisations at their (batch,
// partition) and the measured slowdown of `self` (co-located latency / standalone latency).
struct CoLocationSample {
  double l2_self = 0;
  double l2_other = 0;
  double dram_self = 0;
  double dram_other = 0;
  double slowdown = 1;
};

class InterferenceModel {
 public:
  enum class Kind { kNone, kConstant, kLinear };

  // No interference: factor 1 always (the "gpulet" variant without +int).
  static InterferenceModel None();
  // The conservative default: factor `slowdown` (default 1.18) for any co-located pair.
  static InterferenceModel Constant(double slowdown = 1.18);
  static InterferenceModel Linear(InterferenceCoefficients coefficients);

  // Slowdown (≥ 1) of `self` running alone-at-(self_batch, self_partition) when `other` runs
  // at (other_batch, other_partition) on the other gpulet of the same GPU.
  double Factor(const ModelProfile& self, int self_batch, int self_partition_pct,
                const ModelProfile& other, int other_batch, int other_partition_pct) const;
  // The same from raw utilisations.
  double Factor(double l2_self, double dram_self, double l2_other, double dram_other) const;

  Kind kind() const { return kind_; }
  const InterferenceCoefficients& coefficients() const { return coefficients_; }
  double constant_slowdown() const { return constant_; }

 private:
  Kind kind_ = Kind::kNone;
  InterferenceCoefficients coefficients_;
  double constant_ = 1;
};

// Ordinary least squares over the samples. INVALID_ARGUMENT with fewer than 5 samples or when the
// features are collinear (e.g. all samples from one pair).
StatusOr<InterferenceCoefficients> FitInterference(const std::vector<CoLocationSample>& samples);

// Relative errors |predicted − measured| / measured of `model` over `samples`, in sample order.
std::vector<double> RelativeErrors(const InterferenceModel& model,
                                   const std::vector<CoLocationSample>& samples);

// interference.yaml: `kind: linear` with the five coefficients, or `kind: constant` with
// `slowdown`, or `kind: none` (plus free `synthetic`, `source`, `note`). Strict, errors
// "<source>:<line>: <key>: <reason>". InterferenceToYaml writes `comment` as '#' lines on top.
StatusOr<InterferenceModel> ParseInterferenceYaml(const std::string& text, std::string_view source);
StatusOr<InterferenceModel> LoadInterferenceFile(const std::filesystem::path& path);
std::string InterferenceToYaml(const InterferenceModel& model, std::string_view comment = "");

// Samples CSV (header l2_self,l2_other,dram_self,dram_other,slowdown in any order, optionally with
// the descriptive columns self_model, self_batch, self_partition, other_model, other_batch,
// other_partition; '#' comment lines), as tessera-profile writes and tessera-fit-interference
// reads. Errors name the file and line.
StatusOr<std::vector<CoLocationSample>> ParseSamplesCsv(const std::string& text,
                                                        std::string_view source);

}  // namespace tessera::scheduler
